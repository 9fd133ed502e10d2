"""Teacher-forced scores: the log-probability a model gives to a given translation.

`pair_log_probabilities` frames each pair as the training pipeline does
(`keras_tf.text.frame_source` and `frame_target`, at the model's maximum
lengths), runs the model once over the target, and sums
log P(label | source, previous labels) over the target tokens, END included.
A source or target longer than the model's maximum length is cut as training
cuts it; `score_pairs` says which pairs were.
It is what `keras-tf score` prints: the same quantity beam and greedy search
maximise, for a translation the model did not have to find itself.
"""

import dataclasses

import numpy as np
from keras import ops

from keras_tf.special_tokens import PAD_ID
from keras_tf.text import frame_source, frame_target


@dataclasses.dataclass(frozen=True)
class PairScores:
    """What `score_pairs` computed, one entry per pair.

    Args:
        scores: float64 numpy `[pairs]`, the summed log-probabilities.
        lengths: int numpy `[pairs]`, the target tokens scored (END included).
        cut_sources: indices of the pairs whose source was longer than
            `max_source_length - 1` ids, scored from its first pieces (then END).
        cut_targets: indices of the pairs whose target was longer than
            `max_target_length - 1` ids, scored on its first pieces (then END).
    """

    scores: np.ndarray
    lengths: np.ndarray
    cut_sources: list
    cut_targets: list


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
        ids is cut, as in training). `score_pairs` also says which pairs
        were cut.
    """
    result = score_pairs(model, tokenizers, sources, targets, batch_size)
    return result.scores, result.lengths


def score_pairs(model, tokenizers, sources, targets, batch_size=32):
    """`pair_log_probabilities`, and the indices of the pairs cut to fit: a `PairScores`."""
    if len(sources) != len(targets):
        raise ValueError(
            f"One target per source; received {len(sources)} sources and {len(targets)} targets"
        )
    c = model.config
    scores, lengths, cut_sources, cut_targets = [], [], [], []
    for start in range(0, len(sources), batch_size):
        batch_sources = sources[start : start + batch_size]
        batch_targets = targets[start : start + batch_size]
        source_ids = tokenizers.tokenize_source(batch_sources)
        target_ids = tokenizers.tokenize_target(batch_targets)
        # What the framing below cuts: all but the first max_length - 1 ids.
        cut_sources += (start + np.flatnonzero(
            source_ids.row_lengths().numpy() > c.max_source_length - 1)).tolist()
        cut_targets += (start + np.flatnonzero(
            target_ids.row_lengths().numpy() > c.max_target_length - 1)).tolist()
        encoder = frame_source(source_ids, c.max_source_length)
        decoder, labels = frame_target(target_ids, c.max_target_length)
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
        return PairScores(np.zeros([0]), np.zeros([0], int), [], [])
    return PairScores(np.concatenate(scores), np.concatenate(lengths), cut_sources, cut_targets)
