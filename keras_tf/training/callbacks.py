"""Keras callbacks of the training loop: the learning rate in the logs, a short-run warning.

`keras_tf.training.train` adds `LearningRateMonitor` before its checkpoint,
CSV and TensorBoard callbacks, so the rate shows in the progress bar, in
`history.csv` and in TensorBoard.
"""

import logging

import keras

logger = logging.getLogger("keras_tf.training")


class LearningRateMonitor(keras.callbacks.Callback):
    """Put the current learning rate in the logs; warn if training ends inside the warm-up.

    The progress bar shows `learning_rate` after each batch, and every epoch
    row of the logs (hence `CSVLogger`, `TensorBoard`, `History`) carries it.

    Args:
        warmup_steps: the schedule's warm-up length, or `None` if it has none.

    Example:
        >>> monitor = LearningRateMonitor(warmup_steps=4000)
        >>> monitor.warmup_steps
        4000
    """

    def __init__(self, warmup_steps=None):
        super().__init__()
        self.warmup_steps = warmup_steps

    def _rate(self):
        # A variable (a constant rate) or a tensor (a schedule's value): a tensor first,
        # since numpy's conversion of a variable is deprecated.
        rate = keras.ops.convert_to_tensor(self.model.optimizer.learning_rate)
        return float(keras.ops.convert_to_numpy(rate))

    def on_train_batch_end(self, batch, logs=None):
        if logs is not None:
            logs["learning_rate"] = self._rate()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = self._rate()

    def on_train_end(self, logs=None):
        steps = int(keras.ops.convert_to_numpy(
            keras.ops.convert_to_tensor(self.model.optimizer.iterations)))
        if self.warmup_steps is not None and steps < self.warmup_steps:
            logger.warning(
                "Training ended after %d steps, inside the learning-rate warm-up of %d steps "
                "(the rate is still %.2g); train for more steps, or leave --warmup-steps out "
                "to fit the warm-up to the run",
                steps, self.warmup_steps, self._rate(),
            )
