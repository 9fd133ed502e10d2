"""Training into a preset directory, and averaging its checkpoints (`keras-tf train`, `keras-tf average`).

    DIR/           a preset directory (`keras_tf.translation.presets` names its files):
      options.json   the TrainingOptions the directory was made with
      tokenizers/    Seq2SeqTokenizers.save, learned from the training corpus
                     (with --init-from: the given model's, byte for byte)
      decoding.json  the DecodingConfig (with --init-from: the given model's)
      metadata.json  the format and the versions that wrote it
      config.json    the TransformerConfig                          (keras_tf.training.train)
      model.keras    the best model so far on the validation BLEU   (train)
                     (or loss: keep_best="loss")
      backup/        the training state at the last backup, for resuming (train)
      history.csv    one row per finished epoch                     (train)
      logs/          TensorBoard summaries (train)

Running `train_preset_dir` again on the same directory reuses its tokenizers
and resumes from `backup/` at the next unseen batch; options that would
change the model or its vocabulary (`TrainingOptions.check_resumes`) must be
the same as the first time.
"""

import contextlib
import dataclasses
import os
import shutil
import sys

from keras_tf.buckets import source_buckets
from keras_tf.decoding.config import DecodingConfig
from keras_tf.models import get_preset
from keras_tf.models.config import LONG_RUN_PAIRS, planned_dropout
from keras_tf.option_error import OptionError
from keras_tf.special_tokens import UNK_ID
from keras_tf.text import Seq2SeqTokenizers, make_dataset, make_dataset_by_epoch, with_replay
from keras_tf.text.pipeline import (
    DEFAULT_BATCH_TOKENS,
    MIN_BATCHES_PER_EPOCH,
    fitted_batch_tokens,
)
from keras_tf.text.preprocessor import Seq2SeqPreprocessor
from keras_tf.text.corpora import ParallelCorpus, read_tsv
from keras_tf.training import merging
from keras_tf.training.averaging import average_checkpoints, epoch_checkpoints
from keras_tf.training.bleu import ValidationBleu, corpus_scores
from keras_tf.translation.batches import own_translations, translate_in_batches
from keras_tf.training.distribute import is_chief, make_strategy
from keras_tf.models.learning_rates import (
    PEAK_REFERENCE_TOKENS,
    batch_peak_learning_rate,
    lora_peak_learning_rate,
)
from keras_tf.models.schedules import (
    fine_tuning_peak_learning_rate,
    paper_peak_learning_rate,
)
from keras_tf.training import trainer
from keras_tf.translation import Seq2SeqTranslator, presets
from keras_tf.training.run_lock import RunLockedError, run_lock
from keras_tf.translation.training_options import REPLAY_RATIO, TrainingOptions
from keras_tf.translation.presets import (
    MODEL_FILE,
    OPTIONS_FILE,
    TOKENIZERS_CONFIG,
    TOKENIZERS_DIR,
)


@contextlib.contextmanager
def _native_stderr_silenced():
    """Send file descriptor 2 to /dev/null: SentencePiece's trainer logs ~100 lines there.

    `keras_tf.text` offers no option to quiet it. Python-level errors still
    propagate and are reported once the descriptor is restored.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _tokenizers_for(out_dir, train_corpus, options, write):
    """The tokenizers of `out_dir`, learned from `train_corpus` the first time."""

    directory = os.path.join(out_dir, TOKENIZERS_DIR)
    if os.path.exists(os.path.join(directory, TOKENIZERS_CONFIG)):
        return Seq2SeqTokenizers.load(directory), True
    try:
        with _native_stderr_silenced():
            tokenizers = Seq2SeqTokenizers.train(
                train_corpus.sources,
                train_corpus.targets,
                kind=options.tokenizer,
                vocabulary_size=options.vocabulary_size,
            )
    except ValueError as error:
        raise OptionError(
            [("vocabulary_size", options.vocabulary_size)],
            f"{str(error).rstrip('.')}; pass a smaller size, or none to fit it to the corpus",
        ) from None
    if write:
        presets.write_tokenizers(out_dir, tokenizers)
    return tokenizers, False


# A kept tokenizer that reads more than this share of a corpus's pieces as
# [UNK] loses words: train says so.
UNKNOWN_PIECES_WARNING = 0.01


def _warn_unknown_pieces(tokenizers, corpus, sample=2000):
    """Print one line if the tokenizers read many of the corpus's pieces as [UNK]."""

    for side, texts in (("source", corpus.sources[:sample]), ("target", corpus.targets[:sample])):
        if not texts:
            continue
        tokenize = getattr(tokenizers, f"tokenize_{side}")
        ids = tokenize(list(texts)).flat_values.numpy()
        rate = float((ids == UNK_ID).mean()) if len(ids) else 0.0
        if rate > UNKNOWN_PIECES_WARNING:
            print(
                f"Warning: {rate:.1%} of the corpus's {side} pieces are [UNK] for these "
                f"tokenizers (more than {UNKNOWN_PIECES_WARNING:.0%}): the model cannot read "
                "or write those words; a tokenizer learned from this corpus may suit it better",
                file=sys.stderr,
            )


