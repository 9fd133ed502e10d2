"""The Examples in the serving docstrings run and print what they show."""

import doctest
import importlib

import pytest


# By name: the package's `export` attribute is the function, not the module.
@pytest.mark.parametrize(
    "name",
    ["keras_tf.serving.translator", "keras_tf.serving.export", "keras_tf.translation.batches"],
)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    results = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert results.attempted > 0
    assert results.failed == 0
