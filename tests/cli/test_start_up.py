"""`keras-tf` answers `--version` and `--help` at once, and its commands print no TensorFlow start-up lines."""

import os
import re
import shlex
import subprocess
import sys

from tests.cli.conftest import keras_tf_command

WITHOUT_TENSORFLOW = """
import contextlib, io, sys
from keras_tf.cli.main import main
for argv in (["--version"], ["--help"], ["train", "--help"], ["demo", "--help"]):
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            main(argv)
    except SystemExit as exit:
        assert exit.code == 0, (argv, exit.code)
    assert printed.getvalue().strip(), argv
print(sorted(name for name in ("keras", "tensorflow") if name in sys.modules))
"""


def test_version_and_help_do_not_import_tensorflow():
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_TENSORFLOW], capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]", result.stdout


def test_a_command_prints_no_tensorflow_start_up_lines_and_no_warnings(tmp_path):
    # As a user runs it: TF_CPP_MIN_LOG_LEVEL unset, Python's warnings shown.
    # plot-encoding imports TensorFlow, Keras and matplotlib and runs an op.
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONWARNINGS"] = "default"
    out = tmp_path / "pe.png"
    result = subprocess.run(
        [*keras_tf_command(), "plot-encoding", "--out", str(out)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == ""
    assert result.stdout.strip() == str(out) and out.is_file()


# A TensorFlow or CUDA log line: "E0000 00:00:1796... cuda_platform.cc:52] failed call
# to cuInit", "I0000 ... port.cc:153] oneDNN custom operations are on", absl's banner.
TENSORFLOW_LOG_LINE = re.compile(r"^([IWEF]\d{4} \d\d:\d\d:|WARNING: All log messages)", re.M)


def test_translate_and_export_print_no_tensorflow_or_cuda_line(trained_run, tmp_path):
    # As a user runs them: TF_CPP_MIN_LOG_LEVEL unset. On a machine with a CUDA
    # library and no GPU, both printed "E0000 ... failed call to cuInit".
    model_dir, _ = trained_run
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    command = " ".join(shlex.quote(part) for part in keras_tf_command())
    script = (f"echo 'red cat' | {command} translate --model {shlex.quote(str(model_dir))} && "
              f"{command} export --model {shlex.quote(str(model_dir))} --no-warmup "
              f"--out {shlex.quote(str(tmp_path / 'export' / '1'))}")
    result = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=600,
                            env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not TENSORFLOW_LOG_LINE.search(result.stderr), result.stderr
    assert result.stdout.splitlines()[-1] == str(tmp_path / "export" / "1")
