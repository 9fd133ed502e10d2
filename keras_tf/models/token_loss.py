"""`fit` and `evaluate` report `loss` per target token, not per row.

Keras's trainers add each batch's loss to the epoch's `loss` weighted by
the batch's rows. A translation batch's loss is already a mean over its real
target tokens, and batches hold very different numbers of them: a token
budget packs many short pairs or few long ones, and a short last batch may
be filled with rows of padding (`keras_tf.text.make_dataset`). Weighted by
rows, the epoch's `loss` leans towards the batches of short pairs and moves
with the fill rows. Weighted by tokens, it is the mean over every real
target token of the epoch, whatever the batching: the figure OpenNMT and
fairseq report, the same number `evaluate` gives for any batch size.

Keras 3.15's train and test steps (on every backend) call the loss
tracker's `update_state(loss, rows)` and then `compute_metrics(x, y, ...)`
in the same trace. `TokenMeanLoss` remembers the first, and the models'
`compute_metrics` turns its weight from rows into the batch's tokens.
`tests/training/test_losses_metrics_schedules.py` fails if a Keras release
moves either call.
"""

import threading

import keras
from keras import ops

from keras_tf.special_tokens import PAD_ID


def token_weights(labels, pad_id=PAD_ID, sample_weight=None, dtype="float32"):
    """`[batch, T]` weights: 1 at real target tokens, 0 at padding, times any sample weights.

    `sample_weight` is per row `[batch]` or per token `[batch, T]`. The
    masked loss, the masked accuracy and `TokenMeanLoss` all count tokens so.
    """
    weights = ops.cast(ops.not_equal(ops.cast(labels, "int32"), pad_id), dtype)
    if sample_weight is not None:
        sample_weight = ops.cast(sample_weight, dtype)
        while len(sample_weight.shape) < len(weights.shape):
            sample_weight = ops.expand_dims(sample_weight, -1)
        weights = weights * sample_weight
    return weights


class TokenMeanLoss(keras.metrics.Mean):
    """Keras's `loss` tracker, re-weighted from a batch's rows to its real target tokens.

    `update_state(loss, rows)` adds the batch as `keras.metrics.Mean` does
    and remembers it; `weigh_by_tokens(labels)` then changes that batch's
    weight to its count of non-padding labels (times their sample weights).
    Without the second call, the batch keeps its row weight.

    Example:
        >>> import numpy as np
        >>> tracker = TokenMeanLoss()
        >>> tracker.update_state(2.0, sample_weight=2)        # 2 rows, 3 tokens
        >>> tracker.weigh_by_tokens(np.array([[5, 6, 0], [7, 0, 0]]))
        >>> tracker.update_state(4.0, sample_weight=2)        # 2 rows, 1 token
        >>> tracker.weigh_by_tokens(np.array([[5, 0, 0], [0, 0, 0]]))
        >>> float(tracker.result())                           # (3 * 2 + 1 * 4) / 4
        2.5
    """

    def __init__(self, pad_id=PAD_ID, name="loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        # Per thread: tf.distribute's MirroredStrategy traces each replica's
        # step in a thread of its own, and they interleave between the two calls.
        self._pending = threading.local()

    def update_state(self, values, sample_weight=None):
        super().update_state(values, sample_weight=sample_weight)
        self._pending.batch = (values, sample_weight)

    def weigh_by_tokens(self, labels, sample_weight=None):
        """Weigh the batch `update_state` just added by its real target tokens."""
        batch = getattr(self._pending, "batch", None)
        self._pending.batch = None
        if batch is None or labels is None:
            return
        values, rows = batch
        tokens = token_weights(labels, self.pad_id, sample_weight, self.dtype)
        rows = ops.cast(1 if rows is None else rows, self.dtype)
        extra = ops.sum(tokens) - rows
        self.total.assign_add(ops.cast(values, self.dtype) * extra)
        self.count.assign_add(extra)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}


class TokenMeanLossTracking:
    """A `keras.Model` mix-in: the `loss` tracker Keras makes is a `TokenMeanLoss`.

    Keras's `compile` (also when a `.keras` file is loaded) sets
    `_loss_tracker` to a `keras.metrics.Mean`; this swaps in a
    `TokenMeanLoss` of the same name. `compile` itself is not overridden, so
    loading a saved model still compiles it.
    """

    @property
    def _loss_tracker(self):
        return self.__dict__.get("_token_mean_loss")

    @_loss_tracker.setter
    def _loss_tracker(self, tracker):
        if type(tracker) is keras.metrics.Mean:
            tracker = TokenMeanLoss(name=tracker.name)
        self.__dict__["_token_mean_loss"] = tracker

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if isinstance(self._loss_tracker, TokenMeanLoss):
            self._loss_tracker.weigh_by_tokens(y, sample_weight)
        return super().compute_metrics(x, y, y_pred, sample_weight=sample_weight)
