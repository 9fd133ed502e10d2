"""The one rule for padded source lengths, shared by decoding, the text pipeline and the export.

Sources are padded to the next power of two (at least 16, at most
`max_source_length`), so varying inputs reuse a few compiled shapes. Padding
changes nothing: padded positions are masked out of every attention.
"""


def source_bucket(length, max_source_length, minimum=16):
    """The padded source length: the next power of two >= `length`, in [minimum, max_source_length].

    Example:
        >>> source_bucket(17, 256), source_bucket(3, 256), source_bucket(200, 200)
        (32, 16, 200)
    """
    bucket = minimum
    while bucket < length:
        bucket *= 2
    return min(bucket, max_source_length)


def source_buckets(max_source_length):
    """Every padded source length `generate` and the export use, ascending.

    Example:
        >>> source_buckets(64), source_buckets(100)
        ([16, 32, 64], [16, 32, 64, 100])
    """
    return sorted({source_bucket(n, max_source_length) for n in range(1, max_source_length + 1)})
