"""The backbone (no head), the Transformer (backbone + output head), the translator task, the configuration and presets."""

from keras_tf.models.config import (
    END_ID,
    PAD_ID,
    PRESETS,
    RESERVED_TOKENS,
    START_ID,
    UNK_ID,
    TransformerConfig,
    get_preset,
)
from keras_tf.models.seq2seq_backbone import Seq2SeqBackbone
from keras_tf.models.seq2seq_transformer import Seq2SeqTransformer
from keras_tf.models.seq2seq_translator import Seq2SeqTranslator
from keras_tf.models.config import list_presets  # noqa: F401  (untrained architectures, described)

__all__ = [
    "END_ID",
    "PAD_ID",
    "PRESETS",
    "RESERVED_TOKENS",
    "START_ID",
    "UNK_ID",
    "Seq2SeqBackbone",
    "Seq2SeqTransformer",
    "Seq2SeqTranslator",
    "TransformerConfig",
    "get_preset",
]
