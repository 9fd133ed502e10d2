"""Writing new entries into a fixed-size decoding buffer, with ops that run everywhere.

The key/value cache and the decoding loops' token buffers have a fixed
length and receive one new position per step. `keras.ops.slice_update`
lowers on TensorFlow to `XlaDynamicUpdateSlice`, which TensorFlow runs
outside an XLA cluster only by compiling it on demand, and TF Serving refuses
that unless started with an XLA flag (tensorflow/serving#2217). `update_at`
writes one step with `keras.ops.scatter_update` instead (`TensorScatterUpdate`
on TensorFlow, `.at[].set` on JAX): a plain op on every backend, so the
SavedModel export needs no XLA and no patched Keras, and under XLA an
in-place update like the slice update (`benchmarks/cache_write.py` compares
the two, and a select over all positions).

Without XLA, `TensorScatterUpdate` copies the whole buffer at every step
(TensorFlow's graph executor forwards its input only when nothing else holds
it, which a loop variable never satisfies): at batch 32 the two caches of
transformer_small cost 0.4 ms a step that way. `write_position` writes one
position of a cache, and inside `in_place_writes()` (the
SavedModel export without XLA) it does so with `InplaceUpdate`, which
writes into the buffer it is given. That is safe only for buffers the loop
owns, so they are made with `new_cache`, which inside `in_place_writes()`
is TensorFlow's stateful `Empty` op, zero-filled: Grappler never merges two of
them into one (it would merge two `zeros` of one shape, and two caches would
then be written into one buffer), and each request gets its own. Zero-filled,
not left as it is: an unwritten position's value is masked out of the
scores, but its weight 0 still multiplies it, and 0 × NaN is NaN.

There, too, a step reads only the positions written so far (`written_keys_values`):
the rows `0 .. index` of a position-major buffer are one contiguous block,
which the executor hands on without copying, so the attention of step i
multiplies i + 1 positions instead of the whole cache, and needs no mask.
XLA needs static shapes and reads the whole cache, masked.

So the self-attention cache has one of two layouts, chosen by its writer:
- inside `in_place_writes()`, position-major, keys and values each
  `[length, rows, heads, head_dim]`: one position is one contiguous block,
  written in place;
- everywhere else (XLA, JAX, eager), head-first, each `[heads, rows, length,
  head_dim]`: each (head, row) holds its keys and values as one `[length,
  head_dim]` matrix, so attention is two batched matrix products, which
  XLA:CPU runs faster than the products and sums over a position-major cache
  (bench-small at 64 rows: 1.3 against 2.5 ms for three layers).
A cache is the pair `(keys, values)`, not one stacked tensor: XLA copies a
slice of a tensor that a matrix product reads. Rows are axis 1 in both
layouts, so a beam reorder gathers along axis 1 either way.
`new_cache` makes a cache in the current layout (`cache_shape`),
`position_axis` names its position axis, `write_position` writes one
position into it.
"""

import contextlib
import threading

import keras
from keras import ops

_IN_PLACE = threading.local()


@contextlib.contextmanager
def in_place_writes():
    """Within it, caches are position-major, `new_cache` allocates them with `Empty` and `write_position` writes in place.

    For TensorFlow graphs traced without XLA only (XLA has no `InplaceUpdate`
    and updates in place by itself); outside a TensorFlow backend it changes
    nothing.
    """
    before = getattr(_IN_PLACE, "enabled", False)
    _IN_PLACE.enabled = keras.backend.backend() == "tensorflow"
    try:
        yield
    finally:
        _IN_PLACE.enabled = before


def _in_place():
    return getattr(_IN_PLACE, "enabled", False)


def writes_in_place():
    """True inside `in_place_writes()`: the graph is traced for TensorFlow's graph executor, without XLA.

    Where the cheapest ops differ between the two, this says which to use:
    TensorFlow hands a batched matrix product to oneDNN, about 0.1 ms a call
    on one row, unless it is a `BatchMatMulV3`
    (`graph_ops.eigen_matmul`); XLA's is the fastest way to attend.
    """
    return _in_place()


