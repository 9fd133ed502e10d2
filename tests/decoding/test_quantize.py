"""int8 weights for decoding: `Seq2SeqTransformer.quantize("int8")`."""

import numpy as np
import pytest

from keras_tf.decoding import compiled_functions, generate, greedy_search_uncached
from keras_tf.models import Seq2SeqTransformer, get_preset
from keras_tf.training import make_reverse_task
from tests.decoding.conftest import MAX_LENGTH, random_model, random_sources
from tests.helpers import shared_reverse_model


@pytest.fixture(scope="module")
def reverse_models(tmp_path_factory):
    """The shared trained reverse model (tied embeddings), in float32 and in int8."""
    float32 = shared_reverse_model(tmp_path_factory)
    int8 = shared_reverse_model(tmp_path_factory)  # a second copy, loaded again
    int8.quantize("int8")
    return float32, int8


# 200 sources decode as one batch: issue 50's "batch of at least 16" too.
def test_int8_decodes_the_reverse_task_as_float32_does(reverse_models):
    float32, int8 = reverse_models
    inputs, labels = make_reverse_task(200, seed=99)
    sources, max_length = inputs["encoder_tokens"], labels.shape[1]
    for kwargs in (dict(method="greedy"), dict(method="beam", beam_size=4)):
        expected = generate(float32, sources, max_length=max_length, **kwargs)
        got = generate(int8, sources, max_length=max_length, **kwargs)
        agreement = (got.tokens == expected.tokens).all(axis=1).mean()
        assert agreement >= 0.99, (kwargs, agreement)
        # The scores move a little: int8 weights are in use, not the float32 ones.
        # (Up to 0.99 nats over 11 tokens measured, on a reverse model trained
        # with one thread per op.)
        assert 0 < np.abs(got.scores - expected.scores).max() < 1.5, kwargs


# Apart from the agreement above, which JAX runs too (tests/test_backends.py):
# there the uncached loop compiles every eager op for every prefix length.
def test_cached_int8_greedy_equals_the_full_model_on_the_prefix(reverse_models):
    _, int8 = reverse_models
    inputs, labels = make_reverse_task(200, seed=99)
    sources, max_length = inputs["encoder_tokens"], labels.shape[1]
    got = generate(int8, sources, max_length=max_length, method="greedy")
    # Cached and compiled on int8 weights = the full forward pass at every step.
    uncached = greedy_search_uncached(int8, sources, max_length)
    np.testing.assert_array_equal(got.tokens, uncached.tokens)
    # Inputs are rounded to int8 per token: a float-order difference
    # at a rounding boundary moves a value by one step. Such flips are
    # rare (5 sentences in 200 measured, by 0.001 to 0.026 nats); the
    # rest agree to float32 rounding.
    difference = np.abs(got.scores - uncached.scores)
    assert np.quantile(difference, 0.95) < 1e-4, np.sort(difference)[-8:]
    assert difference.max() < 0.1, np.sort(difference)[-8:]


def test_the_tied_projection_divides_by_the_int8_row_scales(reverse_models):
    float32, int8 = reverse_models
    embedding = int8.target_embedding.token_embedding
    assert str(embedding.embeddings.dtype) == "int8"
    # states: [1, 3, d_model]
    states = np.random.default_rng(0).normal(size=(1, 3, 32)).astype("float32")
    got = np.asarray(int8.target_embedding(states, reverse=True))
    dequantized = np.asarray(embedding.embeddings, "float32") / np.asarray(
        embedding.embeddings_scale
    )[:, None]
    np.testing.assert_allclose(got, states @ dequantized.T, rtol=1e-5, atol=1e-5)
    expected = np.asarray(float32.target_embedding(states, reverse=True))
    # Within int8 rounding of the float32 logits (the int8 values alone are ~300x).
    np.testing.assert_allclose(got, expected, atol=0.02 * np.abs(expected).max())


def test_quantize_after_generate_recompiles_with_int8_weights(tmp_path):
    # Untied: the output projection is a Dense, quantized too.
    model = random_model(norm_first=False, seed=3)
    sources = random_sources(4, 9, seed=3)
    float32 = generate(model, sources, max_length=MAX_LENGTH, end_id=None)
    model.quantize("int8")
    assert model.weight_quantization == "int8"
    assert str(model.output_projection.kernel.dtype) == "int8"
    assert compiled_functions(model) == {}
    got = generate(model, sources, max_length=MAX_LENGTH, end_id=None)
    expected = greedy_search_uncached(model, sources, MAX_LENGTH, end_id=None)
    np.testing.assert_array_equal(got.tokens, expected.tokens)
    np.testing.assert_allclose(got.scores, expected.scores, atol=1e-2)  # as above
    assert np.abs(got.scores - float32.scores).max() > 1e-4
    with pytest.raises(ValueError, match="already quantized: weight_quantization='int8'"):
        model.quantize("int8")
    with pytest.raises(ValueError, match="quantized to int8 cannot be saved as .keras"):
        model.save(tmp_path / "model.keras")


@pytest.mark.parametrize(
    "mode, message",
    [("int4", "supports mode in \\('int8',\\); received mode='int4'"), ("int3", "mode=int3")],
)
def test_other_modes_are_refused(mode, message):
    model = Seq2SeqTransformer(get_preset("transformer_tiny"))
    with pytest.raises(ValueError, match=message):
        model.quantize(mode)
    assert model.weight_quantization is None
