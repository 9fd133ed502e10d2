import os
import subprocess
import sys
import textwrap
import warnings

import keras
import numpy as np
import pytest

from keras_tf.models import Seq2SeqTransformer, TransformerConfig, get_preset
from keras_tf.training import (
    MaskedTokenAccuracy,
    make_reverse_task,
)
from tests.helpers import one_block_tiny, shared_reverse_model, to_numpy

TINY = get_preset("transformer_tiny")


def batch(seed=0, n=3):
    inputs, labels = make_reverse_task(n, vocabulary_size=TINY.target_vocabulary_size, seed=seed)
    return inputs, labels


def test_presets_are_table_3_of_the_paper():
    base, big = get_preset("transformer_base"), get_preset("transformer_big")
    assert (base.num_encoder_layers, base.num_decoder_layers) == (6, 6)
    assert (base.d_model, base.d_ff, base.num_heads, base.dropout) == (512, 2048, 8, 0.1)
    assert (big.d_model, big.d_ff, big.num_heads, big.dropout) == (1024, 4096, 16, 0.3)
    assert base.head_dim == 64 and big.head_dim == 64


def test_unknown_preset_names_the_choices():
    with pytest.raises(ValueError, match=r"Unknown preset 'transformer_huge'; expected one of \["):
        get_preset("transformer_huge")


def test_config_rejects_heads_that_do_not_divide_d_model():
    with pytest.raises(ValueError, match="received d_model=500, num_heads=8"):
        TINY.replace(d_model=500, num_heads=8)


def test_config_is_frozen_and_round_trips():
    with pytest.raises(Exception):
        TINY.d_model = 3
    assert TransformerConfig.from_dict(TINY.to_dict()) == TINY


@pytest.mark.parametrize("tie, norm_first", [(True, False), (False, True)])
def test_get_config_round_trip_gives_equal_logits(tie, norm_first):
    config = TINY.replace(tie_embeddings=tie, norm_first=norm_first)
    model = Seq2SeqTransformer(config)
    inputs, _ = batch()
    clone = Seq2SeqTransformer.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    assert clone.config == config
    np.testing.assert_allclose(to_numpy(clone(inputs)), to_numpy(model(inputs)), atol=1e-6)


def test_tied_model_has_no_separate_output_matrix():
    tied = Seq2SeqTransformer(TINY)
    untied = Seq2SeqTransformer(TINY.replace(tie_embeddings=False))
    vocab, d = TINY.target_vocabulary_size, TINY.d_model
    assert untied.count_params() - tied.count_params() == d * vocab + vocab