def position_axis():
    """The position axis of a cache's keys or values: 0 (position-major) inside `in_place_writes()`, else 2 (head-first)."""
    return 0 if _in_place() else 2


def cache_shape(rows, length, heads, head_dim):
    """The shape of a cache's keys (and of its values) in the current layout.

    Example:
        >>> cache_shape(rows=3, length=8, heads=2, head_dim=4)
        (2, 3, 8, 4)
    """
    if _in_place():
        return (length, rows, heads, head_dim)
    return (heads, rows, length, head_dim)


def new_cache(rows, length, heads, head_dim, dtype):
    """A self-attention cache of zeros in the current layout: `(keys, values)` (see the module docstring).

    Inside `in_place_writes()`: position-major, each `[length, rows, heads,
    head_dim]`, from TensorFlow's stateful `Empty` op, a buffer no other op
    shares, which `write_position` may write in place. Elsewhere:
    head-first, each `[heads, rows, length, head_dim]`.

    Example:
        >>> keys, values = new_cache(rows=3, length=8, heads=2, head_dim=4, dtype="float32")
        >>> tuple(keys.shape), tuple(values.shape)
        ((2, 3, 8, 4), (2, 3, 8, 4))
    """
    shape = cache_shape(rows, length, heads, head_dim)
    if not _in_place():
        return tuple(ops.zeros(shape, dtype=dtype) for _ in range(2))
    import tensorflow as tf  # only inside in_place_writes(), on the TensorFlow backend

    shape = tf.stack([tf.cast(n, tf.int32) for n in shape])
    return tuple(
        tf.raw_ops.Empty(shape=shape, dtype=tf.as_dtype(dtype), init=True) for _ in range(2)
    )


def write_position(cache, index, key_value):
    """`cache` `(keys, values)` with one position's `(key, value)`, each `[rows, heads, head_dim]`, written at `index`.

    Position-major (inside `in_place_writes()`): one position of the keys or
    of the values is one contiguous block, written into the buffer itself
    with `InplaceUpdate` (see the module docstring). Head-first: `update_at`
    along axis 2, which XLA runs in place.

    Example:
        >>> import numpy as np
        >>> cache = new_cache(rows=1, length=3, heads=1, head_dim=1, dtype="float32")
        >>> keys, values = write_position(cache, 1, (np.full((1, 1, 1), 5.0), np.full((1, 1, 1), 6.0)))
        >>> ops.convert_to_numpy(keys).ravel().tolist(), ops.convert_to_numpy(values).ravel().tolist()
        ([0.0, 5.0, 0.0], [0.0, 6.0, 0.0])
    """
    if not _in_place():
        # [rows, heads, head_dim] -> [heads, rows, 1, head_dim]
        return tuple(
            update_at(buffer, index, ops.expand_dims(ops.transpose(new, (1, 0, 2)), 2), axis=2)
            for buffer, new in zip(cache, key_value)
        )
    import tensorflow as tf  # only inside in_place_writes(), on the TensorFlow backend

    index = tf.reshape(tf.cast(index, tf.int32), [1])
    return tuple(
        tf.raw_ops.InplaceUpdate(x=buffer, i=index, v=tf.cast(new, buffer.dtype)[None])
        for buffer, new in zip(cache, key_value)
    )


def positions_first(heads):
    """A cache's keys or values as `[length, rows, heads, head_dim]`.

    The tensor itself if position-major; a transpose (copy) of a head-first one.
    """
    return heads if _in_place() else ops.transpose(heads, (2, 1, 0, 3))


def rows_by_positions(cache):
    """A `[rows, length]` slice of a cache's keys, whose shape the attention masks are built from."""
    keys = cache[0]
    return ops.transpose(keys[:, :, 0, 0]) if _in_place() else keys[0, :, :, 0]


