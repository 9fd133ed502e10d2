import numpy as np
import pytest
from keras import ops

from keras_tf.decoding import generate, greedy_search, greedy_search_uncached
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


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_cached_greedy_equals_the_full_model_on_the_prefix(norm_first, request):
    if norm_first:
        model = random_model(norm_first=True, seed=22)
    else:
        model = request.getfixturevalue("post_norm_model")
    # Length 11 is padded to the bucket 16 by `generate`, not by the reference.
    sources = random_sources(4, 11, seed=5)
    expected = greedy_search_uncached(model, sources, MAX_LENGTH, end_id=None)
    # Exactly max_length tokens without an end token.
    assert expected.tokens.shape == (4, MAX_LENGTH) and (expected.tokens != 0).all()

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
