"""`TrainingOptions`: the training recipe of both front doors, in one frozen dataclass.

`keras-tf train` and `keras_tf.training.train_preset_dir` take it, write it to
the preset directory's `options.json` (`presets.write_options`) and compare a
resumed run's against it (`check_resumes`); `Seq2SeqTranslator.fit(...,
options=...)` trains with its learning-rate plan, loss and loop. It sits on
the task's floor so that the task and the training floor above it read the
same object. Process settings (the `tf.distribute` strategy, XLA, backups,
progress output) are not part of the recipe: they are arguments of the
calls.
"""

import dataclasses
import os

from keras_tf.frozen_config import MAX_INT, MAX_SEED, ConfigMethods, is_finite, is_int
from keras_tf.models.config import PRESETS
from keras_tf.models.schedules import planned_learning_rate
from keras_tf.option_error import OptionError

# What `Seq2SeqTokenizers.train` can learn (keras_tf.text.tokenizers.TRAINABLE_KINDS,
# named here without importing TensorFlow's text ops).
TOKENIZERS = ("sentencepiece", "wordpiece")
MIXED_PRECISION_POLICIES = ("mixed_bfloat16", "mixed_float16")
# `keep_best` choices: the monitored log and whether higher is better.
KEEP_BEST = {"loss": ("val_loss", "min"), "bleu": ("val_bleu", "max")}

# Fields that fix the model, its vocabulary or its optimizer's variables (the
# gradients accumulated so far): a resumed run must repeat them.
FIXED_OPTIONS = (
    "preset", "dropout", "tokenizer", "vocabulary_size", "max_length", "mixed_precision",
    "gradient_accumulation_steps", "lora_rank", "lora_targets", "tokenizer_model", "init_from",
)
# Replayed pairs per new pair when fine-tuning with replay: with the replay
# peak, the ratio that kept the old domain (97 % of its BLEU) and matched
# training from scratch on the new one (benchmarks/finetune.py).
REPLAY_RATIO = 2.0
# The highest peak learning rate: Adam's steps are about the rate itself, and
# weights of order 0.1 do not survive steps of 1.
MAX_LEARNING_RATE = 1.0
# Replayed pairs per new pair at most: beyond, the new corpus is noise in the replay.
MAX_REPLAY_RATIO = 1000.0
# The longest time budget, in minutes (about two years): a larger one is a typo.
MAX_MINUTES = 1e6
# The Dense layers LoRA adapts by default: attention and feed-forward, as
# "LoRA Without Regret" (Schulman et al., 2025) found it must.
LORA_TARGETS = ("query", "key", "value", "attention_output", "inner_dense", "output_dense")
# With --general-valid, the merge kept: the largest α whose BLEU is at least
# this share of the starting model's.
KEEP = 0.9
# Fields that the trained model brings when fine-tuning (`init_from`): they read None.
MODEL_FIELDS = ("preset", "tokenizer", "vocabulary_size", "max_length")
# What `options.json` records besides the options: facts of the run's data.
RUN_FACTS = ("train_pairs", "replay_pairs", "valid_pairs", "planned_dropout", "merge", "average")
# The last epochs averaged at the end of a run with validation BLEU: five, as
# the paper averaged its last five checkpoints (section 6.1); +2.8 BLEU on the
# Bible (benchmarks/learning.py, docs/benchmarks.md).
AVERAGE_LAST = 5
# The least value of each whole-number field.
_MINIMUMS = {
    "vocabulary_size": 5, "max_length": 2, "batch_size": 1, "batch_tokens": 2, "epochs": 1,
    "steps": 1, "warmup_steps": 1, "gradient_accumulation_steps": 1, "seed": 0,
    "early_stopping": 1, "keep_checkpoints": 1, "lora_rank": 1, "average_last": 1,
}
# What an options.json written before the fine-tuning field existed says in `preset`.
_LEGACY_INIT_FROM = "init-from "


