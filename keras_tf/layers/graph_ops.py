"""Matrix products and transposes in the kernels TensorFlow's graph executor runs fastest on small tensors.

Only inside `cache_update.in_place_writes()` (the SavedModel export without
XLA), on the TensorFlow backend. There TensorFlow's oneDNN rewrite takes a
float `Transpose`, `BatchMatMul` and `BatchMatMulV2` (what `ops.transpose`,
`ops.matmul` over three or more axes and `ops.einsum` make), and each call
costs 60-100 µs even on a few thousand numbers. Eigen's kernels, which
TensorFlow keeps for `BatchMatMulV3` and for integer transposes, cost a
few µs there. Two-axis products stay oneDNN's (`ops.matmul` on matrices):
there it is the faster (`benchmarks/serving_op_costs.py`).
"""


def eigen_matmul(a, b, transpose_b=False):
    """`a @ b` (`a @ bᵀ` with `transpose_b`) over broadcast leading dimensions, for TensorFlow's graph executor.

    A `BatchMatMulV3`, Eigen's: the cross-attention of a decoding step at
    20 source positions costs 7 µs against oneDNN's 102 at one row, 49
    against 129 at 32 (and against 9 and 84 for products and sums).

    Example:
        >>> import numpy as np
        >>> queries, keys = np.ones((2, 4, 1, 8), "float32"), np.ones((1, 4, 5, 8), "float32")
        >>> tuple(eigen_matmul(queries, keys, transpose_b=True).shape)
        (2, 4, 1, 5)
    """
    import tensorflow as tf  # only inside in_place_writes(), on the TensorFlow backend

    return tf.raw_ops.BatchMatMulV3(x=a, y=b, Tout=a.dtype, adj_y=transpose_b)


def eigen_transpose(x, perm):
    """`ops.transpose(x, perm)` by Eigen's kernel, for TensorFlow's graph executor.

    The same bits moved as integers, by Eigen's kernel: 8.5 µs against
    oneDNN's 70 at `[1, 20, 4, 32]`, 60 against 98 at `[32, 20, 4, 32]`.

    Example:
        >>> import numpy as np
        >>> heads = eigen_transpose(np.zeros((2, 20, 4, 32), "float32"), (0, 2, 1, 3))
        >>> tuple(heads.shape), heads.dtype.name
        ((2, 4, 20, 32), 'float32')
    """
    import tensorflow as tf  # only inside in_place_writes(), on the TensorFlow backend

    x = tf.convert_to_tensor(x)
    bits = {2: tf.int16, 4: tf.int32, 8: tf.int64}[x.dtype.size]
    return tf.bitcast(tf.transpose(tf.bitcast(x, bits), perm), x.dtype)
