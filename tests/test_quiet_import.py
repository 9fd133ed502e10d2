"""`quiet_tensorflow`, `import_quietly`, `quiet_first_import`: TensorFlow's C++ start-up lines are kept off stderr, nothing else is; `import keras_tf` alone changes nothing."""

import os
import subprocess
import sys

import pytest

from keras_tf.tensorflow_import import QuietFirstImport, import_quietly, quiet_first_import

NOISY_MODULE = '''
import os
os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n")
os.write(2, b"I0000 00:00:1796082642.374100    9843 port.cc:153] oneDNN custom operations are on.\\n")
os.write(2, b"W0000 00:00:1796082642.374453    9843 cudart_stub.cc:31] Could not find cuda drivers\\n")
os.write(2, b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild\\n")
os.write(2, b"E0000 00:00:1796223927.336773   12572 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\\n")
os.write(2, b"E0000 00:00:1796082642.374453    9843 some_op.cc:12] a real error\\n")
os.write(2, b"an ordinary line\\n")
'''

# What import_quietly and quiet_first_import let through of NOISY_MODULE.
KEPT = (
    "E0000 00:00:1796082642.374453    9843 some_op.cc:12] a real error\n"
    "an ordinary line\n"
)


def noisy_module(name, tmp_path, monkeypatch, log_level=None):
    """Make NOISY_MODULE importable as `name`, not yet imported, with TF_CPP_MIN_LOG_LEVEL set or unset."""
    (tmp_path / f"{name}.py").write_text(NOISY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    if log_level is None:
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", log_level)
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_only_the_start_up_lines_are_dropped(tmp_path, monkeypatch, capfd):
    noisy_module("noisy_module", tmp_path, monkeypatch)
    module = import_quietly("noisy_module")
    assert module.__name__ == "noisy_module"
    assert capfd.readouterr().err == KEPT


def test_log_level_0_shows_everything(tmp_path, monkeypatch, capfd):
    noisy_module("noisy_module", tmp_path, monkeypatch, log_level="0")
    import_quietly("noisy_module")
    assert capfd.readouterr().err.count("\n") == 7


def test_an_import_error_still_shows_what_was_written(tmp_path, monkeypatch, capfd):
    (tmp_path / "broken_module.py").write_text(
        "import os\nos.write(2, b'why it broke\\n')\nraise ImportError('broken')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    try:
        import_quietly("broken_module")
    except ImportError as error:
        assert str(error) == "broken"
    else:
        raise AssertionError("the ImportError was swallowed")
    assert capfd.readouterr().err == "why it broke\n"


def test_a_later_first_import_by_anyone_drops_the_start_up_lines(tmp_path, monkeypatch, capfd):
    # On JAX, keras_tf installs this for TensorFlow, which Keras imports when it saves.
    noisy_module("noisy_later", tmp_path, monkeypatch)
    finder = quiet_first_import("noisy_later")
    try:
        assert isinstance(finder, QuietFirstImport) and sys.meta_path[0] is finder
        import noisy_later  # noqa: F401  (a plain import statement, as Keras's would be)

        assert finder not in sys.meta_path  # once: it removed itself
        assert capfd.readouterr().err == KEPT
        # The module keeps its own loader, and a second import reads sys.modules.
        assert type(noisy_later.__loader__).__name__ == "SourceFileLoader"
        assert noisy_later.__spec__.loader is noisy_later.__loader__
    finally:
        finder.remove()
        sys.modules.pop("noisy_later", None)


def test_a_later_first_import_of_a_missing_module_still_fails_plainly(monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    finder = quiet_first_import("no_such_module_here")
    try:
        with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
            import no_such_module_here  # noqa: F401
        assert finder not in sys.meta_path
    finally:
        finder.remove()


def test_quiet_first_import_stands_aside(monkeypatch):
    # Already imported, or TF_CPP_MIN_LOG_LEVEL=0 asks for the lines: no finder.
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    assert quiet_first_import("os") is None
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert quiet_first_import("not_imported_yet") is None
    assert not [f for f in sys.meta_path if isinstance(f, QuietFirstImport)]


FIRST_STEPS = """
import numpy as np
import keras_tf
keras_tf.quiet_tensorflow()
import tensorflow as tf

# The devices were listed quietly, not created: the CPU still splits in two.
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
assert len(tf.config.list_logical_devices("CPU")) == 2

from keras_tf.translation import Seq2SeqTranslator
from keras_tf.text import Seq2SeqTokenizers
lines = ["open the file", "save the notebook", "close the tab now"] * 20
tokenizers = Seq2SeqTokenizers.train(lines, lines, vocabulary_size=24)
translator = Seq2SeqTranslator.from_preset(
    "transformer_tiny", tokenizers=tokenizers, max_source_length=8, max_target_length=8)
inputs, labels = translator.preprocessor(tf.constant(lines[:3]), tf.constant(lines[:3]))
logits = np.asarray(translator.backbone(inputs))
print(logits.shape == (3, labels.shape[1], tokenizers.target_vocabulary_size), labels.shape[1])
"""


def test_first_steps_in_a_fresh_process_write_nothing_to_stderr(tmp_path):
    # TF_CPP_MIN_LOG_LEVEL unset, as a user runs it, who asks for quiet with
    # keras_tf.quiet_tensorflow(). On a CPU whose oneDNN has
    # no int64 kernels, a ragged concatenation (the framing of a batch) and the
    # first look at the devices each wrote an ERROR line that said nothing wrong.
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-c", FIRST_STEPS], capture_output=True, text=True, timeout=300,
        env=env, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == ""
    # "open the file" and the rest, framed: at most 8 ids with START or END.
    matches, width = result.stdout.split()
    assert matches == "True" and 2 <= int(width) <= 8, result.stdout


IMPORT_ALONE = """
import os, sys
fd_before = os.fstat(2)
import keras_tf
print(os.environ.get("TF_CPP_MIN_LOG_LEVEL"))
print([type(finder).__name__ for finder in sys.meta_path
       if finder.__module__.startswith("keras_tf")])
print(sorted(name for name in ("keras", "tensorflow") if name in sys.modules))
fd_after = os.fstat(2)
print((fd_before.st_dev, fd_before.st_ino) == (fd_after.st_dev, fd_after.st_ino))
"""


def test_import_keras_tf_leaves_the_process_alone(tmp_path):
    # A user's script gets TensorFlow as they configured it: `import keras_tf`
    # sets no environment variable, installs one import hook (which registers
    # keras_tf's classes once Keras is imported, and touches nothing else),
    # imports neither Keras nor TensorFlow and leaves file descriptor 2 where
    # it was.
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_ALONE], capture_output=True, text=True, timeout=120,
        env=env, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [
        "None", "['RegisterWhenKerasLoads']", "[]", "True"], result.stdout
    assert result.stderr == ""


def test_each_subpackage_imports_first_in_a_fresh_process():
    # `import keras_tf` imports no subpackage, so a program's first keras_tf
    # import may be any of them; each must find what it needs complete.
    for name in ("decoding", "serving"):
        result = subprocess.run(
            [sys.executable, "-c", f"import keras_tf.{name}"], capture_output=True, text=True,
            timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
        assert result.returncode == 0, (name, result.stderr[-3000:])


def test_quiet_first_import_installs_one_finder_per_module(monkeypatch):
    # tests/conftest.py installs it, then quiet_tensorflow() asks again.
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    finder = quiet_first_import("not_imported_here")
    try:
        assert quiet_first_import("not_imported_here") is finder
        assert [f for f in sys.meta_path if isinstance(f, QuietFirstImport)] == [finder]
    finally:
        finder.remove()
