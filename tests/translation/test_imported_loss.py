"""The loss of an imported OPUS-MT model reads like any other model's.

The converter gives the spare PAD row an output bias of -1e9
(`keras_tf.translation.marian.SPARE_ROW_BIAS`). Smoothing that spreads ε/V
of every target's mass over all V ids adds about (ε/V)·1e9 to the loss:
1.3 million on the fixture. The loss built for `compile`, `fit` and
`train(initial_model=...)` leaves the ids the model never emits out of the
smoothing distribution, as OpenNMT-py's zeroes the padding id.
"""

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from keras_tf.models.losses import MaskedSparseCategoricalCrossentropy, never_emitted_ids
from keras_tf.special_tokens import PAD_ID, START_ID
from keras_tf.training.trainer import train
from keras_tf.translation import Seq2SeqTranslator

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "marian_tiny"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text(encoding="utf-8"))
SMOOTHING = 0.1


@pytest.fixture(scope="module")
def batch():
    translator = Seq2SeqTranslator.from_preset(str(FIXTURE))
    inputs, labels = translator.preprocessor(
        tf.constant(REFERENCE["sources"]), tf.constant(REFERENCE["targets"])
    )
    inputs = {name: value.numpy() for name, value in inputs.items()}
    logits = np.asarray(translator.backbone(inputs), dtype="float64")
    return translator, inputs, labels.numpy(), logits


def numpy_loss(labels, logits, smoothing, excluded):
    """The smoothed loss, the excluded ids taking no smoothing mass, in float64."""
    top = logits.max(-1, keepdims=True)
    log_probs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
    kept = np.ones(logits.shape[-1], dtype=bool)
    kept[list(excluded)] = False
    total, count = 0.0, 0
    for b, t in zip(*np.nonzero(labels != PAD_ID)):
        nll = -log_probs[b, t, labels[b, t]]
        total += (1 - smoothing) * nll + smoothing * -log_probs[b, t, kept].mean()
        count += 1
    return total / count


def test_the_spare_row_and_the_special_ids_take_no_smoothing_mass(batch):
    translator, _, labels, logits = batch
    bias = translator.backbone.output_bias.bias.numpy()
    spare = set(np.flatnonzero(bias <= -1e8).tolist())
    assert spare == {PAD_ID}  # the converter's spare row
    excluded = never_emitted_ids(translator.backbone)
    assert excluded == tuple(sorted({PAD_ID, START_ID} | spare))
    translator.compile()  # the loss `fit` trains with
    got = float(translator.loss(labels, logits.astype("float32")))
    expected = numpy_loss(labels, logits, SMOOTHING, excluded)
    assert got == pytest.approx(expected, rel=1e-4)
    assert got < 20, got
    # Keras's convention (ε/V on every id) reads about (ε/V)·1e9.
    keras_convention = float(
        MaskedSparseCategoricalCrossentropy(label_smoothing=SMOOTHING)(labels, logits))
    assert keras_convention > 1e5


def test_fine_tuning_reports_a_loss_that_reads_true(batch, tmp_path):
    translator, inputs, labels, logits = batch
    # A learning rate of 0 and no dropout: the epoch's loss is this batch's loss.
    config = translator.config.replace(dropout=0.0, attention_dropout=0.0)
    _, history = train(config, (inputs, labels), out_dir=str(tmp_path), epochs=1,
                       batch_size=len(labels), learning_rate=0.0,
                       initial_model=translator.backbone, jit_compile=False, verbose=0)
    expected = numpy_loss(labels, logits, SMOOTHING, never_emitted_ids(translator.backbone))
    assert history.history["loss"][0] == pytest.approx(expected, rel=1e-4)
