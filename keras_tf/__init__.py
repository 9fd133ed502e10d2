"""keras_tf: the original encoder-decoder Transformer as Keras 3 layers.

`import keras_tf` is light and leaves the process alone: it imports neither
Keras nor TensorFlow and changes no setting. Each subpackage loads when it is
first used (`keras_tf.models`, `from keras_tf.models import ...`). It is
enough for `keras.saving.load_model` of any file keras_tf wrote: keras_tf's
layers, models, losses and schedules register with Keras as soon as Keras
is imported, before or after keras_tf (see `RegisterWhenKerasLoads`).

`keras_tf.quiet_tensorflow()`, called first in a script, keeps TensorFlow's
start-up lines off stderr; the `keras-tf` command line does it for itself.
"""

import importlib
import sys

from keras_tf.tensorflow_import import quiet_tensorflow
from keras_tf.version import __version__

_SUBPACKAGES = (
    "datasets", "decoding", "layers", "models", "serving", "text", "training", "translation",
)

__all__ = ["__version__", "quiet_tensorflow", *_SUBPACKAGES]


def __getattr__(name):
    # `keras_tf.models` without an import statement of its own, as before.
    if name in _SUBPACKAGES:
        return importlib.import_module(f"keras_tf.{name}")
    raise AttributeError(f"module 'keras_tf' has no attribute {name!r}")


# Keras finds a custom class of a `.keras` file in its registry, which a class
# enters when its module is imported (`register_keras_serializable`); Keras
# imports the module itself only for the `keras` and `keras_hub` packages.
# `import keras_hub` imports every module for that reason, at the cost of Keras
# and TensorFlow. `import keras_tf` stays light (the command line's `--help`
# answers in a tenth of a second) and registers keras_tf's classes as soon as
# Keras is imported, whoever imports it, and at once when it is imported
# already. The modules whose import registers a class
# (tests/test_keras_registration.py checks the list against the source):
REGISTERING_MODULES = (
    "keras_tf.layers.feed_forward",
    "keras_tf.layers.multi_head_attention",
    "keras_tf.layers.positional_embedding",
    "keras_tf.layers.transformer_decoder_block",
    "keras_tf.layers.transformer_encoder_block",
    "keras_tf.models.losses",
    "keras_tf.models.metrics",
    "keras_tf.models.schedules",
    "keras_tf.models.seq2seq_backbone",
    "keras_tf.models.seq2seq_transformer",
    "keras_tf.translation.translator",
)


def register_with_keras():
    """Import every module that registers a keras_tf class with Keras (imports Keras)."""
    for name in REGISTERING_MODULES:
        importlib.import_module(name)


class _AfterLoading:
    """Runs another loader's `exec_module`, then tells the finder (the module keeps its loader)."""

    def __init__(self, loader, finder, name):
        self.loader, self.finder, self.name = loader, finder, name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__spec__.loader = module.__loader__ = self.loader
        self.finder.started(self.name)
        try:
            self.loader.exec_module(module)
        finally:
            self.finder.finished(self.name)

    def __getattr__(self, attribute):
        return getattr(self.loader, attribute)


class RegisterWhenKerasLoads:
    """A `sys.meta_path` finder: once `keras` is imported, import `REGISTERING_MODULES`.

    When a keras_tf module imports Keras, the registering modules are
    imported after the outermost keras_tf import ends (importing them in the
    middle of it would be a circular import). It removes itself then, and
    otherwise leaves every import to the finders after it.
    """

    def __init__(self):
        self.depth = 0  # keras_tf modules being executed, one inside another
        self.keras_loaded = False

    def find_spec(self, name, path=None, target=None):
        if name != "keras" and not name.startswith("keras_tf."):
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _AfterLoading(spec.loader, self, name)
                return spec
        return None

    def started(self, name):
        if name != "keras":
            self.depth += 1

    def finished(self, name):
        if name == "keras":
            self.keras_loaded = "keras" in sys.modules
        else:
            self.depth -= 1
        if self.keras_loaded and self.depth == 0:
            self.remove()
            register_with_keras()

    def remove(self):
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def register_when_keras_loads():
    """Register keras_tf's classes with Keras now if Keras is imported, else when it is.

    Returns the `RegisterWhenKerasLoads` finder it installed (or found
    installed), or None when it registered at once.
    """
    if "keras" in sys.modules:
        register_with_keras()
        return None
    for finder in sys.meta_path:
        if isinstance(finder, RegisterWhenKerasLoads):
            return finder
    finder = RegisterWhenKerasLoads()
    sys.meta_path.insert(0, finder)  # first: it asks the others, and wraps what they find
    return finder


register_when_keras_loads()
