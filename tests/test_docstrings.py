"""The Examples in the core docstrings run and print what they show."""

import doctest
import importlib

import pytest

MODULES = [
    "keras_tf.layers.masks",
    "keras_tf.layers.multi_head_attention",
    "keras_tf.layers.positional_embedding",
    "keras_tf.layers.feed_forward",
    "keras_tf.layers.transformer_encoder_block",
    "keras_tf.layers.transformer_decoder_block",
    "keras_tf.models.config",
    "keras_tf.models.seq2seq_backbone",
    "keras_tf.models.seq2seq_transformer",
    "keras_tf.models.token_loss",
    "keras_tf.training.losses",
    "keras_tf.training.metrics",
    "keras_tf.training.schedules",
    "keras_tf.training.reverse_task",
    "keras_tf.training.distribute",
    "keras_tf.training.bleu",
    "keras_tf.training.callbacks",
    "keras_tf.training.averaging",
    "keras_tf.decoding.compile",
    "keras_tf.decoding.stages",
    "keras_tf.tensorflow_import",
    "keras_tf.option_error",
    "keras_tf.plots",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    results = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert results.attempted > 0
    assert results.failed == 0