def _tokenizers_from_models(out_dir, tokenizer_model, write):
    """The tokenizers of your SentencePiece model(s), saved in `out_dir` the first time."""

    directory = os.path.join(out_dir, TOKENIZERS_DIR)
    if os.path.exists(os.path.join(directory, TOKENIZERS_CONFIG)):
        return Seq2SeqTokenizers.load(directory)
    paths = list(tokenizer_model) if isinstance(tokenizer_model, (list, tuple)) else [tokenizer_model]
    try:
        tokenizers = Seq2SeqTokenizers.from_sentencepiece(*paths)
    except (OSError, ValueError) as error:
        raise OptionError([("tokenizer_model", tokenizer_model)], str(error)) from None
    if write:
        presets.write_tokenizers(out_dir, tokenizers)
    return tokenizers


def check_same_options(out_dir, options):
    """Raise `OptionError` if `out_dir` holds a run whose fixed options differ from `options`."""
    before = presets.read_options(out_dir)
    if before is not None:
        options.check_resumes(before, out_dir)


def train_preset_dir(out_dir, *args, **kwargs):
    """Learn tokenizers, then train a preset with `keras_tf.training.train`; resume if begun.

    A run that fails before its first epoch is backed up removes the
    directory again if it made it: no half-made directory is left behind.
    The arguments are those of `_train_preset_dir`.
    """
    with _removed_if_no_epoch_finishes(out_dir), contextlib.ExitStack() as run_locks:
        return _train_preset_dir(out_dir, *args, run_locks=run_locks, **kwargs)


@contextlib.contextmanager
def _removed_if_no_epoch_finishes(out_dir):
    """Create `out_dir`; delete it if this call made it and fails before an epoch is backed up."""
    try:
        os.makedirs(out_dir)  # atomic: of two runs started at once, one made it
        created = True
    except FileExistsError:
        created = False
    try:
        yield
    except RunLockedError:
        raise  # the folder is another run's
    except BaseException:
        if created and not os.path.exists(os.path.join(out_dir, presets.BACKUP_DIR, "state.json")):
            shutil.rmtree(out_dir, ignore_errors=True)
        raise


def _train_preset_dir(
    out_dir,
    train_corpus,
    valid_corpus=None,
    *,
    options=None,
    replay_corpus=None,
    strategy="default",
    jit_compile=True,
    backup_every=None,
    verbose="auto",
    run_locks=None,
    **option_values,
):
    """Learn tokenizers, then train a preset with `keras_tf.training.train`; resume if begun.

    A run is the steps below, in order; each reads the one `TrainingOptions`.

    Args:
        out_dir: the model directory, created if missing.
        train_corpus: the training `ParallelCorpus`; the tokenizers are
            learned from it.
        valid_corpus: a `ParallelCorpus` for the validation loss, which picks
            the best checkpoint. Defaults to None: the training loss picks it.
        options: the recipe, a `TrainingOptions` (see its fields), written to
            `options.json`; a resumed run's must agree in its
            `FIXED_OPTIONS`. Defaults to None: built from `option_values`.
            With `batch_size` and `batch_tokens` both None,
            `keras_tf.text.fitted_batch_tokens`: 2,048 tokens, or less on a
            small corpus, for at least 200 batches an epoch. From scratch,
            the default peak follows the tokens of an update
            (`keras_tf.models.learning_rates.batch_peak_learning_rate`). With
            `init_from`, the fine-tuning schedule
            (`planned_fine_tuning_schedule`): a short warm-up to the
            paper's peak.
        replay_corpus: a `ParallelCorpus` of the domain to keep (the one
            `init_from` was trained on), sampled into the training pairs
            (`keras_tf.text.with_replay`, `options.replay_ratio` pairs per
            training pair, drawn from `options.seed`). With `init_from`, the
            default peak is then twice the paper's
            (`fine_tuning_peak_learning_rate(d_model, replay=True)`).
            Defaults to None.
        strategy: `"default"`, `"mirrored"` or `"multi-worker"`.
        jit_compile: compile the train and test steps with XLA. Defaults to
            True; `keras_tf.training.train` turns it off with several replicas.
        backup_every: back up every this many steps; None (default): every
            `keras_tf.training.trainer.BACKUP_INTERVAL_S` seconds.
        verbose: passed to `model.fit`.
        run_locks: a `contextlib.ExitStack` that holds the chief's
            `run_lock(out_dir)` until the run ends.
        **option_values: the fields of `TrainingOptions`, instead of `options`.

    Returns:
        `(translator, history)`: the best model as a `Seq2SeqTranslator`
        (its tokenizers and decoding settings), and the `History` of
        `keras_tf.training.train`.
    """
    options = _the_options(options, option_values)
    check_same_options(out_dir, options)
    start = read_start(options)
    check_batch_fits(options, start)
    os.makedirs(out_dir, exist_ok=True)
    # A multi-worker strategy must exist before the first TensorFlow op,
    # which learning the tokenizers runs.
    strategy = make_strategy(strategy)
    chief = is_chief(strategy)
    if chief and run_locks is not None:  # one run writes here at a time (workers write elsewhere)
        run_locks.enter_context(run_lock(out_dir))
    general_pairs = read_general_valid(options)
    replay_corpus = make_replay_pairs(options, start, replay_corpus, out_dir, chief)
    corpus = mix_replay_pairs(options, train_corpus, replay_corpus)
    text = choose_tokenizers(options, start, corpus, out_dir, chief)
    plan = plan_schedule(options, start, text, corpus, strategy, began_dropout(out_dir, start))
    data = read_data(options, plan, text, corpus, valid_corpus)
    print(f"Recipe: {recipe(options, corpus)}", file=sys.stderr)
    if chief:
        write_run_files(options, corpus, valid_corpus, out_dir, plan.config.dropout)
    model, history = fit(options, start, plan, data, out_dir,
                         strategy=strategy, jit_compile=jit_compile,
                         backup_every=backup_every, verbose=verbose)
    model = average_if_better(options, data, model, out_dir, chief)
    model = choose_or_merge(options, start, text, general_pairs, model, out_dir, chief)
    preprocessor = Seq2SeqPreprocessor(
        text.tokenizers, plan.config.max_source_length, plan.config.max_target_length
    )
    return Seq2SeqTranslator(model, preprocessor, text.decoding), history


