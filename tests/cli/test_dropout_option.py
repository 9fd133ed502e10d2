"""`keras-tf train --dropout P` trains the preset with P_drop = P and records it."""

import json

import pytest

import keras_tf.training.trainer
from keras_tf.cli.main import main
from keras_tf.models import Seq2SeqTransformer, get_preset
from tests.cli.conftest import TRAIN_OPTIONS


class _Stop(Exception):
    pass


def test_dropout_reaches_the_trained_config_and_its_layers(corpus, tmp_path, monkeypatch):
    # What train_preset_dir hands to `train`, caught there: the run itself is the
    # same code every other command test trains through.
    configs, options = [], []

    def capture(config, *args, out_dir, **kwargs):
        configs.append(config)
        with open(f"{out_dir}/options.json") as file:
            options.append(json.load(file))
        raise _Stop

    monkeypatch.setattr(keras_tf.training.trainer, "train", capture)
    assert get_preset("transformer_tiny").dropout == 0.0  # so 0.25 can only come from the flag
    out = tmp_path / "run"
    argv = ["train", "--train", corpus["train"], "--out", str(out), "--epochs", "1",
            "--dropout", "0.25", *TRAIN_OPTIONS]
    with pytest.raises(_Stop):
        main(argv)
    (config,) = configs
    assert config == get_preset("transformer_tiny").replace(
        dropout=0.25, source_vocabulary_size=48, target_vocabulary_size=48,
        max_source_length=16, max_target_length=16,
    )
    assert options[0]["dropout"] == 0.25
    assert not out.exists()  # a run that ends before its first epoch leaves no directory
    model = Seq2SeqTransformer(config)
    rates = {layer.rate for layer in model._flatten_layers()
             if layer.__class__.__name__ == "Dropout"}
    # Every sub-layer dropout at P; the attention weights keep attention_dropout (0).
    assert rates == {0.25, config.attention_dropout} == {0.25, 0.0}, rates
