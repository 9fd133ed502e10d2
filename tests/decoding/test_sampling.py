import keras
import numpy as np
from keras import ops

from keras_tf.decoding import generate, sample_search, top_k_filter, top_p_filter
from tests.decoding.conftest import MAX_LENGTH, random_sources

PROBS = np.array([0.0, 0.05, 0.05, 0.1, 0.5, 0.3], dtype="float32")


def _kept(filtered):
    return (ops.convert_to_numpy(filtered) > -1e8).tolist()


def test_top_k_filter_keeps_the_k_largest():
    logits = np.log(PROBS + 1e-9)[None]
    assert _kept(top_k_filter(logits, 2)) == [[False, False, False, False, True, True]]


def test_top_p_filter_keeps_the_smallest_set_reaching_p():
    logits = np.log(PROBS + 1e-9)[None]
    # 0.5 < 0.6 needs 0.3 too; 0.5 + 0.3 >= 0.8 needs nothing more.
    assert _kept(top_p_filter(logits, 0.6)) == [[False, False, False, False, True, True]]
    assert _kept(top_p_filter(logits, 0.8)) == [[False, False, False, False, True, True]]
    assert _kept(top_p_filter(logits, 0.85)) == [[False, False, False, True, True, True]]
    # The most probable token is always kept.
    assert _kept(top_p_filter(logits, 1e-6)) == [[False, False, False, False, True, False]]


def test_top_k_sampling_draws_from_the_renormalised_top_k():
    def step_fn(tokens, cache, index):
        return ops.log(ops.tile(PROBS[None] + 1e-9, (4000, 1))), cache

    tokens, _ = sample_search(
        step_fn, (), 4000, 1, keras.random.SeedGenerator(3), top_k=2, end_id=None
    )
    counts = np.bincount(ops.convert_to_numpy(tokens)[:, 0], minlength=6) / 4000
    np.testing.assert_allclose(counts, [0, 0, 0, 0, 0.5 / 0.8, 0.3 / 0.8], atol=0.03)


def test_top_k_of_one_is_greedy(post_norm_model):
    sources = random_sources(4, 11, seed=5)
    greedy = generate(post_norm_model, sources, max_length=MAX_LENGTH, end_id=None)
    sampled = generate(
        post_norm_model, sources, max_length=MAX_LENGTH, method="top_k", top_k=1,
        seed=1, end_id=None,
    )
    np.testing.assert_array_equal(sampled.tokens, greedy.tokens)
    np.testing.assert_allclose(sampled.scores, greedy.scores, atol=1e-5)


def test_a_seed_gives_the_same_tokens_every_call(post_norm_model):
    sources = random_sources(4, 11, seed=5)

    def sample(seed):
        return generate(
            post_norm_model, sources, max_length=MAX_LENGTH, method="top_p", top_p=0.9,
            seed=seed, end_id=None,
        ).tokens

    first = sample(seed=7)
    np.testing.assert_array_equal(sample(seed=8), sample(seed=8))
    np.testing.assert_array_equal(sample(seed=7), first)
    assert (sample(seed=8) != first).any()
