"""Token accuracy over non-padding positions."""

import keras
from keras import ops

from keras_tf.special_tokens import PAD_ID
from keras_tf.models.token_loss import token_weights


@keras.saving.register_keras_serializable(package="keras_tf")
class MaskedTokenAccuracy(keras.metrics.Metric):
    """Fraction of non-padding target positions where argmax(logits) equals the label.

    Teacher-forced: every position is predicted from the true prefix.

    Args:
        pad_id: label id to ignore. Defaults to 0.

    Example:
        >>> import numpy as np
        >>> metric = MaskedTokenAccuracy()
        >>> logits = np.eye(4, dtype="float32")[[[1, 2, 3]]]  # predicts 1, 2, 3
        >>> metric.update_state(np.array([[1, 3, 0]]), logits)
        >>> float(metric.result())
        0.5
    """

    def __init__(self, pad_id=PAD_ID, name="masked_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.correct = self.add_variable((), initializer="zeros", name="correct")
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        mask = token_weights(y_true, self.pad_id, sample_weight)
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        hits = ops.cast(ops.equal(predicted, y_true), "float32") * mask
        self.correct.assign_add(ops.sum(hits))
        self.count.assign_add(ops.sum(mask))

    def result(self):
        return self.correct / ops.maximum(self.count, 1.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}
