"""The one place where attention masks are built.

Every attention layer in keras_tf receives a boolean mask of shape
`[batch, query_length, key_length]` (True = may attend) produced by
`compute_attention_mask`. It merges the three things that can hide a key:
padding of the queries, padding of the keys, and the look-ahead (causal)
constraint, which during cached decoding is offset by the cache index.
"""

from keras import ops


def compute_causal_mask(query_length, key_length, cache_index=0):
    """Look-ahead mask: query i (at absolute position cache_index + i) sees keys j <= it.

    Returns a boolean tensor of shape `[1, query_length, key_length]`.
    """
    # positions: [query_length, 1] and [1, key_length]
    query_positions = ops.expand_dims(
        ops.arange(query_length, dtype="int32") + ops.cast(cache_index, "int32"), 1
    )
    key_positions = ops.expand_dims(ops.arange(key_length, dtype="int32"), 0)
    return ops.expand_dims(ops.greater_equal(query_positions, key_positions), 0)


def compute_attention_mask(
    query,
    key,
    query_padding_mask=None,
    key_padding_mask=None,
    causal=False,
    cache_index=None,
):
    """Merge padding masks and the causal flag into one attention mask.

    Args:
        query: `[batch, query_length, ...]` tensor (only its shape is read).
        key: `[batch, key_length, ...]` tensor (only its shape is read).
        query_padding_mask: optional `[batch, query_length]`, True at real tokens.
        key_padding_mask: optional `[batch, key_length]`, True at real tokens.
        causal: add the look-ahead mask.
        cache_index: while decoding with a key/value cache, the absolute
            position of the first query; keys beyond the current position
            (the unfilled part of the cache) are then hidden by the causal
            mask. Defaults to 0.

    Returns:
        A boolean `[batch, query_length, key_length]` tensor, or None when
        nothing is masked.

    Example:
        >>> from keras import ops
        >>> x = ops.zeros((1, 3, 4))
        >>> ops.convert_to_numpy(compute_attention_mask(x, x, causal=True))[0]
        array([[ True, False, False],
               [ True,  True, False],
               [ True,  True,  True]])
    """
    mask = None
    if key_padding_mask is not None:
        # [batch, 1, key_length]
        mask = ops.expand_dims(ops.cast(key_padding_mask, "bool"), 1)
    if query_padding_mask is not None:
        # [batch, query_length, 1]
        query_mask = ops.expand_dims(ops.cast(query_padding_mask, "bool"), 2)
        mask = query_mask if mask is None else ops.logical_and(mask, query_mask)
    if causal:
        query_length = ops.shape(query)[1]
        key_length = ops.shape(key)[1]
        causal_mask = compute_causal_mask(
            query_length, key_length, 0 if cache_index is None else cache_index
        )
        mask = causal_mask if mask is None else ops.logical_and(mask, causal_mask)
    if mask is not None:
        batch = ops.shape(query)[0]
        mask = ops.broadcast_to(
            mask, (batch, ops.shape(query)[1], ops.shape(key)[1])
        )
    return mask
