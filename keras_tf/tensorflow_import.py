"""The one place that imports TensorFlow for the modules that need it.

The layers, models, decoding, loss, metric and schedule run on any Keras
backend and never import TensorFlow. The text pipeline, the serving export,
the trainer's `tf.data` and `tf.distribute` parts and the command line do;
they call `require_tensorflow` so that, without TensorFlow, the error is one
line that says what needs it.
"""

import contextlib
import importlib
import importlib.util
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
# cuInit: ..."); `import_quietly` and `quiet_tensorflow` look at them while they
# listen. Running a reloaded SavedModel adds an ERROR line that only says
# TensorFlow falls back to its own int32 or int64 kernels ("util.cc:131] oneDNN
# supports DT_INT64 only on platforms with AVX-512...", printed on CPUs that have AVX-512 too): the
# command line drops it around such a run (`tensorflow_notices_dropped`).
_START_UP_LINE = re.compile(
    r"^([IW]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\] |"
    r"E\d{4} \d\d:\d\d:\d+\.\d+ +\d+ cuda_platform\.cc:\d+\] failed call to cuInit: |"
    r"E\d{4} \d\d:\d\d:\d+\.\d+ +\d+ util\.cc:\d+\] oneDNN supports DT_INT(32|64) only |"
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
        >>> is_start_up_line("E0000 00:00:1796536875.257292 3114 util.cc:131] oneDNN supports DT_INT64 only ...")
        True
        >>> is_start_up_line("Traceback (most recent call last):")
        False
    """
    return bool(_START_UP_LINE.match(line))


@contextlib.contextmanager
def tensorflow_notices_dropped():
    """Listen to file descriptor 2; afterwards write back all but TensorFlow's start-up lines.

    For the top of a program (a command, a script's main): what the block
    writes to stderr comes out after it, without the lines that
    `is_start_up_line` matches.
    """
    sys.stderr.flush()
    with tempfile.TemporaryFile() as captured:
        stderr_fd = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(stderr_fd, 2)
            os.close(stderr_fd)
            captured.seek(0)
            lines = captured.read().decode("utf-8", "replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not is_start_up_line(line)))
            sys.stderr.flush()


def _wants_start_up_lines():
    """Whether TF_CPP_MIN_LOG_LEVEL=0 asks for the lines; sets TensorFlow's level to 1 if unset."""
    return os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1") == "0"


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
    if _wants_start_up_lines():
        return importlib.import_module(name)
    with tensorflow_notices_dropped():
        module = importlib.import_module(name)
        if "tensorflow" in sys.modules:
            # Lists the devices (CUDA's start-up) without creating them, so a
            # script may still split its CPU into logical devices after this.
            sys.modules["tensorflow"].config.list_physical_devices("GPU")
    return module


class _QuietLoader:
    """Runs another loader's `exec_module` with the start-up lines dropped."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        # The module keeps the real loader; this one leaves no trace. No look
        # at the devices: an import made for Keras's type check on JAX should
        # not start CUDA in TensorFlow beside JAX's.
        module.__spec__.loader = module.__loader__ = self.loader
        with tensorflow_notices_dropped():
            self.loader.exec_module(module)

    def __getattr__(self, attribute):
        return getattr(self.loader, attribute)


class QuietFirstImport:
    """A `sys.meta_path` finder: the first import of one module, by any code, drops its start-up lines.

    On the JAX backend keras_tf does not import TensorFlow, but Keras does
    when TensorFlow is installed and a model is saved (its serializer checks
    `tf.TensorShape`), and a script may import it itself: `import_quietly`'s
    filter, later. It removes itself at that first import, found or not, and
    otherwise leaves the import to the finders after it.
    """

    def __init__(self, name):
        self.name = name

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        self.remove()
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec

    def remove(self):
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def quiet_first_import(name="tensorflow"):
    """Drop TensorFlow's start-up lines from the first import of `name`, whenever it comes.

    Returns the `QuietFirstImport` finder it installed (or found installed),
    or None when `name` is already imported or TF_CPP_MIN_LOG_LEVEL=0 asks
    for the lines.

    Example:
        >>> quiet_first_import("tensorflow") is None  # imported already here
        True
    """
    if name in sys.modules or _wants_start_up_lines():
        return None
    for finder in sys.meta_path:
        if isinstance(finder, QuietFirstImport) and finder.name == name:
            return finder  # installed already (a conftest, then quiet_tensorflow)
    finder = QuietFirstImport(name)
    sys.meta_path.insert(0, finder)
    return finder


def quiet_tensorflow():
    """Keep TensorFlow's C++ start-up lines off stderr in this process; return `keras`.

    Call it first in a script, before `import keras` or `import tensorflow`:
    it imports Keras (and TensorFlow, on its backend) with those lines
    dropped, and on another backend drops them from TensorFlow's first
    import, whenever that comes. It also sets TF_CPP_MIN_LOG_LEVEL to 1 (no
    INFO lines) unless it is set; TF_CPP_MIN_LOG_LEVEL=0 shows everything.
    Python warnings and real errors still reach stderr. `import keras_tf`
    alone does none of this; the `keras-tf` command calls it.

    Example:
        >>> import keras_tf
        >>> keras = keras_tf.quiet_tensorflow()
        >>> keras.__name__
        'keras'
    """
    keras = import_quietly("keras")
    quiet_first_import("tensorflow")
    if "tensorflow" in sys.modules and not _wants_start_up_lines():
        # TensorFlow came in before Keras (a command's own import, or
        # TensorFlow's import of Keras) without the first look at the
        # devices: CUDA's start-up line would come with the first op.
        with tensorflow_notices_dropped():
            sys.modules["tensorflow"].config.list_physical_devices("GPU")
    return keras
