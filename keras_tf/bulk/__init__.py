"""Bulk translation on Apache Beam: a keras_tf export over millions of lines, locally or on a cluster.

    from keras_tf.bulk import TranslateLines, TranslationModelHandler
    translations = keyed_lines | TranslateLines(TranslationModelHandler("gs://bucket/fr-en/1"))

* `TranslationModelHandler`: a `ModelHandler` for Beam's `RunInference`
  over a string-in, string-out export (`keras_tf.serving.export`);
* `TranslateLines`: `(key, line bytes)` in, `(key, (source, translation,
  reject))` out, for a pipeline of your own;
* `translate_files`: what `keras-tf translate-bulk` runs: every input file
  translated line for line, in order, with a rejects file.

Needs the `beam` extra (`pip install "keras-tf[beam]"`); `import keras_tf`
and the `keras-tf` command line import Beam only when this package is used.
docs/bulk.md shows local runs, Dataflow, Flink and Spark.
"""

from keras_tf.bulk.batches import batch_slices
from keras_tf.bulk.files import (
    PAIR_ORDERS,
    REJECTS_FILENAME,
    BulkOptions,
    Summary,
    translate_files,
)
from keras_tf.bulk.handler import METRICS_NAMESPACE, LoadedExport, TranslationModelHandler
from keras_tf.bulk.transform import TranslateLines, decode_line

__all__ = [
    "METRICS_NAMESPACE",
    "PAIR_ORDERS",
    "REJECTS_FILENAME",
    "BulkOptions",
    "LoadedExport",
    "Summary",
    "TranslateLines",
    "TranslationModelHandler",
    "batch_slices",
    "decode_line",
    "translate_files",
]
