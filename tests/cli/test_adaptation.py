"""Adapting a model without forgetting: `--replay-source`, `--general-valid`, LoRA's defaults.

The start is the shared `keras-tf train` run (English -> French word by
word); the new domain translates the same words with the French words in
reverse order, which the start does not.
"""

import csv
import json
import os
import pathlib
import shutil

import keras
import numpy as np
import pytest

from keras_tf.cli.main import main
from keras_tf.training import merging
from keras_tf.training.bleu import corpus_scores
from keras_tf.translation import Seq2SeqTranslator, presets
from tests.cli.conftest import TRAIN_OPTIONS, generated_pairs
from tests.cli.test_resume import _h5_arrays, _kill_when, _state

# The shared options less the fixed warm-up: the fine-tuning schedule plans its own.
QUICK = [option for option in TRAIN_OPTIONS if option not in ("--warmup-steps", "40")]
EPOCHS, STEPS = 2, 8


def _write_tsv(path, pairs):
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def domains(tmp_path_factory):
    """`{"new", "source", "old"}`: the new domain's pairs, plain old-domain sources, old pairs."""
    folder = tmp_path_factory.mktemp("domains")
    new = [(s, " ".join(reversed(t.split()))) for s, t in generated_pairs(48, seed=31)]
    sources = [s for s, _ in generated_pairs(40, seed=32)]
    (folder / "source.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
    return {
        "new": _write_tsv(folder / "new.tsv", new),
        "source": str(folder / "source.txt"),
        "sources": sources,
        "old": _write_tsv(folder / "old.tsv", generated_pairs(24, seed=33)),
    }


def _argv(start, domains, out, *extra):
    return ["train", "--train", domains["new"], "--out", str(out), "--init-from", str(start),
            "--epochs", str(EPOCHS), "--steps", str(STEPS), "--keep-best", "loss",
            *QUICK, *extra]


def _final_weights(out):
    return _h5_arrays(pathlib.Path(out) / f"backup/epoch-{EPOCHS:04d}.weights.h5")


def _assert_same_weights(a, b):
    a, b = _final_weights(a), _final_weights(b)
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.fixture(scope="module")
def replay_run(trained_run, domains, tmp_path_factory):
    """`(argv, out, stderr)` of an uninterrupted run with --replay-source, replay ratio 0.5."""
    out = tmp_path_factory.mktemp("replay") / "run"
    argv = _argv(trained_run[0], domains, out, "--replay-source", domains["source"],
                 "--replay-ratio", "0.5")
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(argv) == 0
    return argv, out, err.getvalue()


def test_replay_source_pairs_are_the_start_models_translations(trained_run, domains, replay_run):
    _, out, err = replay_run
    made = presets.read_replay_pairs(out)
    start = Seq2SeqTranslator.from_preset(trained_run[0])
    assert made == (domains["sources"], start.generate(domains["sources"]))
    # Replayed at the ratio: half as many pairs as the 48 new ones, drawn from the 40 made.
    facts = json.loads((out / "options.json").read_text())
    assert facts["replay_pairs"] == 24 and facts["train_pairs"] == 48
    assert "Replay: 24 pairs of the replay corpus mixed into the 48 training pairs" in err
    assert "Recipe: fine-tuning every weight, replaying the starting model's translations" in err


def test_they_are_replayed_exactly_as_a_replay_corpus(trained_run, domains, replay_run, tmp_path):
    argv, out, _ = replay_run
    corpus_run = tmp_path / "corpus"
    assert main(_argv(trained_run[0], domains, corpus_run, "--replay-corpus",
                      str(out / presets.REPLAY_PAIRS_FILE), "--replay-ratio", "0.5")) == 0
    _assert_same_weights(corpus_run, out)


def test_a_resume_after_sigkill_reuses_the_pairs_and_ends_as_the_uninterrupted_run(
        domains, replay_run, tmp_path, capsys):
    argv, reference, _ = replay_run
    out = tmp_path / "run"
    source = tmp_path / "source.txt"
    shutil.copyfile(domains["source"], source)
    swap = {str(reference): str(out), domains["source"]: str(source)}
    argv = [swap.get(value, value) for value in argv] + ["--backup-every", "3"]
    status = _kill_when(argv, tmp_path / "killed.log", lambda: _state(out) >= (0, 3))
    assert status == 137
    made = (out / presets.REPLAY_PAIRS_FILE).read_bytes()
    assert made == (reference / presets.REPLAY_PAIRS_FILE).read_bytes()
    # The rerun translates nothing: the source file is gone, the pairs are read back.
    source.unlink()
    assert main(argv) == 0
    assert f"read back from {out}/{presets.REPLAY_PAIRS_FILE}" in capsys.readouterr().err
    assert (out / presets.REPLAY_PAIRS_FILE).read_bytes() == made
    _assert_same_weights(out, reference)


def _greedy_bleu(folder, pairs):
    translator = Seq2SeqTranslator.from_preset(folder)
    hypotheses = translator.generate(pairs.sources, method="greedy")
    return corpus_scores(hypotheses, pairs.targets)[0].score


def test_general_valid_keeps_the_largest_alpha_that_keeps_enough(
        trained_run, domains, tmp_path, capsys):
    from keras_tf.text import read_tsv

    start = trained_run[0]
    out = tmp_path / "run"
    assert main(_argv(start, domains, out, "--learning-rate", "0.01",
                      "--general-valid", domains["old"], "--keep", "0.9")) == 0
    err = capsys.readouterr().err
    record = json.loads((out / "options.json").read_text())["merge"]
    assert presets.read_metadata(out)["weights_merged"]["alpha"] == record["alpha"]
    # Score every candidate directly: keras-tf merge, then greedy BLEU on the old pairs.
    old = read_tsv(domains["old"])
    tuned = tmp_path / "tuned"
    os.makedirs(tuned)
    presets.copy_text_files(out, tuned)
    os.link(out / presets.TUNED_MODEL_FILE, tuned / "model.keras")
    start_bleu = _greedy_bleu(start, old)
    assert record["start_bleu"] == pytest.approx(start_bleu)
    scores = {}
    for alpha in merging.ALPHAS:
        merged = tmp_path / f"merged-{alpha}"
        assert main(["merge", "--base", str(start), "--tuned", str(tuned),
                     "--alpha", str(alpha), "--out", str(merged)]) == 0
        scores[alpha] = _greedy_bleu(merged, old)
    keeping = [alpha for alpha, score in scores.items() if score >= 0.9 * start_bleu]
    assert record["alpha"] == max(keeping), (record, scores)
    assert record["merged_bleu"] == pytest.approx(scores[record["alpha"]])
    # The run's model.keras is that merge, its tuned model beside it.
    np.testing.assert_array_equal(
        presets.load_backbone(out).get_weights()[0],
        presets.load_backbone(tmp_path / f"merged-{record['alpha']}").get_weights()[0])
    assert (f"Merge: alpha {record['alpha']:g} keeps {record['merged_bleu']:.1f} BLEU of the "
            f"starting model's {start_bleu:.1f}") in err
    # Both keep the run's loss for keras.saving.load_model.
    for name in ("model.keras", presets.TUNED_MODEL_FILE):
        loss = keras.saving.load_model(out / name).loss
        assert type(loss).__name__ == "MaskedSparseCategoricalCrossentropy", name


def test_lora_defaults_to_its_own_rate_and_the_feed_forward_layers(trained_run, domains, tmp_path,
                                                                   capsys):
    from keras_tf.models.learning_rates import lora_peak_learning_rate
    from keras_tf.training import fine_tuning_peak_learning_rate

    out = tmp_path / "lora"
    assert main(["train", "--train", domains["new"], "--out", str(out), "--init-from",
                 str(trained_run[0]), "--epochs", "1", "--steps", "4", "--lora-rank", "2",
                 "--keep-best", "loss", *QUICK]) == 0
    err = capsys.readouterr().err
    d_model = presets.load_backbone(out).config.d_model
    peak = lora_peak_learning_rate(d_model)
    assert peak == pytest.approx(3 * fine_tuning_peak_learning_rate(d_model))
    assert f"a warm-up to a peak of {peak:.2g} (the LoRA default" in err
    with open(out / "history.csv") as file:
        rates = [float(row["learning_rate"]) for row in csv.DictReader(file)]
    assert fine_tuning_peak_learning_rate(d_model) < max(rates) <= peak * (1 + 1e-6)
    adapted = presets.read_metadata(out)["lora_merged"]["target_layer_names"]
    assert {"inner_dense", "output_dense", "query", "value"} <= set(adapted)
    # A LoRA run's model.keras holds plain merged kernels: it merges, and its merge merges again.
    half, quarter = tmp_path / "half", tmp_path / "quarter"
    for tuned, out_dir in ((out, half), (half, quarter)):
        assert main(["merge", "--base", str(trained_run[0]), "--tuned", str(tuned),
                     "--alpha", "0.5", "--out", str(out_dir)]) == 0
    start = presets.load_backbone(trained_run[0]).get_weights()
    tuned = presets.load_backbone(out).get_weights()
    for a, b, got in zip(start, tuned, presets.load_backbone(quarter).get_weights()):
        np.testing.assert_allclose(got, 0.75 * a + 0.25 * b, rtol=1e-5, atol=1e-6)
