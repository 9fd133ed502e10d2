"""The peak learning rates of the paper's schedule, from scratch and for fine-tuning.

Here, with the model, because both front doors use them: `keras_tf.training`
plans its schedules with them, and `Seq2SeqTranslator.fit` compiles a
pretrained translator at the fine-tuning peak.
"""

# The paper's warm-up (section 5.3), at whose end its schedule peaks.
MAX_WARMUP_STEPS = 4000
# Fine-tuning trained weights: a tenth of the from-scratch peak (7e-5 at
# d_model 512, 1.4e-4 at 128). The from-scratch peak, above what a model was
# trained with, makes it forget what it knew (benchmarks/finetune.py).
FINE_TUNING_PEAK_SCALE = 0.1
# Fine-tuning with replay (pairs of the model's original domain mixed into the
# new ones, `keras_tf.text.with_replay`): the rehearsed domain holds what the
# model knew, so the peak can be high enough to learn the new one: twice the
# from-scratch peak (benchmarks/finetune.py).
REPLAY_PEAK_SCALE = 2.0


def paper_peak_learning_rate(d_model, warmup_steps=MAX_WARMUP_STEPS):
    """The peak of the paper's schedule: d_model^-0.5 · warmup_steps^-0.5.

    Example:
        >>> round(paper_peak_learning_rate(512), 6)
        0.000699
    """
    return d_model**-0.5 * warmup_steps**-0.5


def fine_tuning_peak_learning_rate(d_model, replay=False):
    """The default peak learning rate of fine-tuning: a tenth of the from-scratch peak.

    With `replay` (the original domain's pairs mixed into the new ones), twice
    the from-scratch peak.

    Example:
        >>> round(fine_tuning_peak_learning_rate(512), 7)
        6.99e-05
        >>> round(fine_tuning_peak_learning_rate(512, replay=True), 5)
        0.0014
    """
    scale = REPLAY_PEAK_SCALE if replay else FINE_TUNING_PEAK_SCALE
    return scale * paper_peak_learning_rate(d_model)


# LoRA's factors: ten times full fine-tuning's peak ("LoRA Without Regret",
# Schulman et al., 2025: LoRA's best rate is about 10x full fine-tuning's;
# PEFT trains LoRA at 1e-3), which is the from-scratch peak.
LORA_PEAK_SCALE = 10.0


def lora_peak_learning_rate(d_model):
    """The default peak learning rate of LoRA fine-tuning: ten times full fine-tuning's.

    With or without replay: the factors start at zero, and ten times the
    replay peak (twenty times the from-scratch one) would diverge.

    Example:
        >>> round(lora_peak_learning_rate(512), 6)
        0.000699
    """
    return LORA_PEAK_SCALE * fine_tuning_peak_learning_rate(d_model)
