"""What the encoder and decoder blocks share: hyper-parameters, sub-layer factories, config."""

import keras

from keras_tf.layers.dropout import Dropout
from keras_tf.layers.feed_forward import FeedForward
from keras_tf.layers.multi_head_attention import MultiHeadAttention
from keras_tf.layers.validation import clone_initializer


class TransformerBlockBase(keras.layers.Layer):
    """Base of `TransformerEncoderBlock` and `TransformerDecoderBlock`.

    Holds the constructor arguments (each under its own name, each in
    `get_config`) and builds the sub-layers each block is made of: attention,
    the position-wise feed-forward network, and the dropout + LayerNorm pair
    that wraps every sub-layer.
    """

    def __init__(
        self,
        d_model,
        num_heads,
        d_ff,
        dropout=0.1,
        attention_dropout=0.0,
        activation="relu",
        norm_first=False,
        layer_norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if d_model % num_heads:
            raise ValueError(
                "num_heads must divide d_model; received "
                f"d_model={d_model}, num_heads={num_heads}"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = activation
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def _attention(self, name, query_shape, value_shape=None):
        layer = MultiHeadAttention(
            self.num_heads,
            self.d_model,
            dropout=self.attention_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        layer.build(query_shape, value_shape)
        return layer

    def _feed_forward(self, inputs_shape):
        layer = FeedForward(
            self.d_model,
            self.d_ff,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="feed_forward",
        )
        layer.build(inputs_shape)
        return layer

    def _dropout_and_norm(self, name, inputs_shape):
        """The dropout and LayerNorm around the sub-layer called `name`."""
        dropout = Dropout(
            self.dropout, dtype=self.dtype_policy, name=f"{name}_dropout"
        )
        norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=f"{name}_norm"
        )
        norm.build(inputs_shape)
        return dropout, norm

    def _residual(self, x, sublayer, dropout, norm, training=None):
        """One sub-layer with its residual connection and LayerNorm.

        Post-norm (the paper): LayerNorm(x + Dropout(Sublayer(x))).
        Pre-norm: x + Dropout(Sublayer(LayerNorm(x))).
        `sublayer` may return a tuple `(output, *extras)` (a cache, attention
        weights); the extras are passed through after the new `x`.
        """
        residual = x
        if self.norm_first:
            x = norm(x)
        outputs = sublayer(x)
        x, extras = (outputs[0], outputs[1:]) if isinstance(outputs, tuple) else (outputs, ())
        x = dropout(x, training=training) + residual
        if not self.norm_first:
            x = norm(x)
        return (x, *extras) if extras else x

    def compute_mask(self, inputs, mask=None, **kwargs):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation": self.activation,
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
