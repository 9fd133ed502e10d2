"""The position-wise feed-forward network (section 3.3)."""

import keras

from keras_tf.layers.dense_call import dense_call
from keras_tf.layers.validation import clone_initializer


@keras.saving.register_keras_serializable(package="keras_tf")
class FeedForward(keras.layers.Layer):
    """FFN(x) = activation(x W1 + b1) W2 + b2, applied at every position.

    Args:
        d_model: input and output width.
        d_ff: inner width.
        activation: inner activation. Defaults to "relu", as in the paper.
        kernel_initializer: initializer of both kernels.

    Example:
        >>> import numpy as np
        >>> tuple(FeedForward(d_model=4, d_ff=16)(np.zeros((1, 3, 4))).shape)
        (1, 3, 4)
    """

    def __init__(
        self, d_model, d_ff, activation="relu", kernel_initializer="glorot_uniform", **kwargs
    ):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.d_ff = d_ff
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        self.inner_dense = keras.layers.Dense(
            self.d_ff,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="inner_dense",
        )
        self.inner_dense.build(inputs_shape)
        self.output_dense = keras.layers.Dense(
            self.d_model,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="output_dense",
        )
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.d_ff,))
        self.built = True

    def call(self, inputs):
        return dense_call(self.output_dense, dense_call(self.inner_dense, inputs))

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape[:-1]) + (self.d_model,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "d_ff": self.d_ff,
                "activation": keras.activations.serialize(self.activation),
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
