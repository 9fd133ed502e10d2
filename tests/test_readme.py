"""The README's script example runs as written, in a fresh process, with no Python warning."""

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def python_blocks(path):
    """The ```python blocks of a Markdown file, in order."""
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def test_readme_script_example_runs_as_written(tmp_path):
    blocks = python_blocks(ROOT / "README.md")
    assert len(blocks) == 1, "the README has one script example; this test runs it"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", blocks[0]],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=900,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    lines = result.stdout.strip().splitlines()
    # generate: a list of one string; score: one negative log-probability; export: the folder.
    assert re.fullmatch(r"\['.*'\]", lines[-3]), lines[-3:]
    assert re.fullmatch(r"\[-\d+\.\d+\]", lines[-2]), lines[-2:]
    assert lines[-1].endswith(os.path.join("models", "translator", "1")), lines[-1]
    assert (tmp_path / "my_translator" / "model.keras").is_file()
    assert (tmp_path / "models" / "translator" / "1" / "saved_model.pb").is_file()
