"""Seq2SeqBackbone: the stack without a head; Seq2SeqTransformer is it plus the output layer."""

import keras
import numpy as np
import pytest

from keras_tf.models import Seq2SeqBackbone, Seq2SeqTransformer, get_preset
from tests.helpers import to_numpy

BATCH = {
    "encoder_tokens": np.array([[5, 6, 7, 3, 0, 0], [9, 3, 0, 0, 0, 0]], dtype="int32"),
    "decoder_tokens": np.array([[2, 7, 6, 5], [2, 9, 0, 0]], dtype="int32"),
}


@pytest.mark.parametrize("tie_embeddings, norm_first", [(True, False), (False, True)])
def test_transformer_logits_are_the_head_over_the_backbone_states(tie_embeddings, norm_first):
    keras.utils.set_random_seed(3)
    config = get_preset("transformer_tiny", tie_embeddings=tie_embeddings, norm_first=norm_first)
    model = Seq2SeqTransformer(config)
    backbone = Seq2SeqBackbone(config)
    # The backbone's weights are the model's, in the same order, less the head.
    head = [] if tie_embeddings else model.output_projection.weights
    body = [w for w in model.weights if all(w is not h for h in head)]
    assert [w.path for w in backbone.weights] == [w.path for w in body]
    backbone.set_weights([to_numpy(w) for w in body])

    states = to_numpy(backbone(BATCH))
    assert states.shape == (2, 4, config.d_model)
    if tie_embeddings:
        expected = states @ to_numpy(model.target_embedding.embeddings).T
    else:
        kernel, bias = (to_numpy(w) for w in head)
        expected = states @ kernel + bias
    np.testing.assert_allclose(to_numpy(model(BATCH)), expected, atol=1e-5, rtol=1e-5)


def test_backbone_round_trips_through_a_keras_file(tmp_path):
    keras.utils.set_random_seed(4)
    backbone = Seq2SeqBackbone(get_preset("transformer_tiny"))
    backbone.save(tmp_path / "backbone.keras")
    reloaded = keras.models.load_model(tmp_path / "backbone.keras")
    assert type(reloaded) is Seq2SeqBackbone and reloaded.config == backbone.config
    np.testing.assert_array_equal(to_numpy(reloaded(BATCH)), to_numpy(backbone(BATCH)))


def test_backbone_errors_name_the_class():
    backbone = Seq2SeqBackbone(get_preset("transformer_tiny"))
    with pytest.raises(TypeError, match="Seq2SeqBackbone expects integer token ids"):
        backbone({k: v.astype("float32") for k, v in BATCH.items()})
    with pytest.raises(TypeError, match="Seq2SeqBackbone expects a TransformerConfig"):
        Seq2SeqBackbone("transformer_tiny")


