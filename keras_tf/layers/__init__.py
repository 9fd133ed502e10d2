"""The Transformer's building blocks as Keras layers."""

from keras_tf.layers.dropout import Dropout
from keras_tf.layers.feed_forward import FeedForward
from keras_tf.layers.masks import compute_attention_mask, compute_causal_mask
from keras_tf.layers.multi_head_attention import MultiHeadAttention, masked_softmax
from keras_tf.layers.positional_embedding import PositionalEmbedding, sinusoidal_encoding
from keras_tf.layers.transformer_decoder_block import TransformerDecoderBlock
from keras_tf.layers.transformer_encoder_block import TransformerEncoderBlock

__all__ = [
    "Dropout",
    "FeedForward",
    "MultiHeadAttention",
    "PositionalEmbedding",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
    "compute_attention_mask",
    "compute_causal_mask",
    "masked_softmax",
    "sinusoidal_encoding",
]
