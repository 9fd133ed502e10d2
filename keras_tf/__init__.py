"""keras_tf: the original encoder-decoder Transformer as Keras 3 layers."""

from keras_tf.version import __version__
from keras_tf import layers
from keras_tf import models

__all__ = ["__version__", "layers", "models"]
