"""A Dense layer as Keras calls it, or, in the export without XLA, in the ops TensorFlow's graph executor runs fastest.

Two forms differ there. A float Dense whose output is reshaped into heads
adds its bias after the reshape (`dense_heads`): Grappler fuses a matrix
product and the bias added right after it into one oneDNN call, which
measured alone in a loop costs more than the two apart. And an int8 Dense
multiplies as float32 (`dense_call`).

Inside `cache_update.in_place_writes()` (the SavedModel export without XLA)
TensorFlow runs an int8 × int8 matrix product with its own `BatchMatMulV3`
kernel, not oneDNN's: 147 µs for `[32, 128] × [128, 384]`, where oneDNN's
float32 product takes 22. Keras's int8 `Dense` quantizes its input per
token to integers in [-127, 127] (`abs_max_quantize`), multiplies them by
the int8 kernel in int32, and divides by the two scales. Here the same
integers are multiplied as float32 numbers: every product and partial sum
is an integer below 127² · input width, which float32 holds exactly up to
2²⁴, so for inputs up to 1040 wide the result is the int32 product, bit for
bit, and beyond it is within float32 rounding.
"""

from keras import ops

from keras_tf.layers.cache_update import writes_in_place


def float_int8(dense):
    """`(kernel as float, kernel scale, epsilon)` of an int8 Dense whose product `int8_product` computes; else None.

    None outside `in_place_writes()` and for any other Dense: those are called.
    """
    quantizer = getattr(dense, "inputs_quantizer", None)
    if (
        not writes_in_place()
        or dense.quantization_mode != "int8"
        or dense.lora_enabled
        or type(quantizer).__name__ != "AbsMaxQuantizer"
        or tuple(quantizer.value_range) != (-127, 127)
    ):
        return None
    dtype = dense.compute_dtype
    return ops.cast(dense._kernel, dtype), ops.cast(dense.kernel_scale, dtype), quantizer.epsilon


def int8_product(x, kernel, kernel_scale, epsilon):
    """Keras's int8 `Dense` product of `x` (no bias), over an int8 kernel given as float numbers.

    `x` is quantized per row as `abs_max_quantize` does, but for the int8
    cast: |x · scale| < 127, so its clip to [-127, 127] changes nothing.
    """
    scale = ops.divide(127.0, ops.max(ops.abs(x), axis=-1, keepdims=True) + epsilon)
    scale = ops.cast(scale, x.dtype)
    integers = ops.round(ops.multiply(x, scale))
    return ops.divide(ops.matmul(integers, kernel), ops.multiply(kernel_scale, scale))


def dense_call(dense, x):
    """`dense(x)`; an int8 Dense inside `in_place_writes()` through a float32 product.

    Example:
        >>> import keras, numpy as np
        >>> dense = keras.layers.Dense(3)
        >>> tuple(dense_call(dense, np.ones((2, 4), "float32")).shape)
        (2, 3)
    """
    weights = float_int8(dense)
    if weights is None:
        return dense(x)
    y = int8_product(ops.cast(x, dense.compute_dtype), *weights)
    if dense.bias is not None:
        y = ops.add(y, dense.bias)
    if dense.activation is not None:
        y = dense.activation(y)
    return y


def dense_heads(dense, x, shape):
    """`dense(x)` reshaped to `shape`; a float Dense inside `in_place_writes()` adds its bias after the reshape.

    Example:
        >>> import keras, numpy as np
        >>> dense = keras.layers.Dense(4)
        >>> tuple(dense_heads(dense, np.ones((3, 2), "float32"), (-1, 2, 1, 2)).shape)
        (3, 2, 1, 2)
    """
    if not writes_in_place() or dense.quantization_mode is not None or not dense.use_bias:
        return ops.reshape(dense_call(dense, x), shape)
    dtype = dense.compute_dtype
    heads = ops.reshape(ops.matmul(x, ops.cast(dense.kernel, dtype)), shape)
    return heads + ops.reshape(ops.cast(dense.bias, dtype), shape[1:])
