"""`keras-tf score`: the teacher-forced log-probability of each pair is the training loss's."""

import pathlib
import numpy as np
import tensorflow as tf

from keras_tf.cli.main import main
from keras_tf.cli.model_dir import load_model_dir
from keras_tf.text import frame_source, frame_target
from keras_tf.training import MaskedSparseCategoricalCrossentropy


def test_score_is_minus_the_summed_cross_entropy(untrained_model_dir, corpus, capsys):
    assert main(["score", "--model", untrained_model_dir, "--pairs", corpus["test"],
                 "--batch-size", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    test_lines = pathlib.Path(corpus["test"]).read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(test_lines) == 20
    trained = load_model_dir(untrained_model_dir)
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.0)
    c = trained.model.config
    for line, pair in zip(lines, test_lines):
        score, tokens, source, target = line.split("\t")
        assert f"{source}\t{target}" == pair
        # The same pair through the training loss: the mean negative log-likelihood.
        encoder = frame_source(trained.tokenizers.tokenize_source([source]), c.max_source_length)
        decoder, labels = frame_target(trained.tokenizers.tokenize_target([target]),
                                       c.max_target_length)
        logits = trained.model({"encoder_tokens": encoder.to_tensor(),
                                "decoder_tokens": decoder.to_tensor()})
        mean = float(loss(labels.to_tensor(), logits))
        assert int(tokens) == labels.row_lengths()[0]
        np.testing.assert_allclose(float(score), -mean * int(tokens), rtol=1e-4, atol=1e-3)
    assert tf.reduce_all(tf.constant([float(line.split("\t")[0]) < 0 for line in lines]))


def test_score_counts_the_pairs_it_cut(untrained_model_dir, tmp_path, capsys):
    # max_source_length = max_target_length = 16: 40 words are cut on either side.
    long = " ".join(["red cat"] * 20)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(f"red cat\tchat rouge\n{long}\tchat\nred\t{long}\n{long}\t{long}\n",
                     encoding="utf-8")
    assert main(["score", "--model", untrained_model_dir, "--pairs", str(pairs)]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 4
    lines = [line for line in captured.err.splitlines() if "lines read" not in line]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("3 of 4 pairs were cut to fit the model: 2 sources longer than "
                               "max_source_length=16"), lines[0]
    assert "2 targets longer than max_target_length=16" in lines[0], lines[0]
    assert "pairs 2, 3, 4" in lines[0], lines[0]

    # Nothing cut, nothing said.
    pairs.write_text("red cat\tchat rouge\n", encoding="utf-8")
    assert main(["score", "--model", untrained_model_dir, "--pairs", str(pairs)]) == 0
    assert "cut" not in capsys.readouterr().err


def test_score_help_says_what_is_scored(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["score", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the whole target" not in text
    assert "max_target_length - 1" in text and "stderr counts" in text


def test_evaluate_reports_the_metrics_asked_for_with_sacrebleu_signatures(
    untrained_model_dir, corpus, capsys
):
    from keras_tf.cli import evaluate
    from keras_tf.training import bleu

    assert (evaluate.METRICS, evaluate.TOKENIZERS) == (bleu.METRICS, bleu.TOKENIZERS)
    assert main(["evaluate", "--model", untrained_model_dir, "--test", corpus["test"],
                 "--beam-size", "1", "--metrics", "bleu,chrf,ter", "--tokenize", "zh"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" = ")[0] for line in lines[:3]] == ["BLEU", "chrF2", "TER"]
    assert lines[3].startswith("BLEU signature: nrefs:1|case:mixed|eff:no|tok:zh|")
    assert lines[4].startswith("chrF2 signature: nrefs:1|") and "version:" in lines[4]
    assert lines[5].startswith("TER signature: nrefs:1|") and len(lines) == 6
    assert main(["evaluate", "--model", untrained_model_dir, "--test", corpus["test"],
                 "--metrics", "bleu,meteor"]) == 2
    err = capsys.readouterr().err
    assert "--metrics: expected some of bleu,chrf,ter" in err and err.count("\n") == 1
