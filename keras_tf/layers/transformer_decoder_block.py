"""One decoder layer (section 3.1): masked self-attention, encoder-decoder attention, feed-forward."""

import keras
from keras import ops

from keras_tf.layers.block_base import TransformerBlockBase
from keras_tf.layers.cache_update import rows_by_positions
from keras_tf.layers.masks import compute_attention_mask
from keras_tf.layers.validation import check_last_dim


@keras.saving.register_keras_serializable(package="keras_tf")
class TransformerDecoderBlock(TransformerBlockBase):
    """Masked self-attention, cross-attention over `memory`, then feed-forward.

    Each sub-layer is followed by dropout, a residual add and a LayerNorm
    (post-norm, as in the paper), or preceded by the LayerNorm with
    `norm_first=True`. Self-attention is causal: position i sees positions
    ≤ i. Queries of the cross-attention come from the decoder; keys and values
    from the encoder output `memory`, hidden where `memory_padding_mask` is
    False.

    Each method returns one structure whatever its arguments:
    - `call(inputs, memory)` returns the outputs;
    - `call_with_attention_scores(inputs, memory)` returns `(outputs,
      cross-attention weights [batch, heads, target_length, source_length])`;
    - `call_with_cache(inputs, self_attention_cache, cache_index,
      cross_attention_cache)`, for incremental decoding, returns `(outputs,
      self_attention_cache)`: the self-attention cache comes from
      `cache_update.new_cache`, the cross-attention keys and values
      (each `[batch, heads, source_length, head_dim]`) are computed once
      from `memory` with `compute_cross_attention_cache`.
    All three run one forward pass, `_forward`.

    Args:
        d_model: model width.
        num_heads: attention heads; must divide `d_model`.
        d_ff: feed-forward inner width.
        dropout: dropout on each sub-layer output. Defaults to 0.1.
        attention_dropout: dropout on attention weights. Defaults to 0.
        activation: feed-forward activation. Defaults to "relu".
        norm_first: pre-norm instead of the paper's post-norm. Defaults to False.
        layer_norm_epsilon: LayerNorm epsilon. Defaults to 1e-5.
        kernel_initializer: initializer of all kernels.

    Example:
        >>> import numpy as np
        >>> block = TransformerDecoderBlock(d_model=8, num_heads=2, d_ff=16)
        >>> y = np.zeros((2, 4, 8), "float32"); memory = np.zeros((2, 6, 8), "float32")
        >>> tuple(block(y, memory).shape)
        (2, 4, 8)
    """

    def build(self, inputs_shape, memory_shape=None):
        check_last_dim(self, "inputs", inputs_shape, self.d_model)
        memory_shape = inputs_shape if memory_shape is None else memory_shape
        self.self_attention = self._attention("self_attention", inputs_shape)
        self.self_attention_dropout, self.self_attention_norm = self._dropout_and_norm(
            "self_attention", inputs_shape
        )
        self.cross_attention = self._attention("cross_attention", inputs_shape, memory_shape)
        self.cross_attention_dropout, self.cross_attention_norm = self._dropout_and_norm(
            "cross_attention", inputs_shape
        )
        self.feed_forward = self._feed_forward(inputs_shape)
        self.feed_forward_dropout, self.feed_forward_norm = self._dropout_and_norm(
            "feed_forward", inputs_shape
        )
        self.built = True

    def compute_cross_attention_cache(self, memory):
        """Keys and values of `memory` for cross-attention, computed once per source."""
        return self.cross_attention.compute_key_value(memory)

    def call(
        self,
        inputs,
        memory,
        padding_mask=None,
        memory_padding_mask=None,
        training=None,
        mask=None,
    ):
        """Run the block.

        Args:
            inputs: decoder states `[batch, target_length, d_model]`.
            memory: encoder output `[batch, source_length, d_model]`.
            padding_mask: `[batch, target_length]`, True at real tokens;
                defaults to the Keras mask of `inputs`.
            memory_padding_mask: `[batch, source_length]`, True at real
                source tokens; defaults to the Keras mask of `memory`.

        Returns:
            The outputs `[batch, target_length, d_model]`.
        """
        padding_mask = mask if padding_mask is None else padding_mask
        x, _, _ = self._forward(
            inputs, padding_mask, memory_padding_mask, memory=memory, training=training
        )
        return x

    def call_with_attention_scores(
        self, inputs, memory, padding_mask=None, memory_padding_mask=None, training=None
    ):
        """`call` that also returns the cross-attention weights: `(outputs, weights)`."""
        x, _, weights = self._forward(
            inputs, padding_mask, memory_padding_mask, memory=memory, training=training
        )
        return x, weights

    def call_with_cache(
        self,
        inputs,
        self_attention_cache,
        cache_index,
        cross_attention_cache,
        memory_padding_mask=None,
        training=None,
        cache_rows=None,
    ):
        """One incremental decoding step: `(outputs, updated self_attention_cache)`.

        Args:
            inputs: the new tokens' states `[batch, new_length, d_model]`.
            self_attention_cache: from `cache_update.new_cache`.
            cache_index: int32 scalar, the position of the first new token.
            cross_attention_cache: from `compute_cross_attention_cache(memory)`.
            memory_padding_mask: `[batch, source_length]`, True at real tokens.
            cache_rows: int32 `[batch, max_length]`, the cache row that each
                position is read from (beam search), or None for the own row
                (`MultiHeadAttention.call_with_cache`).

        One new token (`new_length` 1, known when traced) at inference runs
        `step`, the same arithmetic on `[batch, d_model]` states.
        """
        if inputs.shape[1] == 1 and not training:
            x = ops.reshape(inputs, (-1, self.d_model))
            key_mask = None
            if memory_padding_mask is not None:
                key_mask = ops.cast(memory_padding_mask, "bool")
            x, cache = self.step(
                x, self_attention_cache, cache_index, cross_attention_cache, key_mask, cache_rows
            )
            return ops.reshape(x, (-1, 1, self.d_model)), cache
        x, cache, _ = self._forward(
            inputs,
            None,
            memory_padding_mask,
            self_attention_cache=self_attention_cache,
            cache_index=cache_index,
            cross_attention_cache=cross_attention_cache,
            training=training,
            cache_rows=cache_rows,
        )
        return x, cache

    def step(self, x, self_attention_cache, cache_index, cross_attention_cache, key_mask=None,
             cache_rows=None):
        """One new token per row, `[batch, d_model]` in and out: `(outputs, updated cache)`.

        `key_mask`: boolean `[batch, source_length]`, True at real source
        tokens. `cross_attention_cache` may hold one row per group of rows of
        `x` (the beams of a source, which `cache_rows` is given for), as
        `MultiHeadAttention.step_with_key_value` says. The three sub-layers of
        `_forward`, without dropout, each LayerNorm on `[batch, d_model]`
        states (`_step_norm`).
        """
        # The rows of a source (its beams) read their ancestors within their
        # group. Static where known (XLA, eager); the export without XLA, where
        # the batch is unknown, reads ancestors by gathering and needs no groups.
        sources = cross_attention_cache[0].shape[0]
        x, cache = self._residual(
            x,
            lambda x: self.self_attention.step_with_cache(
                x, self_attention_cache, cache_index, cache_rows=cache_rows, sources=sources
            ),
            self.self_attention_dropout,
            _step_norm(self.self_attention_norm),
        )
        # Without beams (`cache_rows` None) each row is its own source.
        group = 1 if cache_rows is None else None
        x = self._residual(
            x,
            lambda x: self.cross_attention.step_with_key_value(
                x, cross_attention_cache, key_mask, group=group
            ),
            self.cross_attention_dropout,
            _step_norm(self.cross_attention_norm),
        )
        x = self._residual(
            x, self.feed_forward, self.feed_forward_dropout, _step_norm(self.feed_forward_norm)
        )
        return x, cache

    def _forward(
        self,
        inputs,
        padding_mask,
        memory_padding_mask,
        memory=None,
        self_attention_cache=None,
        cache_index=None,
        cross_attention_cache=None,
        training=None,
        cache_rows=None,
    ):
        """Returns `(outputs, self_attention_cache or None, cross-attention weights)`."""
        if memory_padding_mask is None and memory is not None:
            memory_padding_mask = getattr(memory, "_keras_mask", None)
        if memory is None and cross_attention_cache is None:
            raise ValueError(
                f"TransformerDecoderBlock '{self.name}' needs `memory` (the encoder "
                "output) or a `cross_attention_cache`; received neither"
            )
        use_cache = self_attention_cache is not None
        # Self-attention keys: the whole cache while decoding, else the inputs.
        keys_like = rows_by_positions(self_attention_cache) if use_cache else inputs
        self_attention_mask = compute_attention_mask(
            inputs,
            keys_like,
            query_padding_mask=padding_mask,
            key_padding_mask=padding_mask,
            causal=True,
            cache_index=cache_index,
        )
        memory_like = (
            cross_attention_cache[0][:, 0, :, 0] if memory is None else memory
        )
        cross_attention_mask = compute_attention_mask(
            inputs,
            memory_like,
            query_padding_mask=padding_mask,
            key_padding_mask=memory_padding_mask,
        )

        # Masked (look-ahead) multi-head self-attention, residual, LayerNorm.
        # While decoding, the attention also returns the updated cache.
        if use_cache:
            x, self_attention_cache = self._residual(
                inputs,
                lambda x: self.self_attention.call_with_cache(
                    x,
                    self_attention_cache,
                    cache_index,
                    attention_mask=self_attention_mask,
                    training=training,
                    cache_rows=cache_rows,
                ),
                self.self_attention_dropout,
                self.self_attention_norm,
                training,
            )
        else:
            x = self._residual(
                inputs,
                lambda x: self.self_attention(
                    x, attention_mask=self_attention_mask, training=training
                ),
                self.self_attention_dropout,
                self.self_attention_norm,
                training,
            )

        # Encoder-decoder attention: queries from the decoder, keys and values
        # from the encoder output (or their cache). Residual, LayerNorm.
        x, weights = self._residual(
            x,
            lambda x: self.cross_attention.call_with_attention_scores(
                x,
                memory,
                attention_mask=cross_attention_mask,
                key_value=cross_attention_cache,
                training=training,
            ),
            self.cross_attention_dropout,
            self.cross_attention_norm,
            training,
        )

        # Position-wise feed-forward, residual, LayerNorm.
        x = self._residual(
            x, self.feed_forward, self.feed_forward_dropout, self.feed_forward_norm, training
        )
        return x, self_attention_cache, weights

    def compute_output_shape(self, inputs_shape, memory_shape=None):
        return tuple(inputs_shape)


def _step_norm(norm):
    """`norm` (a `LayerNormalization` over the last axis) on `[batch, d_model]` states.

    (x - mean) / sqrt(variance + epsilon) * gamma + beta in nine ops, in
    float32. Keras's LayerNormalization runs eleven, and two more that
    reshape gamma and beta, each a node that TensorFlow's graph executor
    runs at every decoding step without XLA. Equal to it within float32
    rounding.
    """

    def call(x):
        x32 = ops.cast(x, "float32")
        mean = ops.mean(x32, axis=-1, keepdims=True)
        centered = x32 - mean
        variance = ops.mean(ops.square(centered), axis=-1, keepdims=True)
        outputs = centered * ops.rsqrt(variance + norm.epsilon)
        outputs = outputs * ops.cast(norm.gamma, "float32") + ops.cast(norm.beta, "float32")
        return ops.cast(outputs, norm.compute_dtype)

    return call
