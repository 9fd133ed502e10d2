"""`keras-tf train` for adapting a model: the fine-tuning rate, --learning-rate, LoRA, replay, your own tokenizer."""

import csv
import io
import pathlib

import pytest
import sentencepiece

from keras_tf.cli.main import main
from keras_tf.models.learning_rates import lora_peak_learning_rate, paper_peak_learning_rate
from keras_tf.training import fine_tuning_peak_learning_rate
from keras_tf.translation import Seq2SeqTranslator, presets
from tests.cli.conftest import TRAIN_OPTIONS, write_corpus

# The shared options less the fixed warm-up: the fine-tuning schedule plans its own.
QUICK = [option for option in TRAIN_OPTIONS if option not in ("--warmup-steps", "40")]


def learning_rates(directory):
    with open(pathlib.Path(directory) / "history.csv") as file:
        return [float(row["learning_rate"]) for row in csv.DictReader(file)]


def test_init_from_with_lora_keeps_what_the_model_brings(trained_run, tmp_path, capsys):
    run = pathlib.Path(trained_run[0])
    new = tmp_path / "new.tsv"
    write_corpus(new, 96, seed=21)
    tuned = tmp_path / "lora"
    assert main(["train", "--train", str(new), "--out", str(tuned), "--epochs", "2",
                 "--steps", "6", "--init-from", str(run), "--lora-rank", "2",
                 "--lora-targets", "query,value,inner_dense", "--keep-best", "loss",
                 *QUICK]) == 0
    err = capsys.readouterr().err
    assert f"Fine-tuning {run}/model.keras: kept its sentencepiece tokenizers" in err
    assert "its decoding settings (greedy" in err and "its length limits (16/16)" in err
    assert "Learning rate: a warm-up to a peak of" in err and "LoRA of rank 2" in err
    # The rate never passes LoRA's peak for the model's d_model: three times the paper's.
    d_model = presets.load_backbone(run).config.d_model
    assert 0 < max(learning_rates(tuned)) <= lora_peak_learning_rate(d_model) * (1 + 1e-6)
    # Tokenizers and decoding settings byte for byte; LoRA merged, and said so.
    for name in ("decoding.json", "tokenizers/tokenizers.json", "tokenizers/shared.spm"):
        assert (tuned / name).read_bytes() == (run / name).read_bytes(), name
    assert presets.read_metadata(tuned)["lora_merged"] == {
        "rank": 2, "target_layer_names": ["inner_dense", "query", "value"]}
    reloaded = Seq2SeqTranslator.from_preset(tuned)
    assert reloaded.backbone.lora is None and reloaded.pretrained
    # compile()'s constant rate for trained weights: a tenth of the paper's peak.
    assert reloaded.default_learning_rate == pytest.approx(paper_peak_learning_rate(d_model) / 10)
    # An untrained architecture trains from scratch: fit's constant 5e-4.
    assert Seq2SeqTranslator.from_preset("transformer_tiny").default_learning_rate == 5e-4


def test_learning_rate_sets_the_peak(corpus, tmp_path):
    out = tmp_path / "run"
    assert main(["train", "--train", corpus["train"], "--out", str(out), "--epochs", "2",
                 "--steps", "20", "--learning-rate", "0.002", "--keep-best", "loss",
                 *QUICK]) == 0
    rates = learning_rates(out)
    # A tenth of the 40 planned updates (4) warm up to 2e-3; by the end of
    # epoch 1 (step 20) the inverse square root has brought it to about
    # 2e-3 * (4 / 20)^0.5 (the paper's peak for d_model 32 would give 1.2e-3).
    assert 0.42 * 0.002 < rates[0] < 0.46 * 0.002, rates
    assert rates[1] < rates[0]


