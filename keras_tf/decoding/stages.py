"""Caches sized to the work: the decoding loop runs in stages, and the cache grows between them.

A fixed cache of `max_length` positions makes every step read all of them,
masked or not. So the loops run one `while_loop` per cache length in
`cache_lengths(max_length)` (64, 128, 256, ... up to `max_length`): steps
0-63 with a 64-position cache, then the cache is padded to 128 for steps
64-127, and so on. A request that ends at step 40 never reads more than 64
positions, whatever `max_length` is. Each stage is one loop of static
shape, so the compiled program holds one loop body per stage and is traced
once; the loop's condition (every sequence ended) is checked at the start
of each stage, so later stages run no step once it holds.

The first length is `FIRST_CACHE_LENGTH`. Each stage is one more copy of
the decoder in the XLA program (compile time), and below 64 positions the
reads saved are small next to the rest of a step, up to a few dozen rows.
From `LARGE_BATCH_ROWS` rows on, reading the caches is a large part of a
step (bench-small, 64 rows: 38 % of it, `benchmarks/decode_profile.py`),
and `first_cache_length` starts at 32: 5-6 % more tokens per second at
batch 64 for greedy and beam 4, for about 1 s more compile time. The
decoding tests set `FIRST_CACHE_LENGTH` to 16 so that their short sequences
cross stages.

Padding a cache with zeros changes no result: positions at or after the
current step are masked out of the attention (`compute_attention_mask`).
"""

from keras import ops
from keras import tree

from keras_tf.layers.cache_update import position_axis


FIRST_CACHE_LENGTH = 64
LARGE_BATCH_ROWS = 64


def first_cache_length(rows):
    """The cache length of the first stage for `rows` rows a step (a Python int, or a tensor when unknown).

    Example:
        >>> first_cache_length(8), first_cache_length(256)
        (64, 32)
    """
    if isinstance(rows, int) and rows >= LARGE_BATCH_ROWS:
        return min(FIRST_CACHE_LENGTH, 32)
    return FIRST_CACHE_LENGTH


def cache_lengths(max_length, first=None):
    """The cache lengths a loop of `max_length` steps grows through: doublings of `first`, then `max_length`.

    Args:
        max_length: the number of steps.
        first: the first length. Defaults to `FIRST_CACHE_LENGTH` (64).

    Example:
        >>> cache_lengths(8), cache_lengths(256), cache_lengths(100, first=16)
        ([8], [64, 128, 256], [16, 32, 64, 100])
    """
    length = first or FIRST_CACHE_LENGTH
    lengths = []
    while length < max_length:
        lengths.append(length)
        length *= 2
    return lengths + [max_length]


def grow_self_attention_cache(cache, length):
    """Pad the keys and values of every block's cache (`cache_update.new_cache`) with zeros to `length` positions."""
    axis = position_axis()

    def grow(leaf):
        padding = [(0, 0)] * 4
        padding[axis] = (0, length - leaf.shape[axis])
        return ops.pad(leaf, padding)

    return tree.map_structure(grow, cache)


def staged_while_loop(cond, body, state, max_length, grow_cache=None, first_cache_length=None,
                      steps_per_iteration=1):
    """`ops.while_loop(cond, body, state, maximum_iterations=max_length)`, with a growing cache.

    Args:
        cond, body: the loop's functions over `state`.
        state: a tuple whose first item is the step index (0 at the start)
            and whose last item is the cache.
        max_length: the number of steps at most.
        grow_cache: `(cache, length) -> cache` padded to `length` positions,
            with the initial cache holding `cache_lengths(max_length,
            first_cache_length)[0]`; None runs one loop over a cache that
            holds `max_length`.
        first_cache_length: the first stage's length. Defaults to
            `FIRST_CACHE_LENGTH`.
        steps_per_iteration: calls of `body` per iteration of the while
            loop, `cond` checked before each iteration; the steps of a stage
            that do not fill an iteration run in a loop of one step per
            iteration. `body` called once `cond` is false must change
            nothing that the caller reads (greedy search: every sequence
            has ended, and pads).

    Returns:
        The final state.
    """
    if grow_cache is None:
        return _while_loop(cond, body, state, max_length, steps_per_iteration)
    start = 0
    for length in cache_lengths(max_length, first_cache_length):
        if start:
            state = tuple(state[:-1]) + (grow_cache(state[-1], length),)
        # The step at index i writes position i: this stage runs steps start .. length - 1.
        # (TensorFlow's XLA bridge fails from the third loop on if a state
        # item is a constant that the body passes through unchanged: the
        # loops must change every item.)
        state = _while_loop(cond, body, state, length - start, steps_per_iteration)
        start = length
    return state


def _while_loop(cond, body, state, steps, steps_per_iteration):
    """`ops.while_loop` of at most `steps` calls of `body`, `steps_per_iteration` of them per iteration."""
    k = steps_per_iteration
    if k > 1 and steps >= k:

        def unrolled(*state):
            for _ in range(k):
                state = body(*state)
            return state

        state = ops.while_loop(cond, unrolled, state, maximum_iterations=steps // k)
        steps %= k
    if steps:
        state = ops.while_loop(cond, body, state, maximum_iterations=steps)
    return state

