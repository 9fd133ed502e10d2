"""The Examples in the text pipeline's docstrings run and print what they show."""

import doctest

import pytest

from keras_tf.datasets import bible, jupyterlab_fr, splits
from keras_tf.text import corpora, pipeline, ragged, tokenizers


@pytest.mark.parametrize(
    "module", [corpora, tokenizers, pipeline, ragged, jupyterlab_fr, bible, splits]
)
def test_docstring_examples(module):
    results = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert results.attempted > 0
    assert results.failed == 0
