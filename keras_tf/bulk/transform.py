"""`TranslateLines`: keyed lines of bytes in, keyed translations or rejects out, in any pipeline."""

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
from apache_beam.transforms.window import GlobalWindows

from keras_tf.bulk.batches import batch_slices
from keras_tf.bulk.handler import METRICS_NAMESPACE, TranslationModelHandler

# Lines a batching worker holds and sorts by length before cutting batches:
# batches of similar lengths pad less (the export pads each batch to the
# source bucket of its longest line).
SORT_WINDOW_BATCHES = 16


def decode_line(line):
    """`(text, None)` for UTF-8 bytes, `(None, reason)` otherwise.

    Example:
        >>> decode_line(b"caf\\xc3\\xa9"), decode_line(b"caf\\xe9")[1]
        (('café', None), 'not UTF-8: byte 0xe9 at byte offset 3')
    """
    try:
        return line.decode("utf-8"), None
    except UnicodeDecodeError as error:
        return None, f"not UTF-8: byte 0x{line[error.start]:02x} at byte offset {error.start}"


class _DecodeLines(beam.DoFn):
    """(key, bytes) -> main: (key, text) to translate; `done`: (key, result) settled already."""

    DONE = "done"

    def __init__(self):
        self._lines = Metrics.counter(METRICS_NAMESPACE, "lines")
        self._rejected = Metrics.counter(METRICS_NAMESPACE, "rejected_lines")

    def process(self, element):
        key, line = element
        self._lines.inc()
        text, reject = decode_line(line)
        if reject:
            self._rejected.inc()
            yield beam.pvalue.TaggedOutput(self.DONE, (key, (None, None, reject)))
        elif not text.strip():  # nothing to translate: the export gives "" too
            yield beam.pvalue.TaggedOutput(self.DONE, (key, (text, "", None)))
        else:
            yield key, text


class _BatchByLength(beam.DoFn):
    """(key, text) -> lists of them, at most N lines and C characters, lines of similar lengths.

    Holds at most `SORT_WINDOW_BATCHES * max_batch_size` lines at a time.
    """

    def __init__(self, max_batch_size, max_batch_chars):
        self._max_lines = max_batch_size
        self._max_chars = max_batch_chars

    def start_bundle(self):
        self._held = []

    def process(self, element):
        self._held.append(element)
        if len(self._held) >= SORT_WINDOW_BATCHES * self._max_lines:
            yield from self._batches()

    def finish_bundle(self):
        for batch in self._batches():
            yield GlobalWindows.windowed_value(batch)

    def _batches(self):
        held = sorted(self._held, key=lambda item: len(item[1]))
        self._held = []
        for start, stop in batch_slices([len(text) for _, text in held], self._max_lines,
                                        self._max_chars):
            yield held[start:stop]


class _Settle(beam.DoFn):
    """(key, PredictionResult) -> (key, (source, translation, reject))."""

    def __init__(self):
        self._rejected = Metrics.counter(METRICS_NAMESPACE, "rejected_lines")
        self._translated = Metrics.counter(METRICS_NAMESPACE, "translated_lines")

    def process(self, element):
        key, prediction = element
        translation, reject = prediction.inference
        if reject:
            self._rejected.inc()
        else:
            self._translated.inc()
        yield key, (prediction.example, translation, reject)


class TranslateLines(beam.PTransform):
    """Translate keyed lines of bytes with a keras_tf export: `(key, line)` -> `(key, result)`.

    `result` is a tuple `(source, translation, reject)`: the line decoded
    (None where it is not UTF-8), its translation (None where rejected)
    and the reason it was rejected (None where translated). A line is
    rejected when it is not UTF-8, holds more subword pieces than the
    export's max_source_length allows, or fails alone after its batch
    failed; a blank line translates to "" without reaching the model.
    Nothing is dropped: every key in gives one key out, in no order (key
    by (file, line number) to put lines back in place).

    Lines are batched in each worker by `TranslationModelHandler`'s bounds,
    sorted by length within a window of `SORT_WINDOW_BATCHES` batches. The
    batches a bundle leaves at its end go to the global window: a transform
    for batch pipelines (bounded inputs in the global window), as bulk jobs are.

    Args:
        handler: a `TranslationModelHandler`.

    Example (docs/bulk.md runs the same in tests/bulk):
        import apache_beam as beam
        from apache_beam.options.pipeline_options import PipelineOptions
        handler = TranslationModelHandler("models/translator/1")
        with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as pipeline:
            _ = (pipeline | beam.Create([(("a.txt", 1), b"Save the file")])
                 | TranslateLines(handler) | beam.Map(print))
    """

    def __init__(self, handler):
        super().__init__()
        if not isinstance(handler, TranslationModelHandler):
            raise TypeError(
                f"handler must be a TranslationModelHandler; received {type(handler).__name__}"
            )
        self.handler = handler

    def expand(self, lines):
        decoded = lines | "Decode" >> beam.ParDo(_DecodeLines()).with_outputs(
            _DecodeLines.DONE, main="to_translate"
        )
        translated = (
            decoded.to_translate
            | "Batch" >> beam.ParDo(_BatchByLength(self.handler.max_batch_size,
                                                   self.handler.max_batch_chars))
            | "Translate" >> RunInference(KeyedModelHandler(self.handler).with_no_batching())
            | "Settle" >> beam.ParDo(_Settle())
        )
        return (translated, decoded[_DecodeLines.DONE]) | "Merge" >> beam.Flatten()
