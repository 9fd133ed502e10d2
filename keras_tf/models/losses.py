"""The training loss: masked sparse cross-entropy with label smoothing (section 5.4)."""

import keras
import numpy as np
from keras import ops
from keras.src.losses.loss import scale_loss_for_distribution

from keras_tf.special_tokens import PAD_ID, START_ID
from keras_tf.models.token_loss import token_weights

# An output bias at or below this marks a row the model can never emit: the
# OPUS-MT converter gives its spare PAD row -1e9 (keras_tf.translation.marian).
UNREACHABLE_BIAS = -1e8


def never_emitted_ids(model):
    """The target ids `model` can never emit, which label smoothing must leave out.

    PAD and START (never a label: padding is masked, START only opens the
    decoder's input), and every id whose output bias is at or below
    `UNREACHABLE_BIAS` (an imported OPUS-MT model's spare row). Smoothing
    mass on a row of bias -1e9 adds about (ε/V)·1e9 to the loss.

    Args:
        model: a `Seq2SeqTransformer` (or anything with its `output_bias`).

    Returns:
        The ids, a sorted tuple of ints.

    Example:
        >>> from keras_tf.models import Seq2SeqTransformer, get_preset
        >>> never_emitted_ids(Seq2SeqTransformer(get_preset("transformer_tiny")))
        (0, 2)
    """
    ids = {PAD_ID, START_ID}
    bias = getattr(model, "output_bias", None)
    if bias is not None:
        values = ops.convert_to_numpy(bias.bias)
        ids.update(int(i) for i in np.flatnonzero(values <= UNREACHABLE_BIAS))
    return tuple(sorted(ids))


@keras.saving.register_keras_serializable(package="keras_tf")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy over target token ids, smoothed, averaged over non-padding tokens.

    With smoothing ε and vocabulary V, the target distribution is
    (1 - ε) on the true token plus ε / V everywhere (Keras's convention), so
    the loss is (1 - ε) · NLL + ε · mean over the vocabulary of -log p.
    With `excluded_ids`, the ε is spread over the other ids only (as
    OpenNMT-py's smoothing zeroes the padding id): the mean runs over the
    vocabulary without them. The training floor passes `never_emitted_ids`
    of the model, so an imported model's loss reads like any other's.
    Positions whose label is the padding id contribute nothing, and the sum
    is divided by the number of real tokens in the batch. Computed in float32.

    Args:
        label_smoothing: ε. Defaults to 0.1, the paper's value.
        pad_id: label id to ignore. Defaults to 0.
        excluded_ids: ids that take no smoothing mass. Defaults to (): every
            id (Keras's convention).
        from_logits: whether `y_pred` are logits. Defaults to True.

    Example:
        >>> import numpy as np
        >>> loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.0)
        >>> y_true = np.array([[1, 0]]); y_pred = np.zeros((1, 2, 4), "float32")
        >>> round(float(loss(y_true, y_pred)), 4)  # log(4), the padded position ignored
        1.3863
    """

    def __init__(
        self,
        label_smoothing=0.1,
        pad_id=PAD_ID,
        from_logits=True,
        excluded_ids=(),
        name="masked_sparse_categorical_crossentropy",
        **kwargs,
    ):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                f"label_smoothing must be in [0, 1); received {label_smoothing!r}"
            )
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id
        self.from_logits = from_logits
        self.excluded_ids = tuple(sorted({int(i) for i in excluded_ids}))

    def call(self, y_true, y_pred):
        """Per-token loss `[batch, length]`, zero at padding."""
        y_true = ops.cast(y_true, "int32")
        y_pred = ops.cast(y_pred, "float32")
        log_probs = (
            ops.log_softmax(y_pred, axis=-1)
            if self.from_logits
            else ops.log(ops.clip(y_pred, 1e-12, 1.0))
        )
        nll = -ops.take_along_axis(log_probs, ops.expand_dims(y_true, -1), axis=-1)[..., 0]
        if self.label_smoothing:
            smooth = self._smoothing_term(log_probs)
            nll = (1.0 - self.label_smoothing) * nll + self.label_smoothing * smooth
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        return nll * mask

    def _smoothing_term(self, log_probs):
        """-log p averaged over the ids that take smoothing mass: `[batch, length]`."""
        vocabulary = log_probs.shape[-1]
        excluded = [i for i in self.excluded_ids if i < vocabulary]
        if not excluded:
            return -ops.mean(log_probs, axis=-1)
        kept = np.ones(vocabulary, dtype=bool)
        kept[excluded] = False
        # where, not a product: an excluded row's log p may be -1e9 (or -inf).
        kept_log_probs = ops.where(kept, log_probs, ops.zeros_like(log_probs))
        return -ops.sum(kept_log_probs, axis=-1) / float(kept.sum())

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Bypasses Keras's mask-based reduction: the denominator is the count
        # of real tokens, whatever masks the logits carry.
        # call() zeroes padding; the weights also count only real tokens.
        weights = token_weights(y_true, self.pad_id, sample_weight)
        loss = ops.sum(self.call(y_true, y_pred) * weights) / ops.maximum(ops.sum(weights), 1.0)
        # Keras's own Loss.__call__ divides by the number of replicas under
        # tf.distribute (the per-replica losses are summed); so must we.
        return scale_loss_for_distribution(loss)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "label_smoothing": self.label_smoothing,
                "pad_id": self.pad_id,
                "from_logits": self.from_logits,
                "excluded_ids": list(self.excluded_ids),
            }
        )
        return config
