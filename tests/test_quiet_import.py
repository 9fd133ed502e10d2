"""`import_quietly`: TensorFlow's C++ start-up lines are kept off stderr, nothing else is."""

import sys

from keras_tf.tensorflow_import import import_quietly

NOISY_MODULE = '''
import os
os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n")
os.write(2, b"I0000 00:00:1796082642.374100    9843 port.cc:153] oneDNN custom operations are on.\\n")
os.write(2, b"W0000 00:00:1796082642.374453    9843 cudart_stub.cc:31] Could not find cuda drivers\\n")
os.write(2, b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild\\n")
os.write(2, b"E0000 00:00:1796082642.374453    9843 some_op.cc:12] a real error\\n")
os.write(2, b"an ordinary line\\n")
'''


def test_only_the_start_up_lines_are_dropped(tmp_path, monkeypatch, capfd):
    (tmp_path / "noisy_module.py").write_text(NOISY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.delitem(sys.modules, "noisy_module", raising=False)
    module = import_quietly("noisy_module")
    assert module.__name__ == "noisy_module"
    assert capfd.readouterr().err == (
        "E0000 00:00:1796082642.374453    9843 some_op.cc:12] a real error\n"
        "an ordinary line\n"
    )


def test_log_level_0_shows_everything(tmp_path, monkeypatch, capfd):
    (tmp_path / "noisy_module.py").write_text(NOISY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    monkeypatch.delitem(sys.modules, "noisy_module", raising=False)
    import_quietly("noisy_module")
    assert capfd.readouterr().err.count("\n") == 6


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
