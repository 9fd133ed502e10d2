"""The backbone (no head), the Transformer (backbone + output head), its loss and metric, the configuration and presets.

The translator task is `keras_tf.translation.Seq2SeqTranslator`.
"""

import warnings

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
from keras_tf.models.losses import MaskedSparseCategoricalCrossentropy
from keras_tf.models.metrics import MaskedTokenAccuracy
from keras_tf.models.seq2seq_backbone import Seq2SeqBackbone
from keras_tf.models.seq2seq_transformer import Seq2SeqTransformer
from keras_tf.models.config import list_presets  # noqa: F401  (untrained architectures, described)

# Names that moved up to keras_tf.translation: kept for one release.
_MOVED = {"Seq2SeqTranslator": "keras_tf.translation"}


def __getattr__(name):
    if name in _MOVED:
        warnings.warn(
            f"keras_tf.models.{name} is deprecated; import it from {_MOVED[name]} "
            "(docs/migration.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        # The one upward import of this floor's face, for one release: listed
        # in tests/test_layering.py's allow-list, marked for removal.
        from keras_tf import translation

        return getattr(translation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "END_ID",
    "PAD_ID",
    "PRESETS",
    "RESERVED_TOKENS",
    "START_ID",
    "UNK_ID",
    "MaskedSparseCategoricalCrossentropy",
    "MaskedTokenAccuracy",
    "Seq2SeqBackbone",
    "Seq2SeqTransformer",
    "TransformerConfig",
    "get_preset",
    "list_presets",
]
