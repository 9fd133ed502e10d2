"""Teacher-forced scores: the log-probability a model gives to a given translation.

`pair_log_probabilities` frames each pair as the training pipeline does
(`keras_tf.text.frame_source` and `frame_target`, at the model's maximum
lengths), runs the model once over the whole target, and sums
log P(label | source, previous labels) over the target tokens, END included.
It is what `keras-tf score` prints: the same quantity beam and greedy search
maximise, for a translation the model did not have to find itself.
"""

import numpy as np
from keras import ops

from keras_tf.special_tokens import PAD_ID


def pair_log_probabilities(model, tokenizers, sources, targets, batch_size=32):
    """Sum of the target tokens' log-probabilities, one per pair (natural log).

    Args:
        model: a `Seq2SeqTransformer`.
        tokenizers: its `Seq2SeqTokenizers`.
        sources: list of `str`.
        targets: list of `str`, one per source.
        batch_size: pairs per forward pass. Defaults to 32.

    Returns:
        `(scores, lengths)`: float64 numpy `[pairs]` of summed
        log-probabilities, and int `[pairs]` of target tokens scored (END
        included; a target longer than the model's `max_target_length - 1`
        ids is cut, as in training).
    """
    from keras_tf.text import frame_source, frame_target

    if len(sources) != len(targets):
        raise ValueError(
            f"One target per source; received {len(sources)} sources and {len(targets)} targets"
        )
    c = model.config
    scores, lengths = [], []
    for start in range(0, len(sources), batch_size):
        batch_sources = sources[start : start + batch_size]
        batch_targets = targets[start : start + batch_size]
        encoder = frame_source(tokenizers.tokenize_source(batch_sources), c.max_source_length)
        decoder, labels = frame_target(
            tokenizers.tokenize_target(batch_targets), c.max_target_length
        )
        # encoder: [B, S]; decoder, labels: [B, T], padded with PAD_ID
        inputs = {
            "encoder_tokens": encoder.to_tensor(default_value=PAD_ID),
            "decoder_tokens": decoder.to_tensor(default_value=PAD_ID),
        }
        labels = np.asarray(labels.to_tensor(default_value=PAD_ID))
        logits = model(inputs, training=False)  # [B, T, vocabulary]
        log_probs = ops.convert_to_numpy(ops.log_softmax(ops.cast(logits, "float32"), axis=-1))
        picked = np.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
        mask = labels != PAD_ID
        scores.append((picked * mask).sum(axis=1, dtype=np.float64))
        lengths.append(mask.sum(axis=1))
    if not scores:
        return np.zeros([0]), np.zeros([0], int)
    return np.concatenate(scores), np.concatenate(lengths)
