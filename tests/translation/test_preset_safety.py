"""A preset from elsewhere is read with care: checked fields, confined file names, sane sizes.

Every bad preset is one `PresetError` line that names the file and the field,
within a second, before anything large is allocated; the command line shows
it as one line and exits 2.
"""

import json
import os
import pathlib
import shutil
import stat
import time

import pytest

from keras_tf.cli.main import main
from keras_tf.decoding import DecodingConfig
from keras_tf.models import Seq2SeqTransformer, get_preset
from keras_tf.preset_checks import PresetError
from keras_tf.text import Seq2SeqTokenizers
from keras_tf.translation import Seq2SeqTranslator, presets
from keras_tf.translation.marian import SIZE_FIELDS
from tests.helpers import build_once, shared_folder
from tests.serving.conftest import train_tokenizers

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "marian_tiny"
WRONG = {int: "12", float: "0.1", bool: "yes", str: 7}


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    """A small preset with WordPiece tokenizers (a vocabulary file any reader can name)."""

    def build(folder):
        tokenizers = Seq2SeqTokenizers.train(
            ["the cat sat on the mat"] * 20, ["le chat"] * 20, kind="wordpiece",
            vocabulary_size=16,
        )
        config = get_preset("transformer_tiny", source_vocabulary_size=16,
                            target_vocabulary_size=16, num_encoder_layers=1,
                            num_decoder_layers=1)
        presets.save_preset(folder / "preset", Seq2SeqTransformer(config), tokenizers,
                            DecodingConfig(method="beam", beam_size=2))

    return build_once(shared_folder(tmp_path_factory, "safety_preset"), build) / "preset"