# --- the steps of a run ---


def _the_options(options, option_values):
    """`options`, or the `TrainingOptions` of `option_values`; a TypeError for both or a wrong type."""
    if options is None:
        return TrainingOptions(**option_values)
    if option_values:
        raise TypeError(
            "train_preset_dir takes options or their fields as keyword arguments, not both; "
            f"received options and {sorted(option_values)}"
        )
    if not isinstance(options, TrainingOptions):
        raise TypeError(f"options must be a TrainingOptions; received {type(options).__name__}")
    return options


@dataclasses.dataclass(frozen=True)
class Start:
    """Where a run starts: the `init_from` translator (None from scratch) and its config.

    Args:
        translator: the `Seq2SeqTranslator` of `options.init_from`, or None.
        config: its `TransformerConfig`, or the preset's; `options.dropout` applied.
        max_length: the longest source and target, or None: the config's.
    """

    translator: object
    config: object
    max_length: int = None

    @property
    def longest(self):
        """The longest source and target, in tokens."""
        return self.max_length or max(self.config.max_source_length, self.config.max_target_length)


def read_start(options):
    """The model a run starts from: `options.init_from`'s, or the untrained `options.preset`."""
    if options.init_from is not None:
        # Fine-tuning: the given model's tokenizers and config, whatever the options say.
        initial = Seq2SeqTranslator.from_preset(options.init_from)
        if initial.preprocessor is None:
            raise OptionError(
                [("init_from", options.init_from)],
                f"no {TOKENIZERS_DIR}/ there; fine-tuning keeps the model's tokenizers",
            )
        base = initial.config
        max_length = max(base.max_source_length, base.max_target_length)
    else:
        initial, base, max_length = None, get_preset(options.preset), options.max_length
    if options.dropout is not None:
        base = base.replace(dropout=options.dropout)
    return Start(initial, base, max_length)


def check_batch_fits(options, start):
    """Refuse a token budget that cannot hold one pair of the longest length."""
    if options.batch_tokens is not None and options.batch_tokens < start.longest:
        raise OptionError(
            [("batch_tokens", options.batch_tokens)],
            f"a batch must hold one pair of the longest length, {start.longest} tokens (max_length)",
        )


@dataclasses.dataclass(frozen=True)
class RunCorpus:
    """The pairs a run trains on: the new domain's, and the replayed ones mixed in.

    Args:
        new_pairs: the training corpus given (the new domain).
        pairs: what is trained on: `new_pairs`, with any replayed pairs mixed in.
    """

    new_pairs: object
    pairs: object

    @property
    def replayed(self):
        """How many replayed pairs are mixed in."""
        return len(self.pairs) - len(self.new_pairs)


