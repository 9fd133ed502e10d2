"""The one place that imports TensorFlow for the modules that need it.

The layers, models, decoding, loss, metric and schedule run on any Keras
backend and never import TensorFlow. The text pipeline, the serving export,
the trainer's `tf.data` and `tf.distribute` parts and the command line do;
they call `require_tensorflow` so that, without TensorFlow, the error is one
line that says what needs it.
"""

import importlib
import os
import re
import sys
import tempfile

INSTALL_HINT = 'pip install "tensorflow>=2.21,<2.22" "tensorflow-text>=2.21,<2.22"'


def require_tensorflow(feature):
    """Import and return `tensorflow`, or raise a one-line `ModuleNotFoundError` naming `feature`.

    Example:
        >>> tf = require_tensorflow("keras_tf.text")
        >>> tf.__name__
        'tensorflow'
    """
    try:
        import tensorflow
    except ImportError:
        raise ModuleNotFoundError(
            f"{feature} needs TensorFlow, which is not installed ({INSTALL_HINT}); "
            "keras_tf's layers, models and decoding run without it, e.g. with "
            "KERAS_BACKEND=jax",
            name="tensorflow",
        ) from None
    return tensorflow


# TensorFlow's start-up log: absl's INFO and WARNING lines ("I0000 00:00:...
# port.cc:153] oneDNN custom operations are on...", "cudart_stub.cc:31] Could not
# find cuda drivers..."), the banner absl prints before it is initialised, and
# the CPU-feature note's second line. TensorFlow writes them from C++ while
# `import tensorflow` loads its libraries, before TF_CPP_MIN_LOG_LEVEL is read.
# On a machine with a CUDA library and no GPU, the first look at the devices
# adds an ERROR line that only says so ("cuda_platform.cc:52] failed call to
# cuInit: ..."); `import_quietly` looks at them while it listens.
_START_UP_LINE = re.compile(
    r"^([IW]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\] |"
    r"E\d{4} \d\d:\d\d:\d+\.\d+ +\d+ cuda_platform\.cc:\d+\] failed call to cuInit: |"
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$|"
    r"To enable the following instructions: )"
)


def is_start_up_line(line):
    """Whether `line` is one of TensorFlow's C++ start-up lines, which `import_quietly` drops.

    For a process that may not import keras_tf (a serving process, say):
    its parent can pass its stderr on without them.

    Example:
        >>> is_start_up_line("I0000 00:00:1796224041.141565   13619 port.cc:153] oneDNN custom ...")
        True
        >>> is_start_up_line("Traceback (most recent call last):")
        False
    """
    return bool(_START_UP_LINE.match(line))


def import_quietly(name):
    """Import module `name` with TensorFlow's C++ start-up lines kept off stderr.

    Whatever else the import writes to file descriptor 2 (its errors, Python
    warnings, absl's ERROR lines) is written back to stderr after it. Set
    TF_CPP_MIN_LOG_LEVEL=0 to see the start-up lines; otherwise it defaults
    to 1 (no INFO lines) for the rest of the process.

    Example:
        >>> import_quietly("keras").__name__
        'keras'
    """
    if name in sys.modules:
        return sys.modules[name]
    if os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1") == "0":
        return importlib.import_module(name)
    sys.stderr.flush()
    with tempfile.TemporaryFile() as captured:
        stderr_fd = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            module = importlib.import_module(name)
            if "tensorflow" in sys.modules:
                # Lists the devices (CUDA's start-up) without creating them, so a
                # script may still split its CPU into logical devices after this.
                sys.modules["tensorflow"].config.list_physical_devices("GPU")
            return module
        finally:
            os.dup2(stderr_fd, 2)
            os.close(stderr_fd)
            captured.seek(0)
            lines = captured.read().decode("utf-8", "replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not is_start_up_line(line)))
            sys.stderr.flush()