def test_lora_trains_the_factors_alone_and_saves_merged_kernels(tmp_path):
    from keras_tf.decoding import compiled_functions, generate
    from keras_tf.training import MaskedSparseCategoricalCrossentropy

    keras.utils.set_random_seed(3)
    model = Seq2SeqTransformer(get_preset(
        "transformer_tiny", num_encoder_layers=1, num_decoder_layers=1, tie_embeddings=False))
    labels = np.array([[7, 6, 5, 3], [9, 3, 0, 0]], dtype="int32")
    before = to_numpy(model(BATCH))
    generate(model, BATCH["encoder_tokens"], max_length=5)
    frozen = {w.path: to_numpy(w) for w in model.weights}

    model.enable_lora(2)
    assert compiled_functions(model) == {}  # programs traced before read no factors
    # B starts at zero: the same function until it trains.
    np.testing.assert_allclose(to_numpy(model(BATCH)), before, atol=1e-6)
    # A and B of the query and value of 3 attentions (encoder self, decoder self and cross).
    lora = model.trainable_weights
    assert len(lora) == 12 and all(w.path.rsplit("/", 1)[-1] in ("lora_kernel_a", "lora_kernel_b")
                                   for w in lora)
    assert {w.path.split("/")[-2] for w in lora} == {"query", "value"}

    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=MaskedSparseCategoricalCrossentropy(), jit_compile=False)
    model.fit(BATCH, labels, epochs=3, verbose=0)
    for w in model.weights:
        if w.path in frozen:  # everything but A and B
            np.testing.assert_array_equal(to_numpy(w), frozen[w.path], err_msg=w.path)
    assert any(np.abs(to_numpy(w)).max() > 0 for w in lora if w.path.endswith("lora_kernel_b"))
    tuned = to_numpy(model(BATCH))
    assert np.abs(tuned - before).max() > 1e-3

    # The file holds W + (alpha / rank) A B: a model without LoRA, the same
    # function. Adam's state is the factors' alone, so not for this model.
    model.save(tmp_path / "tuned.keras")
    reloaded = keras.saving.load_model(tmp_path / "tuned.keras", compile=False)
    assert len(reloaded.trainable_weights) == len(reloaded.weights) == len(frozen)
    np.testing.assert_allclose(to_numpy(reloaded(BATCH)), tuned, atol=1e-5)
    np.testing.assert_array_equal(
        generate(model, BATCH["encoder_tokens"], max_length=5).tokens,
        generate(reloaded, BATCH["encoder_tokens"], max_length=5).tokens,
    )

    with pytest.raises(ValueError, match="already enabled"):
        model.enable_lora(2)
    fresh = Seq2SeqTransformer(get_preset("transformer_tiny"))
    with pytest.raises(ValueError, match="rank must be a positive integer; received rank=0"):
        fresh.enable_lora(0)
    with pytest.raises(ValueError, match=r"No Dense layer named \['keys'\]; this model's are "
                                         r"\['attention_output', 'inner_dense', 'key', "):
        fresh.enable_lora(4, target_layer_names=("query", "keys"))
    with pytest.warns(DeprecationWarning, match="use target_layer_names"):
        fresh.enable_lora(2, target_names=("query",))
    assert fresh.lora == {"rank": 2, "target_layer_names": ["query"]}


def test_lora_factors_save_and_load_alone(tmp_path):
    """`save_lora_weights` writes the factors alone; loaded on the base model, the same logits."""
    import h5py

    keras.utils.set_random_seed(5)
    config = get_preset("transformer_tiny", num_encoder_layers=1, num_decoder_layers=1,
                        tie_embeddings=False)
    base = Seq2SeqTransformer(config)
    base_weights = base.get_weights()
    base.enable_lora(3, target_layer_names=("query", "value", "inner_dense"))
    rng = np.random.default_rng(0)
    for variable in base._lora_variables().values():  # as if trained
        variable.assign(rng.normal(0, 0.2, variable.shape).astype("float32"))
    tuned = to_numpy(base(BATCH))
    path = tmp_path / "domain.lora.h5"
    base.save_lora_weights(path)

    with h5py.File(path, "r") as file:
        names = []
        file.visititems(lambda name, item: names.append(name)
                        if isinstance(item, h5py.Dataset) else None)
        assert file.attrs["rank"] == 3
    # Only the factors: A and B of 3 attentions' query and value and 2 feed-forwards.
    assert len(names) == 2 * (3 * 2 + 2)
    assert all(name.rsplit("/", 1)[-1] in ("lora_kernel_a", "lora_kernel_b") for name in names)
    assert path.stat().st_size < 0.5 * sum(w.nbytes for w in base_weights)

    fresh = Seq2SeqTransformer(config)
    fresh.set_weights(base_weights)
    assert np.abs(to_numpy(fresh(BATCH)) - tuned).max() > 1e-3
    fresh.load_lora_weights(path)
    assert fresh.lora == {"rank": 3, "target_layer_names": ["inner_dense", "query", "value"]}
    np.testing.assert_array_equal(to_numpy(fresh(BATCH)), tuned)

    other = Seq2SeqTransformer(config)
    other.enable_lora(2)
    with pytest.raises(ValueError, match="holds LoRA factors of rank 3"):
        other.load_lora_weights(path)
    with pytest.raises(ValueError, match="must end in .lora.h5"):
        base.save_lora_weights(tmp_path / "domain.h5")

    # A preset of a LoRA model holds the merged kernels and says so.
    from keras_tf.translation import presets

    presets.save_preset(tmp_path / "merged", base)
    assert presets.read_metadata(tmp_path / "merged")["lora_merged"] == base.lora
    merged = presets.load_backbone(tmp_path / "merged")
    assert merged.lora is None
    np.testing.assert_allclose(to_numpy(merged(BATCH)), tuned, atol=1e-5)