def make_replay_pairs(options, start, replay_corpus, out_dir, chief):
    """The pairs to replay: `replay_corpus`, or the start model's translations of `replay_source`.

    The starting model translates the lines of `options.replay_source` with
    its own decoding settings (`keras_tf.translation.batches.own_translations`); the chief
    writes the pairs into `out_dir` (`presets.REPLAY_PAIRS_FILE`), and a
    rerun or a resume reads them back instead of translating again.
    """
    if options.replay_source is None:
        return replay_corpus
    if options.init_from is None:
        raise OptionError([("replay_source", options.replay_source)],
                          "replays a trained model's own translations: give init_from too")
    if replay_corpus is not None:
        raise OptionError(
            [("replay_source", options.replay_source)],
            "replays the starting model's own translations; give it or a replay corpus, not both",
        )
    made = presets.read_replay_pairs(out_dir)
    if made is not None:
        print(f"Replay: the {len(made[0])} pairs made of {options.replay_source}, read back "
              f"from {out_dir}/{presets.REPLAY_PAIRS_FILE}", file=sys.stderr)
        return ParallelCorpus(*made)
    lines, translations = own_translations(start.translator, options.replay_source)
    if chief:
        presets.write_replay_pairs(out_dir, lines, translations)
    print(f"Replay: {options.init_from} translated the {len(lines)} lines of "
          f"{options.replay_source} into {out_dir}/{presets.REPLAY_PAIRS_FILE}", file=sys.stderr)
    # Read back: what a resumed run replays, tabs and line breaks made spaces.
    return ParallelCorpus(*presets.read_replay_pairs(out_dir)) if chief else ParallelCorpus(
        lines, translations)


def mix_replay_pairs(options, train_corpus, replay_corpus):
    """Replay: `options.replay_ratio` pairs of `replay_corpus` per training pair, mixed in."""
    if replay_corpus is None:
        return RunCorpus(train_corpus, train_corpus)
    ratio = REPLAY_RATIO if options.replay_ratio is None else options.replay_ratio
    try:
        mixed = with_replay(train_corpus, replay_corpus, ratio, options.seed)
    except ValueError as error:
        raise OptionError([("replay_ratio", options.replay_ratio)], str(error)) from None
    return RunCorpus(train_corpus, mixed)


@dataclasses.dataclass(frozen=True)
class RunText:
    """The tokenizers a run reads and writes with, and the decoding settings its preset keeps."""

    tokenizers: object
    decoding: object


