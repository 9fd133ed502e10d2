"""Serving: a string-in, string-out SavedModel for TF Serving.

    from keras_tf import serving
    path = serving.export(model, tokenizers, "models/translator")  # models/translator/1

`Seq2SeqTranslator.export` calls it with the translator's own parts, and
`Seq2SeqTranslator.generate` gives the strings the export gives.

docs/serving.md shows how to serve, query and reload the export.
"""

from keras_tf.tensorflow_import import require_tensorflow

require_tensorflow("keras_tf.serving (the SavedModel export)")

from keras_tf.serving.export import (
    CONFIG_FILENAME,
    METHODS,
    OVERLONG_OUTPUT,
    SCORE_OUTPUT,
    SOURCE_IDS_INPUT,
    TARGET_IDS_OUTPUT,
    TEXT_INPUT,
    TEXT_SIGNATURE,
    TOKENS_SIGNATURE,
    TRANSLATION_OUTPUT,
    export,
    loop_body_ops,
    read_export_config,
    saved_model_op_counts,
    saved_model_ops,
)

__all__ = [
    "CONFIG_FILENAME",
    "METHODS",
    "OVERLONG_OUTPUT",
    "SCORE_OUTPUT",
    "SOURCE_IDS_INPUT",
    "TARGET_IDS_OUTPUT",
    "TEXT_INPUT",
    "TEXT_SIGNATURE",
    "TOKENS_SIGNATURE",
    "TRANSLATION_OUTPUT",
    "export",
    "loop_body_ops",
    "read_export_config",
    "saved_model_op_counts",
    "saved_model_ops",
]
