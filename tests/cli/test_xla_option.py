"""`keras-tf train --no-xla` trains in TensorFlow's graph runtime; without it, under XLA."""

import pytest

import keras_tf.training.trainer
from keras_tf.cli.main import main


class _Stop(Exception):
    pass


@pytest.mark.parametrize("flag, jit_compile", [([], True), (["--no-xla"], False)])
def test_no_xla_reaches_the_trainer(corpus, tmp_path, monkeypatch, flag, jit_compile):
    # What train_preset_dir hands to `train`, caught there, as in test_dropout_option.py.
    seen = []

    def capture(config, *args, **kwargs):
        seen.append(kwargs["jit_compile"])
        raise _Stop

    monkeypatch.setattr(keras_tf.training.trainer, "train", capture)
    argv = ["train", "--train", corpus["train"], "--out", str(tmp_path / "run"), "--epochs", "1",
            "--preset", "transformer_tiny", "--vocabulary-size", "48", "--max-length", "16", *flag]
    with pytest.raises(_Stop):
        main(argv)
    assert seen == [jit_compile]
