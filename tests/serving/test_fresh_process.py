"""The export runs as TF Serving runs it: a fresh process, no keras_tf, no XLA, Predict requests.

All requests go to one run of `serving_process.py` (a stand-in for the
model server's Predict handler, see its docstring); each test reads its
answers.
"""

import json

import numpy as np
import pytest

from keras_tf.serving.export import read_export_config
from tests.helpers import build_once, shared_folder
from tests.serving.conftest import (
    Answers,
    output,
    sentences,
    serving_process,
    strings,
    text_request,
    tokens_request,
    translate_tokens,
)

SINGLE = ["open the notebook file"]
BATCH_64 = sentences(64, seed=5)
ADVERSARIAL = {
    "empty": [""],
    "whitespace": ["  \t\n "],
    "10000_chars": [("save the file " * 715)[:10000]],
    "invalid_utf8": [b"caf\xc3 open \xff\xfe file \xed\xa0\x80 \xc0\xaf"],
    "nul_bytes": ["open\x00the\x00file", "\x00\x00"],
    "emoji": ["save 😀🎉 file 👩‍👩‍👧 🇫🇷"],
    "mixed_scripts": ["open 文件 файл ملف קובץ ファイル fichier"],
    "batch_0": [],
    "batch_256": sentences(256, seed=9),
}
# Every single-sentence case in one batch, to compare with the translator.
ADVERSARIAL_BATCH = [text for key, texts in ADVERSARIAL.items() if not key.startswith("batch")
                     for text in texts]


# What each export's tokenizers run: SentencePiece (greedy, xla), WordPiece (beam).
TF_TEXT_OPS = {
    "greedy": ["SentencepieceDetokenizeOp", "SentencepieceOp", "SentencepieceTokenizeOp"],
    "beam": [
        "FastWordpieceTokenizeWithOffsets",
        "NormalizeUTF8",
        "RegexSplitWithOffsets",
        "TFText>FastWordpieceDetokenize",
    ],
}


def source_ids_batch(tokenizers):
    """Client-side ids: normal rows, an empty row, an unknown id, a row over max_source_length."""
    rows = tokenizers.tokenize_source(sentences(3, seed=11)).to_list()
    rows += [[], [7, 9999, 8, -5], [int(i) for i in np.arange(40) % 56 + 4]]
    width = max(len(row) for row in rows)
    return np.array([row + [0] * (width - len(row)) for row in rows], np.int32)


@pytest.fixture(scope="module")
def session(greedy_export, beam_export, xla_export, int8_export, tied_int8_export,
            tmp_path_factory):
    exports = {
        "greedy": greedy_export.export_dir,
        "beam": beam_export.export_dir,
        "xla": xla_export.export_dir,
        "int8": int8_export.export_dir,
        "tied_int8": tied_int8_export.export_dir,
    }
    requests = [
        ("single", "greedy", text_request(SINGLE), False),
        ("batch_64", "greedy", text_request(BATCH_64), False),
        ("adversarial_batch", "greedy", text_request(ADVERSARIAL_BATCH), False),
        *((key, "greedy", text_request(texts), False) for key, texts in ADVERSARIAL.items()),
        ("tokens", "greedy", tokens_request(source_ids_batch(greedy_export.tokenizers)), False),
        ("beam", "beam", text_request(BATCH_64[:16]), False),
        ("xla_disabled", "xla", text_request(BATCH_64[:16]), False),
        ("xla_enabled", "xla", text_request(BATCH_64[:16]), True),
        ("int8", "int8", text_request(BATCH_64[:16]), False),
        ("tied_int8", "tied_int8", text_request(BATCH_64[:16]), False),
    ]

    def serve(folder):
        result = serving_process(folder, exports, requests)
        (folder / "answers.json").write_text(json.dumps(result), encoding="utf-8")

    folder = build_once(shared_folder(tmp_path_factory, "serving_process"), serve)
    return Answers(json.loads((folder / "answers.json").read_text(encoding="utf-8")))


# How far an int8 export's summed log-probability may move when one rounding of
# an input to int8 lands a step apart (see the int8 test).
INT8_ROUNDING = 0.05


def assert_same_translations(response, translator, texts, atol=1e-4):
    expected = translator.generate_with_scores(texts)
    assert strings(response) == expected.texts
    np.testing.assert_allclose(output(response, "score"), expected.scores, rtol=1e-4, atol=atol)


def test_serving_process_never_imports_keras_tf(session):
    # TensorFlow 2.21 itself imports parts of keras, so only these two are checked.
    assert "keras_tf" not in session.result["modules"]
    assert "keras_hub" not in session.result["modules"]
    assert "tensorflow_text" in session.result["modules"]


