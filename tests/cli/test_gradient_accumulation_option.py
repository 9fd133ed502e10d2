"""`keras-tf train --gradient-accumulation-steps N` reaches the trainer and options.json."""

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
