"""`--quantize int8` on translate, evaluate and export: the model is decoded with int8 weights."""

import io

from keras_tf.cli.main import main
from keras_tf.serving.export import read_export_config


def _translate_n_best(model_dir, sources, monkeypatch, capsys, *options):
    """`(translations, scores)` of `translate --n-best 1` on `sources`."""
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(s + "\n" for s in sources)))
    assert main(["translate", "--model", model_dir, "--n-best", "1", "--beam-size", "2",
                 *options]) == 0
    rows = [line.split(" ||| ") for line in capsys.readouterr().out.splitlines()]
    return [text for _, text, _ in rows], [float(score) for _, _, score in rows]


def test_quantize_int8_on_translate_evaluate_and_export(
    untrained_model_dir, corpus, capsys, monkeypatch, tmp_path
):
    with open(corpus["test"], encoding="utf-8") as file:
        sources = [line.split("\t")[0] for line in file]
    _, float32_scores = _translate_n_best(untrained_model_dir, sources, monkeypatch, capsys)
    int8_texts, int8_scores = _translate_n_best(
        untrained_model_dir, sources, monkeypatch, capsys, "--quantize", "int8"
    )
    # Other weights, so other scores (the untrained model's beams may differ too).
    assert max(abs(a - b) for a, b in zip(int8_scores, float32_scores)) > 1e-3

    output = tmp_path / "hypotheses.txt"
    assert main(["evaluate", "--model", untrained_model_dir, "--test", corpus["test"],
                 "--beam-size", "2", "--quantize", "int8", "--output", str(output)]) == 0
    assert capsys.readouterr().out.startswith("BLEU = ")
    assert output.read_text(encoding="utf-8").splitlines() == int8_texts

    out = tmp_path / "models" / "translator" / "1"
    assert main(["export", "--model", untrained_model_dir, "--out", str(out),
                 "--beam-size", "1", "--quantize", "int8"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert read_export_config(out)["quantization"] == "int8"


def test_an_unknown_quantize_mode_is_a_one_line_error(untrained_model_dir, capsys, tmp_path):
    assert main(["export", "--model", untrained_model_dir, "--out", str(tmp_path / "m"),
                 "--quantize", "int4"]) == 2
    err = capsys.readouterr().err
    assert "--quantize: invalid choice: 'int4' (choose from 'int8')" in err
    assert "Traceback" not in err
