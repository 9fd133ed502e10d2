"""The export's layout, records and signatures, and the translator's rules, in process."""

import os
import pathlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import saved_model_pb2

from keras_tf.models import Seq2SeqTransformer, get_preset
from keras_tf.decoding import DecodingConfig
from keras_tf.serving import (
    CONFIG_FILENAME,
    export,
    read_export_config,
)
from keras_tf.text import Seq2SeqPreprocessor, Seq2SeqTokenizers, clean_text
from keras_tf.translation import Seq2SeqTranslator
from tests.serving.conftest import (
    MAX_LENGTH,
    MAX_SOURCE_LENGTH,
    sentences,
    text_request,
    translate_tokens,
)

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "serving.md"


def signature_defs(export_dir):
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((pathlib.Path(export_dir) / "saved_model.pb").read_bytes())
    return saved_model.meta_graphs[0].signature_def


def documented_signatures(max_length):
    """The rows of docs/serving.md's signature table: (signature, direction, name, dtype, shape)."""
    rows = re.findall(
        r"^\| `(\w+)` \| (input|output) \| `(\w+)` \| `(DT_\w+)` \| `(\[[^\]]*\])` \|",
        DOCS.read_text(encoding="utf-8"),
        flags=re.MULTILINE,
    )
    assert rows, f"no signature table in {DOCS}"
    return {
        (signature, direction, name, dtype, shape.replace("max_length", str(max_length)))
        for signature, direction, name, dtype, shape in rows
    }


def test_signatures_are_what_the_docs_tell_clients(greedy_export):
    found = set()
    for key, signature in signature_defs(greedy_export.export_dir).items():
        if key == "__saved_model_init_op":  # TensorFlow's own, not a client signature
            continue
        for direction, tensors in (("input", signature.inputs), ("output", signature.outputs)):
            for name, info in tensors.items():
                shape = "[" + ", ".join(str(d.size) for d in info.tensor_shape.dim) + "]"
                found.add((key, direction, name, types_pb2.DataType.Name(info.dtype), shape))
    assert found == documented_signatures(MAX_LENGTH)


def test_predict_request_from_the_documented_names_round_trips(greedy_export):
    texts = ["open the file", "", "fichier café"]
    request = text_request(texts)
    parsed = type(request).FromString(request.SerializeToString())
    assert parsed == request
    assert parsed.model_spec.signature_name == "serving_default"
    # The tensor the server would feed: the same strings, DT_STRING, shape [3].
    tensor = tf.make_ndarray(parsed.inputs["text"])
    assert parsed.inputs["text"].dtype == tf.string.as_datatype_enum
    assert tensor.shape == (3,) and [t.decode() for t in tensor] == texts
    loaded = tf.saved_model.load(greedy_export.export_dir)
    outputs = loaded.signatures["serving_default"](text=tf.constant(tensor))
    expected = greedy_export.translator.generate(texts)
    assert [t.decode() for t in outputs["translation"].numpy()] == expected


def test_overlong_says_which_sources_were_cut_in_both_signatures(greedy_export):
    exported = greedy_export
    texts = sentences(3, seed=5) + [" ".join(sentences(12, seed=6)), ""]
    pieces = exported.tokenizers.tokenize_source(tf.constant(texts)).row_lengths().numpy()
    expected = pieces > MAX_SOURCE_LENGTH - 1  # 31 pieces, then END
    assert expected.tolist() == [False, False, False, True, False], pieces
    assert exported.translator.overlong_sources(texts) == [3]
    loaded = tf.saved_model.load(exported.export_dir)
    outputs = loaded.signatures["serving_default"](text=tf.constant(texts))
    assert outputs["overlong"].dtype == tf.bool
    np.testing.assert_array_equal(outputs["overlong"].numpy(), expected)
    # The same ids, padded with 0, through translate_tokens.
    ids = exported.tokenizers.tokenize_source(tf.constant(texts)).to_tensor().numpy()
    outputs = loaded.signatures["translate_tokens"](source_ids=tf.constant(ids, tf.int32))
    np.testing.assert_array_equal(outputs["overlong"].numpy(), expected)


def test_version_directories(greedy_export, tmp_path):
    assert greedy_export.export_dir == os.path.join(greedy_export.model_base_path, "1")
    assert sorted(os.listdir(greedy_export.model_base_path)) == ["1"]  # no staging left
    with pytest.raises(FileExistsError, match="versions are immutable"):
        export(
            greedy_export.model, greedy_export.tokenizers, greedy_export.model_base_path, version=1
        )
    with pytest.raises(ValueError, match="received version=0"):
        export(greedy_export.model, greedy_export.tokenizers, tmp_path, version=0)
    # The next version follows the highest number; other names are ignored.
    for name in ("2", "7", "notes", ".tmp-9-x"):
        (tmp_path / name).mkdir()
    path = export(greedy_export.model, greedy_export.tokenizers, tmp_path, max_length=4)
    assert path == os.path.join(tmp_path, "8")