def test_same_strings_as_the_translator(session, greedy_export):
    assert_same_translations(session.response("single"), greedy_export.translator, SINGLE)
    assert_same_translations(session.response("batch_64"), greedy_export.translator, BATCH_64)
    assert all(strings(session.response("batch_64")))  # a random model, but no empty output


def test_beam_search_wordpiece_export_same_strings(session, beam_export):
    assert_same_translations(session.response("beam"), beam_export.translator, BATCH_64[:16])


def test_translate_tokens_same_ids_as_the_translator(session, greedy_export):
    source_ids = source_ids_batch(greedy_export.tokenizers)
    target_ids, scores = translate_tokens(greedy_export.translator, source_ids)
    response = session.response("tokens")
    np.testing.assert_array_equal(output(response, "target_ids"), target_ids)
    np.testing.assert_allclose(output(response, "score"), scores, rtol=1e-4, atol=1e-4)
    assert not output(response, "target_ids")[3].any()  # the empty row


def test_xla_export_fails_without_the_xla_flag_and_matches_with_it(session, xla_export):
    if not session.result["xla_switch"]:
        pytest.skip("this TensorFlow build does not export DisableXlaCompilation")
    assert "XLA compilation disabled" in session.error("xla_disabled")
    assert_same_translations(
        session.response("xla_enabled"), xla_export.translator, BATCH_64[:16]
    )


def test_default_exports_run_with_xla_disabled(session):
    # The default exports answered above with XLA compilation disabled, as in
    # a model server started without an XLA flag.
    assert session.result["xla_switch"]
    assert session.error("batch_64") is None and session.error("beam") is None


def test_int8_export_same_strings_as_the_int8_translator(session, int8_export, greedy_export):
    assert read_export_config(int8_export.export_dir)["quantization"] == "int8"
    assert read_export_config(greedy_export.export_dir)["quantization"] is None
    response = session.response("int8")
    # Keras's int8 Dense also rounds its inputs to int8, per token. The export
    # runs without XLA and the translator with it, so an input within 1e-7 of a
    # rounding edge can land one step apart: measured once, 0.015 on a summed
    # log-probability of -32, the 15 others within 1e-5. The strings are equal.
    assert_same_translations(response, int8_export.translator, BATCH_64[:16], atol=INT8_ROUNDING)
    # The float32 model of the same weights scores otherwise: the export holds int8 ones.
    float32 = greedy_export.translator.generate_with_scores(BATCH_64[:16]).scores
    assert np.abs(output(response, "score") - float32).max() > 2 * INT8_ROUNDING


def test_tied_int8_export_same_strings_as_its_translator(session, tied_int8_export):
    """The tied output layer's int8 table, cast and transposed once per request in the export."""
    assert tied_int8_export.model.output_projection is None
    assert_same_translations(session.response("tied_int8"), tied_int8_export.translator,
                             BATCH_64[:16], atol=INT8_ROUNDING)


@pytest.mark.parametrize("key", ["greedy", "beam", "xla", "int8"])
def test_every_op_is_tensorflow_or_tf_text(session, key):
    ops = session.result["ops"][key]
    assert ops["unregistered"] == []
    everything = set(ops["tensorflow"]) | set(ops["tensorflow_text"])
    assert not everything & {"PyFunc", "PyFuncStateless", "EagerPyFunc"}
    # The TF-Text kernels of the tokenizers, nothing else from outside TensorFlow.
    assert ops["tensorflow_text"] == TF_TEXT_OPS["beam" if key == "beam" else "greedy"]
    if key == "xla":
        assert len(ops["xla_must_compile"]) == 1
    else:
        # No XLA op (each would be compiled on demand, which the server refuses)
        # and no function marked for XLA.
        assert [op for op in ops["tensorflow"] if op.startswith("Xla")] == []
        assert ops["xla_must_compile"] == []


@pytest.mark.parametrize("key", list(ADVERSARIAL))
def test_adversarial_inputs_each_get_an_output(session, key):
    response = session.response(key)
    texts = ADVERSARIAL[key]
    translations = strings(response)  # valid UTF-8, or this raises
    scores = output(response, "score")
    assert len(translations) == len(texts) and scores.shape == (len(texts),)
    assert np.isfinite(scores).all()
    if key in ("empty", "whitespace"):
        assert translations == [""] and scores.tolist() == [0.0]


def test_adversarial_batch_same_strings_as_the_translator(session, greedy_export):
    assert_same_translations(
        session.response("adversarial_batch"), greedy_export.translator, ADVERSARIAL_BATCH
    )
