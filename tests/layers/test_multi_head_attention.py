import keras
import numpy as np
import pytest

from keras_tf.layers import MultiHeadAttention, compute_attention_mask
from keras_tf.layers.cache_update import in_place_writes, new_cache
from keras_tf.layers.graph_ops import eigen_transpose
from tests.helpers import copy_attention_weights, run_layer_checks, to_numpy

D_MODEL, HEADS = 16, 4


def copy_to_keras_mha(ours):
    """A keras.layers.MultiHeadAttention holding `ours`'s weights."""
    theirs = keras.layers.MultiHeadAttention(HEADS, key_dim=D_MODEL // HEADS)
    x = np.zeros((1, 2, D_MODEL), "float32")
    theirs(x, x)
    copy_attention_weights(ours, theirs, D_MODEL, HEADS)
    return theirs


@pytest.fixture
def pair():
    ours = MultiHeadAttention(HEADS, D_MODEL)
    x = np.random.rand(2, 5, D_MODEL).astype("float32")
    ours(x)
    return ours, copy_to_keras_mha(ours)


def test_matches_keras_self_attention(pair):
    ours, theirs = pair
    x = np.random.rand(2, 5, D_MODEL).astype("float32")
    np.testing.assert_allclose(to_numpy(ours(x)), to_numpy(theirs(x, x)), atol=1e-5)


def test_matches_keras_with_causal_mask(pair):
    ours, theirs = pair
    x = np.random.rand(2, 5, D_MODEL).astype("float32")
    mask = compute_attention_mask(x, x, causal=True)
    np.testing.assert_allclose(
        to_numpy(ours(x, attention_mask=mask)),
        to_numpy(theirs(x, x, use_causal_mask=True)),
        atol=1e-5,
    )


def test_matches_keras_cross_attention_with_padding_masks(pair):
    ours, theirs = pair
    query = np.random.rand(2, 4, D_MODEL).astype("float32")
    value = np.random.rand(2, 6, D_MODEL).astype("float32")
    query_mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], bool)
    value_mask = np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], bool)
    mask = compute_attention_mask(query, value, query_mask, value_mask)
    expected = to_numpy(theirs(query, value, query_mask=query_mask, value_mask=value_mask))
    got = to_numpy(ours(query, value, attention_mask=mask))
    # Compare real query positions only; padded ones are unused downstream.
    np.testing.assert_allclose(got[query_mask], expected[query_mask], atol=1e-5)


def test_causal_outputs_do_not_see_the_future():
    layer = MultiHeadAttention(HEADS, D_MODEL)
    x = np.random.rand(1, 6, D_MODEL).astype("float32")
    changed = x.copy()
    changed[:, 4:] = np.random.rand(1, 2, D_MODEL)
    mask = compute_attention_mask(x, x, causal=True)
    a, b = to_numpy(layer(x, attention_mask=mask)), to_numpy(layer(changed, attention_mask=mask))
    np.testing.assert_allclose(a[:, :4], b[:, :4], atol=1e-6)
    assert not np.allclose(a[:, 4:], b[:, 4:])


def test_padded_keys_do_not_change_real_outputs():
    layer = MultiHeadAttention(HEADS, D_MODEL)
    x = np.random.rand(1, 6, D_MODEL).astype("float32")
    changed = x.copy()
    changed[:, 4:] = 100 * np.random.rand(1, 2, D_MODEL)
    padding = np.array([[1, 1, 1, 1, 0, 0]], bool)
    mask = compute_attention_mask(x, x, padding, padding)
    a, b = to_numpy(layer(x, attention_mask=mask)), to_numpy(layer(changed, attention_mask=mask))
    np.testing.assert_allclose(a[:, :4], b[:, :4], atol=1e-5)


@pytest.mark.parametrize("policy", ["float16", "bfloat16"])
def test_fully_masked_row_gives_no_nan_in_low_precision(policy):
    layer = MultiHeadAttention(HEADS, D_MODEL, dtype=policy)
    x = np.random.rand(1, 3, D_MODEL).astype(policy)
    mask = np.zeros((1, 3, 3), bool)  # nothing may be attended
    out = layer(x, attention_mask=mask)  # builds the layer
    same, weights = layer.call_with_attention_scores(x, attention_mask=mask)
    np.testing.assert_array_equal(to_numpy(out), to_numpy(same))
    assert keras.backend.standardize_dtype(out.dtype) == policy
    assert np.all(np.isfinite(to_numpy(keras.ops.cast(out, "float32"))))
    np.testing.assert_allclose(to_numpy(keras.ops.cast(weights, "float32")), 1 / 3, atol=1e-2)