def test_your_own_sentencepiece_model_trains(corpus, tmp_path, capsys):
    from keras_tf.text import read_tsv

    pairs = read_tsv(corpus["train"])
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(pairs.sources + pairs.targets), model_writer=model,
        vocab_size=50, minloglevel=2,
    )
    (tmp_path / "team.model").write_bytes(model.getvalue())
    out = tmp_path / "run"
    assert main(["train", "--train", corpus["train"], "--out", str(out), "--epochs", "1",
                 "--steps", "4", "--tokenizer-model", str(tmp_path / "team.model"),
                 "--keep-best", "loss", *QUICK]) == 0
    assert "Your SentencePiece model: 51 source and 51 target ids" in capsys.readouterr().err
    translator = Seq2SeqTranslator.from_preset(out)
    assert translator.preprocessor.tokenizers.kind == "sentencepiece_vocabulary"
    assert len(translator.generate(["red cat", "open the file"])) == 2
    assert main(["train", "--train", corpus["train"], "--out", str(tmp_path / "x"),
                 "--tokenizer-model", str(tmp_path / "nowhere.model")]) == 2
    assert "--tokenizer-model: no such file" in capsys.readouterr().err


def test_replay_corpus_keeps_the_old_domain_at_the_replay_peak(trained_run, corpus, tmp_path,
                                                               capsys):
    import json

    import numpy as np

    import random

    from keras_tf.text import read_tsv
    from tests.cli.conftest import LEXICON

    run = pathlib.Path(trained_run[0])
    d_model = presets.load_backbone(run).config.d_model

    # The new domain: sentences of 4-5 words, where the model learned 1-3.
    def long_pairs(pairs, seed):
        rng, words = random.Random(seed), sorted(LEXICON)
        english = [[rng.choice(words) for _ in range(rng.randint(4, 5))] for _ in range(pairs)]
        return [(" ".join(e), " ".join(LEXICON[w] for w in e)) for e in english]

    new = tmp_path / "new.tsv"
    new.write_text("".join(f"{s}\t{t}\n" for s, t in long_pairs(96, 31)), encoding="utf-8")
    tune = ["train", "--train", str(new), "--init-from", str(run), "--epochs", "3",
            "--steps", "10", "--keep-best", "loss", *QUICK]
    replayed = tmp_path / "replay"
    assert main([*tune, "--out", str(replayed), "--replay-corpus", corpus["train"],
                 "--replay-ratio", "1"]) == 0
    err = capsys.readouterr().err
    assert "Replay: 96 pairs of the replay corpus mixed into the 96 training pairs" in err
    peak = fine_tuning_peak_learning_rate(d_model, replay=True)
    assert (f"peak of {peak:.2g} (the fine-tuning default: twice the paper's peak "
            "with replay") in err
    assert max(learning_rates(replayed)) <= peak * (1 + 1e-6)
    options = json.loads((replayed / "options.json").read_text())
    assert (options["train_pairs"], options["replay_pairs"]) == (96, 96)
    # The peer: the same peak on the new pairs alone.
    alone = tmp_path / "alone"
    assert main([*tune, "--out", str(alone), "--learning-rate", str(peak)]) == 0

    def mean_log_probability(directory, pairs):
        translator = Seq2SeqTranslator.from_preset(directory)
        return float(np.mean(translator.score([s for s, _ in pairs], [t for _, t in pairs])))

    old_test, new_test = list(read_tsv(corpus["test"])), long_pairs(20, 32)
    before_old = mean_log_probability(run, old_test)
    before_new = mean_log_probability(run, new_test)
    # Both learn the new domain (measured: -15.0 before, -13.5 with replay and
    # -12.7 alone after); replay keeps the old one (-6.0 before, -5.5 with
    # replay, -5.9 alone). The shared run's model is the mean of its two
    # epochs, which knew both domains better than its second epoch did (-17.3
    # and -6.4), so the margins are smaller than they were with that one.
    assert mean_log_probability(replayed, new_test) > before_new + 1.0
    assert mean_log_probability(alone, new_test) > before_new + 1.0
    replayed_old = mean_log_probability(replayed, old_test)
    assert replayed_old > before_old
    assert replayed_old > mean_log_probability(alone, old_test) + 0.25
