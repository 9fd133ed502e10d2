"""The paper's learning-rate schedule and optimizer (section 5.3)."""

import keras
from keras import ops


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


def transformer_adam(d_model, warmup_steps=4000, scale=1.0, **kwargs):
    """Adam(β1=0.9, β2=0.98, ε=1e-9) on the `TransformerSchedule`, as in the paper.

    Extra keyword arguments (e.g. `clipnorm`) go to `keras.optimizers.Adam`.
    """
    return keras.optimizers.Adam(
        learning_rate=TransformerSchedule(d_model, warmup_steps, scale),
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        **kwargs,
    )


# The run-length-aware default: warm up over a tenth of the planned steps
# (at most the paper's 4,000), to the peak the paper's schedule reaches.
WARMUP_FRACTION = 0.1
MAX_WARMUP_STEPS = 4000


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


def paper_peak_learning_rate(d_model, warmup_steps=MAX_WARMUP_STEPS):
    """The peak of the paper's schedule: d_model^-0.5 · warmup_steps^-0.5.

    Example:
        >>> round(paper_peak_learning_rate(512), 6)
        0.000699
    """
    return d_model**-0.5 * warmup_steps**-0.5


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
