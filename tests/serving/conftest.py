"""One small model, its tokenizers and its exports, built once and shared by the serving tests.

The model is transformer_tiny with one encoder and one decoder block, random
weights and an untied output projection (a random tied model mostly repeats
one token): the tests check that the export gives exactly the in-process
strings, not good ones. Depth checks nothing here (the cache of two blocks is
the decoding tests'), and each export traces every block of its programs.
"""

import base64
import json
import os
import subprocess
import sys

import keras_tf  # noqa: F401  (tests/conftest.py keeps TensorFlow's start-up lines off stderr)
import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

from keras_tf.decoding import DecodingConfig, generate
from keras_tf.models import Seq2SeqTransformer
from keras_tf.serving import export
from keras_tf.text import Seq2SeqPreprocessor, Seq2SeqTokenizers
from keras_tf.translation import Seq2SeqTranslator
from tests.helpers import build_once, one_block_tiny, shared_folder

MAX_LENGTH = 12
MAX_SOURCE_LENGTH = 32
MODEL_NAME = "translator"
SERVING_PROCESS = os.path.join(os.path.dirname(__file__), "serving_process.py")

WORDS = (
    "open save close file tab notebook kernel cell run stop copy paste delete rename "
    "export import view edit help search settings terminal console theme "
    "fichier onglet noyau cellule café crème über straße"
).split()


def sentences(count, seed):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(1, 8))) for _ in range(count)]


def train_tokenizers(kind):
    sources = sentences(500, seed=0)
    targets = [" ".join(reversed(s.split())) for s in sources]
    return Seq2SeqTokenizers.train(sources, targets, kind=kind, vocabulary_size=64)


def random_model(tokenizers, seed, tie_embeddings=False):
    keras.utils.set_random_seed(seed)
    config = one_block_tiny(
        source_vocabulary_size=tokenizers.source_vocabulary_size,
        target_vocabulary_size=tokenizers.target_vocabulary_size,
        max_source_length=MAX_SOURCE_LENGTH,
        max_target_length=MAX_SOURCE_LENGTH,
        tie_embeddings=tie_embeddings,
    )
    return Seq2SeqTransformer(config)


class Exported:
    """A model, its tokenizers, the in-process translator and the export of the same settings."""

    def __init__(self, tmp_path_factory, name, kind, seed, xla=False, quantize=None,
                 tie_embeddings=False, **settings):
        settings = dict(max_length=MAX_LENGTH, **settings)

        def build(folder):
            tokenizers = train_tokenizers(kind)
            model = random_model(tokenizers, seed, tie_embeddings)
            tokenizers.save(folder / "tokenizers")
            model.save_weights(folder / "model.weights.h5")  # float32, quantized on loading
            if quantize:
                model.quantize(quantize)
            export(model, tokenizers, folder / MODEL_NAME, xla=xla, **settings)

        folder = build_once(shared_folder(tmp_path_factory, name), build)
        self.tokenizers = Seq2SeqTokenizers.load(folder / "tokenizers")
        self.model = random_model(self.tokenizers, seed, tie_embeddings)
        self.model.load_weights(folder / "model.weights.h5")
        if quantize:
            self.model.quantize(quantize)
        preprocessor = Seq2SeqPreprocessor(self.tokenizers, MAX_SOURCE_LENGTH, MAX_SOURCE_LENGTH)
        self.translator = Seq2SeqTranslator(
            self.model, preprocessor, DecodingConfig(**settings)
        )
        self.model_base_path = str(folder / MODEL_NAME)
        self.export_dir = os.path.join(self.model_base_path, "1")


def translate_tokens(translator, source_ids):
    """What the export's `translate_tokens` signature gives, in process: `(target_ids, scores)`.

    Client ids (no END, padded with 0) framed by the translator's
    preprocessor, decoded by `keras_tf.decoding.generate`; an empty source
    gets no tokens and score 0.
    """
    ragged = translator.preprocessor.ids_to_source_ids(np.asarray(source_ids))
    settings = translator.resolve_decoding()
    tokens = translator.preprocessor.encoder_tokens(ragged, settings.max_source_length).numpy()
    out = generate(translator.backbone, tokens, decoding=settings)
    empty = ragged.row_lengths().numpy() == 0
    return np.where(empty[:, None], 0, out.tokens), np.where(empty, 0.0, out.scores)


