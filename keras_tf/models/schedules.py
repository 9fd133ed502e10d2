"""The paper's learning-rate schedule and optimizer (section 5.3), and the run's plan of them.

Here, with the model, because both training front doors plan with them:
`keras_tf.training.train` (`keras-tf train`) and `Seq2SeqTranslator.fit`
with `TrainingOptions` call `planned_learning_rate`. They run on any Keras
backend; `keras_tf.training` exports them too.
"""

import keras
from keras import ops

from keras_tf.frozen_config import is_int
from keras_tf.models.learning_rates import (  # noqa: F401  (exported here too)
    FINE_TUNING_PEAK_SCALE,
    MAX_WARMUP_STEPS,
    fine_tuning_peak_learning_rate,
    paper_peak_learning_rate,
)


@keras.saving.register_keras_serializable(package="keras_tf")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = scale · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5).

    Linear warm-up for `warmup_steps`, then decay with the inverse square root
    of the step. Steps count from 1 (Keras's iteration counter starts at 0).

    Args:
        d_model: model width.
        warmup_steps: warm-up length. Defaults to 4000, the paper's value.
        scale: a constant factor. Defaults to 1.

    Example:
        >>> schedule = TransformerSchedule(d_model=512)
        >>> round(float(schedule(3999)), 6)  # the peak, at step 4000
        0.000699
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        if d_model < 1 or warmup_steps < 1:
            raise ValueError(
                "TransformerSchedule needs d_model >= 1 and warmup_steps >= 1; "
                f"received d_model={d_model}, warmup_steps={warmup_steps}"
            )
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        return (
            self.scale
            * (self.d_model**-0.5)
            * ops.minimum(ops.rsqrt(step), step * (self.warmup_steps**-1.5))
        )

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
        }


@keras.saving.register_keras_serializable(package="keras_tf")
class PerUpdateSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Read `schedule` at the count of optimizer updates, under gradient accumulation.

    With `gradient_accumulation_steps=N`, a Keras optimizer updates the
    weights once every N batches, but calls its schedule with the count of
    batches. Read that way, the paper's 4,000 warm-up steps would end after
    4,000 / N updates. This schedule gives `schedule(batches // N)`, so
    steps mean updates, as in the paper and in OpenNMT-tf and fairseq.

    Args:
        schedule: a `LearningRateSchedule` whose steps are updates.
        batches_per_update: N, the optimizer's `gradient_accumulation_steps`.

    Example:
        >>> schedule = PerUpdateSchedule(TransformerSchedule(512, warmup_steps=10), 4)
        >>> [float(schedule(b)) == float(schedule.schedule(1)) for b in (3, 4, 7, 8)]
        [False, True, True, False]
    """

    def __init__(self, schedule, batches_per_update):
        if not isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
            raise TypeError(
                "PerUpdateSchedule wraps a keras.optimizers.schedules.LearningRateSchedule; "
                f"received {type(schedule).__name__}"
            )
        if not is_int(batches_per_update) or batches_per_update < 1:
            raise ValueError(
                "batches_per_update must be a positive integer; "
                f"received batches_per_update={batches_per_update!r}"
            )
        self.schedule = schedule
        self.batches_per_update = batches_per_update

    @property
    def warmup_steps(self):
        """The wrapped schedule's warm-up, in updates (None if it has none)."""
        return getattr(self.schedule, "warmup_steps", None)

    def __call__(self, step):
        return self.schedule(ops.floor_divide(step, self.batches_per_update))

    def get_config(self):
        return {
            "schedule": keras.saving.serialize_keras_object(self.schedule),
            "batches_per_update": self.batches_per_update,
        }

    @classmethod
    def from_config(cls, config):
        schedule = keras.saving.deserialize_keras_object(config["schedule"])
        return cls(schedule, config["batches_per_update"])


def checked_accumulation_steps(gradient_accumulation_steps):
    """N, the batches an update takes, for `gradient_accumulation_steps` (None: 1), checked.

    Example:
        >>> checked_accumulation_steps(None), checked_accumulation_steps(8)
        (1, 8)
    """
    if gradient_accumulation_steps is None:
        return 1
    if not is_int(gradient_accumulation_steps) or gradient_accumulation_steps < 1:
        raise ValueError(
            "gradient_accumulation_steps must be None or a positive integer; "
            f"received gradient_accumulation_steps={gradient_accumulation_steps!r}"
        )
    return gradient_accumulation_steps