@dataclasses.dataclass(frozen=True)
class TrainingOptions(ConfigMethods):
    """How to train a translator: the recipe `options.json` stores and a resume repeats.

    Every field is checked on construction; a bad value raises
    `keras_tf.option_error.OptionError` (a `ValueError`) in one line that
    names it: `dropout=1.5: must be in [0, 1)`. `keras-tf train` shows the
    same line with the flag, `--dropout 1.5: ...`.

    Args:
        preset: the untrained architecture, a name in
            `keras_tf.models.PRESETS`. Defaults to `"transformer_small"`.
            None (or ignored) with `init_from`.
        dropout: P_drop instead of the preset's (or the `init_from` model's).
            Defaults to None: theirs; from scratch, a preset without dropout
            trains with 0.1 in a run that reads 250,000 pairs or more
            (`keras_tf.models.config.planned_dropout`).
        tokenizer: `"sentencepiece"` (default) or `"wordpiece"`, one
            vocabulary learned for both sides. None with `init_from`.
        vocabulary_size: the shared vocabulary size. Defaults to None:
            fitted to the corpus. None with `init_from`.
        max_length: the longest source and target, in tokens. Defaults to
            None: the preset's. None with `init_from`.
        tokenizer_model: your SentencePiece model (a path), or a
            (source, target) pair of paths, instead of learning tokenizers;
            kept as absolute paths. Defaults to None.
        init_from: a preset directory to fine-tune: its tokenizers, config
            and weights are the start, so `preset`, `tokenizer`,
            `vocabulary_size` and `max_length` read None. Defaults to None.
        lora_rank: train LoRA factors of this rank alone. Defaults to None.
        lora_targets: the Dense layers LoRA adapts. Defaults to
            `LORA_TARGETS`: every attention and feed-forward projection.
        mixed_precision: None (default, float32), `"mixed_bfloat16"` or
            `"mixed_float16"`.
        batch_size: pairs per batch, instead of `batch_tokens`. Defaults to
            None (`train_preset_dir`: a token budget; `fit`: 32).
        batch_tokens: the token budget of a batch (`train_preset_dir`
            only). Defaults to None: fitted to the corpus.
        epochs: total epochs, those of a killed run included. Defaults to 10.
        steps: batches per epoch; the data repeats as needed. Defaults to
            None: one pass over the data.
        learning_rate: the peak of the warm-up schedule. Defaults to None:
            the paper's peak for the model's d_model (twice it when
            fine-tuning with replay, three times it for LoRA).
        warmup_steps: the warm-up, in updates. Defaults to None: a tenth of
            the planned updates (a fiftieth when fine-tuning); see
            `keras_tf.models.schedules.planned_learning_rate`.
        gradient_accumulation_steps: update the weights once every N
            batches. Defaults to 1.
        label_smoothing: ε of the loss. Defaults to 0.1, the paper's.
        seed: seeds the weights and the shuffle. Defaults to 0.
        keep_best: `"bleu"` or `"loss"`, what picks the kept model
            (`train_preset_dir`). Defaults to None: BLEU with a validation
            corpus, else the loss.
        early_stopping: stop after this many epochs without a gain in the
            `keep_best` quantity (`train_preset_dir`). Defaults to None.
        keep_checkpoints: the last epochs' weights kept for averaging
            (`train_preset_dir`; at least `average_last` of them are kept
            when it averages). Defaults to 1.
        average_last: at the end of a run from scratch that scores
            validation BLEU (`train_preset_dir`), the mean of the last this many epochs'
            weights is scored the same way and becomes the run's model when
            it scores at least the kept epoch's; 1 turns it off. Defaults
            to `AVERAGE_LAST`, 5.
        replay_ratio: with a replay corpus (`train_preset_dir`'s
            `replay_corpus`, or `replay_source`), replayed pairs per
            training pair. Defaults to None: `REPLAY_RATIO`, 2.
        max_minutes: a budget of training time: the run stops after the
            step in progress once this many minutes of training are spent,
            counted over the whole run (a resumed run goes on from the time
            its backup records), keeping the best model and a backup from
            which a larger budget goes on. Not fixed: a resume may change
            it. Defaults to None: no budget.
        replay_source: a UTF-8 text file of source sentences of the
            domain to keep (one a line): the starting model (`init_from`;
            for `fit`, the translator) translates them before training and
            those pairs are replayed as a replay corpus's. Kept as an
            absolute path. Defaults to None.
        general_valid: with `init_from`, a TSV file of pairs of the domain
            to keep: after training, the run keeps the largest merge
            θ₀ + α(θ_ft − θ₀) on `keras_tf.training.merging.ALPHAS` whose
            BLEU on them is at least `keep` times the starting model's
            (`train_preset_dir`). Defaults to None.
        keep: the share of the starting model's BLEU on `general_valid`
            that the kept merge must reach. Defaults to `KEEP`, 0.9.
        merge_alpha: with `init_from`, write θ₀ + α(θ_ft − θ₀) at this α
            as the run's model instead of choosing it. Defaults to None.

    Example:
        >>> options = TrainingOptions(preset="transformer_tiny", epochs=2)
        >>> TrainingOptions.from_dict(options.to_dict()) == options
        True
        >>> options.replace(dropout=1.5)
        Traceback (most recent call last):
        ...
        keras_tf.option_error.OptionError: dropout=1.5: must be in [0, 1)
    """

    preset: str = "transformer_small"
    dropout: float = None
    tokenizer: str = "sentencepiece"
    vocabulary_size: int = None
    max_length: int = None
    tokenizer_model: object = None
    init_from: str = None
    lora_rank: int = None
    lora_targets: tuple = LORA_TARGETS
    mixed_precision: str = None
    batch_size: int = None
    batch_tokens: int = None
    epochs: int = 10
    steps: int = None
    learning_rate: float = None
    warmup_steps: int = None
    gradient_accumulation_steps: int = 1
    label_smoothing: float = 0.1
    seed: int = 0
    keep_best: str = None
    early_stopping: int = None
    keep_checkpoints: int = 1
    average_last: int = AVERAGE_LAST
    replay_ratio: float = None
    max_minutes: float = None
    replay_source: str = None
    general_valid: str = None
    keep: float = KEEP
    merge_alpha: float = None

    def __post_init__(self):
        def set_field(name, value):
            object.__setattr__(self, name, value)

        if self.gradient_accumulation_steps is None:
            set_field("gradient_accumulation_steps", 1)
        if self.init_from is not None:
            set_field("init_from", os.fspath(self.init_from))
            for name in MODEL_FIELDS:
                set_field(name, None)
        if isinstance(self.lora_targets, (list, tuple)):
            set_field("lora_targets", tuple(self.lora_targets))
        if self.tokenizer_model is not None:
            set_field("tokenizer_model", _model_paths(self.tokenizer_model))
        for name in ("replay_source", "general_valid"):
            if isinstance(getattr(self, name), (str, os.PathLike)):
                set_field(name, os.path.abspath(getattr(self, name)))
        if self.keep is None:
            set_field("keep", KEEP)
        self._check()

    def _check(self):
        def fail(name, reason):
            raise OptionError([(name, getattr(self, name))], reason)

        for name, least in _MINIMUMS.items():
            value = getattr(self, name)
            most = MAX_SEED if name == "seed" else MAX_INT
            if value is not None and not (is_int(value) and least <= value <= most):
                fail(name, f"must be a whole number in [{least}, {most}]")
        if self.init_from is None:
            if self.preset not in PRESETS:
                fail("preset", f"not an untrained architecture; one of {sorted(PRESETS)}")
            if self.tokenizer not in TOKENIZERS:
                fail("tokenizer", f"must be one of {list(TOKENIZERS)}")
        if self.dropout is not None and not (is_finite(self.dropout) and 0 <= self.dropout < 1):
            fail("dropout", "must be in [0, 1)")
        if self.learning_rate is not None and not (
                is_finite(self.learning_rate) and 0 < self.learning_rate <= MAX_LEARNING_RATE):
            fail("learning_rate", f"must be a number in (0, {MAX_LEARNING_RATE}] (Adam diverges "
                 "above)")
        if not (is_finite(self.label_smoothing) and 0 <= self.label_smoothing < 1):
            fail("label_smoothing", "must be in [0, 1)")
        if self.replay_ratio is not None and not (
                is_finite(self.replay_ratio) and 0 < self.replay_ratio <= MAX_REPLAY_RATIO):
            fail("replay_ratio", f"must be a number in (0, {MAX_REPLAY_RATIO}]")
        if self.max_minutes is not None and not (
                is_finite(self.max_minutes) and 0 < self.max_minutes <= MAX_MINUTES):
            fail("max_minutes", f"must be a number in (0, {MAX_MINUTES:g}]")
        if self.lora_rank is not None and self.init_from is None and self.preset in PRESETS:
            d_model = PRESETS[self.preset].d_model
            if self.lora_rank > d_model:
                fail("lora_rank", f"must be at most the model's d_model, {d_model} ({self.preset})")
        if not (is_finite(self.keep) and 0 < self.keep <= 1):
            fail("keep", "must be in (0, 1]")
        if self.merge_alpha is not None and not (
                is_finite(self.merge_alpha) and 0 <= self.merge_alpha <= 1):
            fail("merge_alpha", "must be in [0, 1] (0: the starting model, 1: the fine-tuned one)")
        # (`fit` replays its own translations of replay_source without one.)
        for name in ("general_valid", "merge_alpha"):
            if getattr(self, name) is not None and self.init_from is None:
                fail(name, "adapts a trained model: give init_from (--init-from) too")
        if self.mixed_precision not in (None, *MIXED_PRECISION_POLICIES):
            fail("mixed_precision", f"must be None or one of {list(MIXED_PRECISION_POLICIES)}")
        if self.keep_best not in (None, *KEEP_BEST):
            fail("keep_best", f"must be None or one of {sorted(KEEP_BEST)}")
        if not (isinstance(self.lora_targets, tuple) and self.lora_targets
                and all(isinstance(name, str) and name for name in self.lora_targets)):
            fail("lora_targets", "must be a non-empty list of layer names")
        if self.batch_size is not None and self.batch_tokens is not None:
            raise OptionError(
                [("batch_size", self.batch_size), ("batch_tokens", self.batch_tokens)],
                "give one of them",
            )
        if self.init_from is not None and self.tokenizer_model is not None:
            raise OptionError(
                [("init_from", self.init_from), ("tokenizer_model", self.tokenizer_model)],
                "fine-tuning keeps the model's own tokenizers; give one of them",
            )

    def to_dict(self):
        """The fields as JSON values (lists for tuples), as `options.json` holds them."""
        return {name: list(value) if isinstance(value, tuple) else value
                for name, value in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, values):
        """The options of `values`, as `to_dict` or any earlier `options.json` wrote them.

        A field missing from `values` (a file written before it existed)
        takes its default; the run's facts (`train_pairs`, `valid_pairs`)
        are skipped; any other unknown key is an error.
        """
        values = {name: value for name, value in values.items() if name not in RUN_FACTS}
        preset = values.get("preset")
        if isinstance(preset, str) and preset.startswith(_LEGACY_INIT_FROM):
            # Fine-tuning runs once wrote their start as "init-from DIR".
            values = {**values, "preset": None, "init_from": preset[len(_LEGACY_INIT_FROM):]}
        if values.get("lora_targets") is None:
            values.pop("lora_targets", None)  # written as null without lora_rank
        return super().from_dict(values)

    def _fixed(self):
        values = self.to_dict()
        if not self.lora_rank:
            values["lora_targets"] = None  # no adapters: their targets mean nothing
        return {name: values[name] for name in FIXED_OPTIONS}

    def check_resumes(self, before, where):
        """Raise `OptionError` unless these options may resume the run made with `before`.

        Args:
            before: the `TrainingOptions` of the run in `where`.
            where: the run's directory, named in the message.

        Example:
            >>> TrainingOptions(dropout=0.1).check_resumes(TrainingOptions(), "run1")
            Traceback (most recent call last):
            ...
            keras_tf.option_error.OptionError: dropout=0.1: run1 holds a run made with other options (dropout None before, 0.1 now); repeat them to resume, or train into a new directory
        """
        old, new = before._fixed(), self._fixed()
        differ = [name for name in FIXED_OPTIONS if old[name] != new[name]]
        if differ:
            changed = "; ".join(
                f"{name.replace('_', '-')} {old[name]} before, {new[name]} now" for name in differ
            )
            raise OptionError(
                [(name, new[name]) for name in differ],
                f"{where} holds a run made with other options ({changed}); "
                "repeat them to resume, or train into a new directory",
            )

    def learning_rate_schedule(self, d_model, steps_per_epoch, fine_tuning=False):
        """The schedule of these options for a model of `d_model`, read per update.

        Both front doors plan with it (`planned_learning_rate`):
        `epochs * steps_per_epoch / gradient_accumulation_steps` updates.

        Args:
            d_model: the model width.
            steps_per_epoch: batches an epoch (`steps` wins when set), or
                None when unknown.
            fine_tuning: whether the weights are trained ones.

        Example:
            >>> schedule = TrainingOptions(epochs=3).learning_rate_schedule(512, 100)
            >>> schedule.warmup_steps  # a tenth of the 300 updates
            30
        """
        steps = self.steps or steps_per_epoch
        total = self.epochs * steps // self.gradient_accumulation_steps if steps else None
        return planned_learning_rate(
            d_model, total, warmup_steps=self.warmup_steps,
            peak_learning_rate=self.learning_rate, fine_tuning=fine_tuning,
        )


def _model_paths(tokenizer_model):
    """A SentencePiece model path, or a (source, target) pair, made absolute."""
    if isinstance(tokenizer_model, (list, tuple)):
        if not 1 <= len(tokenizer_model) <= 2:
            raise OptionError(
                [("tokenizer_model", tokenizer_model)], "one model, or two (source, target)"
            )
        if len(tokenizer_model) == 1:
            return os.path.abspath(tokenizer_model[0])
        return tuple(os.path.abspath(path) for path in tokenizer_model)
    return os.path.abspath(tokenizer_model)