def copy_of(preset, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(preset, target, symlinks=True)
    return target


def edit_json(path, change):
    values = json.loads(path.read_text(encoding="utf-8"))
    change(values)
    path.write_text(json.dumps(values), encoding="utf-8")


def one_line_refusal(load, *names):
    """`load()` raises a PresetError of one line, fast, naming each of `names`."""
    start = time.perf_counter()
    with pytest.raises(PresetError) as raised:
        load()
    message = str(raised.value)
    assert time.perf_counter() - start < 5, message
    assert "\n" not in message, message
    for name in names:
        assert name in message, (name, message)
    return message


CONFIG_FIELDS = sorted(presets._CONFIG_TYPES)


@pytest.mark.parametrize("field", CONFIG_FIELDS)
def test_a_config_json_field_of_the_wrong_type_is_one_line(preset, tmp_path, field):
    copy = copy_of(preset, tmp_path)
    wrong = WRONG[presets._CONFIG_TYPES[field]]
    edit_json(copy / "config.json", lambda values: values.update({field: wrong}))
    one_line_refusal(lambda: Seq2SeqTranslator.from_preset(copy), "config.json", field)


@pytest.mark.parametrize("field", ["source_vocabulary_size", "target_vocabulary_size"])
def test_a_config_json_without_a_required_field_is_one_line(preset, tmp_path, field):
    copy = copy_of(preset, tmp_path)
    edit_json(copy / "config.json", lambda values: values.pop(field))
    one_line_refusal(lambda: presets.load_backbone(copy), "config.json", field)


@pytest.mark.parametrize("content", ["[]", "not json", '{"d_model": 32', '"text"'])
def test_a_config_json_that_is_no_object_is_one_line(preset, tmp_path, content):
    copy = copy_of(preset, tmp_path)
    (copy / "config.json").write_text(content, encoding="utf-8")
    one_line_refusal(lambda: presets.load_backbone(copy), "config.json")


@pytest.mark.parametrize("field, value", [
    ("d_model", 10**9), ("d_ff", 10**9), ("num_encoder_layers", 10**6),
    ("source_vocabulary_size", 10**9), ("max_source_length", 10**9),
])
def test_a_config_json_of_absurd_sizes_is_refused_before_building(preset, tmp_path, field, value):
    copy = copy_of(preset, tmp_path)
    edit_json(copy / "config.json", lambda values: values.update({field: value}))
    one_line_refusal(lambda: presets.load_backbone(copy), field, str(value))


@pytest.mark.parametrize("field, value", [
    ("files", None), ("files", ["shared_vocab.txt"]), ("shared", "yes"), ("lowercase", 1),
    ("kind", "os.system"), ("format_version", None),
])
def test_a_tokenizers_json_field_gone_or_wrong_is_one_line(preset, tmp_path, field, value):
    copy = copy_of(preset, tmp_path)

    def change(values):
        if value is None:
            values.pop(field)
        else:
            values[field] = value

    edit_json(copy / "tokenizers" / "tokenizers.json", change)
    one_line_refusal(lambda: presets.load_tokenizers(copy), "tokenizers.json")


def _name_file(copy, name):
    edit_json(copy / "tokenizers" / "tokenizers.json",
              lambda values: values["files"].update({"shared": name}))


@pytest.mark.parametrize("case", ["parent", "absolute", "symlink_out", "dev_zero", "fifo", "folder"])
def test_a_tokenizers_json_naming_a_file_out_of_its_folder_is_refused(preset, tmp_path, case):
    copy = copy_of(preset, tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LINE\n")
    folder = copy / "tokenizers"
    if case == "parent":
        name = "../../secret.txt"
    elif case == "absolute":
        name = str(secret)
    elif case == "symlink_out":
        (folder / "link.txt").symlink_to(secret)
        name = "link.txt"
    elif case == "dev_zero":
        (folder / "zero.txt").symlink_to("/dev/zero")
        name = "zero.txt"
    elif case == "fifo":
        os.mkfifo(folder / "pipe.txt")
        name = "pipe.txt"
    else:
        (folder / "sub").mkdir()
        name = "sub"
    _name_file(copy, name)
    message = one_line_refusal(lambda: presets.load_tokenizers(copy), "files.shared")
    assert "TOP-SECRET" not in message


def test_a_garbage_sentencepiece_model_is_one_line(tmp_path):
    train_tokenizers("sentencepiece").save(tmp_path)
    (tmp_path / "shared.spm").write_bytes(os.urandom(300))
    one_line_refusal(lambda: Seq2SeqTokenizers.load(tmp_path), str(tmp_path))


@pytest.mark.parametrize("values", [
    {"method": 3}, {"beam_size": "4"}, {"method": "beam", "beam_size": 0}, {"seed": 1},
])
def test_a_decoding_json_field_of_the_wrong_type_is_one_line(preset, tmp_path, values):
    copy = copy_of(preset, tmp_path)
    edit_json(copy / "decoding.json", lambda current: current.update(values))
    one_line_refusal(lambda: presets.load_decoding(copy), "decoding.json")


def marian_copy(tmp_path):
    target = tmp_path / "marian"
    shutil.copytree(FIXTURE, target)
    return target


@pytest.mark.parametrize("field", sorted(SIZE_FIELDS) + ["pad_token_id", "eos_token_id"])
def test_a_marian_config_field_gone_or_of_the_wrong_type_is_one_line(tmp_path, field):
    for change in (lambda values: values.pop(field), lambda values: values.update({field: "8"})):
        directory = marian_copy(tmp_path)
        edit_json(directory / "config.json", change)
        one_line_refusal(lambda: Seq2SeqTranslator.from_preset(str(directory)), "config.json",
                         field)
        shutil.rmtree(directory)


@pytest.mark.parametrize("field, value, named", [
    ("d_model", 10**9, "d_model"), ("encoder_ffn_dim", 10**9, "ffn_dim"),
    ("decoder_ffn_dim", 10**9, "ffn_dim"), ("max_position_embeddings", 10**9, "max_position"),
    ("vocab_size", 10**9, "vocab_size"), ("encoder_layers", 10**6, "encoder_layers"),
    # Within the bounds, but more than the weights file holds: refused from its header.
    ("d_model", 1024, "model.shared.weight has shape [124, 16]; config.json calls for [124, 1024]"),
    ("encoder_layers", 12, "no tensor model.encoder.layers.11.fc1.weight"),
])
def test_a_marian_config_of_absurd_sizes_is_refused_at_once(tmp_path, field, value, named):
    directory = marian_copy(tmp_path)

    def change(values):
        values[field] = value
        if field == "encoder_ffn_dim":
            values["decoder_ffn_dim"] = value
        if field == "decoder_ffn_dim":
            values["encoder_ffn_dim"] = value

    edit_json(directory / "config.json", change)
    one_line_refusal(lambda: Seq2SeqTranslator.from_preset(str(directory)), named)


@pytest.mark.parametrize("content", [b"", b"\x00" * 64, os.urandom(256)])
def test_a_broken_safetensors_file_is_one_line(tmp_path, content):
    directory = marian_copy(tmp_path)
    (directory / "model.safetensors").write_bytes(content)
    one_line_refusal(lambda: Seq2SeqTranslator.from_preset(str(directory)), "model.safetensors")


def test_the_command_line_shows_a_bad_preset_in_one_line(preset, tmp_path, capsys):
    copy = copy_of(preset, tmp_path)
    edit_json(copy / "config.json", lambda values: values.update({"dropout": "0.1"}))
    assert main(["export", "--model", str(copy), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-tf export: error: ") and err.count("\n") == 1, err
    assert "config.json: dropout must be a float" in err


def test_a_saved_preset_is_readable_by_others(tmp_path):
    old = os.umask(0o022)
    try:
        tokenizers = train_tokenizers("sentencepiece")
        config = get_preset("transformer_tiny", num_encoder_layers=1,
                            num_decoder_layers=1)
        presets.save_preset(tmp_path / "p", Seq2SeqTransformer(config), tokenizers)
    finally:
        os.umask(old)
    for path in [tmp_path / "p", *sorted((tmp_path / "p").rglob("*"))]:
        mode = path.stat().st_mode
        assert mode & stat.S_IROTH, (path, oct(mode))
        if path.is_dir():
            assert mode & stat.S_IXOTH, (path, oct(mode))


_UNDER_A_MEMORY_LIMIT = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))  # 4 GB, as the issue asks
import keras_tf
keras_tf.quiet_tensorflow()
from keras_tf.preset_checks import PresetError
from keras_tf.translation import Seq2SeqTranslator
start = time.perf_counter()
try:
    Seq2SeqTranslator.from_preset(sys.argv[1])
except PresetError as error:
    print(json.dumps({"message": str(error), "seconds": time.perf_counter() - start}))
"""


@pytest.mark.parametrize("field, value", [
    ("d_model", 10**9), ("vocab_size", 10**9), ("encoder_layers", 10**6),
])
def test_absurd_marian_sizes_are_refused_under_a_4_gb_memory_limit(tmp_path, field, value):
    import subprocess
    import sys

    directory = marian_copy(tmp_path)
    edit_json(directory / "config.json", lambda values: values.update({field: value}))
    completed = subprocess.run(
        [sys.executable, "-c", _UNDER_A_MEMORY_LIMIT, str(directory)],
        capture_output=True, text=True, errors="replace", timeout=300,
        cwd=pathlib.Path(__file__).resolve().parents[2],
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout)
    assert field in result["message"] and result["seconds"] < 5, result
