"""The one place that imports TensorFlow for the modules that need it.

The layers, models, decoding, loss, metric and schedule run on any Keras
backend and never import TensorFlow. The text pipeline, the serving export,
the trainer's `tf.data` and `tf.distribute` parts and the command line do;
they call `require_tensorflow` so that, without TensorFlow, the error is one
line that says what needs it.
"""

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
