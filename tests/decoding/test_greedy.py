import contextlib

import numpy as np
import pytest
from keras import ops

from keras_tf.decoding import generate, greedy_search, greedy_search_uncached
from keras_tf.decoding.greedy import exclude_unpickable, take_along_rows
from keras_tf.layers.cache_update import in_place_writes
from keras_tf.models import START_ID
from tests.decoding.conftest import (
    MAX_LENGTH,
    cut_after,
    random_model,
    random_sources,
    token_that_ends_some_rows_early,
)


def test_greedy_search_follows_a_fixed_chain_and_pads_after_end():
    # Token t is followed by t + 1; rows start from different tokens by
    # reading their start token from the cache. Token 7 ends a row.
    def step_fn(tokens, cache, index):
        current = ops.where(ops.equal(index, 0), cache, tokens[:, 0])
        return ops.one_hot(current + 1, 16) * 5.0, cache

    starts = ops.convert_to_tensor([4, 5, 6, 8], dtype="int32")
    tokens, scores = greedy_search(step_fn, starts, batch_size=4, max_length=5, end_id=7)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(tokens),
        [[5, 6, 7, 0, 0], [6, 7, 0, 0, 0], [7, 0, 0, 0, 0], [9, 10, 11, 12, 13]],
    )
    # Each picked token has probability e^5 / (e^5 + 15).
    log_p = 5.0 - np.log(np.exp(5.0) + 15.0)
    np.testing.assert_allclose(ops.convert_to_numpy(scores), np.array([3, 2, 1, 5]) * log_p, rtol=1e-6)


def test_greedy_search_never_picks_padding():
    def step_fn(tokens, cache, index):
        return ops.convert_to_tensor([[9.0, 1.0, 0.0, 0.0]]), cache

    tokens, _ = greedy_search(step_fn, (), batch_size=1, max_length=3)
    np.testing.assert_array_equal(ops.convert_to_numpy(tokens), [[1, 1, 1]])


def test_greedy_search_never_picks_start_and_scores_over_all_logits():
    # START (2) is likeliest; the pick skips it, the score's log-softmax keeps it.
    logits = np.array([[0.0, 1.0, 9.0, 0.0, 2.0]], "float32")

    def step_fn(tokens, cache, index):
        return ops.convert_to_tensor(logits), cache

    tokens, scores = greedy_search(step_fn, (), batch_size=1, max_length=2, end_id=None)
    np.testing.assert_array_equal(ops.convert_to_numpy(tokens), [[4, 4]])
    log_p = 2.0 - np.log(np.exp(logits).sum())
    np.testing.assert_allclose(ops.convert_to_numpy(scores), [2 * log_p], rtol=1e-6)


# Batch 16 (issue 50) on post-norm only: each batch size is another compile
# and another uncached loop, and the cache's batch axis is the same in both norms.
@pytest.mark.parametrize(
    "norm_first, batch_size", [(False, 4), (True, 4), (False, 16)],
    ids=["post_norm", "pre_norm", "post_norm-batch16"],
)
def test_cached_greedy_equals_the_full_model_on_the_prefix(norm_first, batch_size, request):
    if norm_first:
        model = random_model(norm_first=True, seed=22)
    else:
        model = request.getfixturevalue("post_norm_model")
    # Length 11 is padded to the bucket 16 by `generate`, not by the reference.
    sources = random_sources(batch_size, 11, seed=5)
    expected = greedy_search_uncached(model, sources, MAX_LENGTH, end_id=None)
    # Exactly max_length tokens without an end token.
    assert expected.tokens.shape == (batch_size, MAX_LENGTH) and (expected.tokens != 0).all()

    got = generate(model, sources, max_length=MAX_LENGTH, end_id=None)
    np.testing.assert_array_equal(got.tokens, expected.tokens)
    np.testing.assert_allclose(got.scores, expected.scores, atol=1e-4)

    # A token that some rows produce early now ends them; they are padded.
    end_id = token_that_ends_some_rows_early(expected.tokens)
    cut = cut_after(expected.tokens, end_id)
    expected = greedy_search_uncached(model, sources, MAX_LENGTH, end_id=end_id)
    np.testing.assert_array_equal(expected.tokens, cut)
    got = generate(model, sources, max_length=MAX_LENGTH, end_id=end_id)
    np.testing.assert_array_equal(got.tokens, cut)
    np.testing.assert_allclose(got.scores, expected.scores, atol=1e-4)


def test_cached_greedy_at_batch_16_is_the_full_models_argmax_on_its_own_prefix(post_norm_model):
    """Cached == uncached at batch 16 with one forward pass, so that JAX runs it too.

    Under the causal mask, the full model's logits at position i of START +
    tokens depend on the prefix up to i alone: they are what the uncached loop
    computes at step i. (The loop itself, on JAX, compiles every eager op for
    every prefix length: minutes.)
    """
    model = post_norm_model
    sources = random_sources(16, 11, seed=7)
    got = generate(model, sources, max_length=MAX_LENGTH, end_id=None)
    assert got.tokens.shape == (16, MAX_LENGTH) and (got.tokens != 0).all()
    decoder_tokens = np.concatenate(
        [np.full((16, 1), START_ID, "int32"), got.tokens[:, :-1]], axis=1
    )
    # logits: [16, MAX_LENGTH, vocabulary]
    logits = model({"encoder_tokens": sources, "decoder_tokens": decoder_tokens})
    np.testing.assert_array_equal(
        got.tokens, ops.convert_to_numpy(ops.argmax(exclude_unpickable(logits), axis=-1))
    )
    log_probs = ops.convert_to_numpy(ops.log_softmax(logits, axis=-1))
    token_log_probs = np.take_along_axis(log_probs, got.tokens[..., None], axis=-1)[..., 0]
    np.testing.assert_allclose(got.scores, token_log_probs.sum(axis=1), atol=1e-4)

    # A token that some rows produce early ends them: padded after it, scored up to it.
    end_id = token_that_ends_some_rows_early(got.tokens)
    cut = cut_after(got.tokens, end_id)
    ended = generate(model, sources, max_length=MAX_LENGTH, end_id=end_id)
    np.testing.assert_array_equal(ended.tokens, cut)
    lengths = np.where(cut == end_id, np.arange(MAX_LENGTH), MAX_LENGTH - 1).min(axis=1) + 1
    real = np.arange(MAX_LENGTH) < lengths[:, None]
    np.testing.assert_allclose(ended.scores, (token_log_probs * real).sum(axis=1), atol=1e-4)


@pytest.mark.parametrize("in_place", [False, True])
def test_take_along_rows_equals_take_along_axis(in_place):
    x = np.random.rand(3, 5, 2).astype("float32")
    indices = np.array([[4, 0], [1, 1], [3, 2]])
    expected = np.take_along_axis(x, indices[:, :, None], axis=1)
    with in_place_writes() if in_place else contextlib.nullcontext():
        np.testing.assert_array_equal(ops.convert_to_numpy(take_along_rows(x, indices)), expected)
        np.testing.assert_array_equal(ops.convert_to_numpy(take_along_rows(x[:, :, 0], indices)),
                                      expected[:, :, 0])
