import math

import keras
import numpy as np
import pytest

from keras_tf.layers import PositionalEmbedding
from tests.helpers import run_layer_checks, to_numpy


def paper_encoding(max_length, d_model):
    """PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(pos/10000^(2i/d)), looped."""
    pe = np.zeros((max_length, d_model))
    for pos in range(max_length):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            pe[pos, 2 * i] = math.sin(angle)
            pe[pos, 2 * i + 1] = math.cos(angle)
    return pe


def test_zero_embeddings_give_the_papers_formula():
    layer = PositionalEmbedding(10, 16, max_length=50, embeddings_initializer="zeros")
    tokens = np.arange(50).reshape(1, 50) % 10
    out = to_numpy(layer(tokens))[0]
    np.testing.assert_allclose(out, paper_encoding(50, 16), atol=1e-6)


def test_embedding_is_scaled_by_sqrt_d_model():
    layer = PositionalEmbedding(10, 16, max_length=8)
    tokens = np.array([[3, 4, 5]])
    out = to_numpy(layer(tokens))
    table = to_numpy(layer.embeddings)
    np.testing.assert_allclose(
        out[0], table[[3, 4, 5]] * 4.0 + paper_encoding(3, 16), atol=1e-5
    )


def test_start_index_gives_pe_of_that_position():
    layer = PositionalEmbedding(10, 8, max_length=20)
    tokens = np.array([[1, 2, 3, 4, 5, 6]])
    full = to_numpy(layer(tokens))
    for t in range(6):
        step = to_numpy(layer(tokens[:, t : t + 1], start_index=t))
        np.testing.assert_allclose(step[0, 0], full[0, t], atol=1e-6)


def test_padding_id_zero_produces_the_keras_mask():
    layer = PositionalEmbedding(10, 8, max_length=20)
    tokens = np.array([[5, 6, 0, 0], [7, 0, 0, 0]])
    mask = to_numpy(layer.compute_mask(keras.ops.convert_to_tensor(tokens)))
    np.testing.assert_array_equal(mask, tokens != 0)


def test_reverse_ties_the_output_projection_to_the_embedding():
    layer = PositionalEmbedding(10, 8, max_length=20)
    layer(np.array([[1]]))
    states = np.random.rand(2, 3, 8).astype("float32")
    logits = to_numpy(layer(states, reverse=True))
    np.testing.assert_allclose(logits, states @ to_numpy(layer.embeddings).T, atol=1e-5)


def test_too_long_input_raises_with_the_lengths():
    layer = PositionalEmbedding(10, 8, max_length=4)
    with pytest.raises(ValueError, match=r"length 5 .* max_length=4"):
        layer(np.ones((1, 5), "int32"))


def test_float_token_ids_raise():
    layer = PositionalEmbedding(10, 8, max_length=4)
    with pytest.raises(TypeError, match="integer token ids; received dtype float32"):
        layer(np.ones((1, 3), "float32"))


def test_wrong_rank_raises():
    layer = PositionalEmbedding(10, 8, max_length=4)
    with pytest.raises(ValueError, match=r"rank 2 .* received shape \(3,\)"):
        layer(np.ones((3,), "int32"))


def test_layer_checks(tmp_path):
    run_layer_checks(
        PositionalEmbedding,
        dict(vocabulary_size=12, d_model=8, max_length=16),
        np.array([[1, 2, 3, 0], [4, 5, 0, 0]], "int32"),
        tmp_path=tmp_path,
    )
