"""Multi-head attention (section 3.2 of "Attention Is All You Need")."""

import contextlib
import math
import threading

import keras
from keras import ops

from keras_tf.layers.cache_update import (
    position_axis, positions_first, update_at, write_position, writes_in_place,
    written_keys_values,
)
from keras_tf.layers.dense_call import dense_call, float_int8, int8_product
from keras_tf.layers.dropout import Dropout
from keras_tf.layers.graph_ops import eigen_matmul, eigen_transpose
from keras_tf.layers.validation import check_last_dim, clone_initializer


# The query/key/value kernels of self-attention layers, concatenated once per
# decoding call by `fused_step_projections`: {id(layer): (kernel, bias,
# int8 scales or None)}.
_FUSED = threading.local()


@contextlib.contextmanager
def fused_step_projections(layers):
    """Within it, `step_with_cache` of each of `layers` projects q, k and v with one matmul.

    The three kernels (and biases) are concatenated here, once, outside the
    decoding loop that the context encloses; `_fused_projection` would
    concatenate them at every step, which only XLA hoists out of the loop.
    Quantized projections keep their own calls, but for int8 ones in the
    export without XLA (`dense_call.float_int8`): their kernels are
    concatenated as float numbers with their scales, and the query is
    quantized once for the three.
    """
    fused = {}
    for layer in layers:
        weights = layer._fused_weights()
        if weights is None:
            continue  # each its own call
        kernel, bias, scale = weights
        if bias is not None:
            # [3 * d_model] -> [3, heads, head_dim], the shape it is added in
            bias = ops.reshape(bias, (3, layer.num_heads, layer.head_dim))
        fused[id(layer)] = (kernel, bias, scale)
    before = getattr(_FUSED, "kernels", {})
    _FUSED.kernels = {**before, **fused}
    try:
        yield
    finally:
        _FUSED.kernels = before


