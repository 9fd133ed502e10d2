"""An OPUS-MT (Hugging Face Marian) checkpoint, converted, equals Hugging Face's outputs.

tests/fixtures/marian_tiny is a tiny random MarianMTModel with OPUS-MT's
architecture and tokenizer files, and what transformers 5.24 computed from
it (tools/make_marian_fixture.py): teacher-forced logits of a padded batch,
`generate` with greedy and beam-4 search. These tests need numpy,
safetensors and keras_tf only.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_tf.cli.main import main
from keras_tf.decoding import DecodingConfig, power_length_penalty
from keras_tf.layers import sinusoidal_encoding
from keras_tf.models import END_ID, PAD_ID, START_ID
from keras_tf.translation import Seq2SeqTranslator
from keras_tf.translation.marian import (
    marian_id_order,
    read_marian_config,
    read_vocabularies,
)
from tests.cli.conftest import keras_tf_command
from tests.serving.conftest import Answers, serving_process, strings, text_request

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "marian_tiny"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text(encoding="utf-8"))
MAX_NEW_TOKENS = REFERENCE["generation"]["max_new_tokens"]
SOURCES = REFERENCE["sources"]


@pytest.fixture(scope="module")
def translator():
    return Seq2SeqTranslator.from_preset(str(FIXTURE))


@pytest.fixture(scope="module")
def to_ours():
    """Marian id -> our id, the converter's permutation inverted."""
    marian_config = read_marian_config(str(FIXTURE))
    _, _, unk_id = read_vocabularies(str(FIXTURE), marian_config)
    order = marian_id_order(marian_config, unk_id)
    inverse = np.zeros(marian_config["vocab_size"], dtype=np.int64)
    inverse[order[1:]] = np.arange(1, len(order))
    return inverse


def _subprocess_env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="error::UserWarning",
                PYTHONPATH=str(pathlib.Path(__file__).resolve().parents[2]))


# --- the model and its tokenizers ---


def test_tokenizer_gives_marian_tokenizer_ids(translator, to_ours):
    # Sources end with </s> (our END), no start token; ids come from vocab.json, a
    # leading ">>deu<<" is one piece, the piece left out of vocab.json is <unk>.
    preprocessor = translator.preprocessor
    encoder_tokens = preprocessor.encoder_tokens(
        preprocessor.source_ids(tf.constant(SOURCES))
    ).numpy()
    hf_ids = np.array(REFERENCE["input_ids"])
    pad = read_marian_config(str(FIXTURE))["pad_token_id"]
    np.testing.assert_array_equal(encoder_tokens, np.where(hf_ids == pad, PAD_ID, to_ours[hf_ids]))


def test_the_preprocessor_and_tokenizers_load_without_the_weights(translator, monkeypatch):
    import keras_tf.translation.marian as marian
    from keras_tf.translation import presets

    def no_weights(directory):
        raise AssertionError("the weights were read")

    monkeypatch.setattr(marian, "read_weights", no_weights)
    preprocessor = presets.load_preprocessor(str(FIXTURE))
    assert (preprocessor.max_source_length, preprocessor.max_target_length) == (
        translator.config.max_source_length, translator.config.max_target_length)
    ours, theirs = (p.encoder_tokens(p.source_ids(tf.constant(SOURCES))).numpy()
                    for p in (preprocessor, translator.preprocessor))
    np.testing.assert_array_equal(ours, theirs)
    tokenizers = presets.load_tokenizers(str(FIXTURE))
    assert tokenizers.get_config() == translator.preprocessor.tokenizers.get_config()


def test_converted_logits_equal_hugging_face(translator, to_ours):
    hf_ids = np.array(REFERENCE["input_ids"])
    pad = read_marian_config(str(FIXTURE))["pad_token_id"]
    labels = np.array(REFERENCE["labels"])  # padded with Marian's pad
    decoder_tokens = np.concatenate(
        [np.full((len(labels), 1), START_ID), to_ours[labels[:, :-1]]], axis=1
    )
    logits = np.asarray(translator.backbone({
        "encoder_tokens": np.where(hf_ids == pad, PAD_ID, to_ours[hf_ids]).astype("int32"),
        "decoder_tokens": decoder_tokens.astype("int32"),
    }))
    expected = np.load(FIXTURE / "reference.npz")["logits"]  # [batch, T, Marian V]
    np.testing.assert_allclose(logits[..., to_ours], expected, atol=1e-4)
    # The spare row takes no probability mass: log-softmax over V + 1 is Marian's over V.
    assert (logits[..., PAD_ID] == -1e9).all()


def test_greedy_equals_hugging_face_generate(translator):
    out = translator.generate_with_scores(SOURCES, method="greedy", max_length=MAX_NEW_TOKENS)
    assert out.texts == REFERENCE["greedy"]["texts"]
    # HF's greedy scored under the model: the teacher-forced log-probabilities.
    np.testing.assert_allclose(out.scores, REFERENCE["greedy"]["log_probs"], atol=1e-4)


