"""`keras-tf train --gradient-accumulation-steps N` reaches the trainer and options.json; a resume repeats it."""

import json

import pytest

import keras_tf.training.trainer
from keras_tf.cli.main import main
from tests.cli.conftest import TRAIN_OPTIONS


class _Stop(Exception):
    pass


@pytest.mark.parametrize("flag, steps", [([], 1), (["--gradient-accumulation-steps", "3"], 3)])
def test_the_flag_reaches_the_trainer_and_options(corpus, tmp_path, monkeypatch, flag, steps):
    # What train_preset_dir hands to `train`, caught there, as in tests/cli/test_dropout_option.py.
    seen = []

    def capture(config, *args, out_dir, **kwargs):
        with open(f"{out_dir}/options.json") as file:
            seen.append((kwargs["gradient_accumulation_steps"],
                         json.load(file)["gradient_accumulation_steps"]))
        raise _Stop

    monkeypatch.setattr(keras_tf.training.trainer, "train", capture)
    argv = ["train", "--train", corpus["train"], "--out", str(tmp_path / "run"), "--epochs", "1",
            *TRAIN_OPTIONS, *flag]
    with pytest.raises(_Stop):
        main(argv)
    assert seen == [(steps, steps)]


def test_a_resume_with_another_n_stops_before_reading_the_corpus(tmp_path, monkeypatch, capsys):
    # options.json as a first `train --gradient-accumulation-steps 4` with
    # TRAIN_OPTIONS wrote it; the corpus named is missing, so reaching it fails.
    out = tmp_path / "run"
    out.mkdir()
    first = {"preset": "transformer_tiny", "dropout": None, "tokenizer": "sentencepiece",
             "vocabulary_size": 48, "max_length": 16, "mixed_precision": None,
             "gradient_accumulation_steps": 4}
    (out / "options.json").write_text(json.dumps(first))
    argv = ["train", "--train", str(tmp_path / "missing.tsv"), "--out", str(out),
            *TRAIN_OPTIONS, "--gradient-accumulation-steps", "2"]
    assert main(argv) == 2  # a usage error, as argparse's
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"keras-tf train: error: --gradient-accumulation-steps 2: {out} holds a run made with "
        "other options (gradient-accumulation-steps 4 before, 2 now); repeat them to resume, "
        "or train into a new directory, or pass --overwrite to replace it (its files are "
        "deleted)"
    )
    # Written before the option existed, options.json stands for N = 1.
    del first["gradient_accumulation_steps"]
    (out / "options.json").write_text(json.dumps(first))
    assert main(argv) == 2
    assert "gradient-accumulation-steps 1 before, 2 now" in capsys.readouterr().err
    assert main(argv[:-2]) == 2  # N = 1 again: on to the corpus, which is missing
    assert "--train: no such file" in capsys.readouterr().err
