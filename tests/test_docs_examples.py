"""Script examples of the README and docs run as written, in fresh processes, with no UserWarning.

Each test runs the blocks of one document in one empty folder, in order (a
later block may read what an earlier one wrote, as a reader would run them).
"""

import ast
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def python_blocks(path):
    """The ```python blocks of a Markdown file, in order."""
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


# What TensorFlow's C++ code writes to stderr: absl's log lines (INFO,
# WARNING, ERROR, FATAL), the banner before absl is initialised, and the
# CPU-feature note's second line.
TENSORFLOW_LOG_LINE = re.compile(
    r"^([IWEF]\d{4} \d\d:\d\d:\d+\.\d+ |WARNING: All log messages before absl::|"
    r"To enable the following instructions: )"
)


def imports_tensorflow_first(block):
    """Whether the block's first import is TensorFlow's own (its start-up lines are then TensorFlow's)."""
    first = re.search(r"^(?:import|from) (\w+)", block, flags=re.M)
    return bool(first) and first.group(1).startswith("tensorflow")


def asks_for_quiet(block):
    """Whether the block calls `keras_tf.quiet_tensorflow()` (before TensorFlow starts)."""
    return "keras_tf.quiet_tensorflow()" in block


def run_blocks(blocks, folder):
    """Run each block in a fresh `python -W error::UserWarning` in `folder`; return stdout lines.

    As on a user's terminal: `TF_CPP_MIN_LOG_LEVEL` unset. A block that calls
    `keras_tf.quiet_tensorflow()` must write none of TensorFlow's C++ log
    lines to stderr, at start-up or later. Any other block that imports
    keras_tf before TensorFlow gets TensorFlow's start-up lines, as
    TensorFlow prints them (`import keras_tf` leaves that to the user), but
    no other TensorFlow log line. (Not `-W error`: NumPy 2 raises a
    DeprecationWarning inside Keras's TensorFlow backend, which Python's
    default filters hide from users.)
    """
    from keras_tf.tensorflow_import import is_start_up_line

    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(ROOT)
    outputs = []
    for block in blocks:
        result = subprocess.run(
            [sys.executable, "-W", "error::UserWarning", "-c", block],
            cwd=folder, capture_output=True, text=True, env=env, timeout=900,
        )
        assert result.returncode == 0, f"{block}\n---\n{result.stderr[-4000:]}"
        if not imports_tensorflow_first(block):
            noise = [line for line in result.stderr.splitlines() if TENSORFLOW_LOG_LINE.match(line)
                     and (asks_for_quiet(block) or not is_start_up_line(line))]
            assert noise == [], f"{block}\n---\n" + "\n".join(noise)
        outputs.append(result.stdout.strip().splitlines())
    return outputs


def one_string_list(line):
    """Whether `line` is the printed list of one string (Python quotes it either way)."""
    try:
        value = ast.literal_eval(line)
    except (ValueError, SyntaxError):
        return False
    return isinstance(value, list) and len(value) == 1 and isinstance(value[0], str)


def test_readme_script_example(tmp_path):
    blocks = python_blocks(ROOT / "README.md")
    assert len(blocks) == 1, "the README has one script example; this test runs it"
    (lines,) = run_blocks(blocks, tmp_path)
    # generate: a list of one string; score: one negative log-probability; export: the folder.
    assert one_string_list(lines[-3]), lines[-3:]
    assert re.fullmatch(r"\[-\d+\.\d+\]", lines[-2]), lines[-2:]
    assert lines[-1].endswith(os.path.join("models", "translator", "1")), lines[-1]
    assert (tmp_path / "my_translator" / "model.keras").is_file()
    assert (tmp_path / "models" / "translator" / "1" / "saved_model.pb").is_file()


def test_user_guide_script_and_reload_examples(tmp_path):
    blocks = python_blocks(ROOT / "docs" / "user-guide.md")
    assert len(blocks) == 2
    script, reload = run_blocks(blocks, tmp_path)
    assert one_string_list(script[-3]) and one_string_list(script[-2]), script[-3:]
    assert script[-1].endswith(os.path.join("models", "translator", "1"))
    assert (tmp_path / "run1" / "decoding.json").is_file()
    assert reload == [], reload  # the reload block prints nothing; it must run


@pytest.mark.parametrize("document", ["decoding.md"])
def test_self_contained_doc_examples(tmp_path, document):
    blocks = python_blocks(ROOT / "docs" / document)
    run_blocks(blocks[:1], tmp_path)


def test_pretrained_example_runs_on_the_marian_fixture(tmp_path):
    # The tiny fixture stands in for the downloaded Helsinki-NLP/opus-mt-en-de.
    import shutil

    shutil.copytree(ROOT / "tests" / "fixtures" / "marian_tiny", tmp_path / "opus-mt-en-de")
    blocks = python_blocks(ROOT / "docs" / "pretrained.md")
    assert len(blocks) == 1
    (lines,) = run_blocks(blocks, tmp_path)
    assert lines[0] == "beam 4 power", lines
    assert one_string_list(lines[1]), lines
    assert lines[2].endswith(os.path.join("models", "en-de", "1")), lines
    assert (tmp_path / "en-de" / "model.keras").is_file()


def test_which_blocks_must_keep_tensorflows_lines_off_stderr():
    # The user guide's script imports keras_tf first; its serving block is TensorFlow alone.
    blocks = python_blocks(ROOT / "docs" / "user-guide.md")
    assert [imports_tensorflow_first(block) for block in blocks] == [False, True]
    for line in (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1796494586.748145   16486 cudart_stub.cc:31] Could not find cuda drivers",
        "W0000 00:00:1796494586.748145   16486 local_rendezvous.cc:404] Local rendezvous is aborting",
        "E0000 00:00:1796494594.108806   16486 cuda_platform.cc:52] failed call to cuInit: INTERNAL",
        "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow",
    ):
        assert TENSORFLOW_LOG_LINE.match(line), line
    # keras_tf's own counted skips stay.
    assert not TENSORFLOW_LOG_LINE.match("155 of 2442 pairs over-long and truncated (118 by the source)")