def test_beam_4_with_the_power_penalty_equals_hugging_face_generate(translator, to_ours):
    assert translator.decoding.method == "beam" and translator.decoding.beam_size == 4
    assert translator.decoding.length_penalty_style == "power"
    out = translator.generate_with_scores(SOURCES, max_length=MAX_NEW_TOKENS)
    assert out.texts == REFERENCE["beam4"]["texts"]
    np.testing.assert_allclose(out.scores, REFERENCE["beam4"]["sequences_scores"], atol=1e-4)
    # The same ids, not only the same strings.
    preprocessor = translator.preprocessor
    encoder_tokens = preprocessor.encoder_tokens(preprocessor.source_ids(tf.constant(SOURCES)))
    ids = translator.generate(encoder_tokens.numpy(), max_length=MAX_NEW_TOKENS)
    expected = to_ours[np.array(REFERENCE["beam4"]["ids"])[:, 1:]]
    expected[expected == START_ID] = PAD_ID  # HF pads with its pad id, our START
    np.testing.assert_array_equal(ids[:, : expected.shape[1]], expected)


def test_a_hypothesis_cut_at_max_length_gets_no_forced_end(translator):
    # HF forces </s> at the last step when forced_eos_token_id is set (real OPUS-MT
    # configs set it; the fixture does not); keras_tf ends a cut hypothesis without
    # END, and scores it as it is (docs/pretrained.md).
    preprocessor = translator.preprocessor
    encoder_tokens = preprocessor.encoder_tokens(preprocessor.source_ids(tf.constant(SOURCES)))
    ids = translator.generate(encoder_tokens.numpy(), method="greedy", max_length=MAX_NEW_TOKENS)
    cut = REFERENCE["greedy"]["texts"].index("AAAAAAAAAAAA")
    assert END_ID not in ids[cut].tolist() and PAD_ID not in ids[cut].tolist()


# --- the new options ---


def test_concatenated_sinusoids_golden_values():
    # Marian's layout: the sines of every frequency, then the cosines.
    encoding = sinusoidal_encoding(3, 4, "concatenated")
    angles = np.array([0.0, 1.0, 2.0])[:, None] / np.array([1.0, 100.0])[None]
    np.testing.assert_allclose(encoding, np.concatenate([np.sin(angles), np.cos(angles)], 1),
                               rtol=1e-6)
    interleaved = sinusoidal_encoding(3, 4)
    np.testing.assert_allclose(interleaved[:, 0::2], np.sin(angles), rtol=1e-6)
    np.testing.assert_allclose(interleaved[:, 1::2], np.cos(angles), rtol=1e-6)
    with pytest.raises(ValueError, match="received layout='halves'"):
        sinusoidal_encoding(3, 4, "halves")


def test_power_length_penalty_values():
    np.testing.assert_allclose(
        np.asarray(power_length_penalty(np.array([1, 4, 9]), 0.5)), [1.0, 2.0, 3.0], rtol=1e-6
    )
    with pytest.raises(ValueError, match="^length_penalty_style='hf': must be one of"):
        DecodingConfig(length_penalty_style="hf")


def test_new_options_round_trip_through_the_configs(translator):
    c = translator.config
    assert (c.positional_layout, c.output_bias, c.activation) == ("concatenated", True, "silu")
    backbone_config = translator.backbone.get_config()["config"]
    assert backbone_config["positional_layout"] == "concatenated"
    assert backbone_config["output_bias"] is True
    assert translator.backbone.source_embedding.get_config()["layout"] == "concatenated"
    decoding = DecodingConfig.from_dict(translator.decoding.to_dict())
    assert decoding.length_penalty_style == "power" and decoding == translator.decoding
    with pytest.raises(ValueError, match="received positional_layout='halves'"):
        c.replace(positional_layout="halves")


def test_preset_round_trip_and_export_served_by_tensorflow_alone(translator, tmp_path):
    # (A fresh process reading the preset: `keras-tf translate` in the next test.)
    preset = tmp_path / "opus-mt-tiny"
    translator.save_to_preset(preset)
    reloaded = Seq2SeqTranslator.from_preset(preset)
    assert reloaded.config == translator.config and reloaded.decoding == translator.decoding
    expected = reloaded.generate(SOURCES, max_length=MAX_NEW_TOKENS)
    assert expected == REFERENCE["beam4"]["texts"]

    # The SavedModel, read by TensorFlow and TF-Text only, in a fresh process.
    export_dir = reloaded.export(tmp_path / "served", max_length=MAX_NEW_TOKENS)
    result = serving_process(tmp_path, {"marian": export_dir},
                             [("all", "marian", text_request(SOURCES), False)])
    assert "keras_tf" not in result["modules"] and "tensorflow_text" in result["modules"]
    assert strings(Answers(result).response("all")) == expected


