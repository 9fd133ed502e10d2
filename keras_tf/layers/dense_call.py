"""A Dense layer as Keras calls it, or, in the export without XLA, in the ops TensorFlow's graph executor runs fastest.

Two forms differ there. A float Dense adds its bias apart from its product
(`dense_call` on a decoding step's `[rows, width]` within
`step_weights_once`): Grappler fuses a matrix product and the bias added
right after it into one oneDNN call, which costs more than the two apart (`benchmarks/serving_op_costs.py`:
6.5 against 2.2 µs at one row, 15.7 against 10.9 at 32). And an int8 Dense
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

The int8 weights a decoding step reads are cast to float once per request,
outside the decoding loop (`step_weights_once`), not at every step:
TensorFlow's graph executor does not move loop-invariant work out of a loop.
"""

import contextlib
import threading

import keras
from keras import ops
from keras.backend import standardize_dtype

from keras_tf.layers.cache_update import writes_in_place

# Set by `step_weights_once` around a decoding loop, for one request:
# `cast` {(id(int8 variable), dtype): the variable cast to dtype}, `biases`
# {id(float Dense): its bias repeated over the step's rows}, `transposed`
# {id(embedding table): the table in float32, transposed}.
_ONCE = threading.local()


def _sublayers(layers):
    """`layers` and all their sublayers, each once."""
    found = {}
    for top in layers:
        for layer in top._flatten_layers(include_self=True):
            found.setdefault(id(layer), layer)
    return list(found.values())


def int8_weights(layers):
    """`(variable, dtype)` of each int8 weight of `layers` and their sublayers, with the dtype it is read in.

    Dense kernels, read in the layer's compute dtype (`float_int8`), and
    Embedding tables, read in float32 by the tied output projection
    (`PositionalEmbedding(reverse=True)`).
    """
    found = []
    for layer in _sublayers(layers):
        if getattr(layer, "quantization_mode", None) != "int8":
            continue
        for name, dtype in (("_kernel", layer.compute_dtype), ("_embeddings", "float32")):
            variable = getattr(layer, name, None)
            if variable is not None and standardize_dtype(variable.dtype) == "int8":
                found.append((variable, dtype))
    return found


def float_dense_with_bias(layers):
    """The float Dense layers with a bias among `layers` and their sublayers."""
    return [layer for layer in _sublayers(layers) if isinstance(layer, keras.layers.Dense)
            and layer.quantization_mode is None and layer.use_bias]


@contextlib.contextmanager
def step_weights_once(layers, rows, output_tables=()):
    """Within it (inside `in_place_writes()`), the weights a decoding step of `layers` reads in another form, made here, once.

    The export's decoding loop would redo at every step what this does once
    per request, outside the loop (TensorFlow's graph executor does not move
    loop-invariant work out of a loop):
    - each int8 kernel and embedding table cast to float (`cast_weight`):
      the same integers, so the arithmetic is unchanged. The copies live for
      the request: float32, four times the int8 weights' size;
    - each float Dense's bias repeated over the step's `rows`, which
      `dense_call` adds to the product as a plain add of two equal shapes:
      Grappler would fuse a bias added right after the product into one
      oneDNN call, which costs more than the two apart;
    - each of `output_tables` transposed, in float32 (`transposed_table`):
      a product with a transposed operand costs oneDNN more than one with
      the table laid out as the product reads it.

    Args:
        layers: the layers a step calls (their sublayers included).
        rows: the rows of a step's states (batch × beams), a scalar.
        output_tables: embedding tables the step multiplies its states by,
            transposed (a tied output layer).

    Elsewhere (XLA, JAX, eager) it does nothing: XLA hoists and fuses itself.
    """
    if not writes_in_place():
        yield
        return
    names = ("cast", "biases", "transposed")
    before = [getattr(_ONCE, name, {}) for name in names]
    cast = {(id(variable), dtype): ops.cast(variable, dtype)
            for variable, dtype in int8_weights(layers)}
    biases = {
        id(dense): ops.tile(ops.cast(dense.bias, dense.compute_dtype)[None], (rows, 1))
        for dense in float_dense_with_bias(layers)
    }
    transposed = {
        id(table): ops.transpose(cast.get((id(table), "float32"), ops.cast(table, "float32")))
        for table in output_tables
    }
    for name, old, new in zip(names, before, (cast, biases, transposed)):
        setattr(_ONCE, name, {**old, **new})
    try:
        yield
    finally:
        for name, old in zip(names, before):
            setattr(_ONCE, name, old)


def transposed_table(table):
    """`table` transposed in float32 if `step_weights_once` made it; else None."""
    return getattr(_ONCE, "transposed", {}).get(id(table))


def cast_weight(variable, dtype):
    """`ops.cast(variable, dtype)`; within `step_weights_once`, the copy cast there."""
    cast = getattr(_ONCE, "cast", {}).get((id(variable), standardize_dtype(dtype)))
    return ops.cast(variable, dtype) if cast is None else cast


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
    return cast_weight(dense._kernel, dtype), ops.cast(dense.kernel_scale, dtype), quantizer.epsilon


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
    """`dense(x)`; inside `in_place_writes()`, an int8 Dense through a float32 product, a float one on `[rows, width]` with its bias apart.

    Example:
        >>> import keras, numpy as np
        >>> dense = keras.layers.Dense(3)
        >>> tuple(dense_call(dense, np.ones((2, 4), "float32")).shape)
        (2, 3)
    """
    weights = float_int8(dense)
    if weights is not None:
        y = int8_product(ops.cast(x, dense.compute_dtype), *weights)
        if dense.bias is not None:
            y = ops.add(y, dense.bias)
    elif id(dense) in getattr(_ONCE, "biases", {}) and len(x.shape) == 2:
        # A decoding step's [rows, width], within `step_weights_once`: the
        # bias repeated over the rows there, added apart from the product.
        dtype = dense.compute_dtype
        y = ops.matmul(ops.cast(x, dtype), ops.cast(dense.kernel, dtype)) + _ONCE.biases[id(dense)]
    else:
        return dense(x)
    return dense.activation(y)
