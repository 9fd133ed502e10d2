"""`train` on one device: its files, its rerun behaviour, its inputs and its errors."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_tf.training  # noqa: F401  (registers the loss and metric for load_model)
from keras_tf.models import Seq2SeqTransformer, TransformerConfig, get_preset
from keras_tf.training import (
    MaskedSparseCategoricalCrossentropy,
    MaskedTokenAccuracy,
    make_reverse_task,
)
from keras_tf.training.trainer import (
    _as_validation_dataset,
    _fit_calls,
    _shuffled_epochs,
    _TrainingBatches,
    train,
)
from tests.helpers import one_block_tiny

FAST = dict(batch_size=32, learning_rate=3e-3, jit_compile=False, verbose=0)
TINY = one_block_tiny()


def test_writes_files_then_a_rerun_restores_and_continues(tmp_path):
    # One test: pytest-xdist would train a shared module fixture once per worker.
    data = make_reverse_task(256), make_reverse_task(64, seed=1)
    model, history = train(TINY, *data, out_dir=str(tmp_path), epochs=2, **FAST)

    assert sorted(os.listdir(tmp_path)) == ["backup", "config.json", "history.csv", "logs", "model.keras"]
    events = [f for _, _, files in os.walk(tmp_path / "logs") for f in files]
    assert any(f.startswith("events.out.tfevents") for f in events), events
    config = json.loads((tmp_path / "config.json").read_text())
    assert TransformerConfig.from_dict(config) == TINY
    # val_loss fell in the second epoch, so the best model is the final one.
    assert history.history["val_loss"][1] < history.history["val_loss"][0]
    best = keras.models.load_model(tmp_path / "model.keras")
    for a, b in zip(best.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    state = json.loads((tmp_path / "backup" / "state.json").read_text())
    # The training time at each epoch's end, and at the backup (max_minutes's clock).
    epoch_seconds = state.pop("epoch_train_seconds")
    assert len(epoch_seconds) == 2 and 0 < epoch_seconds[0] < epoch_seconds[1]
    assert state.pop("train_seconds") >= epoch_seconds[1]
    assert state == {
        "epoch": 2,
        "step": 0,
        "steps_per_epoch": 8,
        "batches_per_update": 1,  # no gradient accumulation
        "weights": "epoch-0002.weights.h5",
        "best": pytest.approx(history.history["val_loss"][1]),
        "seed_states": [],  # no dropout
        "metric_sums": None,  # only an unfinished epoch needs them
        "history": [
            {"epoch": epoch, **{key: values[epoch] for key, values in history.history.items()}}
            for epoch in (0, 1)
        ],
    }
    assert sorted(os.listdir(tmp_path / "backup")) == ["epoch-0002.weights.h5", "state.json"]
    rows = (tmp_path / "history.csv").read_text().splitlines()
    assert rows[0].split(",") == [
        "epoch", "learning_rate", "loss", "masked_accuracy", "val_loss", "val_masked_accuracy"
    ]
    assert [row.split(",")[0] for row in rows[1:]] == ["0", "1"]

    # The same command after a finished run trains nothing and returns the final weights.
    again, history = train(TINY, *data, out_dir=str(tmp_path), epochs=2, **FAST)
    assert history.epoch == []
    for a, b in zip(again.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    # The optimizer state came back too: Adam's step count.
    assert int(again.optimizer.iterations) == int(model.optimizer.iterations) == 16

    # More epochs continue from there.
    _, history = train(TINY, *data, out_dir=str(tmp_path), epochs=3, **FAST)
    assert history.epoch == [2]
    assert json.loads((tmp_path / "backup" / "state.json").read_text())["epoch"] == 3
    assert len((tmp_path / "history.csv").read_text().splitlines()) == 1 + 3

    # A rerun whose epochs have another number of steps cannot resume that backup.
    with pytest.raises(ValueError, match=r"backup was made with 8 steps per epoch; this run has 4"):
        train(TINY, *data, out_dir=str(tmp_path), epochs=4,
              **{**FAST, "batch_size": 64})


def test_accepts_a_tf_data_dataset(tmp_path):
    # The text pipeline's form: batches of ({"encoder_tokens", "decoder_tokens"}, labels).
    inputs, labels = make_reverse_task(128)
    dataset = tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(32)
    model, history = train(
        TINY.to_dict(), dataset.repeat(), out_dir=str(tmp_path),
        epochs=2, steps_per_epoch=3, learning_rate=3e-3, jit_compile=False, verbose=0,
    )
    assert history.epoch == [0, 1]
    assert int(model.optimizer.iterations) == 6
    assert np.isfinite(history.history["loss"]).all()


def test_numpy_validation_keeps_every_example_in_full_batches():
    # 40 examples in batches of 16: the last batch holds 8 and 8 rows of padding.
    inputs, labels = make_reverse_task(40, seed=3)
    model = Seq2SeqTransformer(get_preset("transformer_tiny"))
    model.compile(loss=MaskedSparseCategoricalCrossentropy(), metrics=[MaskedTokenAccuracy()])
    for distributed in (False, True):
        batches = list(_as_validation_dataset((inputs, labels), 16, distributed))
        assert [len(batch_labels) for _, batch_labels in batches] == [16, 16, 16]
        got = np.concatenate([batch_labels.numpy() for _, batch_labels in batches])
        np.testing.assert_array_equal(got[:40], labels)
        assert not got[40:].any()
        encoder = np.concatenate([features["encoder_tokens"].numpy() for features, _ in batches])
        np.testing.assert_array_equal(encoder[:40], inputs["encoder_tokens"])
        assert not encoder[40:].any()
    # The filled batches give the loss and accuracy of all 40 examples at once.
    filled = model.evaluate(_as_validation_dataset((inputs, labels), 16, False), verbose=0)
    whole = model.evaluate(inputs, labels, batch_size=40, verbose=0)
    np.testing.assert_allclose(filled, whole, rtol=1e-5)


def test_epochs_are_permutations_keyed_on_seed_and_epoch():
    arrays = ({"x": np.arange(10)}, np.arange(10))

    def epochs(seed, start, stop):
        batches = [labels.numpy().tolist() for _, labels in _shuffled_epochs(arrays, 3, seed, range(start, stop))]
        return [sum(batches[i : i + 3], []) for i in range(0, len(batches), 3)]

    run = epochs(seed=0, start=0, stop=3)
    assert all(len(set(epoch)) == 9 for epoch in run)  # 3 full batches of distinct examples
    assert run[0] != run[1] != run[2]
    assert epochs(seed=0, start=1, stop=3) == run[1:]  # a resumed run reads the same epochs
    assert epochs(seed=1, start=0, stop=1) != run[:1]
    for inputs, labels in _shuffled_epochs(arrays, 3, 0, range(0, 1)):
        np.testing.assert_array_equal(inputs["x"], labels)  # rows stay together


def _labels(dataset):
    return [labels.numpy().tolist() for _, labels in dataset]


def test_batches_from_any_position_continue_the_uninterrupted_sequence():
    # Numpy data: 3 batches per epoch.
    arrays = ({"x": np.arange(10)}, np.arange(10))
    numpy_batches = _TrainingBatches(arrays, 3, None, seed=0, distributed=False)
    whole, steps = numpy_batches.stream(0, 0, 3)
    assert steps == 3
    whole = _labels(whole)
    rest, steps = numpy_batches.stream(1, 2, 2)  # epoch 1 after its first 2 steps
    assert (steps, _labels(rest)) == (1, whole[5:6])

    # An epoch function: passes of 4 batches, epochs of 3 steps read across them.
    def epoch_batches(epoch):
        return tf.data.Dataset.range(4).map(lambda i: ({"x": i}, epoch * 10 + i))

    passes = _TrainingBatches(epoch_batches, None, 3, seed=0, distributed=False)
    whole, steps = passes.stream(0, 0, 4)
    assert steps == 3
    assert _labels(whole) == [0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23]
    rest, steps = passes.stream(1, 2, 2)  # step 5 of the run: pass 1, batch 1
    assert (steps, _labels(rest)) == (1, [11])
    rest, _ = passes.stream(2, 0, 4)
    assert _labels(rest) == [12, 13, 20, 21, 22, 23]


def test_a_resume_inside_an_epoch_finishes_it_then_runs_the_others():
    assert _fit_calls(0, 0, 3) == [(0, 0, 3)]
    assert _fit_calls(1, 5, 3) == [(1, 5, 2), (2, 0, 3)]
    assert _fit_calls(2, 5, 3) == [(2, 5, 3)]
    assert _fit_calls(3, 0, 3) == []


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(mixed_precision="float16"), ValueError, "mixed_precision must be None or one of"),
        (dict(strategy="ring"), ValueError, "Unknown strategy 'ring'"),
        (dict(epochs=0), ValueError, "epochs must be a positive integer; received 0"),
        (dict(batch_size=None), ValueError, "needs a positive integer batch_size; received None"),
        (dict(batch_size=64), ValueError, "fewer examples than one batch; received 32 examples"),
        (dict(steps_per_epoch=2), ValueError, "steps_per_epoch applies to a tf.data.Dataset"),
        (dict(model_config=3), TypeError, "model_config must be a TransformerConfig"),
        (dict(model_config="transformer_huge"), ValueError, "Unknown preset 'transformer_huge'"),
        (dict(train_data=[1, 2, 3]), TypeError,
         "must be a tf.data.Dataset, a function epoch -> tf.data.Dataset or a pair"),
        (dict(train_data=lambda epoch: [epoch], batch_size=None), TypeError,
         "must return a tf.data.Dataset for an epoch; received list"),
        (dict(backup_every=0), ValueError,
         "backup_every must be a positive number of steps or None; received backup_every=0"),
    ],
)
def test_rejects_bad_arguments(tmp_path, kwargs, error, message):
    arguments = dict(
        model_config="transformer_tiny", train_data=make_reverse_task(32),
        out_dir=str(tmp_path), batch_size=32,
    )
    arguments.update(kwargs)
    with pytest.raises(error, match=message):
        train(**arguments)


def test_batch_size_is_for_numpy_data_only(tmp_path):
    dataset = tf.data.Dataset.from_tensor_slices(make_reverse_task(32)).batch(8)
    with pytest.raises(ValueError, match="batch_size applies to numpy data"):
        train("transformer_tiny", dataset, out_dir=str(tmp_path), batch_size=8)
