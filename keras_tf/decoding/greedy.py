"""Token-by-token decoding over a step function: greedy search, and the loop that sampling shares.

The loop knows nothing about the model. It calls
`step_fn(tokens, cache, index) -> (logits, cache)` where `tokens` is the
int32 `[batch, 1]` token at position `index` (an int32 scalar tensor),
`cache` is any nest of tensors with a fixed shape (for the Transformer, the
self-attention keys and values, updated in place at `index`), and `logits`
is float32 `[batch, vocabulary]` for the token at position `index + 1`.
Decoding starts with `start_id` at position 0.
"""

import numpy as np
from keras import ops

from keras_tf.decoding.stages import staged_while_loop
from keras_tf.layers.cache_update import writes_in_place

from keras_tf.special_tokens import END_ID, PAD_ID, START_ID


def check_max_length(max_length):
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(
            f"max_length must be a positive integer (the number of tokens to "
            f"generate); received max_length={max_length!r}"
        )


def take_along_rows(x, indices):
    """`x` `[batch, n, ...]` gathered along axis 1 at `indices` `[batch, m]`: `[batch, m, ...]`.

    `ops.take_along_axis` where XLA compiles it; inside `in_place_writes()`
    one `GatherV2` with a batch dimension, where Keras's TensorFlow
    `take_along_axis` builds about twenty graph ops (broadcast shapes,
    negative indices) that the executor runs at every decoding step.

    Example:
        >>> import numpy as np
        >>> out = take_along_rows(np.array([[10, 11, 12], [20, 21, 22]]), np.array([[2], [0]]))
        >>> ops.convert_to_numpy(out).tolist()
        [[12], [20]]
    """
    if writes_in_place():
        import tensorflow as tf  # only inside in_place_writes(), on the TensorFlow backend

        return tf.gather(x, indices, axis=1, batch_dims=1)
    indices = ops.reshape(indices, tuple(ops.shape(indices)) + (1,) * (len(x.shape) - 2))
    return ops.take_along_axis(x, indices, axis=1)


def exclude_unpickable(logits, pad_id=PAD_ID, start_id=START_ID):
    """Lower the padding and start tokens' logits by a large number (1e9), so neither is picked.

    Padding means "no token" to the model's masks, so a generated padding id
    would be hidden from the following steps of an uncached pass but not
    from the cache; fairseq excludes it the same way. The start token only
    ever opens the decoder input; Hugging Face's Marian models ban it too
    (their start token is their padding token, `bad_words_ids`).

    Only the pick is masked: the log-softmax that scores a token is taken
    over the model's logits as they are, so a sequence's score stays its
    teacher-forced log-probability.
    """
    vocabulary_size = logits.shape[-1]
    if vocabulary_size is None:
        ids = ops.arange(ops.shape(logits)[-1])
        unpickable = ops.logical_or(ops.equal(ids, pad_id), ops.equal(ids, start_id))
        return ops.where(unpickable[None, :], -1e9, logits)
    # One add of a constant row: without XLA the graph executor runs every
    # op of the loop at every step, and a `where` over [batch, vocabulary]
    # costs twice an add.
    penalty = np.zeros((vocabulary_size,), dtype="float32")
    penalty[[pad_id, start_id]] = -1e9
    return logits + ops.cast(penalty, logits.dtype)


