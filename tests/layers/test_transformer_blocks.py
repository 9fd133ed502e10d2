"""Encoder and decoder blocks: parity with keras-hub given copied weights, invariances, checks."""

import keras
import keras_hub
import numpy as np
import pytest

from keras_tf.layers import TransformerDecoderBlock, TransformerEncoderBlock
from keras_tf.layers.cache_update import in_place_writes, new_cache
from tests.helpers import copy_attention_weights, run_layer_checks, to_numpy

D_MODEL, HEADS, D_FF = 16, 4, 32
HEAD_DIM = D_MODEL // HEADS


def copy_attention(ours, theirs):
    copy_attention_weights(ours, theirs, D_MODEL, HEADS)


def copy_feed_forward_and_norms(ours, theirs, pairs):
    theirs._feedforward_intermediate_dense.set_weights(ours.feed_forward.inner_dense.get_weights())
    theirs._feedforward_output_dense.set_weights(ours.feed_forward.output_dense.get_weights())
    for mine, other in pairs:
        other.set_weights(mine.get_weights())


def encoder_pair(norm_first):
    ours = TransformerEncoderBlock(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    theirs = keras_hub.layers.TransformerEncoder(
        D_FF, HEADS, dropout=0.0, normalize_first=norm_first, layer_norm_epsilon=1e-5
    )
    x = np.random.rand(2, 5, D_MODEL).astype("float32")
    ours(x), theirs(x)
    copy_attention(ours.self_attention, theirs._self_attention_layer)
    copy_feed_forward_and_norms(
        ours,
        theirs,
        [
            (ours.self_attention_norm, theirs._self_attention_layer_norm),
            (ours.feed_forward_norm, theirs._feedforward_layer_norm),
        ],
    )
    return ours, theirs


def decoder_pair(norm_first):
    ours = TransformerDecoderBlock(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    theirs = keras_hub.layers.TransformerDecoder(
        D_FF, HEADS, dropout=0.0, normalize_first=norm_first, layer_norm_epsilon=1e-5
    )
    y = np.random.rand(2, 4, D_MODEL).astype("float32")
    memory = np.random.rand(2, 6, D_MODEL).astype("float32")
    ours(y, memory), theirs(y, memory)
    copy_attention(ours.self_attention, theirs._self_attention_layer)
    copy_attention(ours.cross_attention, theirs._cross_attention_layer)
    copy_feed_forward_and_norms(
        ours,
        theirs,
        [
            (ours.self_attention_norm, theirs._self_attention_layer_norm),
            (ours.cross_attention_norm, theirs._cross_attention_layer_norm),
            (ours.feed_forward_norm, theirs._feedforward_layer_norm),
        ],
    )
    return ours, theirs


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_matches_keras_hub(norm_first):
    ours, theirs = encoder_pair(norm_first)
    x = np.random.rand(2, 5, D_MODEL).astype("float32")
    padding = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    expected = to_numpy(theirs(x, padding_mask=padding))
    got = to_numpy(ours(x, padding_mask=padding))
    np.testing.assert_allclose(got[padding], expected[padding], atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_matches_keras_hub(norm_first):
    ours, theirs = decoder_pair(norm_first)
    y = np.random.rand(2, 4, D_MODEL).astype("float32")
    memory = np.random.rand(2, 6, D_MODEL).astype("float32")
    y_mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]], bool)
    memory_mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], bool)
    expected = to_numpy(
        theirs(y, memory, decoder_padding_mask=y_mask, encoder_padding_mask=memory_mask)
    )
    got = to_numpy(ours(y, memory, padding_mask=y_mask, memory_padding_mask=memory_mask))
    np.testing.assert_allclose(got[y_mask], expected[y_mask], atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_is_causal(norm_first):
    block = TransformerDecoderBlock(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    y = np.random.rand(1, 6, D_MODEL).astype("float32")
    memory = np.random.rand(1, 3, D_MODEL).astype("float32")
    changed = y.copy()
    changed[:, 3:] = np.random.rand(1, 3, D_MODEL)
    a, b = to_numpy(block(y, memory)), to_numpy(block(changed, memory))
    np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-5)
    assert not np.allclose(a[:, 3:], b[:, 3:])


@pytest.mark.parametrize("norm_first", [False, True])
def test_padded_source_positions_do_not_change_outputs(norm_first):
    encoder = TransformerEncoderBlock(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    decoder = TransformerDecoderBlock(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    x = np.random.rand(1, 5, D_MODEL).astype("float32")
    changed = x.copy()
    changed[:, 3:] = 50 * np.random.rand(1, 2, D_MODEL)
    padding = np.array([[1, 1, 1, 0, 0]], bool)
    a = to_numpy(encoder(x, padding_mask=padding))
    b = to_numpy(encoder(changed, padding_mask=padding))
    np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-5)
    y = np.random.rand(1, 4, D_MODEL).astype("float32")
    np.testing.assert_allclose(
        to_numpy(decoder(y, x, memory_padding_mask=padding)),
        to_numpy(decoder(y, changed, memory_padding_mask=padding)),
        atol=1e-5,
    )


def test_decoder_cache_matches_full_pass():
    block = TransformerDecoderBlock(D_MODEL, HEADS, D_FF, dropout=0.0)
    y = np.random.rand(2, 5, D_MODEL).astype("float32")
    memory = np.random.rand(2, 3, D_MODEL).astype("float32")
    full = to_numpy(block(y, memory))
    cross = block.compute_cross_attention_cache(memory)
    cache = new_cache(2, 5, HEADS, HEAD_DIM, "float32")
    # Two tokens at once (the general path), then one at a time (`step`).
    out, cache = block.call_with_cache(y[:, :2], cache, 0, cross)
    np.testing.assert_allclose(to_numpy(out), full[:, :2], atol=1e-5)
    for t in range(2, 5):
        out, cache = block.call_with_cache(y[:, t : t + 1], cache, t, cross)
        np.testing.assert_allclose(to_numpy(out)[:, 0], full[:, t], atol=1e-5)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the export's forms are TensorFlow's")
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_step_in_the_exports_forms_matches_full_pass(norm_first):
    """Inside `in_place_writes()`: position-major caches written in place, cross-attention of one row per source, LayerNorm in nine ops."""
    block = TransformerDecoderBlock(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    y = np.random.rand(2, 4, D_MODEL).astype("float32")
    memory = np.random.rand(2, 3, D_MODEL).astype("float32")
    real = np.array([[True, True, True], [True, False, False]])
    full = to_numpy(block(y, memory, memory_padding_mask=real))
    cross = block.compute_cross_attention_cache(memory)
    with in_place_writes():
        cache = new_cache(2, 4, HEADS, HEAD_DIM, "float32")
        assert tuple(cache[0].shape) == (4, 2, HEADS, HEAD_DIM)
        for t in range(4):
            out, cache = block.call_with_cache(y[:, t : t + 1], cache, t, cross,
                                               memory_padding_mask=real)
            np.testing.assert_allclose(to_numpy(out)[:, 0], full[:, t], atol=1e-5)
    # The padding is read: the second row differs from its unpadded pass.
    unpadded = to_numpy(block(y, memory))
    assert np.abs(unpadded[1] - full[1]).max() > 1e-3


def test_decoder_without_memory_raises():
    block = TransformerDecoderBlock(D_MODEL, HEADS, D_FF)
    y = np.zeros((1, 2, D_MODEL), "float32")
    with pytest.raises(ValueError, match="needs `memory`"):
        block(y, None)


def test_decoder_methods_return_one_structure_each():
    block = TransformerDecoderBlock(D_MODEL, HEADS, D_FF, dropout=0.0)
    y = np.random.rand(2, 4, D_MODEL).astype("float32")
    memory = np.random.rand(2, 3, D_MODEL).astype("float32")
    out = block(y, memory)
    assert not isinstance(out, tuple)
    same, weights = block.call_with_attention_scores(y, memory)
    np.testing.assert_array_equal(to_numpy(out), to_numpy(same))
    assert tuple(weights.shape) == (2, HEADS, 4, 3)
    np.testing.assert_allclose(to_numpy(weights).sum(-1), 1.0, atol=1e-5)
    encoder = TransformerEncoderBlock(D_MODEL, HEADS, D_FF, dropout=0.0)
    x = encoder(memory)
    same, weights = encoder.call_with_attention_scores(memory)
    np.testing.assert_array_equal(to_numpy(x), to_numpy(same))
    assert tuple(weights.shape) == (2, HEADS, 3, 3)


def test_blocks_reject_heads_that_do_not_divide_d_model():
    with pytest.raises(ValueError, match="received d_model=10, num_heads=4"):
        TransformerEncoderBlock(10, 4, 16)
    with pytest.raises(ValueError, match="received d_model=10, num_heads=4"):
        TransformerDecoderBlock(10, 4, 16)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_checks(tmp_path, norm_first):
    run_layer_checks(
        TransformerEncoderBlock,
        dict(d_model=8, num_heads=2, d_ff=16, dropout=0.1, norm_first=norm_first),
        np.random.rand(2, 4, 8).astype("float32"),
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_checks(tmp_path, norm_first):
    run_layer_checks(
        TransformerDecoderBlock,
        dict(d_model=8, num_heads=2, d_ff=16, dropout=0.1, norm_first=norm_first),
        [np.random.rand(2, 4, 8).astype("float32"), np.random.rand(2, 3, 8).astype("float32")],
        tmp_path=tmp_path,
    )
