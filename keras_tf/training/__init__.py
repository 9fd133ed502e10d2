"""Training pieces: the paper's loss, metric, schedule and optimizer."""

from keras_tf.training.losses import MaskedSparseCategoricalCrossentropy
from keras_tf.training.metrics import MaskedTokenAccuracy
from keras_tf.training.reverse_task import make_reverse_task
from keras_tf.training.schedules import TransformerSchedule, transformer_adam

__all__ = [
    "MaskedSparseCategoricalCrossentropy",
    "MaskedTokenAccuracy",
    "TransformerSchedule",
    "make_reverse_task",
    "transformer_adam",
]