def choose_tokenizers(options, start, corpus, out_dir, chief):
    """The start model's tokenizers, your SentencePiece model(s), or ones learned from the pairs.

    The chief writes them (and `decoding.json`) into `out_dir` the first time.
    """
    initial, base = start.translator, start.config
    tokenizer_model = options.tokenizer_model
    if initial is not None:
        tokenizers, decoding = initial.preprocessor.tokenizers, initial.decoding
        if chief and not os.path.exists(os.path.join(out_dir, TOKENIZERS_DIR)):
            # What the model brings stays as it was: its tokenizers and its
            # decoding settings (an OPUS-MT model's length penalty and limit).
            presets.copy_text_files(options.init_from, out_dir)
        kept = decoding.method + (
            f" beam {decoding.beam_size}, length penalty {decoding.length_penalty} "
            f"({decoding.length_penalty_style})" if decoding.method == "beam" else "")
        print(
            f"Fine-tuning {options.init_from}/{MODEL_FILE}: kept its {tokenizers.kind} tokenizers "
            f"({tokenizers.source_vocabulary_size} ids), its decoding settings ({kept}, "
            f"max_length {decoding.max_length or base.max_target_length}) and its length "
            f"limits ({base.max_source_length}/{base.max_target_length}), not the preset, "
            "tokenizer, vocabulary size or max length options",
            file=sys.stderr,
        )
        _warn_unknown_pieces(tokenizers, corpus.new_pairs)
        return RunText(tokenizers, decoding)
    decoding = DecodingConfig()
    if tokenizer_model is not None:
        tokenizers = _tokenizers_from_models(out_dir, tokenizer_model, write=chief)
        if chief:
            presets.write_decoding(out_dir, decoding)
        print(
            f"Your SentencePiece model{'s' if isinstance(tokenizer_model, (list, tuple)) else ''}: "
            f"{tokenizers.source_vocabulary_size} source and "
            f"{tokenizers.target_vocabulary_size} target ids (4 reserved, then its pieces)",
            file=sys.stderr,
        )
        _warn_unknown_pieces(tokenizers, corpus.new_pairs)
        return RunText(tokenizers, decoding)
    # Every worker learns the same tokenizers from the same corpus; the chief saves them.
    tokenizers, reused = _tokenizers_for(out_dir, corpus.pairs, options, write=chief)
    if chief:
        presets.write_decoding(out_dir, decoding)
    print(
        f"{'Reusing' if reused else 'Learned'} {options.tokenizer} tokenizers: "
        f"{tokenizers.source_vocabulary_size} shared ids in {out_dir}/{TOKENIZERS_DIR}",
        file=sys.stderr,
    )
    return RunText(tokenizers, decoding)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a run trains: the model's config, its batches, and the peak learning rate.

    Args:
        config: the `TransformerConfig` trained (the vocabulary of the tokenizers).
        data_options: the batching of `make_dataset` (sizes, lengths, buckets).
        peak: the peak learning rate handed to `keras_tf.training.train`
            (None: its own plan, from scratch).
    """

    config: object
    data_options: dict
    peak: float = None


def began_dropout(out_dir, start):
    """The dropout a run in `out_dir` began with, or None for a new run.

    `options.json`'s `planned_dropout`; a run begun before that fact was
    recorded trained with its config's (the preset's, or `options.dropout`).
    """
    if not os.path.isfile(os.path.join(out_dir, presets.OPTIONS_FILE)):
        return None
    return presets.read_run_facts(out_dir).get("planned_dropout", start.config.dropout)


def plan_schedule(options, start, text, corpus, strategy, recorded_dropout=None):
    """The model's config, the batches (a token budget fitted to the corpus) and the peak rate.

    From scratch without `options.dropout`, the dropout follows the run's
    length (`keras_tf.models.config.planned_dropout` of epochs x training
    pairs); a resumed run keeps the one it began with, `recorded_dropout`.
    """
    tokenizers, max_length = text.tokenizers, start.longest
    config = start.config.replace(
        source_vocabulary_size=tokenizers.source_vocabulary_size,
        target_vocabulary_size=tokenizers.target_vocabulary_size,
        max_source_length=max_length,
        max_target_length=max_length,
    )
    if start.translator is None and options.dropout is None:
        pairs_read = options.epochs * len(corpus.pairs)
        dropout = (planned_dropout(config, pairs_read) if recorded_dropout is None
                   else recorded_dropout)  # a resumed run: what it began with
        if dropout != config.dropout:
            config = config.replace(dropout=dropout)
            print(f"Dropout {dropout:g} (the preset's {start.config.dropout:g} below "
                  f"{LONG_RUN_PAIRS:,} pairs read; this run reads {pairs_read:,}; "
                  "--dropout sets it)", file=sys.stderr)
    bucket_boundaries = source_buckets(max_length)
    batch_size, batch_tokens = options.batch_size, options.batch_tokens
    if batch_size is None and batch_tokens is None:
        batch_tokens = fitted_batch_tokens(
            corpus.pairs, tokenizers, max_length=max_length, bucket_boundaries=bucket_boundaries
        )
        print(
            f"Batches of at most {batch_tokens} tokens (the default: {DEFAULT_BATCH_TOKENS}, "
            f"or less for {MIN_BATCHES_PER_EPOCH} batches an epoch; --batch-tokens sets it)",
            file=sys.stderr,
        )
    accumulation = options.gradient_accumulation_steps
    if accumulation and accumulation > 1:
        size = (f"{accumulation * batch_size} pairs" if batch_size else
                f"at most {accumulation * batch_tokens} tokens")
        print(
            f"One update every {accumulation} batches: {size} an update; "
            "the learning-rate schedule counts updates",
            file=sys.stderr,
        )
    data_options = dict(
        batch_size=batch_size,
        batch_tokens=batch_tokens,
        max_source_length=max_length,
        max_target_length=max_length,
        bucket_boundaries=bucket_boundaries,
        # One shape per bucket (one XLA program); not with several replicas,
        # where a replica's all-padding share would shrink that step.
        fill_short_batches=strategy.num_replicas_in_sync == 1,
    )
    replay = corpus.replayed > 0
    if replay:
        print(f"Replay: {corpus.replayed} pairs of the replay corpus mixed "
              f"into the {len(corpus.new_pairs)} training pairs", file=sys.stderr)
    fine_tuning = start.translator is not None
    learning_rate = options.learning_rate
    # From scratch, the default peak follows the tokens of an update; a given
    # warm-up alone keeps the paper's schedule (--warmup-steps).
    update_tokens = (batch_tokens * max(1, accumulation or 1)
                     if batch_tokens and options.warmup_steps is None else None)
    peak = learning_rate or planned_peak(options, config.d_model, fine_tuning, replay,
                                         update_tokens)
    scaled = not fine_tuning and learning_rate is None and peak != paper_peak_learning_rate(
        config.d_model)
    lora_rate = fine_tuning and learning_rate is None and options.lora_rank
    print(
        f"Learning rate: a warm-up to a peak of {peak:.2g} "
        + ("(the LoRA default: three times the paper's peak; --learning-rate sets it)"
           if lora_rate else
           f"(the fine-tuning default: {'twice ' if replay else ''}the paper's "
           f"peak{' with replay' if replay else ''}; --learning-rate sets it)"
           if fine_tuning and learning_rate is None else
           "(--learning-rate)" if learning_rate is not None else
           f"({peak / paper_peak_learning_rate(config.d_model):.2g} times the paper's peak "
           f"for this d_model, at {update_tokens} tokens an update; --learning-rate sets it)"
           if scaled else
           "(the paper's peak for this d_model; --learning-rate sets it)")
        + (f"; LoRA of rank {options.lora_rank} on {', '.join(options.lora_targets)}"
           if options.lora_rank else ""),
        file=sys.stderr,
    )
    return Plan(config, data_options, peak if fine_tuning or scaled else learning_rate)


def planned_peak(options, d_model, fine_tuning, replay, update_tokens=None):
    """The default peak learning rate: from scratch (for its batch), full fine-tuning
    (with replay) or LoRA's."""
    if not fine_tuning:  # no token budget: the paper's peak
        return batch_peak_learning_rate(d_model, update_tokens or PEAK_REFERENCE_TOKENS)
    if options.lora_rank:
        return lora_peak_learning_rate(d_model)
    return fine_tuning_peak_learning_rate(d_model, replay)


