"""keras_tf: the original encoder-decoder Transformer as Keras 3 layers.

`import keras_tf` is light and leaves the process alone: it imports neither
Keras nor TensorFlow and changes no setting. Each subpackage loads when it is
first used (`keras_tf.models`, `from keras_tf.models import ...`). It is
enough for `keras.saving.load_model` of any file keras_tf wrote: keras_tf's
layers, models, losses and schedules register with Keras as soon as Keras
is imported, before or after keras_tf (`keras_tf.keras_registration`).

`keras_tf.quiet_tensorflow()`, called first in a script, keeps TensorFlow's
start-up lines off stderr; the `keras-tf` command line does it for itself.
"""

import importlib

from keras_tf.keras_registration import register_when_keras_loads
from keras_tf.tensorflow_import import quiet_tensorflow
from keras_tf.version import __version__

register_when_keras_loads()

_SUBPACKAGES = (
    "datasets", "decoding", "layers", "models", "serving", "text", "training", "translation",
)

__all__ = ["__version__", "quiet_tensorflow", *_SUBPACKAGES]


def __getattr__(name):
    # `keras_tf.models` without an import statement of its own, as before.
    if name in _SUBPACKAGES:
        return importlib.import_module(f"keras_tf.{name}")
    raise AttributeError(f"module 'keras_tf' has no attribute {name!r}")
