"""`keras-tf train --dropout P` trains the preset with P_drop = P and records it."""

import json
import os

from keras_tf.cli.main import main
from keras_tf.models import get_preset
from tests.cli.conftest import TRAIN_OPTIONS


def test_dropout_reaches_the_saved_config_and_the_layers(corpus, tmp_path):
    from keras_tf.models import Seq2SeqTranslator

    assert get_preset("transformer_tiny").dropout == 0.0  # so 0.25 can only come from the flag
    out = tmp_path / "run"
    argv = ["train", "--train", corpus["train"], "--out", str(out), "--epochs", "1",
            "--steps", "2", "--dropout", "0.25", *TRAIN_OPTIONS]
    assert main(argv) == 0
    with open(out / "options.json") as file:
        assert json.load(file)["dropout"] == 0.25
    translator = Seq2SeqTranslator.from_preset(str(out))
    assert translator.config.dropout == 0.25
    rates = {layer.rate for layer in translator.backbone._flatten_layers()
             if layer.__class__.__name__ == "Dropout"}
    # Every sub-layer dropout at P; the attention weights keep attention_dropout (0).
    assert rates == {0.25, translator.config.attention_dropout} == {0.25, 0.0}, rates
    assert os.path.exists(out / "model.keras")
