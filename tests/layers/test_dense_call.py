"""The export's int8 Dense: the int32 product of Keras's int8 call, computed as a float32 one."""

import keras
import numpy as np
import pytest

from keras_tf.layers.cache_update import in_place_writes
from keras_tf.layers.dense_call import dense_call
from tests.helpers import to_numpy

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the export without XLA is TensorFlow's"
)


def int8_dense(width, units, activation=None):
    dense = keras.layers.Dense(units, activation=activation)
    dense.build((None, width))
    dense.set_weights([np.random.randn(width, units).astype("float32"),
                       np.random.randn(units).astype("float32")])
    dense.quantize("int8")
    return dense


@pytest.mark.parametrize("activation", [None, "relu"])
def test_int8_dense_call_is_keras_int8_call_bit_for_bit(activation):
    dense = int8_dense(512, 48, activation)
    x = np.random.randn(5, 512).astype("float32") * 3
    with in_place_writes():
        got = to_numpy(dense_call(dense, x))
    expected = to_numpy(dense(x))
    np.testing.assert_array_equal(got, expected)


def test_int8_dense_call_beyond_float32s_exact_integers_stays_within_rounding():
    dense = int8_dense(2048, 16)  # 127² · 2048 > 2²⁴
    x = np.random.randn(3, 2048).astype("float32")
    with in_place_writes():
        got = to_numpy(dense_call(dense, x))
    np.testing.assert_allclose(got, to_numpy(dense(x)), rtol=1e-5, atol=1e-5)


def test_outside_the_export_it_is_the_layer_call():
    dense = int8_dense(32, 8)
    x = np.random.randn(2, 32).astype("float32")
    np.testing.assert_array_equal(to_numpy(dense_call(dense, x)), to_numpy(dense(x)))
