"""Row-wise concatenation of ragged tensors, without TensorFlow's log line.

`tf.concat([a, b], axis=1)` on ragged tensors transposes their int64 row
partitions. On a CPU whose oneDNN build lacks int64 kernels, the first int64
transpose of a process writes an ERROR line to stderr ("oneDNN supports
DT_INT64 only on platforms with AVX-512...") that `TF_CPP_MIN_LOG_LEVEL=1`
does not hide. The framing of every batch concatenates rows, so this does it
with a gather instead.
"""

import tensorflow as tf


def concat_rows(first, second):
    """Row i of the result is row i of `first`, then row i of `second`.

    Args:
        first, second: ragged `[batch, (n)]` tensors of one dtype and batch size.

    Returns:
        A ragged `[batch, (n1 + n2)]` tensor, equal to
        `tf.concat([first, second], axis=1)`.

    Example:
        >>> concat_rows(tf.ragged.constant([[1, 2], []]), tf.ragged.constant([[3], [4]])).to_list()
        [[1, 2, 3], [4]]
    """
    splits_dtype = first.row_splits.dtype
    second = second.with_row_splits_dtype(splits_dtype)
    lengths = first.row_lengths() + second.row_lengths()
    starts = tf.cumsum(lengths, exclusive=True)  # where each result row begins

    def positions(part, offset):
        # Where each of `part`'s values goes in the result's flat values: its
        # row's start, plus `offset` within that row, plus its index in its row.
        shift = starts + offset - part.row_splits[:-1]
        index = tf.range(tf.size(part.values, out_type=splits_dtype))
        return tf.gather(shift, part.value_rowids()) + index

    order = tf.concat([positions(first, 0), positions(second, first.row_lengths())], axis=0)
    values = tf.gather(
        tf.concat([first.values, second.values], axis=0), tf.math.invert_permutation(order)
    )
    return tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)