@dataclasses.dataclass(frozen=True)
class RunData:
    """The batches of a run, and what keeps its best model."""

    train_set: object
    valid_set: object
    validation_bleu: object
    keep_best: str


def read_data(options, plan, text, corpus, valid_corpus):
    """The training batches (by epoch, from the seed), the validation ones, and the keep-best rule."""
    tokenizers = text.tokenizers
    # Epoch e's batches depend on (seed, e) alone: a resumed run reads the
    # batches an uninterrupted one would. With `steps`, epochs of the data
    # follow each other whatever the steps per epoch.
    train_set = make_dataset_by_epoch(
        corpus.pairs, tokenizers, seed=options.seed, **plan.data_options)
    valid_set = None
    if valid_corpus is not None:
        valid_set = make_dataset(valid_corpus, tokenizers, shuffle=False, **plan.data_options)
    validation_bleu = None
    keep_best = options.keep_best
    if keep_best is None:
        keep_best = "bleu" if valid_corpus is not None else "loss"
    if keep_best == "bleu":
        if valid_corpus is None:
            raise OptionError(
                [("keep_best", "bleu")], "needs a validation corpus to score (--valid)"
            )
        import sacrebleu  # noqa: F401  (a missing demo extra fails now, not after an epoch)

        validation_bleu = ValidationBleu(valid_corpus.sources, valid_corpus.targets, tokenizers)
    return RunData(train_set, valid_set, validation_bleu, keep_best)


def write_run_files(options, corpus, valid_corpus, out_dir, dropout):
    """Write `options.json` (the options, the data's sizes, the planned dropout) and `metadata.json`."""
    presets.write_options(
        out_dir, options, train_pairs=len(corpus.new_pairs), replay_pairs=corpus.replayed,
        valid_pairs=len(valid_corpus) if valid_corpus is not None else 0,
        planned_dropout=dropout,
    )
    lora_rank, lora_targets = options.lora_rank, options.lora_targets
    presets.write_metadata(
        out_dir,
        {"rank": lora_rank, "target_layer_names": sorted(lora_targets)} if lora_rank else None,
    )


def recipe(options, corpus):
    """The recipe of a run, in words: what `train` prints."""
    if options.init_from is None:
        return "training from scratch" + (" with replay" if corpus.replayed else "")
    parts = ["fine-tuning " + (f"LoRA factors of rank {options.lora_rank}" if options.lora_rank
                               else "every weight")]
    if options.replay_source is not None:
        parts.append(f"replaying the starting model's translations of {options.replay_source}"
                     " (--replay-source)")
    elif corpus.replayed:
        parts.append("replaying pairs of the domain to keep (--replay-corpus)")
    if options.merge_alpha is not None:
        parts.append(f"then merging with the starting weights at alpha {options.merge_alpha:g}"
                     " (--merge-alpha)")
    elif options.general_valid is not None:
        parts.append(f"then merging with the starting weights at the largest alpha keeping "
                     f"{options.keep:.0%} of its BLEU on {options.general_valid} (--general-valid)")
    if len(parts) == 1:
        parts.append("nothing done to keep the old domain (--replay-source, --replay-corpus "
                     "or --general-valid keep it)")
    return ", ".join(parts)


