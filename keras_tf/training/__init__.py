"""Training pieces: the paper's loss, metric, schedule and optimizer, the recipe, the entry point.

`TrainingOptions` is the recipe of both front doors: `train_preset_dir`
(`keras-tf train`) and `Seq2SeqTranslator.fit(..., options=...)`.

The loss, metric, schedule and reverse task run on any Keras backend.
`train`, `make_strategy`, `train_preset_dir` and `average_preset_dir` use
`tf.data` and `tf.distribute`, so they are imported on first use and need
TensorFlow.
"""

import importlib

from keras_tf.training.callbacks import LearningRateMonitor
from keras_tf.models.losses import MaskedSparseCategoricalCrossentropy
from keras_tf.models.metrics import MaskedTokenAccuracy
from keras_tf.training.reverse_task import make_reverse_task
from keras_tf.models.schedules import (
    PerUpdateSchedule,
    TransformerSchedule,
    WarmupInverseSqrtSchedule,
    fine_tuning_peak_learning_rate,
    paper_adam,
    planned_fine_tuning_schedule,
    planned_learning_rate,
    planned_schedule,
    planned_warmup_steps,
    transformer_adam,
)
from keras_tf.translation.training_options import TrainingOptions

# name -> the TensorFlow-only module that defines it
_NEEDS_TENSORFLOW = {
    "average_preset_dir": "keras_tf.training.preset_dir",
    "make_strategy": "keras_tf.training.distribute",
    "train": "keras_tf.training.trainer",
    "train_preset_dir": "keras_tf.training.preset_dir",
}


def __getattr__(name):
    if name in _NEEDS_TENSORFLOW:
        return getattr(importlib.import_module(_NEEDS_TENSORFLOW[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "LearningRateMonitor",
    "MaskedSparseCategoricalCrossentropy",
    "MaskedTokenAccuracy",
    "PerUpdateSchedule",
    "TrainingOptions",
    "TransformerSchedule",
    "WarmupInverseSqrtSchedule",
    "average_preset_dir",
    "make_reverse_task",
    "make_strategy",
    "fine_tuning_peak_learning_rate",
    "paper_adam",
    "planned_fine_tuning_schedule",
    "planned_learning_rate",
    "planned_schedule",
    "planned_warmup_steps",
    "train",
    "train_preset_dir",
    "transformer_adam",
]
