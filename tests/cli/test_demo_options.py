"""`keras-tf demo --corpus bible`: the Bible, with keras-tf train's defaults (no training here)."""

import os

from keras_tf.cli.main import main


class _Stop(ValueError):
    pass


def test_bible_demo_trains_on_the_bible_with_the_defaults(tmp_path, monkeypatch, capsys):
    seen = {}

    def train_preset_dir(out_dir, train_corpus, valid_corpus, **options):
        seen.update(options, train=len(train_corpus), valid=len(valid_corpus))
        raise _Stop("stopped before training")

    monkeypatch.setattr("keras_tf.training.preset_dir.train_preset_dir", train_preset_dir)
    status = main(["demo", "--corpus", "bible", "--out", str(tmp_path)])
    assert status == 1 and "stopped before training" in capsys.readouterr().err
    assert seen["train"] == 29867 and seen["valid"] == 607
    # The defaults of keras-tf train: fitted vocabulary, warm-up and token batches.
    assert seen["vocabulary_size"] is None and seen["warmup_steps"] is None
    assert seen["batch_size"] is None and seen["max_length"] == 128
    lines = (tmp_path / "data" / "test.tsv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 628 and os.path.isfile(tmp_path / "data" / "train.tsv")


def test_quick_is_for_the_short_demo(tmp_path, capsys):
    assert main(["demo", "--corpus", "bible", "--quick", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        "keras-tf demo: error: --quick applies to the jupyterlab corpus; "
        "--corpus bible has one length"
    )
