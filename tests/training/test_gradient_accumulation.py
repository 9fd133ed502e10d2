"""Gradient accumulation: N batches make the update of one batch N times as large.

The schedule counts updates, and the trainer plans its warm-up in updates
and keeps N in its backup (the command-line flag:
tests/cli/test_gradient_accumulation_option.py). The first two tests run on
JAX too (tests/test_backends.py); the trainer's need TensorFlow and import it
in the test.
"""

import json
import math
import types

import keras
import numpy as np
import pytest

from keras_tf.models import Seq2SeqTransformer
from keras_tf.training import (
    MaskedSparseCategoricalCrossentropy,
    PerUpdateSchedule,
    TransformerSchedule,
    make_reverse_task,
    planned_schedule,
    transformer_adam,
)
from tests.helpers import one_block_tiny


def test_the_schedule_is_read_per_update_and_saved_with_the_optimizer():
    inner = TransformerSchedule(64, warmup_steps=3)
    schedule = PerUpdateSchedule(inner, 4)
    rates = [float(schedule(batch)) for batch in range(12)]
    assert rates == [float(inner(batch // 4)) for batch in range(12)]
    assert len(set(rates)) == 3 and schedule.warmup_steps == 3
    # Keras's own accumulation reads the schedule per batch: warm-up over in 3/4 of an update.
    keras_adam = keras.optimizers.Adam(inner, gradient_accumulation_steps=4)
    ours = transformer_adam(64, warmup_steps=3, gradient_accumulation_steps=4)
    for optimizer in (keras_adam, ours):
        optimizer._iterations.assign(8)  # the batch count: two updates done
    assert float(ours.learning_rate) == float(inner(2)) != float(keras_adam.learning_rate)
    # Serialized with the optimizer, as a .keras file holds it.
    again = keras.optimizers.deserialize(keras.optimizers.serialize(ours))
    assert again.gradient_accumulation_steps == 4
    again._iterations.assign(8)
    assert float(again.learning_rate) == float(ours.learning_rate)
    with pytest.raises(ValueError, match="received gradient_accumulation_steps=0"):
        transformer_adam(64, gradient_accumulation_steps=0)
    assert transformer_adam(64, gradient_accumulation_steps=1).gradient_accumulation_steps is None


def _fit(config, weights, data, batch_size, accumulate, jit_compile):
    model = Seq2SeqTransformer(config)
    model.set_weights(weights)
    schedule = TransformerSchedule(config.d_model, warmup_steps=3, scale=4.0)
    if accumulate:
        schedule = PerUpdateSchedule(schedule, accumulate)
    model.compile(
        optimizer=keras.optimizers.SGD(schedule, gradient_accumulation_steps=accumulate),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
        jit_compile=jit_compile,
    )
    model.fit(*data, batch_size=batch_size, epochs=1, shuffle=False, verbose=0)
    return model


def test_two_batches_accumulated_update_as_one_batch_of_both():
    # Every pair has 6 source and 7 target tokens, so the loss of a batch of 8
    # is the mean of the losses of its two halves. SGD, not Adam: Adam's first
    # steps are lr * g / |g|, which turns float rounding in a gradient that is
    # zero in exact arithmetic (the attention's key bias) into whole steps.
    data = make_reverse_task(16, min_length=6, max_length=6, seed=3)
    config = one_block_tiny()
    keras.utils.set_random_seed(0)
    start = Seq2SeqTransformer(config).get_weights()
    accumulated = _fit(config, start, data, batch_size=4, accumulate=2, jit_compile=True)
    # The reference without XLA on TensorFlow, one compile fewer; JAX without
    # jit compiles every op it runs, which costs more than one compile.
    whole = _fit(config, start, data, batch_size=8, accumulate=None,
                 jit_compile=keras.backend.backend() == "jax")
    assert int(accumulated.optimizer.iterations) == int(whole.optimizer.iterations) == 2
    assert int(accumulated.optimizer._iterations) == 4
    # The second update's rate: the schedule's at update 1, in both.
    assert float(accumulated.optimizer.learning_rate) == float(whole.optimizer.learning_rate)
    moved = max(np.abs(w - w0).max() for w, w0 in zip(whole.get_weights(), start))
    assert moved > 1e-2, moved
    for ours, theirs in zip(accumulated.get_weights(), whole.get_weights()):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)


class _Interrupt(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 8:
            raise KeyboardInterrupt


def test_train_plans_updates_and_resumes_inside_an_update(tmp_path):
    from keras_tf.training.trainer import train

    data = make_reverse_task(128, seed=1)
    config = one_block_tiny()
    args = dict(epochs=1, batch_size=4, gradient_accumulation_steps=4, jit_compile=False,
                verbose=0)
    model, history = train(config, data, out_dir=str(tmp_path / "whole"), **args)
    # 32 batches, 8 updates: the default schedule is planned for 8 and read at 8.
    assert int(model.optimizer.iterations) == 8
    expected = float(planned_schedule(config.d_model, 8)(8))
    assert math.isclose(history.history["learning_rate"][-1], expected, rel_tol=1e-6)
    assert expected != float(planned_schedule(config.d_model, 32)(32))

    # Stopped after batch 9, with a backup after batch 6, two batches into an
    # update: the rerun restores those two batches' sums and ends as the whole run.
    out_dir = str(tmp_path / "stopped")
    with pytest.raises(KeyboardInterrupt):
        train(config, data, out_dir=out_dir, backup_every=6, callbacks=[_Interrupt()], **args)
    state = json.loads((tmp_path / "stopped" / "backup" / "state.json").read_text())
    assert (state["step"], state["batches_per_update"]) == (6, 4)
    with pytest.raises(ValueError, match="gradient_accumulation_steps=4; this run has 2"):
        train(config, data, out_dir=out_dir, backup_every=6,
              **{**args, "gradient_accumulation_steps": 2})
    resumed, _ = train(config, data, out_dir=out_dir, backup_every=6, **args)
    assert int(resumed.optimizer.iterations) == 8
    for a, b in zip(resumed.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_several_replicas_are_refused_before_any_work():
    # Keras 3.15's update inside ops.cond is a merge_call under several
    # replicas, which TensorFlow refuses at fit's first step (keras #20582).
    # A pytest worker has one CPU device, so the strategy is a stand-in.
    from keras_tf.training.trainer import check_accumulation_fits

    two_replicas = types.SimpleNamespace(num_replicas_in_sync=2)
    with pytest.raises(ValueError, match=r"gradient_accumulation_steps=4 needs a strategy with "
                                         r"one replica; this one has 2\. .*#20582"):
        check_accumulation_fits(4, two_replicas)
    check_accumulation_fits(1, two_replicas)  # no accumulation: nothing to refuse
    check_accumulation_fits(4, types.SimpleNamespace(num_replicas_in_sync=1))
