"""The peak learning rates of the paper's schedule, from scratch and for fine-tuning.

Here, with the model, because both front doors use them: `keras_tf.training`
plans its schedules with them, and `Seq2SeqTranslator.fit` compiles a
pretrained translator at the fine-tuning peak.
"""

# The paper's warm-up (section 5.3), at whose end its schedule peaks.
MAX_WARMUP_STEPS = 4000
# Fine-tuning trained weights with nothing of the old domain: the paper's
# peak (7e-4 at d_model 512, 1.4e-3 at 128). Measured on two pairs of domains
# over three seeds (benchmarks/finetune.py, docs/pretrained.md): without
# old-domain data no peak kept 90 % of what the model knew, and a tenth of
# this peak kept more only by learning almost nothing (Bible -> UI strings:
# 1.5 BLEU in 5 epochs against 12.8); --replay-source, --replay-corpus or
# --general-valid keep what it knew.
FINE_TUNING_PEAK_SCALE = 1.0
# Fine-tuning with replay (pairs of the model's original domain mixed into the
# new ones, `keras_tf.text.with_replay`): the rehearsed domain holds what the
# model knew, so the peak can be high enough to learn the new one: twice the
# paper's peak (benchmarks/finetune.py).
REPLAY_PEAK_SCALE = 2.0


def paper_peak_learning_rate(d_model, warmup_steps=MAX_WARMUP_STEPS):
    """The peak of the paper's schedule: d_model^-0.5 · warmup_steps^-0.5.

    Example:
        >>> round(paper_peak_learning_rate(512), 6)
        0.000699
    """
    return d_model**-0.5 * warmup_steps**-0.5


# keras-tf train's from-scratch peak follows its batch: the paper's peak up to
# 512 tokens an update (where it was measured best at equal epochs), then
# the square root of the budget over 512 (Adam's square-root scaling rule),
# at most twice the paper's peak: measured at 2,048 tokens on the Bible,
# where twice the peak scored 29.72 test BLEU after 16 epochs (40 minutes)
# against 512 tokens at the paper's peak's 28.49 after 45 minutes
# (docs/benchmarks.md). Twice the paper's formula is also what OpenNMT-tf
# and tensor2tensor run (their Noam scale of 2).
PEAK_REFERENCE_TOKENS = 512
MAX_BATCH_PEAK_SCALE = 2.0


def batch_peak_learning_rate(d_model, update_tokens):
    """The from-scratch peak for updates of `update_tokens` token positions.

    `paper_peak_learning_rate(d_model)` times
    sqrt(update_tokens / 512), kept between 1 and `MAX_BATCH_PEAK_SCALE`.

    Example:
        >>> [round(batch_peak_learning_rate(128, t), 5) for t in (255, 512, 2048, 8192)]
        [0.0014, 0.0014, 0.0028, 0.0028]
    """
    scale = min(MAX_BATCH_PEAK_SCALE, max(1.0, (update_tokens / PEAK_REFERENCE_TOKENS) ** 0.5))
    return scale * paper_peak_learning_rate(d_model)


def fine_tuning_peak_learning_rate(d_model, replay=False):
    """The default peak learning rate of fine-tuning: the paper's peak.

    With `replay` (the original domain's pairs mixed into the new ones), twice
    the paper's peak.

    Example:
        >>> round(fine_tuning_peak_learning_rate(512), 6)
        0.000699
        >>> round(fine_tuning_peak_learning_rate(512, replay=True), 5)
        0.0014
    """
    scale = REPLAY_PEAK_SCALE if replay else FINE_TUNING_PEAK_SCALE
    return scale * paper_peak_learning_rate(d_model)


# LoRA's factors: three times the paper's peak. LoRA's best rate sits
# well above full fine-tuning's ("LoRA Without Regret", Schulman et al.,
# 2025: about 10x; PEFT trains LoRA at 1e-3); measured on two pairs of
# domains (benchmarks/finetune.py), 3x the paper's peak learned more
# than 1x at the same keep, and 0.1x learned nothing.
LORA_PEAK_SCALE = 3.0


def lora_peak_learning_rate(d_model):
    """The default peak learning rate of LoRA fine-tuning: three times the paper's peak.

    With or without replay: the factors start at zero, and a multiple of the
    replay peak would diverge.

    Example:
        >>> round(lora_peak_learning_rate(512), 5)
        0.0021
    """
    return LORA_PEAK_SCALE * paper_peak_learning_rate(d_model)


# `Seq2SeqTranslator.compile()`'s constant rate for trained weights: no
# warm-up, so a tenth of the paper's peak (7e-5 at d_model 512); Adam's
# first updates at the peak itself, unwarmed, can undo what the weights know.
# The planned schedules (`keras-tf train --init-from`, `fit(options=...)`)
# warm up to `fine_tuning_peak_learning_rate` instead.
CONSTANT_FINE_TUNING_SCALE = 0.1


def constant_fine_tuning_learning_rate(d_model):
    """`compile()`'s constant learning rate for a translator with trained weights.

    Example:
        >>> round(constant_fine_tuning_learning_rate(512), 7)
        6.99e-05
    """
    return CONSTANT_FINE_TUNING_SCALE * paper_peak_learning_rate(d_model)