def paper_adam(learning_rate, gradient_accumulation_steps=None, **kwargs):
    """Adam with the paper's β1=0.9, β2=0.98, ε=1e-9, optionally accumulating gradients.

    Args:
        learning_rate: a float or a `LearningRateSchedule` whose steps are
            updates.
        gradient_accumulation_steps: N: update the weights once every N
            batches, with the mean of their gradients, as from one batch N
            times as large (OpenNMT-tf's `effective_batch_size`, fairseq's
            `--update-freq`). The schedule is then read per update
            (`PerUpdateSchedule`). Defaults to None (or 1): every batch.
        **kwargs: further arguments of `keras.optimizers.Adam`, e.g. `clipnorm`.
    """
    steps = checked_accumulation_steps(gradient_accumulation_steps)
    if steps > 1 and isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        learning_rate = PerUpdateSchedule(learning_rate, steps)
    return keras.optimizers.Adam(
        learning_rate=learning_rate,
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        gradient_accumulation_steps=steps if steps > 1 else None,  # Keras refuses 1
        **kwargs,
    )


def transformer_adam(d_model, warmup_steps=4000, scale=1.0, gradient_accumulation_steps=None,
                     **kwargs):
    """Adam(β1=0.9, β2=0.98, ε=1e-9) on the `TransformerSchedule`, as in the paper.

    Args:
        d_model, warmup_steps, scale: the `TransformerSchedule`'s.
        gradient_accumulation_steps: update once every N batches; the
            warm-up still counts updates (see `paper_adam`). Defaults to None.
        **kwargs: further arguments of `keras.optimizers.Adam`, e.g. `clipnorm`.

    Example:
        >>> optimizer = transformer_adam(512, gradient_accumulation_steps=8)
        >>> optimizer.gradient_accumulation_steps, optimizer.beta_2
        (8, 0.98)
    """
    return paper_adam(
        TransformerSchedule(d_model, warmup_steps, scale),
        gradient_accumulation_steps=gradient_accumulation_steps,
        **kwargs,
    )


# The run-length-aware default: warm up over a tenth of the planned steps
# (at most the paper's 4,000), to the peak the paper's schedule reaches.
WARMUP_FRACTION = 0.1


