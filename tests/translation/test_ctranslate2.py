"""The CTranslate2 export: greedy strings equal `generate`'s, on a trained model and on the Marian fixture."""

import json
import os
import sys

import pytest

from keras_tf.cli.main import main
from keras_tf.serving.ctranslate2 import (
    CONFIG_FILENAME,
    TOKENIZERS_DIRNAME,
    CTranslate2Translator,
    read_ctranslate2_config,
    translate,
)
from keras_tf.translation import Seq2SeqTranslator
from tests.translation.test_marian_import import FIXTURE
from tests.translation.test_translator import TEXTS, make_pairs, trained  # noqa: F401 (fixture)


def test_greedy_strings_equal_generate_on_a_trained_translator(trained, tmp_path):
    translator = trained["translator"]
    sources = trained["held_out"][0] + TEXTS
    path = translator.export_ctranslate2(tmp_path / "ct2")
    assert {"model.bin", "config.json", CONFIG_FILENAME, TOKENIZERS_DIRNAME,
            "README.md"} <= set(os.listdir(path))
    config = read_ctranslate2_config(path)
    assert config["max_length"] == translator.resolve_decoding().max_length
    assert translate(path, sources, beam_size=1) == translator.generate(sources, method="greedy")


def test_greedy_and_beam_strings_equal_generate_on_the_marian_fixture(tmp_path):
    translator = Seq2SeqTranslator.from_preset(str(FIXTURE))
    sources = ["Hello world.", "This is a test of the tiny model.", "", "Bonjour"]
    path = translator.export_ctranslate2(tmp_path / "marian_ct2")
    ct2 = CTranslate2Translator(path)
    assert ct2.translate(sources, beam_size=1) == translator.generate(sources, method="greedy")
    # Marian's beam search (4, len^1.0): CTranslate2 normalises scores the same way.
    assert ct2.translate(sources) == translator.generate(sources)


def test_int8_loads_and_translates(trained, tmp_path, capsys):
    # The command line, from the trained preset folder.
    out = tmp_path / "int8_ct2"
    assert main(["export", "--model", trained["directory"], "--format", "ctranslate2",
                 "--quantize", "int8", "--beam-size", "1", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert read_ctranslate2_config(out)["quantization"] == "int8"
    with open(out / "config.json") as file:
        assert json.load(file)["eos_token"] == "</s>"
    sources = trained["held_out"][0]
    int8 = CTranslate2Translator(out).translate(sources)  # the exported beam size: 1
    expected = trained["translator"].generate(sources, method="greedy")
    agreement = sum(a == b for a, b in zip(int8, expected)) / len(expected)
    # Not required to be equal; measured 0.975 (39 of the 40 held-out sentences).
    assert len(int8) == len(sources) and agreement >= 0.8, agreement


def test_without_ctranslate2_the_command_is_a_one_line_error(trained, tmp_path, capsys,
                                                            monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # `import ctranslate2` fails
    assert main(["export", "--model", trained["directory"], "--format", "ctranslate2",
                 "--out", str(tmp_path / "ct2")]) == 2
    err = capsys.readouterr().err
    assert err == ("keras-tf export: error: --format ctranslate2 needs the ctranslate2 package "
                   '(pip install "keras-tf[ctranslate2]")\n')
    monkeypatch.delitem(sys.modules, "keras_tf.serving.ctranslate2")
    with pytest.raises(ModuleNotFoundError, match="needs the ctranslate2 package"):
        trained["translator"].export_ctranslate2(tmp_path / "ct2")
