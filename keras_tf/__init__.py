"""keras_tf: the original encoder-decoder Transformer as Keras 3 layers."""

from keras_tf.tensorflow_import import import_quietly, quiet_first_import

import_quietly("keras")  # with TensorFlow's C++ start-up lines kept off stderr
quiet_first_import("tensorflow")  # on JAX, for whoever imports it later: Keras's saving does

from keras_tf.version import __version__  # noqa: E402
from keras_tf import layers  # noqa: E402
from keras_tf import models  # noqa: E402
from keras_tf import training  # noqa: E402; registers the loss and metric for load_model

__all__ = ["__version__", "layers", "models", "training"]