@keras.saving.register_keras_serializable(package="keras_tf")
class WarmupInverseSqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = peak · min(step / warmup_steps, (warmup_steps / step)^0.5).

    The paper's shape (linear warm-up, then decay with the inverse square
    root of the step) with its peak given directly, as fairseq's
    `inverse_sqrt` scheduler does, so the warm-up can follow the length of
    the run without moving the peak. Steps count from 1.

    Args:
        peak_learning_rate: the rate at step `warmup_steps`.
        warmup_steps: warm-up length.

    Example:
        >>> schedule = WarmupInverseSqrtSchedule(1e-3, warmup_steps=100)
        >>> [round(float(schedule(s)), 6) for s in (0, 99, 399)]
        [1e-05, 0.001, 0.0005]
    """

    def __init__(self, peak_learning_rate, warmup_steps):
        if peak_learning_rate <= 0 or warmup_steps < 1:
            raise ValueError(
                "WarmupInverseSqrtSchedule needs peak_learning_rate > 0 and warmup_steps >= 1; "
                f"received peak_learning_rate={peak_learning_rate}, warmup_steps={warmup_steps}"
            )
        self.peak_learning_rate = peak_learning_rate
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        return self.peak_learning_rate * ops.minimum(step / warmup, ops.sqrt(warmup / step))

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps}


def planned_warmup_steps(total_steps):
    """A tenth of the planned steps, at least 1 and at most the paper's 4,000.

    Example:
        >>> planned_warmup_steps(900), planned_warmup_steps(10**6)
        (90, 4000)
    """
    return int(max(1, min(MAX_WARMUP_STEPS, round(WARMUP_FRACTION * total_steps))))


def planned_schedule(d_model, total_steps):
    """The default schedule for a run of `total_steps`: it reaches its peak within the run.

    A warm-up of `planned_warmup_steps(total_steps)` to the peak the paper's
    schedule reaches for `d_model` after its 4,000 steps (1.4e-3 at
    d_model 128, 7e-4 at 512); a long run gets the paper's schedule exactly.

    Example:
        >>> schedule = planned_schedule(d_model=512, total_steps=300)
        >>> schedule.warmup_steps, round(schedule.peak_learning_rate, 6)
        (30, 0.000699)
    """
    return WarmupInverseSqrtSchedule(
        paper_peak_learning_rate(d_model), planned_warmup_steps(total_steps)
    )


FINE_TUNING_WARMUP_FRACTION = 0.02


def planned_fine_tuning_schedule(d_model, total_steps, peak_learning_rate=None,
                                 warmup_steps=None):
    """The schedule for fine-tuning trained weights over `total_steps` updates.

    The from-scratch schedule's shape (linear warm-up, inverse square root
    decay), with a short warm-up (a fiftieth of the run: the weights are
    trained already) to `fine_tuning_peak_learning_rate`, the paper's
    peak.

    Example:
        >>> schedule = planned_fine_tuning_schedule(d_model=512, total_steps=1000)
        >>> schedule.warmup_steps, round(schedule.peak_learning_rate, 6)
        (20, 0.000699)
    """
    peak = fine_tuning_peak_learning_rate(d_model) if peak_learning_rate is None else peak_learning_rate
    if warmup_steps is None:
        warmup_steps = int(max(1, round(FINE_TUNING_WARMUP_FRACTION * total_steps)))
    return WarmupInverseSqrtSchedule(peak, warmup_steps)


def planned_learning_rate(d_model, total_updates, *, warmup_steps=None, peak_learning_rate=None,
                          fine_tuning=False):
    """The learning-rate schedule of a run of `total_updates` optimizer updates.

    The one plan of both front doors (`keras-tf train` and
    `Seq2SeqTranslator.fit(options=...)`):

    - fine-tuning trained weights: `planned_fine_tuning_schedule`, its peak
      and warm-up replaced by those given;
    - from scratch with `peak_learning_rate`: a warm-up (`warmup_steps`, or
      `planned_warmup_steps(total_updates)`) to that peak, then the inverse
      square root;
    - from scratch with `warmup_steps` alone: the paper's
      `TransformerSchedule(d_model, warmup_steps)`;
    - from scratch with neither: `planned_schedule(d_model, total_updates)`.

    Args:
        d_model: the model width.
        total_updates: the planned optimizer updates (epochs times batches
            an epoch, over the batches an update takes), or None when the
            data's length is unknown: then only `warmup_steps` alone plans.
        warmup_steps: the warm-up, in updates. Defaults to None: planned.
        peak_learning_rate: the peak. Defaults to None: the paper's peak for
            `d_model` (`fine_tuning_peak_learning_rate` when fine-tuning).
        fine_tuning: whether the weights are trained ones. Defaults to False.

    Example:
        >>> schedule = planned_learning_rate(512, 300)
        >>> schedule.warmup_steps, round(schedule.peak_learning_rate, 6)
        (30, 0.000699)
        >>> planned_learning_rate(512, 1000, fine_tuning=True).warmup_steps
        20
    """
    if warmup_steps is not None and peak_learning_rate is None and not fine_tuning:
        return TransformerSchedule(d_model, warmup_steps)
    if total_updates is None and warmup_steps is None:
        raise ValueError(
            "The learning-rate schedule follows the planned number of updates; the "
            "training data has no known length, so pass steps_per_epoch or warmup_steps"
        )
    total = max(1, total_updates or 0)
    if fine_tuning:
        return planned_fine_tuning_schedule(d_model, total, peak_learning_rate, warmup_steps)
    if peak_learning_rate is not None:
        return WarmupInverseSqrtSchedule(
            peak_learning_rate, warmup_steps or planned_warmup_steps(total)
        )
    return planned_schedule(d_model, total)
