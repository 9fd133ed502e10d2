"""BLEU-driven training: the validation BLEU logged each epoch is `keras-tf evaluate`'s BLEU."""

import csv
import os

from keras_tf.cli.main import main

OPTIONS = ["--preset", "transformer_tiny", "--batch-size", "16", "--vocabulary-size", "48",
           "--max-length", "16"]


def test_callback_bleu_equals_evaluate_bleu(tmp_path, corpus, capsys):
    out = str(tmp_path / "run")
    assert main(["train", "--train", corpus["train"], "--valid", corpus["valid"], "--out", out,
                 "--epochs", "3", "--steps", "12", *OPTIONS]) == 0
    printed = capsys.readouterr().out
    assert "val_bleu" in printed and "val_chrf" in printed and "learning_rate" in printed
    with open(os.path.join(out, "history.csv")) as file:
        rows = list(csv.DictReader(file))
    bleu = [float(row["val_bleu"]) for row in rows]
    chrf = [float(row["val_chrf"]) for row in rows]
    # Sentences of 1-3 words hold no 4-grams, so a good model's corpus BLEU
    # may be 0; chrF (characters) shows the learning.
    assert len(bleu) == 3 and chrf[-1] > chrf[0] > 0, chrf
    best = bleu.index(max(bleu))
    # model.keras is the best epoch on BLEU; evaluate decodes greedily, as the callback.
    assert main(["evaluate", "--model", out, "--test", corpus["valid"], "--beam-size", "1"]) == 0
    bleu_line, chrf_line = capsys.readouterr().out.strip().splitlines()
    assert bleu_line.startswith(f"BLEU = {bleu[best]:.2f} ")
    assert chrf_line == f"chrF2 = {chrf[best]:.2f}"
