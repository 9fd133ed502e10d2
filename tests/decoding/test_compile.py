"""The backend's XLA entry point: weights read at call time, one trace per shape, clear errors."""

import keras
import numpy as np
import pytest

from keras_tf.decoding import compiled_functions, generate
from keras_tf.decoding.compile import xla_compile
from keras_tf.models import Seq2SeqTransformer
from tests.decoding.conftest import random_model, random_sources


def test_a_weight_change_after_compiling_is_seen_without_retracing():
    model = random_model(norm_first=False, seed=31)
    sources = random_sources(2, 9, seed=9)
    before = generate(model, sources, max_length=6, end_id=None)

    # The same model with other weights, and a fresh model compiled for them.
    new_weights = random_model(norm_first=False, seed=32).get_weights()
    fresh = Seq2SeqTransformer(model.config)
    fresh.set_weights(new_weights)
    model.set_weights(new_weights)
    after = generate(model, sources, max_length=6, end_id=None)
    expected = generate(fresh, sources, max_length=6, end_id=None)

    assert not np.allclose(after.scores, before.scores)
    np.testing.assert_array_equal(after.tokens, expected.tokens)
    np.testing.assert_allclose(after.scores, expected.scores, rtol=1e-6)
    assert list(compiled_functions(model).values()) == [1]


def test_one_trace_per_input_shape():
    traces = []

    def double(x):
        traces.append(tuple(x.shape))
        return x * 2

    compiled = xla_compile(double, lambda: [])
    for shape in [(2, 3), (2, 3), (4, 3), (2, 3)]:
        out = compiled(np.ones(shape, "float32"))
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(out), np.full(shape, 2.0))
    assert traces == [(2, 3), (4, 3)]


def test_an_unsupported_backend_is_named(monkeypatch):
    monkeypatch.setattr(keras.backend, "backend", lambda: "torch")
    with pytest.raises(NotImplementedError, match="received KERAS_BACKEND='torch'"):
        xla_compile(lambda x: x, lambda: [])
