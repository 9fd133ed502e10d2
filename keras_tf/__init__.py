"""keras_tf: the original encoder-decoder Transformer as Keras 3 layers."""

from keras_tf.version import __version__
from keras_tf import layers
from keras_tf import models
from keras_tf import training  # registers the loss and metric for load_model

__all__ = ["__version__", "layers", "models", "training"]
