"""keras_tf.layers.Dropout: Keras's Dropout, drawn with ThreeFry inside an XLA-compiled TensorFlow step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_tf.layers import Dropout
from keras_tf.layers.dropout import _in_xla_context

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the ThreeFry path is TensorFlow's"
)

RATE = 0.25


def _pair(seed=3):
    """Ours and Keras's, with the same rate and seed."""
    return Dropout(RATE, seed=seed), keras.layers.Dropout(RATE, seed=seed)


def _run(layer, x, jit_compile):
    return tf.function(lambda t: layer(t, training=True), jit_compile=jit_compile)(x).numpy()


def test_tensorflow_still_says_where_it_traces_for_xla():
    # The private name this layer reads; if TensorFlow moves it, the layer
    # quietly draws Philox again (a training step 16 % dearer on a CPU, not 4.6 %).
    from tensorflow.python.ops import control_flow_util

    assert callable(control_flow_util.GraphOrParentsInXlaContext)
    seen = {}

    def probe(jit_compile):
        def f(t):
            seen[jit_compile] = _in_xla_context()
            return t

        tf.function(f, jit_compile=jit_compile)(tf.zeros(1))

    probe(True)
    probe(False)
    assert seen == {True: True, False: False}
    assert _in_xla_context() is False  # eager


@pytest.mark.parametrize("jit_compile", [True, False])
def test_a_mask_keeps_the_rate_and_scales_the_kept(jit_compile):
    x = np.random.default_rng(0).uniform(1.0, 2.0, (64, 32, 128)).astype("float32")
    out = _run(Dropout(RATE, seed=1), x, jit_compile)
    kept = out != 0
    # 262,144 draws: the kept fraction's standard deviation is 0.00085.
    assert abs(kept.mean() - (1 - RATE)) < 0.005
    np.testing.assert_allclose(out[kept], x[kept] / (1 - RATE), rtol=1e-6)


def test_under_xla_it_draws_threefry_and_elsewhere_keras_s_own_mask():
    x = np.ones((16, 64), "float32")
    ours, theirs = _pair()
    # Outside XLA: the same mask as Keras's Dropout, draw for draw.
    np.testing.assert_array_equal(_run(ours, x, False), _run(theirs, x, False))
    ours, theirs = _pair()
    fast, philox = _run(ours, x, True), _run(theirs, x, True)
    assert (fast != philox).any()  # another generator
    # ...and the one named: ThreeFry on the seed Keras's generator gives.
    seed = keras.random.SeedGenerator(3).next()
    seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    expected = tf.function(
        lambda t: tf.nn.experimental.stateless_dropout(t, RATE, seed=seed, rng_alg="threefry"),
        jit_compile=True,
    )(x)
    np.testing.assert_array_equal(fast, expected.numpy())


def test_each_step_draws_a_new_mask_and_a_seed_repeats_the_stream():
    x = np.ones((8, 64), "float32")

    def two_steps():
        layer = Dropout(RATE, seed=5)
        step = tf.function(lambda t: layer(t, training=True), jit_compile=True)
        return step(x).numpy(), step(x).numpy()

    first, second = two_steps()
    assert (first != second).any()
    again = two_steps()
    np.testing.assert_array_equal(first, again[0])
    np.testing.assert_array_equal(second, again[1])


def test_noise_shape_shares_a_mask_along_its_none_axes():
    layer = Dropout(RATE, noise_shape=(None, 1, None), seed=2)
    out = _run(layer, np.ones((4, 6, 32), "float32"), True)
    # One mask per (batch, feature), the same at every position.
    assert (out == out[:, :1, :]).all()
    assert 0 < (out == 0).mean() < 1


def test_inference_and_rate_zero_pass_through():
    x = np.arange(12, dtype="float32").reshape(3, 4)
    layer = Dropout(0.5)
    np.testing.assert_array_equal(
        tf.function(lambda t: layer(t, training=False), jit_compile=True)(x).numpy(), x
    )
    np.testing.assert_array_equal(_run(Dropout(0.0), x, True), x)


def test_the_model_s_dropouts_are_these_and_xla_training_learns_through_them():
    from keras_tf.models import Seq2SeqTransformer

    from tests.helpers import one_block_tiny

    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(one_block_tiny(dropout=0.1))
    rng = np.random.default_rng(0)
    tokens = rng.integers(4, 60, (64, 8)).astype("int32")
    inputs = {"encoder_tokens": tokens, "decoder_tokens": tokens}
    model.compile(
        keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy", jit_compile=True
    )
    history = model.fit(inputs, tokens, batch_size=16, epochs=6, verbose=0)
    dropouts = [
        layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.Dropout)
    ]
    # the two embedding sums; the encoder's self-attention weights and its two
    # sub-layers; the decoder's two attentions' weights and its three sub-layers
    assert [type(layer) for layer in dropouts] == [Dropout] * 10
    losses = history.history["loss"]
    assert losses[-1] < 0.75 * losses[0]
