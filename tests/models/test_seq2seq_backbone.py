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
