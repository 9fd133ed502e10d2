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
position of a position-major buffer, and inside `in_place_writes()` (the
SavedModel export without XLA) it does so with `InplaceUpdate`, which
writes into the buffer it is given. That is safe only for buffers the loop
owns, so they are made with `new_buffer`, which inside `in_place_writes()`
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
"""

import contextlib
import threading

import keras
from keras import ops

_IN_PLACE = threading.local()


@contextlib.contextmanager
def in_place_writes():
    """Within it, `write_position` writes in place and `new_buffer` allocates with `Empty`.

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


def new_buffer(shape, dtype):
    """A fresh buffer of zeros for `write_position`; inside `in_place_writes()`, one no other op shares."""
    if not _in_place():
        return ops.zeros(shape, dtype=dtype)
    import tensorflow as tf  # only inside in_place_writes(), on the TensorFlow backend

    shape = tf.stack([tf.cast(n, tf.int32) for n in shape])
    return tf.raw_ops.Empty(shape=shape, dtype=tf.as_dtype(dtype), init=True)


def write_position(buffer, index, update):
    """`buffer` `[2, length, ...]` with `update` `[2, ...]` written at position `index` of axis 1.

    The self-attention caches are position-major (`[2 (keys, values), length,
    rows, heads, head_dim]`), so one position of keys and of values is two
    contiguous rows. Inside `in_place_writes()` the rows are written into
    `buffer` itself (see the module docstring); otherwise with `update_at`.

    Example:
        >>> import numpy as np
        >>> out = write_position(np.zeros((2, 3, 1)), 1, np.array([[5.0], [6.0]]))
        >>> ops.convert_to_numpy(out)[:, :, 0].tolist()
        [[0.0, 5.0, 0.0], [0.0, 6.0, 0.0]]
    """
    if not _in_place():
        return update_at(buffer, index, ops.expand_dims(update, 1), axis=1)
    import tensorflow as tf  # only inside in_place_writes(), on the TensorFlow backend

    rows = _rows(buffer)
    index = tf.cast(index, tf.int32)
    rows = tf.raw_ops.InplaceUpdate(
        x=rows, i=tf.stack([index, index + buffer.shape[1]]), v=tf.cast(update, buffer.dtype)
    )
    out = tf.reshape(rows, _static_shape(buffer))
    out.set_shape(buffer.shape)
    return out


def _static_shape(buffer):
    # The batch axis (2) is the one unknown when the export is traced: -1,
    # so the reshapes need no Shape op.
    return [-1 if n is None else n for n in buffer.shape]


def _rows(buffer):
    """`[2, length, ...]` viewed as `[2 * length, ...]` (a reshape: no copy)."""
    import tensorflow as tf  # only inside in_place_writes(), on the TensorFlow backend

    shape = _static_shape(buffer)
    return tf.reshape(buffer, [2 * shape[1]] + shape[2:])


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


def written_keys_values(buffer, index):
    """Inside `in_place_writes()`: the keys and values of positions `0 .. index`, else None.

    Args:
        buffer: a position-major cache `[2, length, ...]`.
        index: int32 scalar, the last position written.

    Returns:
        `(keys, values)`, each `[index + 1, ...]`, views of `buffer`; or None
        outside `in_place_writes()` (read the whole buffer, masked).
    """
    if not _in_place():
        return None
    import tensorflow as tf  # only inside in_place_writes(), on the TensorFlow backend

    length = buffer.shape[1]
    rows = _rows(buffer)
    count = tf.cast(index, tf.int32) + 1
    # Slices of the first axis alone: views, not copies.
    return rows[:count], rows[length : length + count]
