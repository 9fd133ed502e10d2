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
