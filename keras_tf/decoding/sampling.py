"""Top-k and top-p (nucleus) sampling over a step function.

The picking follows keras-hub's `TopKSampler` and `TopPSampler`: sort the
top k (or all) tokens, keep the nucleus with a shifted cumulative
probability mask, sample among them and map back to ids. Their classes are
not reused: their loop fills a decoder-only prompt buffer and does not pad
a sequence after its end token, and they draw from a `SeedGenerator` made
when the sampler is built, so a second call continues the random stream
instead of repeating it. Here the caller passes the `SeedGenerator` and sets
its state before each call, which makes a seed reproducible without
recompiling.
"""

import keras
from keras import ops

from keras_tf.decoding.greedy import decode_token_by_token
from keras_tf.special_tokens import END_ID, PAD_ID, START_ID

# Finite, so that (masked - masked) never makes a NaN.
_MASKED_LOGIT = -1e9


def nucleus_mask(sorted_logits, p):
    """Which tokens top-p keeps: the shortest prefix of a sorted row whose probability reaches `p`.

    Args:
        sorted_logits: float32 `[batch, n]`, each row in decreasing order.
        p: float in (0, 1]. The most probable token is always kept.

    Returns:
        bool `[batch, n]`, True for the kept prefix.

    Example:
        >>> import numpy as np
        >>> from keras import ops
        >>> logits = np.log([[0.5, 0.3, 0.1, 0.1]])
        >>> ops.convert_to_numpy(nucleus_mask(logits, 0.6)).tolist()
        [[True, True, False, False]]
    """
    cumulative = ops.cumsum(ops.softmax(sorted_logits, axis=-1), axis=-1)
    # Keep a token while the tokens before it have not yet reached p.
    return ops.concatenate(
        [ops.ones_like(cumulative[:, :1], dtype="bool"), cumulative[:, :-1] < p],
        axis=-1,
    )


def sample_search(
    step_fn,
    initial_cache,
    batch_size,
    max_length,
    seed_generator,
    top_k=None,
    top_p=None,
    temperature=1.0,
    start_id=START_ID,
    end_id=END_ID,
    pad_id=PAD_ID,
    grow_cache=None,
    first_cache_length=None,
):
    """Sample each token from the model's distribution, restricted by top-k and/or top-p.

    Args:
        step_fn: `(tokens [batch, 1], cache, index) -> (logits [batch, V], cache)`.
        initial_cache: the cache before the first step.
        batch_size: number of sequences.
        max_length: number of tokens to generate at most.
        seed_generator: a `keras.random.SeedGenerator`; the same state gives
            the same samples.
        top_k: sample among the k most probable tokens. Defaults to None (all).
        top_p: sample among the fewest most probable tokens whose
            probability reaches p. Defaults to None (all). With `top_k`
            too, the nucleus is taken within the top k.
        temperature: divides the logits first. Defaults to 1.
        start_id, end_id, pad_id, grow_cache, first_cache_length: as in
            `greedy_search`.

    Returns:
        `(tokens [batch, max_length] int32, scores [batch] float32)`, the
        scores being the model's (untempered) summed log-probabilities of
        the sampled tokens.

    Example:
        >>> import keras
        >>> from keras import ops
        >>> def step_fn(tokens, cache, index):  # logit i for token i
        ...     return ops.tile(ops.arange(10.0)[None], (2, 1)), cache
        >>> tokens, _ = sample_search(step_fn, (), 2, 5,
        ...     keras.random.SeedGenerator(7), top_k=3, end_id=None)
        >>> bool(ops.all(tokens >= 7))
        True
    """

    # Step t draws with the generator's state + [0, t], as t draws in a row
    # would. The state is set for each draw rather than updated inside the
    # loop, which a traced loop body (jax.jit) cannot carry out of itself.
    initial_state = seed_generator.state.value
    seed_dtype = keras.backend.standardize_dtype(seed_generator.state.dtype)

    def pick(logits, index):
        # Sample among the top k (or all) tokens, most probable first, as
        # keras-hub's samplers do: values, order: [batch, k].
        k = top_k if top_k is not None else ops.shape(logits)[-1]
        values, order = ops.top_k(logits / temperature, k=k, sorted=True)
        if top_p is not None:
            values = ops.where(nucleus_mask(values, top_p), values, _MASKED_LOGIT)
        step = ops.stack([ops.zeros_like(index), index])
        state = initial_state + ops.cast(step, seed_dtype)
        with keras.StatelessScope(state_mapping=[(seed_generator.state, state)]):
            choice = keras.random.categorical(values, 1, dtype="int32", seed=seed_generator)
        return ops.take_along_axis(order, choice, axis=-1)[:, 0]

    return decode_token_by_token(
        step_fn, initial_cache, batch_size, max_length, pick,
        start_id=start_id, end_id=end_id, pad_id=pad_id, grow_cache=grow_cache,
        first_cache_length=first_cache_length,
    )