@keras.saving.register_keras_serializable(package="keras_tf")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention with an optional key/value cache.

    The four steps of the paper: linear projections of queries, keys and
    values; a split into `num_heads` heads of width d_k = d_model / h;
    softmax(Q Kᵀ / √d_k + mask) · V per head; concatenation and an output
    projection.

    The softmax runs in float32 whatever the compute dtype, and masked scores
    are replaced (not added to) by a large negative float32 number, so a fully
    masked row gives uniform weights rather than NaN in float16 or bfloat16.

    Each method returns one structure whatever its arguments:
    - `call` returns the output;
    - `call_with_attention_scores` returns `(output, weights)`;
    - `call_with_cache` (incremental decoding) returns `(output, cache)`: the
      keys and values of the new tokens are written into a fixed-size cache
      `(keys, values)` (`cache_update.new_cache`: each head-first `[num_heads,
      batch, max_length, head_dim]`, or position-major `[max_length, batch,
      num_heads, head_dim]` in the export without XLA) at `cache_index`, and
      attention runs over the whole cache (the causal mask hides the unfilled
      part).
    Cross-attention reuses keys and values computed once from the encoder
    output (`compute_key_value`: keys and values, each `[batch, heads,
    key_length, head_dim]`) through the `key_value` argument.

    One new token at a time (`step_with_cache`, `step_with_key_value`) runs
    on `[batch, d_model]` states with few, large ops: every decoding step of
    a SavedModel served without XLA runs each op through TensorFlow's graph
    executor, where a `[batch, 1, d_model]` projection alone is ten ops.

    Args:
        num_heads: the number of heads h.
        d_model: model width; `num_heads` must divide it.
        dropout: dropout rate on the attention weights. Defaults to 0.
        use_bias: whether the projections have biases. Defaults to True.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases.

    Example:
        >>> import numpy as np
        >>> mha = MultiHeadAttention(num_heads=2, d_model=8)
        >>> x = np.random.rand(1, 5, 8).astype("float32")
        >>> tuple(mha(x).shape)
        (1, 5, 8)

    References:
        Vaswani et al., 2017, section 3.2.2.
    """

    def __init__(
        self,
        num_heads,
        d_model,
        dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if d_model % num_heads:
            raise ValueError(
                "num_heads must divide d_model; received "
                f"d_model={d_model}, num_heads={num_heads}"
            )
        self.num_heads = num_heads
        self.d_model = d_model
        self.head_dim = d_model // num_heads
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def _dense(self, name):
        return keras.layers.Dense(
            self.d_model,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, query_shape, value_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        check_last_dim(self, "query", query_shape, self.d_model)
        check_last_dim(self, "value", value_shape, self.d_model)
        self.query_dense = self._dense("query")
        self.query_dense.build(query_shape)
        self.key_dense = self._dense("key")
        self.key_dense.build(value_shape)
        self.value_dense = self._dense("value")
        self.value_dense.build(value_shape)
        self.output_dense = self._dense("attention_output")
        self.output_dense.build(tuple(query_shape[:-1]) + (self.d_model,))
        self.dropout_layer = Dropout(
            self.dropout, dtype=self.dtype_policy
        )
        self.built = True

    def _split_heads(self, x):
        # [batch, length, d_model] -> [batch, length, heads, head_dim]
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[1], self.num_heads, self.head_dim))

    def _fused_projection(self, x):
        """Queries `[batch, length, heads, head_dim]` and keys/values of `x` in one matmul.

        The weights stay in the three Dense layers (so checkpoints and weight
        copies see q, k and v separately); only the call concatenates them.
        """
        shape = ops.shape(x)
        # qkv: [batch, length, 3, heads, head_dim]
        qkv = ops.reshape(self._qkv(x), (shape[0], shape[1], 3, self.num_heads, self.head_dim))
        key_value = ops.transpose(qkv[:, :, 1:], (0, 2, 1, 3, 4))
        return qkv[:, :, 0], key_value

    def _qkv(self, x):
        """q, k and v of `x` `[batch, length, d_model]` side by side: `[batch, length, 3 * d_model]`."""
        weights = self._fused_weights()
        if weights is None:
            dense = (self.query_dense, self.key_dense, self.value_dense)
            return ops.concatenate([dense_call(d, x) for d in dense], axis=-1)
        kernel, bias, scale = weights
        qkv = ops.matmul(x, kernel) if scale is None else int8_product(x, kernel, *scale)
        return qkv if bias is None else qkv + bias

    def _fused_weights(self):
        """`(kernel [d_model, 3 * d_model], bias [3 * d_model] or None, int8 scales or None)`: q, k and v as one product.

        None where the three are quantized and each must be called: a
        quantized Dense (`Seq2SeqTransformer.quantize`) holds integer kernels
        and scales its own outputs. Only int8 ones in the export without XLA
        (`dense_call.float_int8`) become one product, over their kernels as
        float numbers, the input quantized once for the three.
        """
        dense = (self.query_dense, self.key_dense, self.value_dense)
        scale = None
        if any(d.quantization_mode is not None for d in dense):
            int8 = [float_int8(d) for d in dense]
            if any(weights is None for weights in int8) or len({w[2] for w in int8}) != 1:
                return None  # each its own call (or quantizers that differ)
            kernel = ops.concatenate([weights[0] for weights in int8], axis=1)
            scale = (ops.concatenate([weights[1] for weights in int8], axis=-1), int8[0][2])
        else:
            kernel = ops.concatenate(
                [ops.cast(d.kernel, self.compute_dtype) for d in dense], axis=1
            )
        bias = None
        if self.use_bias:
            bias = ops.concatenate([ops.cast(d.bias, self.compute_dtype) for d in dense])
        return kernel, bias, scale

    def _key_value_heads(self, value):
        """Keys and values of `value`: `[batch, 2, length, heads, head_dim]`."""
        key = self._split_heads(dense_call(self.key_dense, value))
        value = self._split_heads(dense_call(self.value_dense, value))
        return ops.stack([key, value], axis=1)

    def compute_key_value(self, value):
        """Project `value` to `(keys, values)`, head-major: each `[batch, heads, length, head_dim]`.

        Each (row, head) then holds its keys and values as one `[length,
        head_dim]` matrix, so a decoding step attends with two batched
        matrix products (`step_with_key_value`).
        """
        transpose = eigen_transpose if writes_in_place() else ops.transpose
        return tuple(
            transpose(self._split_heads(dense_call(dense, value)), (0, 2, 1, 3))
            for dense in (self.key_dense, self.value_dense)
        )

    def call(self, query, value=None, attention_mask=None, key_value=None, training=None):
        """Attend from `query` to `value` (self-attention when `value` is None).

        Args:
            query: `[batch, query_length, d_model]`.
            value: `[batch, key_length, d_model]`, the source of keys and values.
            attention_mask: boolean `[batch, query_length, key_length]` from
                `compute_attention_mask`; True where attention is allowed.
            key_value: `(keys, values)` computed beforehand by
                `compute_key_value`, instead of `value`.
            training: enables attention dropout.

        Returns:
            The output `[batch, query_length, d_model]`.
        """
        output, _ = self._attention(query, value, attention_mask, key_value, training)
        return output

    def call_with_attention_scores(
        self, query, value=None, attention_mask=None, key_value=None, training=None
    ):
        """`call` that also returns the weights: `(output, [batch, heads, query_length, key_length])`."""
        return self._attention(query, value, attention_mask, key_value, training)

    def call_with_cache(
        self, query, cache, cache_index, attention_mask=None, training=None, cache_rows=None
    ):
        """Self-attention of new tokens over a key/value cache, for incremental decoding.

        Args:
            query: the new tokens' states `[batch, new_length, d_model]`.
            cache: from `cache_update.new_cache`.
            cache_index: int32 scalar, the position of the first new token.
            attention_mask: `[batch, new_length, max_length]`, from
                `compute_attention_mask(..., causal=True, cache_index=...)`.
            cache_rows: int32 `[batch, max_length]` or None. Where given,
                row b reads position t of the cache from row
                `cache_rows[b, t]`: beam search follows each hypothesis'
                ancestors through it instead of reordering the cache.

        Returns:
            `(output [batch, new_length, d_model], updated cache)`.
        """
        query_heads, key_value = self._fused_projection(query)
        # Write this step's keys and values, then attend over the whole cache.
        # key_value: [batch, 2, new_length, heads, head_dim] -> the cache's
        # layout (`cache_update`): position-major or head-first
        axis = position_axis()
        cache = tuple(
            update_at(buffer, cache_index,
                      ops.transpose(key_value[:, i], (1, 0, 2, 3) if axis == 0 else (2, 0, 1, 3)),
                      axis=axis)
            for i, buffer in enumerate(cache)
        )
        key_heads, value_heads = positions_first(cache[0]), positions_first(cache[1])
        if cache_rows is not None:
            key_heads, value_heads = (
                read_rows(key_heads, cache_rows), read_rows(value_heads, cache_rows)
            )
        # [max_length, batch, heads, head_dim] -> [batch, max_length, heads, head_dim]
        key_heads, value_heads = (
            ops.transpose(key_heads, (1, 0, 2, 3)), ops.transpose(value_heads, (1, 0, 2, 3))
        )
        output, _ = self._attend(query_heads, key_heads, value_heads, attention_mask, training)
        return output, cache

    def step_with_cache(self, query, cache, cache_index, cache_rows=None, sources=None):
        """`call_with_cache` for one new token, on `[batch, d_model]` states, for inference.

        The same arithmetic (no dropout): queries, keys and values from the
        three projections, the keys and values written at `cache_index`
        (`write_position`), attention over positions `0 .. cache_index`.

        Args:
            query: `[batch, d_model]`.
            cache: a self-attention cache (`cache_update.new_cache`).
            cache_index: int32 scalar, the new token's position.
            cache_rows: as in `call_with_cache`. A row's ancestors are rows
                of its own group (the beams of its source).
            sources: the number of groups of rows, the rows of a group next
                to each other (beam search: the batch size). Used with
                `cache_rows` on a head-first cache; None is one group of
                all rows (correct, and as slow as rows²).

        Returns:
            `(output [batch, d_model], updated cache)`.
        """
        fused = getattr(_FUSED, "kernels", {}).get(id(self))
        if fused is None:
            # Three projections: `_fused_projection` would concatenate the
            # kernels at every step (`fused_step_projections` does it once).
            query_heads = self._step_heads(dense_call(self.query_dense, query))
            key_value = (self._step_heads(dense_call(self.key_dense, query)),
                         self._step_heads(dense_call(self.value_dense, query)))
        else:
            kernel, bias, scale = fused
            # qkv: [batch, 3, heads, head_dim]. The bias is added after the
            # reshape: TensorFlow's Grappler fuses a matmul and the add that
            # follows it into one oneDNN call, which measured alone in a loop
            # costs more than the two (10 against 5 + 1.5 µs at one row).
            qkv = ops.matmul(query, kernel) if scale is None else int8_product(query, kernel, *scale)
            qkv = ops.reshape(qkv, (-1, 3, self.num_heads, self.head_dim))
            if bias is not None:
                qkv = qkv + bias
            # One unstack, not a transpose (a oneDNN call of 0.1 ms at batch
            # 32 without XLA) or three slices and reshapes.
            query_heads, key, value = ops.unstack(qkv, axis=1)
            key_value = (key, value)
        cache = write_position(cache, cache_index, key_value)
        written = written_keys_values(cache, cache_index)
        if written is None:
            # A head-first cache: all positions, the unwritten ones masked.
            return self._attend_head_first(query_heads, cache, cache_index, cache_rows,
                                           sources), cache
        # Position-major, in place (graph executor): positions 0 .. cache_index
        # only, none masked.
        key_heads, value_heads = written
        if cache_rows is not None:
            cache_rows = cache_rows[:, : ops.shape(key_heads)[0]]
            key_heads = read_rows(key_heads, cache_rows)
            value_heads = read_rows(value_heads, cache_rows)
        return self._attend_one(query_heads, key_heads, value_heads), cache

    def _attend_head_first(self, query_heads, cache, cache_index, cache_rows, sources):
        """softmax(q Kᵀ / √d_k + mask) · V for one query per row, over a head-first cache.

        query_heads: `[rows, heads, head_dim]`; cache: `(keys, values)`,
        each `[heads, rows, length, head_dim]`, positions after `cache_index`
        masked. Each (head, row) attends with two batched matrix products.
        With `cache_rows`, the query of row r is multiplied with the keys of
        every row of its group
        (a `[group, head_dim] × [head_dim, group · length]` product per source
        and head), and a one-hot table of ancestors picks, at each position,
        the score of the row that holds it; the weights are spread back the
        same way before the product with the values. No cache row is copied.
        Returns the output `[rows, d_model]`.
        """
        heads, head_dim = self.num_heads, self.head_dim
        keys, values = cache
        length = keys.shape[2] or ops.shape(keys)[2]
        # [rows, heads, head_dim] -> [heads, rows, head_dim]
        query = ops.transpose(query_heads, (1, 0, 2))
        query = query * ops.cast(1.0 / math.sqrt(head_dim), query.dtype)
        visible = ops.less_equal(ops.arange(length, dtype="int32"), ops.cast(cache_index, "int32"))
        if cache_rows is None:
            scores = ops.einsum("hrd,hrld->hrl", query, keys)
            weights = self._position_softmax(scores, visible)
            context = ops.einsum("hrl,hrld->hrd", weights, values)
        else:
            rows = query.shape[1] or ops.shape(query)[1]
            groups = sources or 1
            # [heads, groups, group, head_dim] and [heads, groups, group, length, head_dim]
            query = ops.reshape(query, (heads, groups, -1, head_dim))
            group = query.shape[2] or ops.shape(query)[2]
            keys = ops.reshape(keys, (heads, groups, group, length, head_dim))
            # ancestors[b, q, k, t]: 1 where row q of group b reads position t from row k
            first = (ops.arange(rows, dtype="int32") // group) * group
            ancestors = ops.one_hot(ops.cast(cache_rows, "int32") - first[:, None], group)
            ancestors = ops.transpose(
                ops.reshape(ancestors, (groups, group, length, group)), (0, 1, 3, 2)
            )
            # scores of every query against every key of its group: [heads, groups, q, k, length]
            scores = ops.cast(ops.einsum("hbqd,hbkld->hbqkl", query, keys), "float32")
            scores = ops.sum(scores * ancestors[None], axis=3)
            weights = self._position_softmax(scores, visible)
            spread = weights[:, :, :, None, :] * ops.cast(ancestors, weights.dtype)[None]
            spread = ops.reshape(spread, (heads, groups, group, group * length))
            values = ops.reshape(values, (heads, groups, group * length, head_dim))
            context = ops.reshape(
                ops.einsum("hbqm,hbmd->hbqd", spread, values), (heads, rows, head_dim)
            )
        # [heads, rows, head_dim] -> [rows, d_model]
        context = ops.reshape(ops.transpose(context, (1, 0, 2)), (-1, self.d_model))
        return dense_call(self.output_dense, context)

    def _position_softmax(self, scores, visible, axis=-1):
        """Softmax along `axis` in float32, over the scores where `visible` (broadcast to `scores`, or None: all) holds.

        Written out: along the positions wherever they lie, without the
        transposes and the oneDNN call (65 µs for a few hundred numbers
        without XLA) that `ops.softmax` makes off the last axis.
        """
        scores = ops.cast(scores, "float32")
        if visible is not None:
            scores = ops.where(visible, scores, -1e9)
        weights = ops.exp(scores - ops.max(scores, axis=axis, keepdims=True))
        weights = weights / ops.sum(weights, axis=axis, keepdims=True)
        return ops.cast(weights, self.compute_dtype)

    def step_with_key_value(self, query, key_value, key_mask=None, group=None):
        """Cross-attention of one new token over keys and values computed once, for inference.

        The rows of `query` come in groups, one group per row of
        `key_value`: beam search's `beam_size` hypotheses of one source share
        its keys and values, which are then read once per source instead of
        once per hypothesis. Each (source, head) attends with two batched
        matrix products: `[group, head_dim] × [head_dim, length]` and
        `[group, length] × [length, head_dim]`.

        Args:
            query: `[batch * group, d_model]`, the rows of a source next to
                each other.
            key_value: `(keys, values)`, each `[batch, heads,
                source_length, head_dim]`, from `compute_key_value`.
            key_mask: boolean `[batch, source_length]`, True at real tokens.
            group: the number of rows of `query` per source, when known
                (greedy search: 1); None works it out from the shapes.

        Returns:
            The output `[batch * group, d_model]`.
        """
        keys, values = key_value
        scale = 1.0 / math.sqrt(self.head_dim)
        batch = ops.shape(keys)[0] if group is None else -1
        if writes_in_place():
            # TensorFlow's graph executor: two of Eigen's batched products per
            # (row, head), over the keys and values as they lie (broadcast
            # over a source's rows), no transpose.
            # query_heads: [batch, group, heads, 1, head_dim]
            query_heads = ops.reshape(
                dense_call(self.query_dense, query),
                (batch, group or -1, self.num_heads, 1, self.head_dim),
            )
            query_heads = query_heads * ops.cast(scale, query_heads.dtype)
            # scores: [batch, group, heads, 1, source_length]
            scores = eigen_matmul(query_heads, keys[:, None], transpose_b=True)
            visible = None if key_mask is None else key_mask[:, None, None, None, :]
            weights = self._position_softmax(scores, visible)
            context = eigen_matmul(weights, values[:, None])
            return dense_call(self.output_dense, ops.reshape(context, (-1, self.d_model)))
        # XLA: two batched matrix products per (source, head).
        # [batch * group, d_model] -> [batch, group, heads, head_dim]
        query_heads = ops.reshape(
            dense_call(self.query_dense, query),
            (batch, group or -1, self.num_heads, self.head_dim),
        )
        query_heads = query_heads * ops.cast(scale, query_heads.dtype)
        visible = None if key_mask is None else key_mask[:, None, None, :]
        # scores: [batch, heads, group, source_length]
        scores = ops.einsum("bghd,bhsd->bhgs", query_heads, keys)
        weights = self._position_softmax(scores, visible)
        context = ops.einsum("bhgs,bhsd->bghd", weights, values)
        # context: [batch, group, heads, head_dim] -> [batch * group, d_model]
        return dense_call(self.output_dense, ops.reshape(context, (-1, self.d_model)))

    def _step_heads(self, x):
        # [batch, d_model] -> [batch, heads, head_dim]
        return ops.reshape(x, (-1, self.num_heads, self.head_dim))

    def _attend_one(self, query_heads, key_heads, value_heads):
        """softmax(q Kᵀ / √d_k) · V for one query per row, over the written positions of position-major keys.

        query_heads: `[batch, heads, head_dim]`; key_heads, value_heads:
        `[length, batch, heads, head_dim]`, every position visible. The
        products and sums run along the positions (axis 0) as they lie in
        memory, so nothing is transposed. Returns the output `[batch, d_model]`.
        """
        query_heads = query_heads * ops.cast(1.0 / math.sqrt(self.head_dim), query_heads.dtype)
        # scores: [length, batch, heads]
        scores = ops.sum(query_heads[None] * key_heads, axis=-1)
        weights = self._position_softmax(scores, None, axis=0)
        # context: [batch, heads, head_dim] -> [batch, d_model]
        context = ops.sum(weights[..., None] * value_heads, axis=0)
        return dense_call(self.output_dense, ops.reshape(context, (-1, self.d_model)))

    def _attention(self, query, value, attention_mask, key_value, training):
        if key_value is not None:
            # Cross-attention over keys and values computed once (decoding),
            # head-major: each [batch, heads, key_length, head_dim].
            query_heads = self._split_heads(dense_call(self.query_dense, query))
            key_heads = ops.transpose(key_value[0], (0, 2, 1, 3))
            value_heads = ops.transpose(key_value[1], (0, 2, 1, 3))
        elif value is None and writes_in_place():
            return self._self_attention_in_graph(query, attention_mask, training)
        elif value is None:
            # Self-attention: q, k and v from one matmul, which measured
            # 15-25% faster per training step than three on a CPU.
            query_heads, key_value = self._fused_projection(query)
            key_heads, value_heads = key_value[:, 0], key_value[:, 1]
        else:
            query_heads = self._split_heads(dense_call(self.query_dense, query))
            key_value = self._key_value_heads(value)
            key_heads, value_heads = key_value[:, 0], key_value[:, 1]
        return self._attend(query_heads, key_heads, value_heads, attention_mask, training)

    def _self_attention_in_graph(self, query, attention_mask, training):
        """Self-attention for TensorFlow's graph executor (inside `in_place_writes()`): `(output, weights)`.

        The same arithmetic as `_attend` without the transposes and batched
        products that TensorFlow hands to oneDNN at a fixed cost of 60-80 µs
        a call on one sentence: Eigen's (`eigen_transpose`, `eigen_matmul`)
        instead.
        """
        shape = ops.shape(query)
        batch, length = shape[0], shape[1]
        heads, head_dim = self.num_heads, self.head_dim
        # [batch, length, 3, heads, head_dim] -> 3 x [batch, heads, length, head_dim]
        qkv = ops.reshape(self._qkv(query), (batch, length, 3, heads, head_dim))
        query_heads, key_heads, value_heads = ops.unstack(eigen_transpose(qkv, (2, 0, 3, 1, 4)))
        query_heads = query_heads * ops.cast(1.0 / math.sqrt(head_dim), query_heads.dtype)
        # scores, weights: [batch, heads, length, length]
        scores = eigen_matmul(query_heads, key_heads, transpose_b=True)
        # TensorFlow's softmax op, as `_attend`: oneDNN's, 45 µs slower than
        # the five ops of `_position_softmax` on one sentence but 50 µs faster
        # at batch 32 (one request: 0.1 ms slower and 1 ms faster).
        weights = ops.cast(masked_softmax(scores, attention_mask), self.compute_dtype)
        dropped = self.dropout_layer(weights, training=training)
        # [batch, heads, length, head_dim] -> [batch, length, d_model]
        context = eigen_transpose(eigen_matmul(dropped, value_heads), (0, 2, 1, 3))
        context = ops.reshape(context, (batch, length, self.d_model))
        return dense_call(self.output_dense, context), weights

    def _attend(self, query_heads, key_heads, value_heads, attention_mask, training):
        """softmax(Q Kᵀ / √d_k + mask) · V, heads concatenated, output projection.

        Returns `(output, weights)`.
        """
        # query_heads: [batch, query_length, heads, head_dim]
        # key_heads, value_heads: [batch, key_length, heads, head_dim]

        # scores: [batch, heads, query_length, key_length]
        query_heads = query_heads * ops.cast(
            1.0 / math.sqrt(self.head_dim), query_heads.dtype
        )
        # A single query (one decoding step) multiplies and reduces over the
        # cache: the einsums would make XLA transpose (copy) all of K and V at
        # every step. Same arithmetic, so the same results.
        single_query = query_heads.shape[1] == 1
        if single_query:
            # [batch, key_length, heads] -> [batch, heads, 1, key_length]
            scores = ops.sum(query_heads * key_heads, axis=-1)
            scores = ops.expand_dims(ops.transpose(scores, (0, 2, 1)), 2)
        else:
            scores = ops.einsum("bqhd,bkhd->bhqk", query_heads, key_heads)
        weights = masked_softmax(scores, attention_mask)
        weights = ops.cast(weights, self.compute_dtype)
        dropped = self.dropout_layer(weights, training=training)
        # context: [batch, query_length, heads, head_dim] -> concat heads
        if single_query:
            # [batch, heads, 1, key_length] -> [batch, key_length, heads, 1]
            step_weights = ops.expand_dims(ops.transpose(dropped[:, :, 0, :], (0, 2, 1)), -1)
            context = ops.sum(step_weights * value_heads, axis=1, keepdims=True)
        else:
            context = ops.einsum("bhqk,bkhd->bqhd", dropped, value_heads)
        shape = ops.shape(context)
        context = ops.reshape(context, (shape[0], shape[1], self.d_model))
        return dense_call(self.output_dense, context), weights

    def compute_output_shape(self, query_shape, value_shape=None):
        return tuple(query_shape[:-1]) + (self.d_model,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "d_model": self.d_model,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config


def read_rows(heads, rows):
    """`heads[t, rows[b, t]]` for every b and t: position-major heads `[length, batch, ...]`, rows `[batch, length]`.

    Returns `[length, batch, ...]`, each row's positions read from its ancestors' rows.

    Example:
        >>> import numpy as np
        >>> heads = np.array([[10, 20], [11, 21], [12, 22]])  # [length 3, batch 2]
        >>> ops.convert_to_numpy(read_rows(heads, np.array([[1, 0, 0], [1, 1, 0]]))).T.tolist()
        [[20, 11, 12], [20, 21, 12]]
    """
    shape = ops.shape(heads)
    length = heads.shape[0] or shape[0]
    batch = heads.shape[1] or shape[1]
    # flat position of (t, rows[b, t]) in heads viewed as [length * batch, ...]: [length, batch]
    flat = ops.transpose(ops.cast(rows, "int32")) + ops.arange(length, dtype="int32")[:, None] * batch
    flat_heads = ops.reshape(heads, (-1,) + tuple(heads.shape[2:]))
    return ops.take(flat_heads, flat, axis=0)


def masked_softmax(scores, attention_mask=None):
    """Softmax over the last axis in float32, with masked scores replaced.

    Replacing (rather than adding -inf) keeps a fully masked row finite: its
    weights become uniform instead of NaN, in every dtype.
    """
    scores = ops.cast(scores, "float32")
    if attention_mask is not None:
        # [batch, query_length, key_length] -> [batch, 1, query_length, key_length]
        mask = ops.expand_dims(ops.cast(attention_mask, "bool"), 1)
        scores = ops.where(mask, scores, ops.full_like(scores, -1e9))
    if scores.shape[-1] == 1:
        # One key (the first decoder position): its weight is 1, masked or
        # not. Said here rather than by Keras's softmax, which warns on it.
        return ops.ones_like(scores)
    return ops.softmax(scores, axis=-1)
