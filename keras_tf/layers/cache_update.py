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
"""

from keras import ops


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