def test_export_records_its_settings_and_tokenizers(greedy_export, beam_export):
    for exported, method, beam_size in ((greedy_export, "greedy", 1), (beam_export, "beam", 3)):
        config = read_export_config(exported.export_dir)
        assert config["method"] == method and config["beam_size"] == beam_size
        assert config["max_length"] == MAX_LENGTH
        assert config["max_source_length"] == MAX_SOURCE_LENGTH
        assert config["xla"] is False
        assert config["model"] == exported.model.config.to_dict()
        settings = exported.translator.resolve_decoding()
        for name in ("method", "beam_size", "length_penalty", "length_penalty_style",
                     "max_length", "max_source_length"):
            assert config[name] == getattr(settings, name), name
        # The client-side tokenizers are in assets/ and give the same ids.
        assets = os.path.join(exported.export_dir, "assets")
        assert CONFIG_FILENAME in os.listdir(assets)
        reloaded = Seq2SeqTokenizers.load(assets)
        texts = sentences(8, seed=1)
        assert (
            reloaded.tokenize_source(texts).to_list()
            == exported.tokenizers.tokenize_source(texts).to_list()
        )


def test_reload_with_tfsm_layer_and_saved_model_load(greedy_export):
    texts = sentences(4, seed=2) + [""]
    expected = greedy_export.translator.generate(texts)
    layer = keras.layers.TFSMLayer(greedy_export.export_dir, call_endpoint="serving_default")
    outputs = layer(tf.constant(texts))
    assert [t.decode() for t in outputs["translation"].numpy()] == expected
    loaded = tf.saved_model.load(greedy_export.export_dir)
    outputs = loaded.translate_text(tf.constant(texts))  # the function, also saved
    assert [t.decode() for t in outputs["translation"].numpy()] == expected


def test_translator_rules(greedy_export):
    translator = greedy_export.translator
    assert translator.generate([]) == []
    out = translator.generate_with_scores(["", "open file"])
    assert out.texts[0] == "" and out.scores[0] == 0.0 and out.texts[1]
    # Invalid UTF-8 is read as U+FFFD.
    assert translator.generate([b"open \xff file"]) == translator.generate(["open \ufffd file"])
    assert clean_text(tf.constant([b"a\xc3(b"])).numpy().tolist() == ["a\ufffd(b".encode()]


def test_sources_are_cut_to_max_source_length_minus_one_ids(greedy_export):
    # The documented rule: the first max_source_length - 1 subword ids, then END.
    long_ids = np.arange(100, dtype=np.int32)[None, :] % 56 + 4
    cut_ids = long_ids[:, : MAX_SOURCE_LENGTH - 1]
    long_out = translate_tokens(greedy_export.translator, long_ids)
    cut_out = translate_tokens(greedy_export.translator, cut_ids)
    np.testing.assert_array_equal(long_out[0], cut_out[0])
    loaded = tf.saved_model.load(greedy_export.export_dir)
    served = loaded.signatures["translate_tokens"](source_ids=tf.constant(long_ids))
    np.testing.assert_array_equal(served["target_ids"].numpy(), cut_out[0])


def test_bad_arguments_get_clear_errors(greedy_export):
    model, tokenizers = greedy_export.model, greedy_export.tokenizers
    translator = greedy_export.translator
    with pytest.raises(ValueError, match=r"method must be one of \('greedy', 'beam'\) to export"):
        export(model, tokenizers, "unused", method="top_k")
    with pytest.raises(ValueError, match="^beam_size=0: must be a whole number"):
        translator.generate(["open"], method="beam", beam_size=0)
    with pytest.raises(ValueError, match="max_length=33 is beyond the model's positional range"):
        translator.generate(["open"], max_length=33)
    with pytest.raises(ValueError, match="^length_penalty='0.6': must be a number"):
        export(model, tokenizers, "unused", method="beam", length_penalty="0.6")
    with pytest.raises(ValueError, match="^max_source_length=1: must be a whole number in "
                                         r"\[2, 2147483647\]"):
        translator.generate(["open"], max_source_length=1)
    with pytest.raises(TypeError, match="Expected a keras_tf.text.Seq2SeqTokenizers"):
        Seq2SeqPreprocessor(tokenizers.source_tokenizer, 8, 8)
    with pytest.raises(TypeError, match="Wrap a single string in a list"):
        translator.generate_with_scores("open the file")
    with pytest.raises(TypeError, match="xla must be True or False"):
        export(model, tokenizers, "unused", xla="yes")
    smaller = Seq2SeqTransformer(get_preset("transformer_tiny", source_vocabulary_size=32))
    with pytest.raises(ValueError, match="source tokenizer has 64 ids but the model's"):
        Seq2SeqTranslator(smaller, Seq2SeqPreprocessor(tokenizers, 8, 8))
    with pytest.raises(ValueError, match="source tokenizer has 64 ids but the model's"):
        export(smaller, tokenizers, "unused")


def test_a_failed_export_names_the_folder_asked_for_not_its_staging_name():
    from keras_tf.serving.export import _naming

    staging, target = "models/translator/.tmp-3-0a1b", "models/translator/3"
    error = tf.errors.PermissionDeniedError(None, None, f"{staging}/variables: Permission denied")
    named = _naming(error, staging, target)
    assert isinstance(named, tf.errors.PermissionDeniedError)
    assert named.message == f"{target}/variables: Permission denied"
    os_error = _naming(PermissionError(13, "Permission denied", f"{staging}/assets"), staging,
                       target)
    assert str(os_error) == f"[Errno 13] Permission denied: '{target}/assets'"
