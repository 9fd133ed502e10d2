"""The backend's XLA entry point for the decoding functions: the one backend switch of decoding.

The loops are `keras.ops`; only compiling them differs. On TensorFlow,
`tf.function(jit_compile=True)` reads the model's variables as variables. On
JAX, `jax.jit` would bake variables it closes over into the program as
constants, so their values are passed in as arguments and read through a
`keras.StatelessScope`, as Keras's own JAX trainer does: a weight change
after compiling is seen without recompiling.
"""

import keras

SUPPORTED_BACKENDS = ("tensorflow", "jax")


def xla_compile(fn, variables):
    """Compile `fn(*tensors)` with XLA for the current Keras backend.

    Args:
        fn: a function of tensors, traced once per input shape.
        variables: a callable returning the Keras variables `fn` reads (the
            model's, a seed generator's); JAX passes their current values
            at every call.

    Returns:
        A function with the signature of `fn`.

    Example:
        >>> import keras, numpy as np
        >>> scale = keras.Variable(2.0)
        >>> double = xla_compile(lambda x: x * scale, lambda: [scale])
        >>> float(double(np.float32(3.0)))
        6.0
        >>> _ = scale.assign(3.0)
        >>> float(double(np.float32(3.0)))  # the new value, no recompile
        9.0
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        # No autograph: the loops are explicit `ops.while_loop`s.
        return tf.function(fn, jit_compile=True, autograph=False)
    if backend == "jax":
        import jax

        def stateless(values, *tensors):
            with keras.StatelessScope(state_mapping=list(zip(variables(), values))):
                return fn(*tensors)

        compiled = jax.jit(stateless)

        def call(*tensors):
            return compiled([v.value for v in variables()], *tensors)

        return call
    raise NotImplementedError(
        f"compiled decoding supports the Keras backends {SUPPORTED_BACKENDS}; "
        f"received KERAS_BACKEND={backend!r}"
    )
