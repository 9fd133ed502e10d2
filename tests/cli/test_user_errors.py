"""Every user error is one line on stderr and a non-zero exit status, with no traceback."""

import os
import subprocess
import sys

import pytest

from keras_tf.cli.main import main
from tests.cli.conftest import keras_tf_command

# Each case: argv with {train}, {test}, {model}, {tmp} filled in, and a fragment of the message.
CASES = {
    "missing file": (["train", "--train", "{tmp}/nope.tsv", "--out", "{tmp}/run"],
                     "--train: no such file"),
    "directory for a file": (["train", "--train", "{tmp}", "--out", "{tmp}/run"],
                             "is a directory"),
    "malformed line": (["train", "--train", "{tmp}/bad.tsv", "--out", "{tmp}/run"],
                       "line 2"),
    "empty corpus": (["train", "--train", "{tmp}/empty.tsv", "--out", "{tmp}/run"],
                     "is empty"),
    "unknown preset": (["train", "--train", "{train}", "--out", "{tmp}/run",
                        "--preset", "transformer_huge"], "Unknown preset 'transformer_huge'"),
    "epochs out of range": (["train", "--train", "{train}", "--out", "{tmp}/run",
                             "--epochs", "0"], "--epochs: expected an integer >= 1"),
    "backup interval out of range": (["train", "--train", "{train}", "--out", "{tmp}/run",
                                      "--backup-every", "0"],
                                     "--backup-every: expected an integer >= 1; received 0"),
    "not an integer": (["train", "--train", "{train}", "--out", "{tmp}/run",
                        "--batch-size", "lots"], "--batch-size: expected an integer"),
    "unknown tokenizer": (["train", "--train", "{train}", "--out", "{tmp}/run",
                           "--tokenizer", "bpe"], "invalid choice: 'bpe'"),
    "missing option": (["train", "--train", "{train}"], "required: --out"),
    "other options on resume": (["train", "--train", "{train}", "--out", "{model}",
                                 "--max-length", "32"], "holds a run made with other options"),
    "not a model directory": (["evaluate", "--model", "{tmp}", "--test", "{test}"],
                              "is not a keras-tf model directory"),
    "no model directory": (["translate", "--model", "{tmp}/nowhere"],
                           "--model: no such directory"),
    "a file for the model directory": (["translate", "--model", "{train}"],
                                       "--model: not a directory"),
    "beam size out of range": (["evaluate", "--model", "{model}", "--test", "{test}",
                                "--beam-size", "0"], "--beam-size: expected an integer >= 1"),
    "unwritable output": (["evaluate", "--model", "{model}", "--test", "{test}",
                           "--output", "{tmp}/no/such/dir/out.txt"], "--output: cannot write"),
    "layer out of range": (["attention", "--model", "{model}", "--text", "hi", "--out",
                            "{tmp}/a.png", "--layer", "2"], "--layer 2 is out of range"),
    "head out of range": (["attention", "--model", "{model}", "--text", "hi", "--out",
                           "{tmp}/a.png", "--head", "4"], "--head 4 is out of range"),
    "existing export version": (["export", "--model", "{model}", "--out", "{tmp}"],
                                "exists, and TF Serving versions are immutable"),
    "d_model out of range": (["plot-encoding", "--d-model", "0"],
                             "--d-model: expected an integer in [2, 4096]"),
    "vocabulary too large": (["train", "--train", "{train}", "--out", "{tmp}/run",
                              "--vocabulary-size", "5000"],
                             "--vocabulary-size 5000: SentencePiece cannot learn"),
    "both batch options": (["train", "--train", "{train}", "--out", "{tmp}/run",
                            "--batch-size", "8", "--batch-tokens", "512"],
                           "--batch-size 8 and --batch-tokens 512: give one of them"),
    "token budget below a pair": (["train", "--train", "{train}", "--out", "{tmp}/run",
                                   "--batch-tokens", "32"],
                                  "--batch-tokens 32: a batch must hold one pair"),
    "dropout out of range": (["train", "--train", "{train}", "--out", "{tmp}/run",
                              "--dropout", "1.5"],
                             "--dropout 1.5: must be in [0, 1)"),
    "other dropout on resume": (["train", "--train", "{train}", "--out", "{model}",
                                 "--dropout", "0"], "dropout None before, 0.0 now"),
    "unknown command": (["frobnicate"], "invalid choice: 'frobnicate'"),
    "no command": ([], "required: COMMAND"),
}


@pytest.fixture
def paths(tmp_path, corpus, untrained_model_dir):
    (tmp_path / "bad.tsv").write_text("Hello\tBonjour\nno tab on this line\n", encoding="utf-8")
    (tmp_path / "empty.tsv").write_text("", encoding="utf-8")
    (tmp_path / "1").mkdir()  # an existing export version
    # The untrained directory holds no options.json; give it one, as train writes.
    with open(os.path.join(untrained_model_dir, "options.json"), "w") as file:
        file.write('{"preset": "transformer_small", "tokenizer": "sentencepiece", '
                   '"vocabulary_size": 8000, "max_length": null, "mixed_precision": null}')
    return {"tmp": str(tmp_path), "train": corpus["train"], "test": corpus["test"],
            "model": untrained_model_dir}


def _fill(argv, paths):
    filled = [arg.format(**paths) for arg in argv]
    # "export --out {tmp}" means version 1 under it, which exists.
    if filled[:1] == ["export"]:
        filled[filled.index("--out") + 1] = os.path.join(paths["tmp"], "1")
    return filled


@pytest.mark.parametrize("case", sorted(CASES))
def test_user_error_is_one_line(case, paths, capsys):
    argv, fragment = CASES[case]
    argv = _fill(argv, paths)
    status = main(argv)
    captured = capsys.readouterr()
    assert status != 0
    lines = captured.err.strip().splitlines()
    # One error line, last; only a data-reading command logs its counts before it.
    assert len(lines) == 1 or (argv[0] == "train" and "lines read" in lines[0]), captured.err
    assert len(lines) <= 2 and sum("error" in line for line in lines) == 1, captured.err
    lines = lines[-1:]
    command = argv[0] if argv and argv[0] != "frobnicate" else None
    assert lines[0].startswith(f"keras-tf {command}: error: " if command else "keras-tf: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in captured.err + captured.out
    # A failed train leaves no half-made --out directory.
    assert not os.path.exists(os.path.join(paths["tmp"], "run"))


def test_missing_optional_module_is_one_line_naming_its_install(paths, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "sacrebleu", None)  # as if not installed
    assert main(["evaluate", "--model", paths["model"], "--test", paths["test"]]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    # sacreBLEU is part of the core install; the demo's drawing is the demo extra's.
    assert err.startswith("keras-tf evaluate: error: ") and "pip install -e '.'" in err
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    out = os.path.join(paths["tmp"], "pe.png")
    assert main(["plot-encoding", "--out", out]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install -e '.[demo]'" in err, err


def test_user_error_in_a_real_process(tmp_path):
    # Nothing but our line: TensorFlow's C++ start-up lines ("I0000 00:00:...
    # port.cc:153] oneDNN custom operations are on", the absl banner) are kept
    # off stderr although TF_CPP_MIN_LOG_LEVEL is not set.
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        keras_tf_command() + ["train", "--train", str(tmp_path / "nope.tsv"), "--out",
                              str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert result.returncode == 2
    assert result.stderr == f"keras-tf train: error: --train: no such file: {tmp_path / 'nope.tsv'}\n"
    assert result.stdout == ""
