"""The private Keras attributes the tf.distribute workaround replaces still exist."""

import keras
import pytest

from keras_tf.models import Seq2SeqTransformer, get_preset
from keras_tf.training.distribute import KERAS_HOOKS, check_keras_hooks


def test_every_hooked_attribute_exists_on_a_model():
    model = Seq2SeqTransformer(get_preset("transformer_tiny"))
    assert all(hasattr(model, name) for name in KERAS_HOOKS)
    assert callable(model._maybe_symbolic_build) and callable(model._symbolic_build)
    check_keras_hooks(model)


def test_a_missing_hook_fails_loudly():
    class Moved(keras.Model):
        def __getattribute__(self, name):
            if name == "_maybe_symbolic_build":
                raise AttributeError(name)
            return super().__getattribute__(name)

    with pytest.raises(RuntimeError, match=r"\['_maybe_symbolic_build'\], which keras 3\.\d+"):
        check_keras_hooks(Moved())
