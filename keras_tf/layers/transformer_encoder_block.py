"""One encoder layer (section 3.1): self-attention, then feed-forward."""

import keras

from keras_tf.layers.block_base import TransformerBlockBase
from keras_tf.layers.masks import compute_attention_mask
from keras_tf.layers.validation import check_last_dim


@keras.saving.register_keras_serializable(package="keras_tf")
class TransformerEncoderBlock(TransformerBlockBase):
    """Self-attention → dropout → add → LayerNorm → feed-forward → dropout → add → LayerNorm.

    That is the paper's post-norm layer, LayerNorm(x + Sublayer(x)).
    `norm_first=True` gives the pre-norm variant x + Sublayer(LayerNorm(x)),
    which trains more stably in deep stacks; the model then adds a final
    LayerNorm after the stack.

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

    Call arguments:
        inputs: `[batch, length, d_model]`.
        padding_mask: optional `[batch, length]`, True at real tokens. When
            omitted, the Keras mask of `inputs` is used.

    `call` returns the outputs; `call_with_attention_scores` returns
    `(outputs, self-attention weights [batch, heads, length, length])`.

    Example:
        >>> import numpy as np
        >>> block = TransformerEncoderBlock(d_model=8, num_heads=2, d_ff=16)
        >>> tuple(block(np.zeros((2, 5, 8), "float32")).shape)
        (2, 5, 8)
    """

    def build(self, inputs_shape):
        check_last_dim(self, "inputs", inputs_shape, self.d_model)
        self.self_attention = self._attention("self_attention", inputs_shape)
        self.self_attention_dropout, self.self_attention_norm = self._dropout_and_norm(
            "self_attention", inputs_shape
        )
        self.feed_forward = self._feed_forward(inputs_shape)
        self.feed_forward_dropout, self.feed_forward_norm = self._dropout_and_norm(
            "feed_forward", inputs_shape
        )
        self.built = True

    def call(self, inputs, padding_mask=None, training=None, mask=None):
        padding_mask = mask if padding_mask is None else padding_mask
        x, _ = self._forward(inputs, padding_mask, training)
        return x

    def call_with_attention_scores(self, inputs, padding_mask=None, training=None):
        """`call` that also returns the self-attention weights: `(outputs, weights)`."""
        return self._forward(inputs, padding_mask, training)

    def _forward(self, inputs, padding_mask, training):
        attention_mask = compute_attention_mask(
            inputs, inputs, query_padding_mask=padding_mask, key_padding_mask=padding_mask
        )

        # Multi-head self-attention, residual, LayerNorm.
        x, weights = self._residual(
            inputs,
            lambda x: self.self_attention.call_with_attention_scores(
                x, attention_mask=attention_mask, training=training
            ),
            self.self_attention_dropout,
            self.self_attention_norm,
            training,
        )
        # Position-wise feed-forward, residual, LayerNorm.
        x = self._residual(
            x, self.feed_forward, self.feed_forward_dropout, self.feed_forward_norm, training
        )
        return x, weights

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)