def test_import_marian_command_writes_a_preset_translate_reads(tmp_path, capsys):
    out = tmp_path / "en-de"
    # In this process (tests/cli runs the console script itself)...
    assert main(["import-marian", "--model", str(FIXTURE), "--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    assert (out / "model.keras").is_file() and (out / "tokenizers" / "tokenizers.json").is_file()
    # ...and a fresh process reads the preset: the converted weights,
    # tokenizers and decoding settings all survive save_to_preset.
    translated = subprocess.run(
        keras_tf_command() + ["translate", "--model", str(out)],
        input="\n".join(SOURCES) + "\n", capture_output=True, text=True,
        env=_subprocess_env(), timeout=300,
    )
    assert translated.returncode == 0, translated.stderr[-3000:]
    # Beam 4 (--beam-size's default), with the preset's power penalty and max_length.
    expected = Seq2SeqTranslator.from_preset(str(FIXTURE)).generate(SOURCES)
    assert translated.stdout.splitlines() == expected


# --- what the converter refuses ---


def _broken_copy(tmp_path, edit_config=None, remove=()):
    directory = tmp_path / "broken"
    shutil.copytree(FIXTURE, directory)
    for name in remove:
        os.remove(directory / name)
    if edit_config:
        path = directory / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **edit_config}))
    return str(directory)


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"model_type": "bart"}, "expected model_type='marian'; received model_type='bart'"),
        ({"normalize_before": True}, "normalize_before=True is not supported"),
        ({"tie_word_embeddings": False}, "tie_word_embeddings=False is not supported"),
        ({"share_encoder_decoder_embeddings": False},
         "share_encoder_decoder_embeddings=False is not supported"),
        ({"activation_function": "gelu_new"}, "activation_function='gelu_new' is not supported"),
        ({"static_position_embeddings": False},
         "static_position_embeddings=False is not supported"),
        ({"scale_embedding": False}, "scale_embedding=False is not supported"),
        ({"decoder_start_token_id": 0}, "decoder_start_token_id=0 must be pad_token_id=123"),
    ],
)
def test_unsupported_configs_raise_naming_the_field(tmp_path, edit, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        Seq2SeqTranslator.from_preset(_broken_copy(tmp_path, edit_config=edit))


def test_a_directory_without_config_is_not_a_marian_model(tmp_path):
    directory = _broken_copy(tmp_path, remove=["config.json"])
    with pytest.raises(ValueError, match="not a keras_tf preset"):
        Seq2SeqTranslator.from_preset(directory)
    from keras_tf.translation import marian

    with pytest.raises(ValueError, match="not a Hugging Face Marian directory: no config.json"):
        marian.convert(directory)


def test_missing_vocabulary_raises(tmp_path):
    with pytest.raises(ValueError, match="no vocab.json"):
        Seq2SeqTranslator.from_preset(_broken_copy(tmp_path, remove=["vocab.json"]))


def test_pytorch_weights_without_torch_raise(tmp_path):
    pytest.importorskip("safetensors")
    if "torch" in sys.modules or _torch_importable():
        pytest.skip("torch is installed: pytorch_model.bin would be read")
    directory = _broken_copy(tmp_path, remove=["model.safetensors"])
    (pathlib.Path(directory) / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="holds pytorch_model.bin .* needs torch"):
        Seq2SeqTranslator.from_preset(directory)


def _torch_importable():
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def test_hf_paths_need_huggingface_hub_or_name_the_form():
    with pytest.raises(ValueError, match="Expected hf://ORGANIZATION/NAME"):
        Seq2SeqTranslator.from_preset("hf://opus-mt-en-de")
    import importlib.util

    if importlib.util.find_spec("huggingface_hub") is None:
        with pytest.raises(ValueError, match="needs huggingface_hub"):
            Seq2SeqTranslator.from_preset("hf://Helsinki-NLP/opus-mt-en-de")


def test_separate_vocabularies_read_target_vocab_json(tmp_path):
    directory = _broken_copy(tmp_path)
    tokenizer_config = pathlib.Path(directory) / "tokenizer_config.json"
    tokenizer_config.write_text(
        json.dumps({**json.loads(tokenizer_config.read_text()), "separate_vocabs": True})
    )
    marian_config = read_marian_config(directory)
    with pytest.raises(ValueError, match="no target_vocab.json"):
        read_vocabularies(directory, marian_config)
    vocabulary = json.loads((FIXTURE / "vocab.json").read_text(encoding="utf-8"))
    target = {("<target>" + piece if i == 5 else piece): i for piece, i in vocabulary.items()}
    (pathlib.Path(directory) / "target_vocab.json").write_text(json.dumps(target))
    source_pieces, target_pieces, _ = read_vocabularies(directory, marian_config)
    assert target_pieces[5] == "<target>" + source_pieces[5]
    assert target_pieces[:5] + target_pieces[6:] == source_pieces[:5] + source_pieces[6:]
