import math

import keras
import numpy as np
import pytest

from keras_tf.training import (
    MaskedSparseCategoricalCrossentropy,
    MaskedTokenAccuracy,
    TransformerSchedule,
    transformer_adam,
)


def numpy_loss(labels, logits, smoothing, pad_id=0):
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    total, count = 0.0, 0
    for b in range(labels.shape[0]):
        for t in range(labels.shape[1]):
            if labels[b, t] == pad_id:
                continue
            nll = -log_probs[b, t, labels[b, t]]
            uniform = -log_probs[b, t].mean()
            total += (1 - smoothing) * nll + smoothing * uniform
            count += 1
    return total / count


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_loss_equals_the_numpy_formula_and_ignores_padding(smoothing):
    rng = np.random.default_rng(0)
    labels = np.array([[5, 3, 0, 0], [1, 2, 7, 0]])
    logits = rng.normal(size=(2, 4, 9)).astype("float32")
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=smoothing)
    got = float(loss(labels, logits))
    assert got == pytest.approx(numpy_loss(labels, logits, smoothing), rel=1e-5)
    # Changing logits at padded positions changes nothing.
    logits[labels == 0] = 100.0
    assert float(loss(labels, logits)) == pytest.approx(got, rel=1e-6)


def test_loss_matches_keras_sparse_crossentropy_without_smoothing():
    labels = np.array([[5, 3, 2, 1]])
    logits = np.random.default_rng(1).normal(size=(1, 4, 9)).astype("float32")
    ours = float(MaskedSparseCategoricalCrossentropy(label_smoothing=0.0)(labels, logits))
    theirs = float(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits))
    assert ours == pytest.approx(theirs, rel=1e-5)


def test_excluded_ids_take_no_smoothing_mass():
    rng = np.random.default_rng(2)
    labels = np.array([[5, 3, 0], [1, 7, 4]])
    kept = np.ones(9, bool)
    kept[[0, 2]] = False

    def expected(logits):
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        nll = -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]
        return (0.9 * nll + 0.1 * -log_probs[..., kept].mean(-1))[labels != 0].mean()

    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1, excluded_ids=(2, 0, 40))
    logits = rng.normal(size=(2, 3, 9)).astype("float32")
    assert float(loss(labels, logits)) == pytest.approx(expected(logits), rel=1e-5)
    # A row of -1e9 logits (an imported model's spare row) reads a loss near the others.
    logits[..., 0] = -1e9
    assert float(loss(labels, logits)) == pytest.approx(expected(logits), rel=1e-5)
    assert float(loss(labels, logits)) < np.log(9) + 1


def test_loss_config_round_trip_and_bad_smoothing():
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.2, pad_id=3, excluded_ids=(2, 0))
    clone = MaskedSparseCategoricalCrossentropy.from_config(loss.get_config())
    assert (clone.label_smoothing, clone.pad_id, clone.excluded_ids) == (0.2, 3, (0, 2))
    with pytest.raises(ValueError, match=r"received 1.5"):
        MaskedSparseCategoricalCrossentropy(label_smoothing=1.5)


def test_masked_accuracy_counts_only_real_tokens():
    metric = MaskedTokenAccuracy()
    labels = np.array([[1, 2, 3, 0, 0]])
    logits = np.eye(5, dtype="float32")[[[1, 2, 4, 0, 0]]]  # 2 of 3 real tokens right
    metric.update_state(labels, logits)
    assert float(metric.result()) == pytest.approx(2 / 3)
    metric.update_state(np.array([[4, 0]]), np.eye(5, dtype="float32")[[[4, 4]]])
    assert float(metric.result()) == pytest.approx(3 / 4)


def test_schedule_is_the_papers_formula():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    for step in [1, 100, 3999, 4000, 4001, 20000]:
        expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
        # Keras counts iterations from 0; the schedule counts steps from 1.
        assert float(schedule(step - 1)) == pytest.approx(expected, rel=1e-5)
    peak = max(float(schedule(s)) for s in range(3990, 4010))
    assert peak == pytest.approx(512**-0.5 * 4000**-0.5, rel=1e-4)


def test_schedule_serializes_and_rejects_bad_values():
    schedule = TransformerSchedule(256, warmup_steps=100, scale=2.0)
    clone = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert float(clone(50)) == pytest.approx(float(schedule(50)))
    with pytest.raises(ValueError, match="received d_model=0, warmup_steps=10"):
        TransformerSchedule(0, 10)


def test_transformer_adam_has_the_papers_betas():
    optimizer = transformer_adam(512)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    assert isinstance(optimizer._learning_rate, TransformerSchedule)
    assert math.isclose(float(optimizer.learning_rate), 512**-0.5 * 4000**-1.5, rel_tol=1e-4)


def test_fit_and_evaluate_report_the_loss_per_target_token_not_per_row():
    """`loss` is the mean over every real target token, whatever rows the batches hold.

    Batches of 4 rows: short pairs, long pairs, then 2 real pairs and 2 rows
    of padding alone (as `make_dataset` fills a short batch). Keras weighs a
    batch by its rows; ours by its tokens, which `numpy_loss` over the whole
    set is.
    """
    from keras_tf.models import Seq2SeqTransformer
    from tests.helpers import one_block_tiny

    rng = np.random.default_rng(0)
    lengths = [2, 1, 2, 2, 12, 11, 12, 10, 5, 6, 0, 0]
    labels = np.zeros((len(lengths), 12), "int32")
    for row, length in enumerate(lengths):
        labels[row, :length] = rng.integers(3, 64, length)
    inputs = {"encoder_tokens": np.roll(labels, 1, axis=1), "decoder_tokens": labels}
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(one_block_tiny())  # a weighting check: depth changes nothing
    model.compile(
        optimizer=keras.optimizers.SGD(0.0),  # the weights stay: fit's loss is evaluate's
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
        jit_compile=True,
    )
    logits = keras.ops.convert_to_numpy(model(inputs))
    token_mean = numpy_loss(labels, logits, 0.1)
    batch_means = [numpy_loss(labels[i:i + 4], logits[i:i + 4], 0.1) for i in (0, 4, 8)]
    assert abs(np.mean(batch_means) - token_mean) > 0.01  # rows would tell them apart

    evaluated = model.evaluate(inputs, labels, batch_size=4, verbose=0)
    history = model.fit(inputs, labels, batch_size=4, shuffle=False, verbose=0)
    assert evaluated == pytest.approx(token_mean, rel=1e-5)
    assert history.history["loss"][0] == pytest.approx(token_mean, rel=1e-5)
