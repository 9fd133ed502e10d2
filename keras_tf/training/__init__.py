"""Training pieces: the paper's loss, metric, schedule and optimizer, and the entry point."""

from keras_tf.training.distribute import make_strategy
from keras_tf.training.losses import MaskedSparseCategoricalCrossentropy
from keras_tf.training.metrics import MaskedTokenAccuracy
from keras_tf.training.reverse_task import make_reverse_task
from keras_tf.training.callbacks import LearningRateMonitor
from keras_tf.training.schedules import (
    TransformerSchedule,
    WarmupInverseSqrtSchedule,
    planned_schedule,
    planned_warmup_steps,
    transformer_adam,
)
from keras_tf.training.trainer import train

__all__ = [
    "LearningRateMonitor",
    "MaskedSparseCategoricalCrossentropy",
    "MaskedTokenAccuracy",
    "TransformerSchedule",
    "WarmupInverseSqrtSchedule",
    "make_reverse_task",
    "make_strategy",
    "planned_schedule",
    "planned_warmup_steps",
    "train",
    "transformer_adam",
]
