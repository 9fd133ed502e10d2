import keras
import numpy as np
from keras import ops

from keras_tf.decoding import generate, nucleus_mask, sample_search
from keras_tf.decoding.compile import xla_compile
from tests.decoding.conftest import MAX_LENGTH, random_sources

# Probabilities of ids 0..5; ids 0 (padding) and 2 (start) are never sampled.
PROBS = np.array([0.2, 0.05, 0.05, 0.1, 0.3, 0.3], dtype="float32")


def test_nucleus_mask_keeps_the_shortest_prefix_reaching_p():
    sorted_logits = np.log(np.array([[0.5, 0.3, 0.1, 0.1]], "float32"))

    def kept(p):
        return ops.convert_to_numpy(nucleus_mask(sorted_logits, p)).tolist()

    assert kept(0.5) == [[True, False, False, False]]
    assert kept(0.6) == [[True, True, False, False]]
    assert kept(0.79) == [[True, True, False, False]]
    assert kept(0.81) == [[True, True, True, False]]
    # The most probable token is always kept.
    assert kept(1e-6) == [[True, False, False, False]]


def _sample_frequencies(**kwargs):
    def step_fn(tokens, cache, index):
        return ops.log(ops.tile(PROBS[None], (4000, 1))), cache

    tokens, _ = sample_search(
        step_fn, (), 4000, 1, keras.random.SeedGenerator(3), end_id=None, **kwargs
    )
    return np.bincount(ops.convert_to_numpy(tokens)[:, 0], minlength=6) / 4000


def test_top_k_samples_from_the_renormalised_top_k():
    # The top 3 without padding and start: ids 4, 5 (0.3 each) and 3 (0.1).
    np.testing.assert_allclose(
        _sample_frequencies(top_k=3), [0, 0, 0, 1 / 7, 3 / 7, 3 / 7], atol=0.03
    )


def test_top_p_samples_from_the_renormalised_nucleus():
    # Without padding and start the probabilities are 0.4, 0.4, 0.133, 0.067: p=0.7
    # keeps ids 4 and 5.
    np.testing.assert_allclose(
        _sample_frequencies(top_p=0.7), [0, 0, 0, 0, 0.5, 0.5], atol=0.03
    )


def test_unrestricted_sampling_follows_the_model_without_padding_and_start():
    expected = np.where([False, True, False, True, True, True], PROBS, 0.0) / 0.75
    np.testing.assert_allclose(_sample_frequencies(), expected, atol=0.03)


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


def test_each_compiled_step_draws_afresh():
    # The same logits at every step: a seed stuck at one value under the
    # compiled loop would pick one token 40 times.
    seed_generator = keras.random.SeedGenerator(3)

    def step_fn(tokens, cache, index):
        return ops.zeros((1, 6)), cache

    def sample():
        return sample_search(step_fn, (), 1, 40, seed_generator, end_id=None)[0]

    tokens = ops.convert_to_numpy(xla_compile(sample, lambda: [seed_generator.state])())
    assert len(np.unique(tokens)) == 4, tokens  # every id but padding and start