@pytest.fixture(scope="session")
def greedy_export(tmp_path_factory):
    """SentencePiece, greedy, no XLA: the default export."""
    return Exported(tmp_path_factory, "greedy", "sentencepiece", seed=3)


@pytest.fixture(scope="session")
def beam_export(tmp_path_factory):
    """WordPiece, beam search of 3."""
    return Exported(tmp_path_factory, "beam", "wordpiece", seed=4, method="beam", beam_size=3)


@pytest.fixture(scope="session")
def xla_export(tmp_path_factory):
    """SentencePiece, greedy, generation compiled with XLA."""
    return Exported(tmp_path_factory, "xla", "sentencepiece", seed=3, xla=True)


@pytest.fixture(scope="session")
def int8_export(tmp_path_factory):
    """`greedy_export`'s model (same seed and tokenizers) with int8 weights."""
    return Exported(tmp_path_factory, "int8", "sentencepiece", seed=3, quantize="int8")


@pytest.fixture(scope="session")
def tied_int8_export(tmp_path_factory):
    """int8 weights, the output layer tied to the target embedding table (int8 rows too)."""
    return Exported(tmp_path_factory, "tied_int8", "sentencepiece", seed=3, quantize="int8",
                    tie_embeddings=True)


def text_request(texts, signature_name="serving_default"):
    """A TF Serving PredictRequest for the text signature, as docs/serving.md builds it."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = MODEL_NAME
    request.model_spec.signature_name = signature_name
    request.inputs["text"].CopyFrom(
        tf.make_tensor_proto(texts, dtype=tf.string, shape=[len(texts)])
    )
    return request


def tokens_request(source_ids):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = MODEL_NAME
    request.model_spec.signature_name = "translate_tokens"
    request.inputs["source_ids"].CopyFrom(tf.make_tensor_proto(np.asarray(source_ids, np.int32)))
    return request


def serving_process(folder, exports, requests):
    """Answer `requests` with `serving_process.py` in a fresh process; return its result dict.

    Args:
        folder: where the spec and result files go (also the working directory).
        exports: `{key: export_dir}`.
        requests: `[(request_id, export_key, PredictRequest, xla)]`.
    """
    spec = {
        "exports": exports,
        "requests": [
            {
                "id": request_id,
                "export": key,
                "request": base64.b64encode(request.SerializeToString()).decode(),
                "xla": xla,
            }
            for request_id, key, request, xla in requests
        ],
    }
    spec_path, result_path = folder / "spec.json", folder / "result.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    # Away from the repository and its PYTHONPATH; keras_tf stays importable (it is
    # installed), which makes "it was never imported" a real check.
    env.pop("PYTHONPATH", None)
    completed = subprocess.run(
        [sys.executable, SERVING_PROCESS, str(spec_path), str(result_path)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(result_path.read_text(encoding="utf-8"))


class Answers:
    """The result of `serving_process`: PredictResponses or errors, by request id."""

    def __init__(self, result):
        self.result = result

    def response(self, request_id):
        """The PredictResponse, or raise with the server's error."""
        answer = self.result["responses"][request_id]
        if not answer["ok"]:
            raise AssertionError(f"request {request_id!r} failed: {answer['error']}")
        return predict_pb2.PredictResponse.FromString(base64.b64decode(answer["response"]))

    def error(self, request_id):
        answer = self.result["responses"][request_id]
        return None if answer["ok"] else answer["error"]


def output(response, name):
    return tf.make_ndarray(response.outputs[name])


def strings(response, name="translation"):
    return [s.decode("utf-8") for s in output(response, name).tolist()]