def test_attention_weights_are_returned_and_sum_to_one():
    layer = MultiHeadAttention(HEADS, D_MODEL)
    x = np.random.rand(2, 5, D_MODEL).astype("float32")
    mask = compute_attention_mask(x, x, causal=True)
    out = layer(x, attention_mask=mask)
    same, weights = layer.call_with_attention_scores(x, attention_mask=mask)
    # `call` returns one tensor, `call_with_attention_scores` always a pair.
    assert not isinstance(out, tuple)
    np.testing.assert_array_equal(to_numpy(out), to_numpy(same))
    weights = to_numpy(weights)
    assert weights.shape == (2, HEADS, 5, 5)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(weights[0, 0], k=1) == 0)


def test_cache_gives_the_same_outputs_as_the_full_sequence():
    layer = MultiHeadAttention(HEADS, D_MODEL)
    x = np.random.rand(2, 5, D_MODEL).astype("float32")
    full = to_numpy(layer(x, attention_mask=compute_attention_mask(x, x, causal=True)))
    cache = new_cache(2, 5, HEADS, D_MODEL // HEADS, "float32")
    step_cache = cache
    for t in range(5):
        step = x[:, t : t + 1]
        mask = compute_attention_mask(step, np.zeros((2, 5)), causal=True, cache_index=t)
        out, cache = layer.call_with_cache(step, cache, t, attention_mask=mask)
        np.testing.assert_allclose(to_numpy(out)[:, 0], full[:, t], atol=1e-5)
        # One token on [batch, d_model] states: the same outputs and cache.
        step_out, step_cache = layer.step_with_cache(x[:, t], step_cache, t)
        np.testing.assert_allclose(to_numpy(step_out), full[:, t], atol=1e-5)
        for step_part, part in zip(step_cache, cache):
            np.testing.assert_allclose(to_numpy(step_part), to_numpy(part), atol=1e-6)


def test_one_token_cross_attention_equals_the_full_pass():
    layer = MultiHeadAttention(HEADS, D_MODEL)
    x = np.random.rand(3, 4, D_MODEL).astype("float32")
    memory = np.random.rand(3, 6, D_MODEL).astype("float32")
    real = np.arange(6)[None, :] < np.array([[6], [2], [4]])  # [batch, source]
    mask = compute_attention_mask(x, memory, key_padding_mask=real)
    full = to_numpy(layer(x, memory, attention_mask=mask))
    key_value = layer.compute_key_value(memory)
    assert [tuple(t.shape) for t in key_value] == [(3, HEADS, 6, D_MODEL // HEADS)] * 2
    for t in range(4):
        out = layer.step_with_key_value(x[:, t], key_value, real)
        np.testing.assert_allclose(to_numpy(out), full[:, t], atol=1e-5)


def test_one_token_cross_attention_shares_a_sources_keys_among_its_group_of_rows():
    """Rows 3b .. 3b + 2 (beam search's hypotheses of source b) read only source b's keys and values."""
    layer = MultiHeadAttention(HEADS, D_MODEL)
    group = 3
    queries = np.random.rand(2 * group, 1, D_MODEL).astype("float32")
    memory = np.random.rand(2, 5, D_MODEL).astype("float32")
    real = np.arange(5)[None, :] < np.array([[5], [2]])
    tiled_memory, tiled_real = np.repeat(memory, group, 0), np.repeat(real, group, 0)
    mask = compute_attention_mask(queries, tiled_memory, key_padding_mask=tiled_real)
    full = to_numpy(layer(queries, tiled_memory, attention_mask=mask))[:, 0]
    shared = layer.step_with_key_value(
        queries[:, 0], layer.compute_key_value(memory), real
    )
    np.testing.assert_allclose(to_numpy(shared), full, atol=1e-5)
    # A source's rows differ from each other: the test is not of one repeated row.
    assert np.abs(full[0] - full[1]).max() > 1e-3


tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the export's forms are TensorFlow's"
)


@tensorflow_only
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_eigen_transpose_is_the_transpose(dtype):
    x = keras.ops.convert_to_numpy(keras.ops.cast(np.random.rand(2, 3, 5, 4, 6), dtype))
    with in_place_writes():
        moved = eigen_transpose(x, (2, 0, 3, 1, 4))
    assert moved.dtype == x.dtype
    np.testing.assert_array_equal(to_numpy(moved), x.transpose(2, 0, 3, 1, 4))


@tensorflow_only
def test_self_attention_in_the_exports_form_equals_the_einsum_form():
    """Inside `in_place_writes()`: Eigen's transposes and batched products."""
    layer = MultiHeadAttention(HEADS, D_MODEL)
    x = np.random.rand(2, 5, D_MODEL).astype("float32")
    real = np.arange(5)[None, :] < np.array([[5], [3]])
    mask = compute_attention_mask(x, x, real, real, causal=True)
    layer(x)
    output, weights = map(to_numpy, layer.call_with_attention_scores(x, attention_mask=mask))
    with in_place_writes():
        in_graph, in_graph_weights = map(
            to_numpy, layer.call_with_attention_scores(x, attention_mask=mask))
    np.testing.assert_allclose(in_graph, output, atol=1e-5)
    np.testing.assert_allclose(in_graph_weights, weights, atol=1e-6)
    # The mask is applied: a padded key gets no weight.
    assert np.abs(in_graph_weights[1, :, :3, 3:]).max() < 1e-6


@tensorflow_only
def test_cross_attention_in_the_exports_form_equals_the_einsum_form():
    """Keys and values moved by Eigen's transposes, one row or a group of rows per source through Eigen's products."""
    layer = MultiHeadAttention(HEADS, D_MODEL)
    memory = np.random.rand(2, 5, D_MODEL).astype("float32")
    real = np.arange(5)[None, :] < np.array([[5], [2]])
    layer(memory[:, :1], memory)
    key_value = [to_numpy(t) for t in layer.compute_key_value(memory)]
    for group in (1, 3):
        queries = np.random.rand(2 * group, D_MODEL).astype("float32")
        expected = to_numpy(layer.step_with_key_value(queries, key_value, real, group=group))
        with in_place_writes():
            in_graph_key_value = [to_numpy(t) for t in layer.compute_key_value(memory)]
            got = to_numpy(layer.step_with_key_value(queries, in_graph_key_value, real, group=group))
        for ours, theirs in zip(in_graph_key_value, key_value):
            np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_num_heads_must_divide_d_model():
    with pytest.raises(ValueError, match="received d_model=500, num_heads=8"):
        MultiHeadAttention(8, 500)


def test_wrong_width_raises():
    layer = MultiHeadAttention(HEADS, D_MODEL)
    with pytest.raises(ValueError, match=r"d_model=16; received shape \(1, 3, 8\)"):
        layer(np.zeros((1, 3, 8), "float32"))


def test_layer_checks(tmp_path):
    run_layer_checks(
        MultiHeadAttention,
        dict(num_heads=2, d_model=8, dropout=0.1),
        np.random.rand(2, 4, 8).astype("float32"),
        tmp_path=tmp_path,
    )


def test_one_token_over_ancestor_rows_equals_attention_over_the_gathered_cache():
    """Row r reads position t from row cache_rows[r, t] of its group (beam search's ancestors)."""
    layer = MultiHeadAttention(HEADS, D_MODEL)
    sources, group, length, index = 2, 3, 5, 3
    rows, head_dim = sources * group, D_MODEL // HEADS
    layer.build((rows, 1, D_MODEL))
    rng = np.random.default_rng(0)
    cache = new_cache(rows, length, HEADS, head_dim, "float32")
    cache = tuple(keras.ops.convert_to_tensor(rng.random(tuple(t.shape)), "float32") for t in cache)
    # Ancestors among the rows of the same source; the new position is the row's own.
    cache_rows = (np.arange(rows) // group * group)[:, None] + rng.integers(0, group, (rows, length))
    cache_rows[:, index] = np.arange(rows)
    query = rng.random((rows, D_MODEL)).astype("float32")
    out, written = layer.step_with_cache(query, cache, index, cache_rows=cache_rows,
                                         sources=sources)
    # The reference: every row's ancestors copied into it, then no table.
    gathered = tuple(to_numpy(t)[:, cache_rows, np.arange(length)[None, :]] for t in written)
    expected, _ = layer.step_with_cache(query, gathered, index)
    np.testing.assert_allclose(to_numpy(out), to_numpy(expected), atol=1e-5)
    # Without `sources`, all rows form one group: the same result.
    one_group, _ = layer.step_with_cache(query, cache, index, cache_rows=cache_rows)
    np.testing.assert_allclose(to_numpy(one_group), to_numpy(expected), atol=1e-5)
    # The table matters: reading the own rows differs.
    own, _ = layer.step_with_cache(query, cache, index)
    assert np.abs(to_numpy(own) - to_numpy(expected)).max() > 1e-3