def fit(options, start, plan, data, out_dir, *, strategy, jit_compile, backup_every, verbose):
    """Train with `keras_tf.training.train`: `(model, history)`, resuming from `out_dir/backup/`.

    A merge a finished run wrote into `model.keras` is undone first
    (`presets.restore_tuned_backbone`): training goes on from the fine-tuned model.
    """
    initial = start.translator
    presets.restore_tuned_backbone(out_dir)
    # Through the module: tests replace trainer.train to see what it is handed.
    return trainer.train(
        plan.config,
        data.train_set,
        data.valid_set,
        out_dir=out_dir,
        epochs=options.epochs,
        steps_per_epoch=options.steps,
        strategy=strategy,
        jit_compile=jit_compile,
        mixed_precision=options.mixed_precision,
        warmup_steps=options.warmup_steps,
        peak_learning_rate=plan.peak,
        gradient_accumulation_steps=options.gradient_accumulation_steps,
        label_smoothing=options.label_smoothing,
        seed=options.seed,
        backup_every=backup_every,
        validation_bleu=data.validation_bleu,
        keep_best=data.keep_best,
        early_stopping=options.early_stopping,
        keep_checkpoints=kept_checkpoints(options, data),
        max_minutes=options.max_minutes,
        initial_model=initial.backbone if initial is not None else None,
        lora_rank=options.lora_rank,
        lora_target_layer_names=tuple(options.lora_targets),
        verbose=verbose,
    )


def averages(options, data):
    """Whether the run ends by trying the mean of its last epochs (`average_if_better`).

    From scratch with validation BLEU only: a fine-tuning recipe's defaults were
    measured without it (benchmarks/finetune.py).
    """
    return (options.average_last > 1 and data.validation_bleu is not None
            and options.init_from is None)


def kept_checkpoints(options, data):
    """The epoch checkpoints kept: `keep_checkpoints`, or the `average_last` it averages."""
    if averages(options, data):
        return max(options.keep_checkpoints, options.average_last)
    return options.keep_checkpoints


def compiled_like(backbone, model):
    """`backbone`, compiled as the run's `model` (its loss and metrics), so `model.keras` keeps them.

    A backbone read back from `model.keras` (`presets.load_backbone`) comes
    uncompiled; written so, `keras.saving.load_model` would hand a user a
    model without its loss.
    """
    if model.compiled:
        backbone.compile_from_config(model.get_compile_config())
    return backbone


def average_if_better(options, data, model, out_dir, chief):
    """The mean of the last `average_last` epochs if it validates as well as the kept model.

    As the paper averaged its last checkpoints (section 6.1), and OpenNMT-tf's
    `--auto_config` its last 8; kept only when the validation says so: the
    greedy BLEU that picked the kept model (`ValidationBleu.score`) scores both.
    Needs two epoch checkpoints at least (`DIR/backup/`, `kept_checkpoints`).
    The choice and both scores go to `options.json` (`"average"`) and one line
    to stderr. The chief alone averages (the files are its). Returns the run's
    model: the mean, or `model` unchanged.
    """
    if not (chief and averages(options, data)):
        return model
    checkpoints = epoch_checkpoints(os.path.join(out_dir, presets.BACKUP_DIR))
    checkpoints = checkpoints[-options.average_last:]
    if len(checkpoints) < 2:
        return model
    validation = data.validation_bleu
    candidate = presets.load_backbone(out_dir)  # the kept model, then the mean
    kept_bleu = float(validation.score(candidate)[0].score)
    average_checkpoints(candidate, [path for _, path in checkpoints])
    averaged_bleu = float(validation.score(candidate)[0].score)
    epochs = [epoch for epoch, _ in checkpoints]
    chosen = averaged_bleu >= kept_bleu
    record = {"epochs": epochs, "bleu": averaged_bleu, "kept_bleu": kept_bleu, "chosen": chosen}
    print(f"Averaged epochs {epochs[0]}-{epochs[-1]}: validation BLEU {averaged_bleu:.2f} "
          f"against the kept epoch's {kept_bleu:.2f}; "
          f"{'the average is the model' if chosen else 'the kept epoch stays the model'} "
          "(--average-last)", file=sys.stderr)
    if chosen:
        presets.write_backbone(out_dir, compiled_like(candidate, model))
    values = presets.read_run_facts(out_dir)
    presets.write_options(out_dir, options, **{**values, "average": record})
    return candidate if chosen else model


def read_general_valid(options):
    """The pairs of `options.general_valid` (the domain to keep), or None."""
    if options.general_valid is None:
        return None
    try:
        return read_tsv(options.general_valid)
    except (OSError, ValueError) as error:
        raise OptionError([("general_valid", options.general_valid)], str(error)) from None


