"""`keras-tf train`, then `evaluate`, `translate` and `export` on what it wrote, in process.

The training run (the shared `trained_run`: 2 epochs of 60 steps with --valid) is
BLEU-driven, the default with --valid: the validation BLEU and chrF it logs
each epoch are `keras-tf evaluate`'s on the kept model.
"""

import pathlib
import csv
import io
import json
import os
import re

import pytest
import tensorflow as tf

from keras_tf.cli.main import main


@pytest.mark.filterwarnings("error::UserWarning")
def test_train_then_evaluate_translate_export(trained_run, tmp_path, corpus, capsys, monkeypatch):
    run, printed = trained_run
    out = str(run)
    assert "Epoch 2/2" in printed
    for name in ("val_bleu", "val_chrf", "learning_rate"):
        assert name in printed, name
    # Everything needed to reload: the model, the tokenizers, the config.
    for name in ("model.keras", "config.json", "options.json", "history.csv",
                 "tokenizers/tokenizers.json", "backup/state.json"):
        assert os.path.isfile(os.path.join(out, name)), name
    config = json.loads(pathlib.Path(os.path.join(out, "config.json")).read_text())
    assert config["d_model"] == 32 and config["max_source_length"] == 16
    assert json.loads(pathlib.Path(os.path.join(out, "backup", "state.json")).read_text())["epoch"] == 2

    # The logged validation BLEU and chrF: sentences of 1-3 words hold no
    # 4-grams, so a good model's corpus BLEU may be 0; chrF shows the learning.
    with open(os.path.join(out, "history.csv")) as file:
        rows = list(csv.DictReader(file))
    bleu = [float(row["val_bleu"]) for row in rows]
    chrf = [float(row["val_chrf"]) for row in rows]
    assert len(bleu) == 2 and chrf[-1] > chrf[0] > 0, chrf
    # model.keras is the best epoch on BLEU, or the mean of the epochs where
    # that validates better (options.json says which); evaluate decodes
    # greedily, as the callback and the averaging do.
    best = bleu.index(max(bleu))
    average = json.loads(pathlib.Path(os.path.join(out, "options.json")).read_text())["average"]
    assert main(["evaluate", "--model", out, "--test", corpus["valid"], "--beam-size", "1"]) == 0
    bleu_line, chrf_line, *signatures = capsys.readouterr().out.strip().splitlines()
    assert [line.split(" signature: ")[0] for line in signatures] == ["BLEU", "chrF2"]
    assert bleu_line.startswith(f"BLEU = {average['bleu'] if average['chosen'] else bleu[best]:.2f} ")
    if not average["chosen"]:
        assert chrf_line == f"chrF2 = {chrf[best]:.2f}"

    # evaluate: sacreBLEU's BLEU and chrF lines on stdout, the translations in --output.
    hypotheses = str(tmp_path / "hypotheses.txt")
    assert main(["evaluate", "--model", out, "--test", corpus["test"], "--beam-size", "2",
                 "--batch-size", "8", "--output", hypotheses]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4  # the two scores, then their sacreBLEU signatures
    assert lines[2].startswith("BLEU signature: nrefs:1|case:mixed|eff:no|tok:13a|")
    assert re.fullmatch(r"BLEU = \d+\.\d\d [\d./]+ \(BP = [\d.]+ ratio = [\d.]+ "
                        r"hyp_len = \d+ ref_len = \d+\)", lines[0]), lines[0]
    assert re.fullmatch(r"chrF2 = \d+\.\d\d", lines[1]), lines[1]
    test_lines = pathlib.Path(corpus["test"]).read_text(encoding="utf-8").splitlines()
    assert len(pathlib.Path(hypotheses).read_text(encoding="utf-8").splitlines()) == len(test_lines)

    # translate: one line out per line in, empty lines included, across batches.
    sources = ["red cat", "", "open the file", "two dogs", "  ", "save"]
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(s + "\n" for s in sources)))
    assert main(["translate", "--model", out, "--beam-size", "1", "--batch-size", "4"]) == 0
    translations = capsys.readouterr().out.split("\n")
    assert translations[-1] == ""  # every line ends with a newline
    assert len(translations[:-1]) == len(sources)
    assert translations[1] == "" and translations[4] == ""
    # The model directory is a preset: from_preset translates as the command does.
    from keras_tf.translation import Seq2SeqTranslator

    assert Seq2SeqTranslator.from_preset(out).generate(["red cat", "open the file"]) == [
        translations[0], translations[2]
    ]

    # export: BASE/NAME/VERSION, whose serving_default signature translates strings.
    export_dir = str(tmp_path / "models" / "tiny" / "3")
    assert main(["export", "--model", out, "--out", export_dir, "--beam-size", "1"]) == 0
    assert capsys.readouterr().out.strip() == export_dir
    signature = tf.saved_model.load(export_dir).signatures["serving_default"]
    outputs = signature(text=tf.constant(["red cat", "open the file"]))
    assert outputs["translation"].dtype == tf.string
    assert outputs["translation"].shape == (2,)
    assert outputs["score"].shape == (2,)
    # The export translates as `keras-tf translate` does.
    assert [t.decode() for t in outputs["translation"].numpy()] == [
        translations[0], translations[2]
    ]


def test_translate_and_evaluate_count_the_sources_cut_to_fit(
    untrained_model_dir, corpus, capsys, monkeypatch, tmp_path
):
    """A source longer than max_source_length is translated from its first pieces, and said so."""
    from keras_tf.text import Seq2SeqTokenizers

    tokenizers = Seq2SeqTokenizers.load(os.path.join(untrained_model_dir, "tokenizers"))
    lines = ["red cat", "red cat " * 12, "", "open the file " * 6, "save"]
    pieces = [len(ids) for ids in tokenizers.tokenize_source(tf.constant(lines)).to_list()]
    cut = [number for number, count in enumerate(pieces, start=1) if count > 15]
    assert cut == [2, 4], pieces  # max_source_length 16: 15 pieces, then END
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(line + "\n" for line in lines)))
    assert main(["translate", "--model", untrained_model_dir, "--beam-size", "1",
                 "--batch-size", "2"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == len(lines)
    assert captured.err.splitlines() == [
        "2 of 5 lines are longer than max_source_length=16 (END included) allows and were "
        "translated from their first 15 subword pieces: lines 2, 4"
    ]
    test = tmp_path / "test.tsv"
    test.write_text("".join(f"{line}\tx\n" for line in lines if line), encoding="utf-8")
    assert main(["evaluate", "--model", untrained_model_dir, "--test", str(test),
                 "--beam-size", "1"]) == 0
    assert ("2 of 4 test sources are longer than max_source_length=16 (END included) allows "
            "and were translated from their first 15 subword pieces") in capsys.readouterr().err