def decode_token_by_token(
    step_fn,
    initial_cache,
    batch_size,
    max_length,
    pick_fn,
    start_id=START_ID,
    end_id=END_ID,
    pad_id=PAD_ID,
    grow_cache=None,
    first_cache_length=None,
    most_probable=False,
):
    """Pick one token per step with `pick_fn` until every sequence has ended.

    Args:
        step_fn: `(tokens [batch, 1], cache, index) -> (logits [batch, V], cache)`.
        initial_cache: the cache before the first step.
        batch_size: number of sequences (a Python int).
        max_length: number of tokens to generate at most (a Python int).
        pick_fn: `(logits [batch, V] float32, index) -> int32 [batch]`; the
            padding and start logits are masked before it.
        start_id: the token fed at position 0.
        end_id: the token that ends a sequence; None generates exactly
            `max_length` tokens.
        pad_id: what follows the end token in the output.
        grow_cache: `(cache, length) -> cache`, to run in stages over a
            growing cache (`stages.py`); None keeps `initial_cache` as it is.
        first_cache_length: the length of `initial_cache` when it grows.
            Defaults to `stages.FIRST_CACHE_LENGTH`.
        most_probable: True when `pick_fn` picks the most probable pickable
            token (greedy search). Its probability is then at least that of
            every other token but padding and start, far from float32's
            underflow, and its log is taken of one softmax entry.

    Returns:
        `(tokens, scores)`: int32 `[batch, max_length]`, the generated tokens
        (the start token excluded, the end token included, `pad_id` after
        it), and float32 `[batch]`, the sum of the model's log-probabilities
        of the generated tokens.
    """
    check_max_length(max_length)
    # tokens: [batch, max_length]; last: [batch, 1]; finished, scores: [batch]
    tokens = ops.full((batch_size, max_length), pad_id, dtype="int32")
    last = ops.full((batch_size, 1), start_id, dtype="int32")
    finished = ops.zeros((batch_size,), dtype="bool")
    scores = ops.zeros((batch_size,), dtype="float32")
    index = ops.convert_to_tensor(0, dtype="int32")
    positions = np.arange(max_length, dtype="int32")[None, :]

    def cond(index, tokens, last, finished, scores, cache):
        return ops.logical_not(ops.all(finished))

    def body(index, tokens, last, finished, scores, cache):
        logits, cache = step_fn(last, cache, index)
        logits = ops.cast(logits, "float32")
        picked = ops.cast(
            pick_fn(exclude_unpickable(logits, pad_id, start_id), index), "int32"
        )
        if most_probable:
            # One softmax op (a single pass over [batch, vocabulary] without
            # XLA, where the formula below is four) and the log of one entry.
            probs = ops.softmax(logits, axis=-1)
            picked_log_probs = ops.log(take_along_rows(probs, picked[:, None])[:, 0])
        else:
            # log p(picked), the one log-probability needed, as log-softmax
            # computes it ((logit - max) - log Σ exp(logits - max)) but without
            # a [batch, vocabulary] log-softmax written out: a token sampled
            # far down the distribution has a probability that float32 would
            # round to 0.
            top = ops.max(logits, axis=-1, keepdims=True)
            picked_logits = take_along_rows(logits, picked[:, None])
            picked_log_probs = (picked_logits - top)[:, 0] - ops.log(
                ops.sum(ops.exp(logits - top), axis=-1)
            )
        # A finished sequence keeps its score and is padded from here on.
        picked = ops.where(finished, pad_id, picked)
        scores = scores + ops.where(finished, 0.0, picked_log_probs)
        # One select over the small [batch, max_length] buffer: a scatter
        # builds its indices in about twenty ops at every step without XLA.
        tokens = ops.where(ops.equal(positions, index), picked[:, None], tokens)
        if end_id is not None:
            finished = ops.logical_or(finished, ops.equal(picked, end_id))
        else:
            # Never true (ids are >= 0), but computed in the loop: TensorFlow's
            # XLA bridge fails on a third stage that passes a constant through
            # unchanged (stages.py).
            finished = ops.logical_or(finished, ops.less(picked, 0))
        return index + 1, tokens, picked[:, None], finished, scores, cache

    _, tokens, _, _, scores, _ = staged_while_loop(
        cond, body, (index, tokens, last, finished, scores, initial_cache), max_length, grow_cache,
        first_cache_length,
        # Without XLA, two steps per iteration: the graph executor runs the
        # loop's control nodes (four per loop variable) and the body's
        # constants once per iteration (one sentence 16.2 -> 15.4 ms,
        # transformer_small). A step after every sequence has ended pads.
        steps_per_iteration=2 if writes_in_place() else 1,
    )
    return tokens, scores


def greedy_search(
    step_fn,
    initial_cache,
    batch_size,
    max_length,
    start_id=START_ID,
    end_id=END_ID,
    pad_id=PAD_ID,
    grow_cache=None,
    first_cache_length=None,
):
    """Greedy decoding: the most probable token (other than padding and start) at every step.

    Args:
        step_fn: `(tokens [batch, 1], cache, index) -> (logits [batch, V], cache)`.
        initial_cache: the cache before the first step (any nest of tensors).
        batch_size: number of sequences.
        max_length: number of tokens to generate at most.
        start_id: the token fed at position 0. Defaults to `START_ID`.
        end_id: the token that ends a sequence; None disables stopping.
            Defaults to `END_ID`.
        pad_id: what follows the end token. Defaults to `PAD_ID`.
        grow_cache: `(cache, length) -> cache`: run in stages over a growing
            cache (`stages.py`). Defaults to None, one fixed cache.
        first_cache_length: the length of `initial_cache` when it grows.
            Defaults to `stages.FIRST_CACHE_LENGTH`.

    Returns:
        `(tokens [batch, max_length] int32, scores [batch] float32)`, the
        scores being the model's summed log-probabilities.

    Example:
        >>> from keras import ops
        >>> def step_fn(tokens, cache, index):  # always predicts token 3 (END)
        ...     return ops.one_hot(ops.full((2,), 3), 5) * 10.0, cache
        >>> tokens, scores = greedy_search(step_fn, (), batch_size=2, max_length=4)
        >>> ops.convert_to_numpy(tokens).tolist()
        [[3, 0, 0, 0], [3, 0, 0, 0]]
    """

    def argmax(logits, index):
        # The first of equal maxima, as argmax.
        if writes_in_place():
            # TensorFlow's graph executor: one op, top_k(1). Keras's
            # TensorFlow argmax adds a sign-of-zero check of five ops over
            # [batch, vocabulary].
            return ops.top_k(logits, 1)[1][:, 0]
        # XLA: two plain reductions, the maximum and the least id reaching it.
        # XLA:CPU's top_k(1) is a call into a partial sort (0.6 ms of an 11 ms
        # step at 64 rows, bench-small), and its argmax a slow reduction of
        # (value, index) pairs.
        vocabulary_size = logits.shape[-1]
        ids = ops.arange(vocabulary_size, dtype="int32")[None, :]
        top = ops.max(logits, axis=-1, keepdims=True)
        return ops.min(ops.where(ops.equal(logits, top), ids, vocabulary_size), axis=-1)

    return decode_token_by_token(
        step_fn, initial_cache, batch_size, max_length, argmax,
        start_id=start_id, end_id=end_id, pad_id=pad_id, grow_cache=grow_cache,
        first_cache_length=first_cache_length, most_probable=True,
    )
