"""TF Serving warm-up requests: `assets.extra/tf_serving_warmup_requests` in the export.

TF Serving replays the records of this file when it loads a version, before
it marks the version available, so the first client does not pay for the
runtime's first-run work (kernel creation, Grappler's passes, and with XLA
one compilation per source bucket). The file is a TFRecord file of
`tensorflow.serving.PredictionLog` protos, each holding a `predict_log`
whose `request` is a `PredictRequest` of the `serving_default` signature.

Why a hand encoder: those protos ship with `tensorflow-serving-api`, not with
the tensorflow wheel, and the export must not need that package (it is a
test dependency only). The four wrapper messages are small and stable
(TF Serving's `apis/*.proto`), so `_prediction_log` writes their few fields
with the protobuf wire format itself; the `TensorProto` inside is
TensorFlow's own (`tf.make_tensor_proto`). tests/serving/test_warmup.py
parses the file with `tensorflow_serving.apis.prediction_log_pb2`.
"""

import os

import tensorflow as tf

# Where TF Serving looks for the file, relative to the SavedModel folder.
WARMUP_DIRNAME = "assets.extra"
WARMUP_FILENAME = "tf_serving_warmup_requests"
# One request per source bucket, for the shortest buckets: most requests fall in them.
WARMUP_BUCKETS = 3
# The words the warm-up sentences are made of; any tokenizer splits them into pieces.
WARMUP_WORDS = (
    "the quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat "
    "and five boxing wizards jump quickly at dawn"
).split()

# Field numbers of TF Serving's protos (tensorflow_serving/apis/*.proto).
_PREDICTION_LOG_PREDICT_LOG = 6  # PredictionLog.predict_log
_PREDICT_LOG_REQUEST = 1  # PredictLog.request
_REQUEST_MODEL_SPEC = 1  # PredictRequest.model_spec
_REQUEST_INPUTS = 2  # PredictRequest.inputs: map<string, TensorProto>
_MODEL_SPEC_NAME = 1  # ModelSpec.name
_MODEL_SPEC_SIGNATURE_NAME = 3  # ModelSpec.signature_name
_MAP_KEY, _MAP_VALUE = 1, 2  # a map entry is a message {key = 1; value = 2}
_LENGTH_DELIMITED = 2  # the wire type of strings, bytes and messages


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number, payload):
    """One length-delimited field: key, length, bytes."""
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(payload)) + payload


def _prediction_log(model_name, signature_name, inputs):
    """A serialized `PredictionLog{predict_log{request{model_spec, inputs}}}`.

    Args:
        model_name: `ModelSpec.name` (TF Serving's warm-up does not check it).
        signature_name: `ModelSpec.signature_name`.
        inputs: `{name: tensorflow TensorProto}`.
    """
    model_spec = _field(_MODEL_SPEC_NAME, model_name) if model_name else b""
    model_spec += _field(_MODEL_SPEC_SIGNATURE_NAME, signature_name)
    request = _field(_REQUEST_MODEL_SPEC, model_spec)
    for name, tensor in sorted(inputs.items()):
        entry = _field(_MAP_KEY, name) + _field(_MAP_VALUE, tensor.SerializeToString())
        request += _field(_REQUEST_INPUTS, entry)
    return _field(_PREDICTION_LOG_PREDICT_LOG, _field(_PREDICT_LOG_REQUEST, request))


def warmup_texts(preprocessor, buckets, max_source_length, count=WARMUP_BUCKETS):
    """Sentences whose lengths fall in the first `count` source buckets, one per bucket.

    Each takes about the middle of its bucket's range in subword pieces, as
    `preprocessor` tokenizes it (at most `max_source_length - 1` pieces).

    Args:
        preprocessor: the export's `Seq2SeqPreprocessor`.
        buckets: the model's source buckets, ascending.
        max_source_length: the export's longest encoder input, END included.
        count: how many buckets to cover. Defaults to `WARMUP_BUCKETS`.

    Returns:
        A list of str, shortest first.
    """
    targets, previous = [], 0
    for bucket in buckets:
        if len(targets) == count or previous >= max_source_length:
            break
        # END takes one position of the bucket: pieces + 1 in (previous, bucket].
        targets.append(max(1, min((previous + bucket) // 2, max_source_length - 1)))
        previous = bucket
    longest = 2 * max(targets) + len(WARMUP_WORDS)
    words = [WARMUP_WORDS[i % len(WARMUP_WORDS)] for i in range(longest)]
    candidates = [" ".join(words[:n]) for n in range(1, longest + 1)]
    lengths = preprocessor.source_ids(tf.constant(candidates)).row_lengths().numpy()
    texts = []
    for target in sorted(set(targets)):
        # The shortest candidate with at least `target` pieces (else the longest).
        index = next((i for i, n in enumerate(lengths) if n >= target), len(candidates) - 1)
        texts.append(candidates[index])
    return texts


def write_warmup_requests(export_dir, texts, signature_name, input_name, model_name=""):
    """Write one `PredictionLog` per text, a batch of one, to `<export_dir>/assets.extra/`.

    Args:
        export_dir: the SavedModel folder.
        texts: the sources to replay, one request each.
        signature_name: the signature the requests call.
        input_name: its string input.
        model_name: `ModelSpec.name`. Defaults to "".

    Returns:
        The file written.
    """
    directory = os.path.join(export_dir, WARMUP_DIRNAME)
    tf.io.gfile.makedirs(directory)
    path = os.path.join(directory, WARMUP_FILENAME)
    with tf.io.TFRecordWriter(path) as writer:
        for text in texts:
            tensor = tf.make_tensor_proto([text], dtype=tf.string, shape=[1])
            writer.write(_prediction_log(model_name, signature_name, {input_name: tensor}))
    return path
