"""Keras callbacks of the training loop: the learning rate in the logs, a time budget.

`keras_tf.training.train` adds `LearningRateMonitor` before its checkpoint,
CSV and TensorBoard callbacks, so the rate shows in the progress bar, in
`history.csv` and in TensorBoard; with `max_minutes` it adds `TimeBudget`
before the checkpoint too, which then backs up where the budget stops.
"""

import logging
import time

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


class TrainingClock:
    """Training time of a whole run: what earlier (resumed) parts spent, plus this part's.

    Starts when the first `fit` of this process begins training, so the
    time spent reading data and building the model before it is not
    counted, and the compile of the first step is.

    Args:
        seconds_before: the training time the run's backup records.
    """

    def __init__(self, seconds_before=0.0):
        self.seconds_before = float(seconds_before)
        self.started = None

    def start(self):
        if self.started is None:
            self.started = time.monotonic()

    def seconds(self):
        """The run's training time so far, in seconds."""
        running = time.monotonic() - self.started if self.started is not None else 0.0
        return self.seconds_before + running


class TimeBudget(keras.callbacks.Callback):
    """Stop `fit` after the step in progress once the run's training time reaches a budget.

    Checked after every batch and at every epoch end; it sets
    `model.stop_training`, so Keras ends the epoch early (running its
    validation) and `fit` returns.

    Args:
        seconds: the budget, in seconds of training time of the whole run.
        clock: the `TrainingClock` that counts it.
        any_worker: `flag -> bool`, whether `flag` is true on any worker,
            so that several workers stop at the same step
            (`keras_tf.training.distribute.any_worker`). Defaults to None:
            one process.

    Example:
        >>> budget = TimeBudget(60.0, TrainingClock(seconds_before=75.0))
        >>> budget.spent()
        True
    """

    def __init__(self, seconds, clock, any_worker=None):
        super().__init__()
        self.seconds = seconds
        self.clock = clock
        self.any_worker = any_worker or bool
        self.stopped = False

    def spent(self):
        """Whether the budget is spent, on any worker."""
        return self.any_worker(self.clock.seconds() >= self.seconds)

    def on_train_begin(self, logs=None):
        self.clock.start()

    def on_train_batch_end(self, batch, logs=None):
        if self.spent():
            self.stopped = self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        if not self.stopped and self.spent():
            self.stopped = self.model.stop_training = True