def test_save_and_load_in_a_fresh_process_gives_identical_logits(tmp_path):
    model = Seq2SeqTransformer(TINY.replace(norm_first=True))
    inputs, _ = batch(n=4)
    path = tmp_path / "m.keras"
    model.save(path)
    np.savez(tmp_path / "inputs.npz", **inputs)
    np.save(tmp_path / "expected.npy", to_numpy(model(inputs)))
    script = textwrap.dedent(
        f"""
        import numpy as np, keras
        import keras_tf.models  # registers the layers
        model = keras.models.load_model({str(path)!r})  # safe_mode left on
        inputs = dict(np.load({str(tmp_path / 'inputs.npz')!r}))
        got = keras.ops.convert_to_numpy(model(inputs))
        np.testing.assert_array_equal(got, np.load({str(tmp_path / 'expected.npy')!r}))
        print("EQUAL")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "EQUAL" in result.stdout


def test_decoding_sub_models_share_the_training_weights():
    model = Seq2SeqTransformer(TINY)
    ids = {id(w) for w in model.weights}
    for sub in (model.encoder, model.cross_attention_cache, model.decoder_step):
        assert sub.weights and {id(w) for w in sub.weights} <= ids


def test_save_and_load_build_no_decoding_sub_model_and_keep_every_weight(tmp_path):
    # Keras's saving reads every name dir() lists; the sub-model properties
    # would each build a functional model there (seconds), for no weight.
    model = Seq2SeqTransformer(TINY)
    model.save(tmp_path / "m.keras")
    assert model._submodels == {}
    reloaded = keras.models.load_model(tmp_path / "m.keras")
    assert reloaded._submodels == {}
    assert [w.path for w in reloaded.weights] == [w.path for w in model.weights]
    for mine, theirs in zip(model.get_weights(), reloaded.get_weights()):
        np.testing.assert_array_equal(mine, theirs)
    # Still there to read, and built from the reloaded layers on first use.
    ids = {id(w) for w in reloaded.weights}
    for name in Seq2SeqTransformer._SUBMODEL_PROPERTIES:
        assert {id(w) for w in getattr(reloaded, name).weights} <= ids, name
    assert sorted(reloaded._submodels) == sorted(Seq2SeqTransformer._SUBMODEL_PROPERTIES)


@pytest.mark.parametrize(
    "norm_first, blocks", [(False, 2), (True, 2), (False, 1)], ids=["post", "pre", "one_block"]
)
def test_step_by_step_decoding_equals_the_full_pass(norm_first, blocks):
    model = Seq2SeqTransformer(
        TINY.replace(norm_first=norm_first, num_encoder_layers=blocks, num_decoder_layers=blocks)
    )
    inputs, _ = batch(n=2)
    encoder_tokens = keras.ops.convert_to_tensor(inputs["encoder_tokens"])
    decoder_tokens = keras.ops.convert_to_tensor(inputs["decoder_tokens"])
    full = to_numpy(model(inputs))
    # One cache per block, also for one block (Keras hands a functional
    # model's one-output list back as its element alone), and no warning
    # from the step model that its inputs' structure is not its own.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cross = model.cross_attention_cache(model.encoder(encoder_tokens))
        assert isinstance(cross, list) and len(cross) == blocks, type(cross)
        cache = model.init_self_attention_cache(2, decoder_tokens.shape[1])
        for t in range(decoder_tokens.shape[1]):
            logits, cache = model.decoder_step(
                {
                    "decoder_tokens": decoder_tokens[:, t : t + 1],
                    "encoder_tokens": encoder_tokens,
                    "cross_attention_cache": cross,
                    "self_attention_cache": cache,
                    "cache_index": keras.ops.convert_to_tensor(t, "int32"),
                }
            )
            assert isinstance(cache, list) and len(cache) == blocks, type(cache)
            real = inputs["decoder_tokens"][:, t] != 0
            np.testing.assert_allclose(to_numpy(logits)[real, 0], full[real, t], atol=1e-4)


def test_attention_probe_weights_are_distributions_over_real_source_tokens():
    model = Seq2SeqTransformer(TINY)
    inputs, _ = batch(n=2)
    _, weights = model.attention_probe(inputs)
    weights = to_numpy(weights)
    assert weights.shape[:3] == (2, TINY.num_decoder_layers, TINY.num_heads)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    padded_source = (inputs["encoder_tokens"] == 0)[:, None, None, None, :]
    real_target = (inputs["decoder_tokens"] != 0)[:, None, None, :, None]
    assert padded_source.any()
    assert np.all(weights * padded_source * real_target == 0)


def test_bad_inputs_get_clear_errors():
    model = Seq2SeqTransformer(TINY)
    inputs, _ = batch()
    with pytest.raises(TypeError, match="integer token ids in 'encoder_tokens'; received dtype float32"):
        model({**inputs, "encoder_tokens": inputs["encoder_tokens"].astype("float32")})
    with pytest.raises(ValueError, match=r"longer than max_length=64"):
        model({**inputs, "encoder_tokens": np.ones((1, 65), "int32"), "decoder_tokens": np.ones((1, 3), "int32")})
    with pytest.raises(ValueError, match=r"rank|shape"):
        model({**inputs, "encoder_tokens": inputs["encoder_tokens"][0]})
    with pytest.raises(TypeError, match="expects a TransformerConfig"):
        Seq2SeqTransformer("transformer_tiny")


def test_mixed_bfloat16_logits_are_float32_and_close():
    inputs, _ = batch(n=8)
    model = Seq2SeqTransformer(TINY)
    mixed = Seq2SeqTransformer(TINY, dtype="mixed_bfloat16")
    mixed.set_weights(model.get_weights())
    logits = mixed(inputs)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    np.testing.assert_allclose(to_numpy(logits), to_numpy(model(inputs)), atol=0.3)
    # fit under XLA: the shared reverse model (tests/helpers.train_reverse_model);
    # under mixed_bfloat16 with XLA: tests/training/test_mixed_precision.py.


def test_fit_traces_its_train_step_once():
    # A train step that created the optimizer's variables while traced would
    # be traced twice on TensorFlow, doubling the first batch's time.
    class CountingTraces(Seq2SeqTransformer):
        calls = 0

        def call(self, inputs, training=None, mask=None):
            CountingTraces.calls += 1
            return super().call(inputs, training=training, mask=mask)

    inputs, labels = batch(n=16)
    model = CountingTraces(one_block_tiny())  # a trace count: depth changes nothing
    model.compile("adam", "sparse_categorical_crossentropy", jit_compile=True)
    model.fit(inputs, labels, batch_size=8, epochs=2, verbose=0)
    assert CountingTraces.calls == 1


@pytest.fixture(scope="module")
def trained_reverse_model(tmp_path_factory):
    return shared_reverse_model(tmp_path_factory)


def test_learns_to_reverse_held_out_sequences(trained_reverse_model):
    test_x, test_y = make_reverse_task(500, seed=99)
    metric = MaskedTokenAccuracy()
    metric.update_state(test_y, trained_reverse_model.predict(test_x, verbose=0))
    accuracy = float(metric.result())
    assert accuracy >= 0.95, accuracy
