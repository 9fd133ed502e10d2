"""`train(keep_best="bleu")` keeps the model of the best val_bleu; `early_stopping` stops.

The same run checks the default schedule: its warm-up follows the planned
steps, and the rate reaches the logs.
"""

import csv
import logging

import keras
import numpy as np
import pytest

from keras_tf.training import (
    WarmupInverseSqrtSchedule,
    make_reverse_task,
    planned_warmup_steps,
    train,
)
from keras_tf.training.bleu import ValidationBleu, corpus_scores
from tests.helpers import one_block_tiny


class _ScriptedBleu(ValidationBleu):
    """Logs a given val_bleu per epoch, and keeps each epoch's weights."""

    def __init__(self, scores):
        super().__init__([], [], tokenizers=None)
        self.scores = scores
        self.weights = []

    def on_epoch_end(self, epoch, logs=None):
        logs["val_bleu"] = self.scores[epoch]
        self.weights.append(self.model.get_weights())


def test_keep_best_bleu_early_stopping_and_the_planned_rate(tmp_path, caplog):
    scripted = _ScriptedBleu([5.0, 7.0, 6.0, 6.5, 9.0])
    with caplog.at_level(logging.WARNING, logger="keras_tf"):
        model, history = train(
            one_block_tiny(), make_reverse_task(128), make_reverse_task(32, seed=1),
            out_dir=str(tmp_path), epochs=5, batch_size=32, jit_compile=False, verbose=0,
            validation_bleu=scripted, keep_best="bleu", early_stopping=2,
        )
    # No gain in epochs 3 and 4 (index 2, 3) after the best, epoch 2: stop there.
    assert history.epoch == [0, 1, 2, 3]
    assert history.history["val_bleu"] == [5.0, 7.0, 6.0, 6.5]
    best = keras.models.load_model(tmp_path / "model.keras", compile=False)
    for saved, kept in zip(best.get_weights(), scripted.weights[1]):
        np.testing.assert_array_equal(saved, kept)
    assert not np.array_equal(model.get_weights()[0], scripted.weights[1][0])

    # No learning rate given: the warm-up is planned on the 5 x 4 steps asked
    # for, and each epoch row carries the rate of the next step.
    schedule = model.optimizer._learning_rate
    assert isinstance(schedule, WarmupInverseSqrtSchedule)
    assert schedule.warmup_steps == planned_warmup_steps(5 * 128 // 32) == 2
    expected = [float(schedule(4 * (epoch + 1))) for epoch in range(4)]
    assert history.history["learning_rate"] == pytest.approx(expected, rel=1e-5)
    with open(tmp_path / "history.csv") as file:
        rows = list(csv.DictReader(file))
    assert [float(row["learning_rate"]) for row in rows] == pytest.approx(expected, rel=1e-5)
    assert not [r for r in caplog.records if "warm-up" in r.getMessage()]


def test_corpus_scores_is_sacrebleu():
    import sacrebleu

    hypotheses = ["the cat sat on the mat today", "a dog ran"]
    references = ["the cat sat on a mat today", "a dog ran"]
    bleu, chrf = corpus_scores(hypotheses, references)
    assert bleu.score == sacrebleu.corpus_bleu(hypotheses, [references]).score
    assert chrf.score == sacrebleu.corpus_chrf(hypotheses, [references]).score
    assert 0 < bleu.score < 100
