"""`keras-tf merge`: θ₀ + α(θ_ft − θ₀) of two presets, written as a complete preset."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_tf.cli.main import main
from keras_tf.decoding import DecodingConfig
from keras_tf.text import Seq2SeqPreprocessor
from keras_tf.translation import Seq2SeqTranslator, presets
from tests.serving.conftest import MAX_SOURCE_LENGTH, random_model, sentences, train_tokenizers

DECODING = DecodingConfig(max_length=12)


def _save(folder, tokenizers, model):
    preprocessor = Seq2SeqPreprocessor(tokenizers, MAX_SOURCE_LENGTH, MAX_SOURCE_LENGTH)
    Seq2SeqTranslator(model, preprocessor, DECODING).save_to_preset(str(folder))
    return str(folder)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """`{"base", "tuned", "other_vocabulary"}`: preset folders of one architecture, random weights."""
    folder = tmp_path_factory.mktemp("merge")
    tokenizers = train_tokenizers("sentencepiece")
    other = train_tokenizers("wordpiece")
    assert other.source_vocabulary_size == tokenizers.source_vocabulary_size
    return {
        "base": _save(folder / "base", tokenizers, random_model(tokenizers, 3)),
        "tuned": _save(folder / "tuned", tokenizers, random_model(tokenizers, 5)),
        "other_vocabulary": _save(folder / "other", other, random_model(other, 5)),
    }


def _weights(folder):
    return presets.load_backbone(folder).get_weights()


def test_alpha_0_is_the_base_1_the_tuned_one_half_the_mean(pair, tmp_path, capsys):
    base, tuned = _weights(pair["base"]), _weights(pair["tuned"])
    assert not np.array_equal(base[0], tuned[0])
    expected = {
        0.0: base,
        1.0: tuned,
        0.5: [((a.astype(np.float64) + b) / 2).astype(a.dtype) for a, b in zip(base, tuned)],
    }
    for alpha, want in expected.items():
        out = str(tmp_path / f"merged-{alpha}")
        argv = ["merge", "--base", pair["base"], "--tuned", pair["tuned"],
                "--alpha", str(alpha), "--out", out]
        assert main(argv) == 0
        assert capsys.readouterr().out.strip() == (
            f"Merged {pair['base']} and {pair['tuned']} at alpha {alpha:g} into {out}")
        got = _weights(out)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
        assert presets.read_metadata(out)["weights_merged"]["alpha"] == alpha


def test_the_merge_is_a_complete_preset_whose_export_equals_translate(pair, tmp_path, capsys):
    merged = str(tmp_path / "merged")
    assert main(["merge", "--base", pair["base"], "--tuned", pair["tuned"],
                 "--alpha", "0.25", "--out", merged]) == 0
    assert {"model.keras", "config.json", "tokenizers", "decoding.json", "metadata.json"} <= set(
        os.listdir(merged))
    # The tuned run's text files, byte for byte.
    for name in ("decoding.json", os.path.join("tokenizers", "tokenizers.json")):
        with open(os.path.join(merged, name), "rb") as a, \
                open(os.path.join(pair["tuned"], name), "rb") as b:
            assert a.read() == b.read()
    export_dir = str(tmp_path / "serving" / "translator" / "1")
    assert main(["export", "--model", merged, "--out", export_dir, "--beam-size", "1",
                 "--no-warmup"]) == 0
    capsys.readouterr()
    texts = sentences(4, seed=7)
    expected = Seq2SeqTranslator.from_preset(merged).generate(texts)
    outputs = tf.saved_model.load(export_dir).signatures["serving_default"](text=tf.constant(texts))
    assert [t.decode() for t in outputs["translation"].numpy()] == expected


def _refused(capsys, argv, *fragments):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-tf merge: error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, err


def test_other_architectures_vocabularies_alphas_and_outs_are_refused_in_one_line(
        pair, tmp_path, capsys):
    out = tmp_path / "out"
    merge = ["merge", "--base", pair["base"], "--out", str(out)]
    _refused(capsys, merge + ["--tuned", pair["other_vocabulary"], "--alpha", "0.5"],
             "not the same vocabulary")
    # Another architecture: the same tokenizers, a wider feed-forward layer.
    tuned = presets.load_backbone(pair["tuned"])
    wider = tuned.config.replace(d_ff=tuned.config.d_ff * 2)
    from keras_tf.models import Seq2SeqTransformer
    from keras_tf.text import Seq2SeqTokenizers

    tokenizers = Seq2SeqTokenizers.load(os.path.join(pair["tuned"], "tokenizers"))
    other = _save(tmp_path / "wider", tokenizers, Seq2SeqTransformer(wider))
    _refused(capsys, merge + ["--tuned", other, "--alpha", "0.5"],
             "not the same architecture (d_ff ")
    for alpha in ("1.5", "-0.1", "nan", "half"):
        _refused(capsys, merge + ["--tuned", pair["tuned"], "--alpha", alpha], "--alpha")
    assert not out.exists()
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    _refused(capsys, merge + ["--tuned", pair["tuned"], "--alpha", "0.5"],
             f"--out: {out} is not empty")
    assert os.listdir(out) == ["notes.txt"]