def update_at(tensor, index, update, axis):
    """`tensor` with `update` written at positions `index ... index + T - 1` of `axis`.

    Args:
        tensor: the buffer, e.g. a cache `[batch, 2, length, heads, head_dim]`.
        index: int32 scalar (a tensor inside a loop), the first position.
        update: the new entries, the shape of `tensor` but `T` along `axis`.
        axis: the position axis (non-negative).

    Returns:
        A tensor of `tensor`'s shape and dtype.

    Example:
        >>> import numpy as np
        >>> out = update_at(np.zeros((1, 4)), 2, np.ones((1, 1)), axis=1)
        >>> ops.convert_to_numpy(out).tolist()
        [[0.0, 0.0, 1.0, 0.0]]
    """
    update = ops.cast(update, tensor.dtype)
    # Static where known; while a functional model is built, lengths are None.
    length = tensor.shape[axis] or ops.shape(tensor)[axis]
    steps = update.shape[axis] or ops.shape(update)[axis]
    broadcast = [1] * len(tensor.shape)
    broadcast[axis] = -1
    # positions: [1, ..., length, ..., 1], the index of each slot along `axis`
    positions = ops.reshape(ops.arange(length, dtype="int32"), broadcast)
    index = ops.cast(index, "int32")
    if isinstance(steps, int) and steps == 1:
        return _scatter_one_step(tensor, index, update, axis)
    # Several steps: place step t at index + t with a one-hot matrix.
    # one_hot: [steps, length]
    one_hot = ops.cast(
        ops.equal(
            ops.arange(length, dtype="int32")[None, :],
            index + ops.arange(steps, dtype="int32")[:, None],
        ),
        tensor.dtype,
    )
    moved = ops.moveaxis(update, axis, -1)
    placed = ops.moveaxis(ops.matmul(moved, one_hot), -1, axis)
    hit = ops.logical_and(ops.greater_equal(positions, index), ops.less(positions, index + steps))
    return ops.where(hit, placed, tensor)


def _scatter_one_step(tensor, index, update, axis):
    """`update_at` for one step: scatter the `[*leading, 1, *trailing]` update at `index`."""
    shape = ops.shape(tensor)
    leading = [shape[i] for i in range(axis)]
    # indices: [n, axis + 1], one row (i_0, ..., i_{axis-1}, index) per leading position
    grids = ops.meshgrid(*[ops.arange(n, dtype="int32") for n in leading], indexing="ij")
    indices = ops.stack([ops.reshape(g, (-1,)) for g in grids], axis=-1)
    column = ops.ones_like(indices[:, :1]) * index
    indices = ops.concatenate([indices, column], axis=-1)
    # updates: [n, *trailing]
    updates = ops.squeeze(update, axis=axis)
    updates = ops.reshape(updates, (-1,) + tuple(ops.shape(updates)[axis:]))
    return ops.scatter_update(tensor, indices, updates)


def written_keys_values(cache, index):
    """Inside `in_place_writes()`: the keys and values of positions `0 .. index`, else None.

    Args:
        cache: a position-major cache `(keys, values)`, each `[length, ...]`.
        index: int32 scalar, the last position written.

    Returns:
        `(keys, values)`, each `[index + 1, ...]`, views of the buffers; or
        None outside `in_place_writes()` (read the whole cache, masked).
    """
    if not _in_place():
        return None
    import tensorflow as tf  # only inside in_place_writes(), on the TensorFlow backend

    # Slices of the first axis alone: views, not copies. One size for both
    # (a `buffer[:count]` packs its begin, end and strides at every step).
    size = tf.stack([tf.cast(index, tf.int32) + 1, -1, -1, -1])
    written = []
    for buffer in cache:
        prefix = tf.slice(buffer, [0, 0, 0, 0], size)
        prefix.set_shape([None] + buffer.shape[1:])
        written.append(prefix)
    return tuple(written)
