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


def test_int8_queries_keys_and_values_fused_equal_three_int8_calls():
    """`fused_step_projections` in the export: one quantization and one product for q, k and v."""
    from keras_tf.layers import MultiHeadAttention
    from keras_tf.layers.cache_update import new_cache
    from keras_tf.layers.multi_head_attention import _FUSED, fused_step_projections

    layer = MultiHeadAttention(num_heads=2, d_model=8)
    layer(np.zeros((1, 3, 8), "float32"))
    for dense in (layer.query_dense, layer.key_dense, layer.value_dense, layer.output_dense):
        dense.quantize("int8")
    x = np.random.randn(4, 8).astype("float32")
    outputs = []
    for fuse in (False, True):
        with in_place_writes():
            cache = new_cache(4, 3, 2, 4, "float32")
            if fuse:
                with fused_step_projections([layer]):
                    # The int8 kernels fused, with their scales.
                    assert _FUSED.kernels[id(layer)][2] is not None
                    out, cache = layer.step_with_cache(x, cache, 0)
            else:
                out, cache = layer.step_with_cache(x, cache, 0)
            outputs.append((to_numpy(out), to_numpy(cache[0])))
    np.testing.assert_array_equal(outputs[0][0], outputs[1][0])
    np.testing.assert_array_equal(outputs[0][1], outputs[1][1])


def test_int8_encoder_queries_keys_and_values_are_one_product_with_keras_bits():
    """The encoder's self-attention in the export: q, k and v of int8 layers from one quantization, Keras's bits."""
    from keras_tf.layers import MultiHeadAttention

    layer = MultiHeadAttention(num_heads=2, d_model=8)
    layer(np.zeros((1, 3, 8), "float32"))
    dense = (layer.query_dense, layer.key_dense, layer.value_dense)
    for d in dense:
        d.quantize("int8")
    x = np.random.randn(2, 5, 8).astype("float32") * 3
    with in_place_writes():
        kernel, bias, scale = layer._fused_weights()
        got = to_numpy(layer._qkv(x))
    assert scale is not None and tuple(kernel.shape) == (8, 24)
    expected = np.concatenate([to_numpy(d(x)) for d in dense], axis=-1)
    np.testing.assert_array_equal(got, expected)
    # Outside the export, three int8 calls: nothing to fuse.
    assert layer._fused_weights() is None


def test_step_weights_once_casts_each_int8_weight_of_the_step_and_no_other():
    """The export's int8 weights cast before the decoding loop: the same call, the same bits."""
    from keras_tf.layers import PositionalEmbedding
    from keras_tf.layers.dense_call import cast_weight, int8_weights, step_weights_once

    dense, float_dense = int8_dense(16, 8, "relu"), keras.layers.Dense(4)
    float_dense.build((None, 16))
    embedding = PositionalEmbedding(vocabulary_size=12, d_model=16, max_length=8)
    embedding.build((None, 4))
    embedding.token_embedding.quantize("int8")
    found = {id(variable): dtype for variable, dtype in int8_weights([dense, float_dense, embedding])}
    # The Dense kernel in its compute dtype, the table as the tied output
    # layer reads it; not the float Dense, not the scales or biases.
    assert found == {id(dense._kernel): "float32", id(embedding.token_embedding._embeddings): "float32"}

    x = np.random.randn(3, 16).astype("float32") * 2
    expected = to_numpy(dense(x)), to_numpy(embedding(x[:, None], reverse=True))
    with in_place_writes(), step_weights_once([dense, embedding], rows=3):
        table = cast_weight(embedding.token_embedding._embeddings, "float32")
        # The copy made on entry, the same object at every read.
        assert table is cast_weight(embedding.token_embedding._embeddings, "float32")
        got = to_numpy(dense_call(dense, x)), to_numpy(embedding(x[:, None], reverse=True))
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    np.testing.assert_array_equal(
        to_numpy(table), to_numpy(embedding.token_embedding._embeddings).astype("float32"))
    # Outside the export's graphs it casts nothing ahead: a plain cast.
    with step_weights_once([dense], rows=3):
        table_again = cast_weight(embedding.token_embedding._embeddings, "float32")
    assert table_again is not table


def test_untied_int8_output_layer_in_the_export_is_keras_int8_call():
    """An untied output layer after `quantize("int8")`: the export's float32 product, Keras's bits."""
    from keras_tf.layers.dense_call import step_weights_once
    from keras_tf.models import Seq2SeqTransformer, get_preset

    model = Seq2SeqTransformer(get_preset("transformer_tiny", tie_embeddings=False))
    model.quantize("int8")
    assert model.output_projection.quantization_mode == "int8"
    states = np.random.randn(3, model.config.d_model).astype("float32")
    expected = to_numpy(model._head(states))
    with in_place_writes(), step_weights_once([model.output_projection], rows=3):
        got = to_numpy(model._head(states))
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("activation", [None, "relu"])
def test_float_dense_in_a_step_adds_its_repeated_bias_apart_from_the_product(activation):
    """Within `step_weights_once`, a float Dense: product, then the bias over the rows; Keras's values."""
    import tensorflow as tf

    from keras_tf.layers.dense_call import float_dense_with_bias, step_weights_once

    dense, no_bias = keras.layers.Dense(6, activation=activation), keras.layers.Dense(6, use_bias=False)
    dense.build((None, 5))
    no_bias.build((None, 5))
    dense.bias.assign(np.random.randn(6).astype("float32"))
    assert float_dense_with_bias([dense, no_bias, int8_dense(5, 6)]) == [dense]
    x = np.random.randn(4, 5).astype("float32")

    @tf.function
    def step(x):
        with in_place_writes(), step_weights_once([dense], rows=tf.shape(x)[0]):
            return dense_call(dense, x)

    graph = step.get_concrete_function(tf.TensorSpec([None, 5], tf.float32)).graph
    ops_run = {op.type for op in graph.get_operations()}
    # No BiasAdd for Grappler to fuse: a MatMul and an add of [rows, units].
    assert "BiasAdd" not in ops_run and {"MatMul", "Tile", "AddV2"} <= ops_run, ops_run
    np.testing.assert_allclose(to_numpy(step(x)), to_numpy(dense(x)), rtol=1e-6, atol=1e-6)


def test_tied_output_layer_reads_the_table_transposed_once_with_keras_values():
    from keras_tf.layers import PositionalEmbedding
    from keras_tf.layers.dense_call import step_weights_once, transposed_table

    embedding = PositionalEmbedding(vocabulary_size=12, d_model=16, max_length=8)
    embedding.build((None, 4))
    table = embedding.token_embedding.embeddings
    states = np.random.randn(3, 1, 16).astype("float32")
    expected = to_numpy(embedding(states, reverse=True))
    assert transposed_table(table) is None
    with in_place_writes(), step_weights_once([], rows=3, output_tables=[table]):
        np.testing.assert_array_equal(to_numpy(transposed_table(table)), to_numpy(table).T)
        got = to_numpy(embedding(states, reverse=True))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert transposed_table(table) is None  # made for one request only
