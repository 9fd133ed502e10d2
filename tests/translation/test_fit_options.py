"""`translator.fit(..., options=TrainingOptions(...))` trains with the schedule `keras-tf train` plans."""

import keras
import numpy as np
import pytest

from keras_tf.models import MaskedSparseCategoricalCrossentropy
from keras_tf.models.schedules import PerUpdateSchedule, planned_warmup_steps
from keras_tf.option_error import OptionError
from keras_tf.training import fine_tuning_peak_learning_rate, make_reverse_task, trainer
from keras_tf.translation import Seq2SeqTranslator, TrainingOptions

PAIRS = 64  # 16 batches of 4 an epoch: 32 updates in 2 epochs, a warm-up of 3


class _Rates(keras.callbacks.Callback):
    """The learning rate each train step updates with."""

    def __init__(self):
        super().__init__()
        self.rates = []

    def on_train_batch_begin(self, batch, logs=None):
        self.rates.append(float(self.model.optimizer.learning_rate))


def _planned_by_train(config, options, steps_per_epoch, fine_tuning):
    """The rates `keras-tf train` (trainer.train, via train_preset_dir) plans, batch by batch."""
    schedule = trainer._schedule(
        config, None, options.warmup_steps, options.epochs, steps_per_epoch,
        options.gradient_accumulation_steps, peak_learning_rate=options.learning_rate,
        fine_tuning=fine_tuning,
    )
    # Under accumulation the optimizer reads the schedule per update (paper_adam).
    per_update = PerUpdateSchedule(schedule, options.gradient_accumulation_steps)
    return [float(per_update(batch)) for batch in range(options.epochs * steps_per_epoch)]


@pytest.mark.parametrize("fields", [
    dict(),  # the planned warm-up to the paper's peak
    dict(learning_rate=2e-3, warmup_steps=3, label_smoothing=0.2),
    dict(gradient_accumulation_steps=2),
])
def test_fit_plans_the_schedule_train_plans(fields, tmp_path):
    options = TrainingOptions(epochs=2, batch_size=4, **fields)
    translator = Seq2SeqTranslator.from_preset("transformer_tiny")
    rates = _Rates()
    history = translator.fit(*make_reverse_task(PAIRS), options=options, callbacks=[rates],
                             verbose=0)
    assert history.epoch == [0, 1]
    expected = _planned_by_train(translator.config, options, PAIRS // 4, fine_tuning=False)
    np.testing.assert_allclose(rates.rates, expected, rtol=1e-6)
    # A warm-up over a tenth of the run's 32 batches' updates (a plan of one
    # epoch, or of batches as updates, warms up one update shorter or longer),
    # then a decay: not compile()'s constant 5e-4.
    updates = 32 // options.gradient_accumulation_steps
    warmup = options.warmup_steps or planned_warmup_steps(updates)
    assert warmup == {1: 3, 2: 2}[options.gradient_accumulation_steps] or options.warmup_steps
    peak = int(np.argmax(expected))  # the first batch of the peak update
    assert peak == (warmup - 1) * options.gradient_accumulation_steps, (peak, warmup)
    assert expected[0] < expected[peak] and expected[-1] < expected[peak]
    assert translator.loss.label_smoothing == options.label_smoothing


def test_a_trained_translator_gets_the_fine_tuning_schedule(tmp_path):
    Seq2SeqTranslator.from_preset("transformer_tiny").save_to_preset(tmp_path / "trained")
    translator = Seq2SeqTranslator.from_preset(tmp_path / "trained")
    options = TrainingOptions(epochs=1, steps=3, batch_size=16)
    rates = _Rates()
    translator.fit(*make_reverse_task(PAIRS), options=options, callbacks=[rates], verbose=0)
    expected = _planned_by_train(translator.config, options, 3, fine_tuning=True)
    np.testing.assert_allclose(rates.rates, expected, rtol=1e-6)
    from_scratch = _planned_by_train(translator.config, options, 3, fine_tuning=False)
    # The paper's peak after a warm-up of a fiftieth of the run (one update), not a tenth.
    assert max(expected) == pytest.approx(fine_tuning_peak_learning_rate(translator.config.d_model))
    assert expected[0] == max(expected) and max(from_scratch) == pytest.approx(max(expected))


def test_fit_takes_its_loop_from_the_options_alone():
    translator = Seq2SeqTranslator.from_preset("transformer_tiny")
    data = make_reverse_task(PAIRS)
    with pytest.raises(ValueError, match=r"received batch_size=8, epochs=3 too: set them in"):
        translator.fit(*data, batch_size=8, epochs=3, options=TrainingOptions())
    with pytest.raises(OptionError, match="^batch_tokens=256: fit batches text by batch_size"):
        translator.fit(*data, options=TrainingOptions(batch_tokens=256))
    with pytest.raises(TypeError, match="options must be a keras_tf.translation.TrainingOptions"):
        translator.fit(*data, options={"epochs": 1})
    translator.compile(loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.0))
    assert not translator.optimizer.built  # none of the refusals compiled or trained
