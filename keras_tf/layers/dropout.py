"""Dropout as `keras.layers.Dropout` draws it, with XLA's fast generator inside an XLA-compiled TensorFlow step.

Keras's TensorFlow backend draws a dropout mask with
`tf.nn.experimental.stateless_dropout` and TensorFlow's default generator,
Philox. Inside an XLA-compiled training step on CPU, XLA's Philox costs four
times its ThreeFry: the twelve masks of `transformer_small`'s training step
at 2,048 tokens take 33 ms against 8, and the whole step costs 16 % more
with dropout 0.1 than without against 4.6 % with ThreeFry
(`benchmarks/dropout_speed.py`, `benchmarks/results/dropout-speed.md`).
ThreeFry is XLA's own generator (JAX's default); TensorFlow's kernels
outside XLA lack it. So this layer draws with ThreeFry where TensorFlow is
tracing for XLA, and is Keras's Dropout everywhere else (other backends,
`jit_compile=False`, inference). Same rate, same seed generator, same
expectation; only the stream of masks differs.

TensorFlow says whether a graph is being traced for XLA only through
`tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext`, a
private name; where it is missing this layer is Keras's Dropout, and
`tests/layers/test_dropout.py` fails loudly.
"""

import keras


def _in_xla_context():
    """True where TensorFlow is tracing a graph for XLA (a `jit_compile=True` function)."""
    import tensorflow as tf  # only on the TensorFlow backend

    try:
        from tensorflow.python.ops import control_flow_util
    except ImportError:
        return False
    in_xla = getattr(control_flow_util, "GraphOrParentsInXlaContext", None)
    if in_xla is None or tf.executing_eagerly():
        return False
    return bool(in_xla(tf.compat.v1.get_default_graph()))


class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout`, drawing its mask with ThreeFry inside an XLA-compiled TensorFlow step.

    Args: those of `keras.layers.Dropout` (`rate`, `noise_shape`, `seed`).

    Example:
        >>> import numpy as np
        >>> layer = Dropout(0.5, seed=0)
        >>> x = np.ones((2, 8), "float32")
        >>> bool((np.asarray(layer(x, training=False)) == x).all())
        True
        >>> {float(v) for v in np.asarray(layer(x, training=True)).ravel()} <= {0.0, 2.0}
        True
    """

    def call(self, inputs, training=False):
        drawn_by_xla = (
            training and self.rate > 0
            and keras.backend.backend() == "tensorflow" and _in_xla_context()
        )
        if not drawn_by_xla:
            return super().call(inputs, training=training)
        import tensorflow as tf  # only on the TensorFlow backend

        seed = self.seed_generator.next()
        # XLA's stateless generators take an int32 seed; the generator's
        # state is int64 on TensorFlow (Keras's backend folds it the same way).
        if seed.dtype != tf.int32:
            seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
        noise_shape = None
        if self.noise_shape is not None:
            noise_shape = [
                tf.shape(inputs)[i] if size is None else size
                for i, size in enumerate(self.noise_shape)
            ]
        return tf.nn.experimental.stateless_dropout(
            inputs, rate=self.rate, seed=seed, rng_alg="threefry", noise_shape=noise_shape
        )
