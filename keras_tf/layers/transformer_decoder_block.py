"""One decoder layer (section 3.1): masked self-attention, encoder-decoder attention, feed-forward."""

import keras

from keras_tf.layers.block_base import TransformerBlockBase
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

    For incremental decoding, pass `self_attention_cache`
    `[batch, 2, max_length, heads, head_dim]` with `cache_index`, and
    `cross_attention_cache` `[batch, 2, source_length, heads, head_dim]`
    computed once from `memory` with `compute_cross_attention_cache`. The
    block then returns `(outputs, self_attention_cache)`.

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
        memory=None,
        padding_mask=None,
        memory_padding_mask=None,
        self_attention_cache=None,
        cache_index=None,
        cross_attention_cache=None,
        return_attention_scores=False,
        training=None,
        mask=None,
    ):
        """Run the block.

        Args:
            inputs: decoder states `[batch, target_length, d_model]`.
            memory: encoder output `[batch, source_length, d_model]`; may be
                omitted when `cross_attention_cache` is given.
            padding_mask: `[batch, target_length]`, True at real tokens;
                defaults to the Keras mask of `inputs`.
            memory_padding_mask: `[batch, source_length]`, True at real
                source tokens; defaults to the Keras mask of `memory`.
            self_attention_cache, cache_index: the decoding cache and the
                position of the first token of `inputs`.
            cross_attention_cache: keys and values of `memory`.
            return_attention_scores: also return the cross-attention weights
                `[batch, heads, target_length, source_length]`.

        Returns:
            `outputs`, then the updated self-attention cache if one was given,
            then the cross-attention weights if requested.
        """
        padding_mask = mask if padding_mask is None else padding_mask
        if memory_padding_mask is None and memory is not None:
            memory_padding_mask = getattr(memory, "_keras_mask", None)
        if memory is None and cross_attention_cache is None:
            raise ValueError(
                f"TransformerDecoderBlock '{self.name}' needs `memory` (the encoder "
                "output) or a `cross_attention_cache`; received neither"
            )
        use_cache = self_attention_cache is not None
        # Self-attention keys: the whole cache while decoding, else the inputs.
        keys_like = self_attention_cache[:, 0] if use_cache else inputs
        self_attention_mask = compute_attention_mask(
            inputs,
            keys_like,
            query_padding_mask=None if use_cache else padding_mask,
            key_padding_mask=None if use_cache else padding_mask,
            causal=True,
            cache_index=cache_index,
        )
        memory_like = cross_attention_cache[:, 0] if memory is None else memory
        cross_attention_mask = compute_attention_mask(
            inputs,
            memory_like,
            query_padding_mask=None if use_cache else padding_mask,
            key_padding_mask=memory_padding_mask,
        )

        # Masked (look-ahead) multi-head self-attention, residual, LayerNorm.
        # While decoding, the attention also returns the updated cache.
        self_attention_outputs = self._residual(
            inputs,
            lambda x: self.self_attention(
                x,
                attention_mask=self_attention_mask,
                cache=self_attention_cache,
                cache_index=cache_index,
                training=training,
            ),
            self.self_attention_dropout,
            self.self_attention_norm,
            training,
        )
        if use_cache:
            x, self_attention_cache = self_attention_outputs
        else:
            x = self_attention_outputs

        # Encoder-decoder attention: queries from the decoder, keys and values
        # from the encoder output (or their cache). Residual, LayerNorm.
        x, weights = self._residual(
            x,
            lambda x: self.cross_attention(
                x,
                memory,
                attention_mask=cross_attention_mask,
                cache=cross_attention_cache,
                return_attention_scores=True,
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

        outputs = (x,)
        if use_cache:
            outputs += (self_attention_cache,)
        if return_attention_scores:
            outputs += (weights,)
        return outputs[0] if len(outputs) == 1 else outputs

    def compute_output_shape(self, inputs_shape, memory_shape=None):
        return tuple(inputs_shape)

    def compute_output_spec(
        self,
        inputs,
        memory=None,
        padding_mask=None,
        memory_padding_mask=None,
        self_attention_cache=None,
        cache_index=None,
        cross_attention_cache=None,
        return_attention_scores=False,
        training=None,
        mask=None,
    ):
        outputs = (keras.KerasTensor(inputs.shape, dtype=self.compute_dtype),)
        if self_attention_cache is not None:
            outputs += (
                keras.KerasTensor(
                    self_attention_cache.shape, dtype=self_attention_cache.dtype
                ),
            )
        if return_attention_scores:
            source_length = (
                memory.shape[1] if memory is not None else cross_attention_cache.shape[2]
            )
            outputs += (
                keras.KerasTensor(
                    (inputs.shape[0], self.num_heads, inputs.shape[1], source_length),
                    dtype=self.compute_dtype,
                ),
            )
        return outputs[0] if len(outputs) == 1 else outputs
