"""Top-k and top-p (nucleus) sampling over a step function.

The filters follow keras-hub's `TopKSampler` and `TopPSampler` (top-k, then
the shifted cumulative-probability mask of the nucleus). Their classes are
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
from keras_tf.models.config import END_ID, PAD_ID, START_ID

# Finite, so that (masked - masked) never makes a NaN.
_MASKED_LOGIT = -1e9


def top_k_filter(logits, k):
    """Keep the `k` largest logits of each row; mask the rest.

    Args:
        logits: float32 `[batch, V]`.
        k: Python int, 1 <= k <= V.
    """
    # kth: [batch, 1], the k-th largest logit.
    kth = ops.top_k(logits, k=k, sorted=True)[0][:, -1:]
    return ops.where(logits < kth, _MASKED_LOGIT, logits)


def top_p_filter(logits, p):
    """Keep the smallest set of most probable tokens whose probability reaches `p`.

    The most probable token is always kept.

    Args:
        logits: float32 `[batch, V]`.
        p: float in (0, 1].
    """
    vocabulary_size = ops.shape(logits)[-1]
    # sorted_logits, order: [batch, V], most probable first.
    sorted_logits, order = ops.top_k(logits, k=vocabulary_size, sorted=True)
    cumulative = ops.cumsum(ops.softmax(sorted_logits, axis=-1), axis=-1)
    # Keep a token if the tokens before it have not yet reached p.
    keep = ops.concatenate(
        [ops.ones_like(cumulative[:, :1], dtype="bool"), cumulative[:, :-1] < p],
        axis=-1,
    )
    # Kept tokens are a prefix of the sorted row; its last logit is the
    # threshold: [batch, 1].
    last_kept = ops.sum(ops.cast(keep, "int32"), axis=-1, keepdims=True) - 1
    threshold = ops.take_along_axis(sorted_logits, last_kept, axis=-1)
    return ops.where(logits < threshold, _MASKED_LOGIT, logits)


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
):
    """Sample each token from the model's distribution, restricted by top-k and/or top-p.

    Args:
        step_fn: `(tokens [batch, 1], cache, index) -> (logits [batch, V], cache)`.
        initial_cache: the cache before the first step.
        batch_size: number of sequences.
        max_length: number of tokens to generate at most.
        seed_generator: a `keras.random.SeedGenerator`; the same state gives
            the same samples.
        top_k: keep the k most probable tokens. Defaults to None (all).
        top_p: keep the smallest set of tokens with probability >= p.
            Defaults to None (all).
        temperature: divides the logits before filtering. Defaults to 1.
        start_id, end_id, pad_id: as in `greedy_search`.

    Returns:
        `(tokens [batch, max_length] int32, scores [batch] float32)`, the
        scores being the model's (untempered) summed log-probabilities of
        the sampled tokens.

    Example:
        >>> import keras
        >>> from keras import ops
        >>> def step_fn(tokens, cache, index):
        ...     return ops.zeros((2, 10)), cache
        >>> tokens, _ = sample_search(step_fn, (), 2, 5,
        ...     keras.random.SeedGenerator(7), top_k=3, end_id=None)
        >>> bool(ops.all(tokens < 3))
        True
    """

    def pick(logits, index):
        logits = logits / temperature
        if top_k is not None:
            logits = top_k_filter(logits, top_k)
        if top_p is not None:
            logits = top_p_filter(logits, top_p)
        return keras.random.categorical(logits, 1, dtype="int32", seed=seed_generator)[:, 0]

    return decode_token_by_token(
        step_fn, initial_cache, batch_size, max_length, pick,
        start_id=start_id, end_id=end_id, pad_id=pad_id,
    )
