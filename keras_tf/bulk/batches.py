"""The one batching rule of bulk translation: at most N lines and C characters a batch."""


def batch_slices(lengths, max_lines, max_chars):
    """`(start, stop)` ranges cutting items of `lengths`, in order, into bounded batches.

    Each batch holds at most `max_lines` items whose lengths sum to at most
    `max_chars`; an item longer than `max_chars` goes alone.

    Example:
        >>> batch_slices([3, 3, 3, 9, 1], max_lines=2, max_chars=8)
        [(0, 2), (2, 3), (3, 4), (4, 5)]
    """
    slices = []
    start, chars = 0, 0
    for index, length in enumerate(lengths):
        if index > start and (index - start == max_lines or chars + length > max_chars):
            slices.append((start, index))
            start, chars = index, 0
        chars += length
    if start < len(lengths):
        slices.append((start, len(lengths)))
    return slices
