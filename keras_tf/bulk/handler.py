"""A Beam `ModelHandler` over a keras_tf export: strings in, their translations out.

Beam's own `TFModelHandlerTensor` cannot load the export (it loads with
`tf.keras.models.load_model`, which Keras 3 refuses for a SavedModel:
apache/beam#30616), so this handler loads it with `tf.saved_model.load`
after `import tensorflow_text` (the tokenizers' ops) and calls its
`serving_default` signature on a batch of strings.
"""

import time

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizers' ops: SentencepieceOp)
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from keras_tf.bulk.batches import batch_slices
from keras_tf.serving.export import (
    OVERLONG_OUTPUT,
    TEXT_INPUT,
    TEXT_SIGNATURE,
    TRANSLATION_OUTPUT,
    read_export_config,
)

# Where the handler's and TranslateLines' counters show in a runner's metrics.
METRICS_NAMESPACE = "keras_tf.bulk"


class LoadedExport:
    """An export loaded in a worker process, used only through its methods.

    With `large_model=True` or `model_copies`, Beam shares one copy per
    machine between its worker processes behind a proxy that passes only
    method calls (an attribute such as `.signatures` does not pass), so the
    signature is kept behind `translate`.
    """

    def __init__(self, export_dir):
        self._config = read_export_config(export_dir)
        self._signature = tf.saved_model.load(export_dir).signatures[TEXT_SIGNATURE]

    def max_source_length(self):
        """The export's max_source_length, in subword pieces with END."""
        return self._config["max_source_length"]

    def translate(self, texts):
        """`(translations, overlong)` for a list of str: lists of str and of bool, in order.

        `overlong[i]` is True where text i held more pieces than
        max_source_length allows (the export translated its first pieces).
        An `xla=True` export compiles a program per batch size (and source
        bucket), so its batches are padded with empty lines to a power of
        two: a handful of programs however the lines were batched.
        """
        count = len(texts)
        if self._config["xla"]:
            texts = list(texts) + [""] * ((1 << (count - 1).bit_length()) - count)
        outputs = self._signature(**{TEXT_INPUT: tf.constant(texts, tf.string)})
        translations = [t.decode("utf-8") for t in outputs[TRANSLATION_OUTPUT].numpy().tolist()]
        return translations[:count], outputs[OVERLONG_OUTPUT].numpy().tolist()[:count]


class TranslationModelHandler(ModelHandler):
    """Translate strings with a keras_tf export inside Beam's `RunInference`.

    Each prediction's `inference` is a pair `(translation, reject)`: the
    translated str and None, or None and the reason the line was not
    translated. A line is rejected when it holds more subword pieces than
    the export's max_source_length allows ("overlong": the export would
    translate its first pieces only), or when the model fails on it: a
    batch that raises is retried line by line, and only the lines that
    still fail are rejected, with the error.

    Batches reaching the model hold at most `max_batch_size` lines and
    `max_batch_chars` characters (a longer batch is cut; one line longer
    than `max_batch_chars` goes alone). Under plain `RunInference`,
    `batch_elements_kwargs` bounds the count; `TranslateLines` batches by
    both bounds itself, sorting lines by length first.

    Args:
        export_dir: the export's version folder (`<base>/<version>`): a
            local path or any `tf.io.gfile` URI, e.g. `gs://bucket/models/fr-en/1`.
        max_batch_size: lines per batch. Defaults to 64.
        max_batch_chars: characters per batch. Defaults to 16384.
        large_model: one copy of the model per machine, shared by its
            worker processes, instead of one per process. Defaults to False.
        model_copies: how many copies per machine (implies sharing).
            Defaults to None: one per worker process, or one per machine
            with `large_model`.

    Example (docs/bulk.md runs TranslateLines over it in tests/bulk):
        import apache_beam as beam
        from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
        handler = TranslationModelHandler("models/translator/1")
        with beam.Pipeline() as pipeline:
            _ = (pipeline | beam.Create([("a", "Save the file")])
                 | RunInference(KeyedModelHandler(handler)) | beam.Map(print))
    """

    def __init__(self, export_dir, *, max_batch_size=64, max_batch_chars=16384,
                 large_model=False, model_copies=None):
        if max_batch_size < 1 or max_batch_chars < 1:
            raise ValueError(
                "max_batch_size and max_batch_chars must be >= 1; received "
                f"max_batch_size={max_batch_size}, max_batch_chars={max_batch_chars}"
            )
        super().__init__(max_batch_size=max_batch_size, large_model=large_model,
                         model_copies=model_copies)
        self.export_dir = str(export_dir)
        self.max_batch_size = max_batch_size
        self.max_batch_chars = max_batch_chars
        self._lines = Metrics.counter(METRICS_NAMESPACE, "model_lines")
        self._batches = Metrics.counter(METRICS_NAMESPACE, "model_batches")
        self._failed_batches = Metrics.counter(METRICS_NAMESPACE, "failed_batches")
        self._batch_lines = Metrics.distribution(METRICS_NAMESPACE, "batch_lines")
        self._batch_ms = Metrics.distribution(METRICS_NAMESPACE, "batch_translation_ms")

    def load_model(self):
        return LoadedExport(self.export_dir)

    def run_inference(self, batch, model, inference_args=None):
        texts = list(batch)
        limit = None
        results = []
        for start, stop in batch_slices([len(t) for t in texts], self.max_batch_size,
                                        self.max_batch_chars):
            part = texts[start:stop]
            started = time.perf_counter()
            try:
                outcomes = self._translate(model, part)
            except Exception as error:  # noqa: BLE001  a failed batch is retried line by line
                self._failed_batches.inc()
                outcomes = [self._translate_alone(model, text, error) for text in part]
            self._batches.inc()
            self._lines.inc(len(part))
            self._batch_lines.update(len(part))
            self._batch_ms.update(int(1000 * (time.perf_counter() - started)))
            for text, (translation, overlong, failure) in zip(part, outcomes):
                if overlong:
                    limit = limit or model.max_source_length()
                    reject = (f"overlong: more than {limit - 1} subword pieces "
                              f"(the export's max_source_length is {limit})")
                    results.append(PredictionResult(text, (None, reject)))
                elif failure:
                    results.append(PredictionResult(text, (None, failure)))
                else:
                    results.append(PredictionResult(text, (translation, None)))
        return results

    @staticmethod
    def _translate(model, texts):
        translations, overlong = model.translate(texts)
        return [(t, o, None) for t, o in zip(translations, overlong)]

    def _translate_alone(self, model, text, batch_error):
        try:
            return self._translate(model, [text])[0]
        except Exception as error:  # noqa: BLE001  the line's own failure, kept in the rejects
            message = " ".join(f"{type(error).__name__}: {error}".split())[:300]
            return None, False, f"failed: {message} (its batch failed: {type(batch_error).__name__})"

    def get_num_bytes(self, batch):
        # RunInference's byte counter; Beam's default pickles the batch to count it.
        return sum(len(text.encode("utf-8")) for text in batch)

    def get_metrics_namespace(self):
        return METRICS_NAMESPACE
