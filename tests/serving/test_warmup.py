"""TF Serving's warm-up file: `PredictionLog` records that the loaded SavedModel answers."""

import os

import pytest
import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from keras_tf.buckets import source_bucket
from keras_tf.serving.export import export, read_export_config
from keras_tf.serving.warmup import (
    WARMUP_BUCKETS,
    WARMUP_DIRNAME,
    WARMUP_FILENAME,
    _prediction_log,
)
from tests.serving.conftest import MAX_SOURCE_LENGTH, MODEL_NAME


def warmup_logs(export_dir):
    path = os.path.join(export_dir, WARMUP_DIRNAME, WARMUP_FILENAME)
    return [
        prediction_log_pb2.PredictionLog.FromString(record)
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator()
    ]


def test_warmup_records_parse_and_replay_through_the_loaded_savedmodel(greedy_export):
    logs = warmup_logs(greedy_export.export_dir)
    assert read_export_config(greedy_export.export_dir)["warmup"] is True
    texts = []
    for log in logs:
        assert log.WhichOneof("log_type") == "predict_log"
        request = log.predict_log.request
        assert request.model_spec.signature_name == "serving_default"
        assert request.model_spec.name == MODEL_NAME
        assert list(request.inputs) == ["text"]
        texts.extend(t.decode() for t in tf.make_ndarray(request.inputs["text"]).tolist())

    # One sentence per short source bucket (MAX_SOURCE_LENGTH 32: buckets 16 and 32).
    tokenizers = greedy_export.tokenizers
    lengths = tokenizers.tokenize_source(tf.constant(texts)).row_lengths().numpy() + 1  # END
    buckets = [source_bucket(n, MAX_SOURCE_LENGTH) for n in lengths]
    assert buckets == [16, 32] and len(logs) <= WARMUP_BUCKETS

    # Replayed as TF Serving does at load: each request through serving_default.
    signature = tf.saved_model.load(greedy_export.export_dir).signatures["serving_default"]
    replies = []
    for log in logs:
        inputs = {
            name: tf.constant(tf.make_ndarray(tensor))
            for name, tensor in log.predict_log.request.inputs.items()
        }
        replies.extend(t.decode() for t in signature(**inputs)["translation"].numpy())
    assert replies == greedy_export.translator.generate(texts)


def test_the_hand_encoder_writes_tensorflow_servings_bytes():
    tensor = tf.make_tensor_proto(["open the file", "café"], dtype=tf.string, shape=[2])
    log = prediction_log_pb2.PredictionLog()
    request = log.predict_log.request
    request.model_spec.name = "translator"
    request.model_spec.signature_name = "serving_default"
    request.inputs["text"].CopyFrom(tensor)
    expected = log.SerializeToString(deterministic=True)
    assert _prediction_log("translator", "serving_default", {"text": tensor}) == expected


def test_warmup_must_be_a_bool(greedy_export):
    with pytest.raises(TypeError, match="warmup must be True or False; received warmup='yes'"):
        export(greedy_export.model, greedy_export.tokenizers, "unused", warmup="yes")