def choose_or_merge(options, start, text, general_pairs, model, out_dir, chief):
    """With `merge_alpha` or `general_valid`: θ₀ + α(θ_ft − θ₀) as the run's `model.keras`.

    The fine-tuned model (the run's kept `model.keras`) moves to
    `presets.TUNED_MODEL_FILE`. With `general_valid`, the starting model and
    the merges of `merging.ALPHAS` (largest first) are greedy-decoded on its
    sources and scored with sacreBLEU; the largest α whose BLEU is at least
    `options.keep` times the starting model's is kept. `options.json` and
    `metadata.json` record α and the BLEU figures. Returns the model to
    hand back: `model` unchanged without either option.
    """
    if options.merge_alpha is None and general_pairs is None:
        return model
    base = start.translator.backbone
    tuned = presets.load_backbone(out_dir)  # the kept model, not the last epoch's
    tuned_weights = tuned.get_weights()
    merging.check_mergeable(base, tuned, "init_from", "out")
    candidate = presets.load_backbone(out_dir)
    preprocessor = Seq2SeqPreprocessor(
        text.tokenizers, candidate.config.max_source_length, candidate.config.max_target_length
    )
    greedy = DecodingConfig(method="greedy", max_length=text.decoding.max_length)

    def bleu(backbone):
        translator = Seq2SeqTranslator(backbone, preprocessor, greedy)
        hypotheses = translate_in_batches(translator, general_pairs.sources, 32, greedy)
        return float(corpus_scores(hypotheses, general_pairs.targets)[0].score)

    def merged_bleu(alpha):
        candidate.set_weights(merging.merged_weights(base.get_weights(), tuned_weights, alpha))
        return bleu(candidate)

    record = {"alpha": options.merge_alpha}
    if general_pairs is not None:
        start_bleu = bleu(base)
        if options.merge_alpha is None:
            alpha, scores = merging.choose_alpha(merged_bleu, start_bleu, options.keep)
        else:
            alpha, scores = options.merge_alpha, {options.merge_alpha: merged_bleu(
                options.merge_alpha)}
        record.update(alpha=alpha, keep=options.keep, start_bleu=start_bleu,
                      merged_bleu=scores[alpha], tuned_bleu=scores.get(1.0),
                      scores={str(a): score for a, score in scores.items()},
                      general_valid=options.general_valid)
        print(f"Merge: alpha {alpha:g} keeps {scores[alpha]:.1f} BLEU of the starting model's "
              f"{start_bleu:.1f} on {options.general_valid} "
              f"({scores[alpha] / start_bleu if start_bleu else 1:.0%}; --keep "
              f"{options.keep:g})", file=sys.stderr)
    else:
        alpha = options.merge_alpha
        print(f"Merge: alpha {alpha:g} (--merge-alpha)", file=sys.stderr)
    candidate.set_weights(merging.merged_weights(base.get_weights(), tuned_weights, alpha))
    if chief:
        presets.write_tuned_backbone(out_dir, compiled_like(tuned, model))
        presets.write_backbone(out_dir, compiled_like(candidate, model))
        presets.write_metadata(out_dir, merged={
            **merging.merge_record(options.init_from, os.path.join(
                out_dir, presets.TUNED_MODEL_FILE), alpha), **record})
        values = presets.read_run_facts(out_dir)
        presets.write_options(out_dir, options, **{**values, "merge": record})
    return candidate


def average_preset_dir(model_dir, last, out_dir):
    """Write `out_dir`: `model_dir` with its model the mean of its last `last` epoch checkpoints.

    Returns:
        The epochs averaged, oldest first.
    """

    if not os.path.isfile(os.path.join(model_dir, MODEL_FILE)):
        raise ValueError(f"{model_dir} is not a trained preset directory (no {MODEL_FILE})")
    backup = os.path.join(model_dir, presets.BACKUP_DIR)
    checkpoints = epoch_checkpoints(backup) if os.path.isdir(backup) else []
    if len(checkpoints) < last:
        raise OptionError(
            [("last", last)],
            f"{backup} holds {len(checkpoints)} epoch checkpoint(s); train with "
            f"keep_checkpoints={last} (--keep-checkpoints {last}) to keep them",
        )
    if os.path.exists(out_dir):
        raise OptionError([("out", out_dir)], "exists; averaging writes a new preset directory")
    checkpoints = checkpoints[-last:]
    with _removed_if_no_epoch_finishes(out_dir):
        model = presets.load_backbone(model_dir)
        average_checkpoints(model, [path for _, path in checkpoints])
        presets.copy_text_files(model_dir, out_dir)
        if os.path.exists(os.path.join(model_dir, OPTIONS_FILE)):
            shutil.copy(os.path.join(model_dir, OPTIONS_FILE), os.path.join(out_dir, OPTIONS_FILE))
        presets.write_backbone(out_dir, model)
        presets.write_metadata(out_dir)
    return [epoch for epoch, _ in checkpoints]
