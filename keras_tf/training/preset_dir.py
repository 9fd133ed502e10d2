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
import os
import shutil
import sys

from keras_tf.buckets import source_buckets
from keras_tf.decoding.config import DecodingConfig
from keras_tf.models import get_preset
from keras_tf.option_error import OptionError
from keras_tf.special_tokens import UNK_ID
from keras_tf.text import Seq2SeqTokenizers, make_dataset, make_dataset_by_epoch, with_replay
from keras_tf.text.pipeline import (
    DEFAULT_BATCH_TOKENS,
    MIN_BATCHES_PER_EPOCH,
    fitted_batch_tokens,
)
from keras_tf.text.preprocessor import Seq2SeqPreprocessor
from keras_tf.training.averaging import average_checkpoints, epoch_checkpoints
from keras_tf.training.bleu import ValidationBleu
from keras_tf.training.distribute import is_chief, make_strategy
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
            `keras_tf.text.fitted_batch_tokens`: 512 tokens, or less on a
            small corpus, for at least 200 batches an epoch. With
            `init_from`, the fine-tuning schedule
            (`planned_fine_tuning_schedule`): a short warm-up to a tenth of
            the from-scratch peak.
        replay_corpus: a `ParallelCorpus` of the domain to keep (the one
            `init_from` was trained on), sampled into the training pairs
            (`keras_tf.text.with_replay`, `options.replay_ratio` pairs per
            training pair, drawn from `options.seed`). With `init_from`, the
            default peak is then twice the from-scratch one
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
    if options is None:
        options = TrainingOptions(**option_values)
    elif option_values:
        raise TypeError(
            "train_preset_dir takes options or their fields as keyword arguments, not both; "
            f"received options and {sorted(option_values)}"
        )
    elif not isinstance(options, TrainingOptions):
        raise TypeError(f"options must be a TrainingOptions; received {type(options).__name__}")
    check_same_options(out_dir, options)
    init_from, tokenizer_model = options.init_from, options.tokenizer_model
    lora_rank, lora_targets = options.lora_rank, options.lora_targets
    learning_rate = options.learning_rate
    batch_size, batch_tokens = options.batch_size, options.batch_tokens
    gradient_accumulation_steps = options.gradient_accumulation_steps
    new_pairs = train_corpus  # the new domain, which the [UNK] check reads
    if replay_corpus is not None:
        ratio = REPLAY_RATIO if options.replay_ratio is None else options.replay_ratio
        try:
            train_corpus = with_replay(train_corpus, replay_corpus, ratio, options.seed)
        except ValueError as error:
            raise OptionError([("replay_ratio", options.replay_ratio)], str(error)) from None
    initial = None
    if init_from is not None:
        # Fine-tuning: the given model's tokenizers and config, whatever the options say.
        initial = Seq2SeqTranslator.from_preset(init_from)
        if initial.preprocessor is None:
            raise OptionError(
                [("init_from", init_from)],
                f"no {TOKENIZERS_DIR}/ there; fine-tuning keeps the model's tokenizers",
            )
        base = initial.config
        tokenizers = initial.preprocessor.tokenizers
        max_length = max(base.max_source_length, base.max_target_length)
    else:
        base = get_preset(options.preset)
        max_length = options.max_length
    if options.dropout is not None:
        base = base.replace(dropout=options.dropout)
    longest = max_length or max(base.max_source_length, base.max_target_length)
    if batch_tokens is not None and batch_tokens < longest:
        raise OptionError(
            [("batch_tokens", batch_tokens)],
            f"a batch must hold one pair of the longest length, {longest} tokens (max_length)",
        )
    os.makedirs(out_dir, exist_ok=True)
    # A multi-worker strategy must exist before the first TensorFlow op,
    # which learning the tokenizers runs.
    strategy = make_strategy(strategy)
    chief = is_chief(strategy)
    if chief and run_locks is not None:  # one run writes here at a time (workers write elsewhere)
        run_locks.enter_context(run_lock(out_dir))
    if initial is not None:
        decoding = initial.decoding
        if chief and not os.path.exists(os.path.join(out_dir, TOKENIZERS_DIR)):
            # What the model brings stays as it was: its tokenizers and its
            # decoding settings (an OPUS-MT model's length penalty and limit).
            presets.copy_text_files(init_from, out_dir)
        kept = decoding.method + (
            f" beam {decoding.beam_size}, length penalty {decoding.length_penalty} "
            f"({decoding.length_penalty_style})" if decoding.method == "beam" else "")
        print(
            f"Fine-tuning {init_from}/{MODEL_FILE}: kept its {tokenizers.kind} tokenizers "
            f"({tokenizers.source_vocabulary_size} ids), its decoding settings ({kept}, "
            f"max_length {decoding.max_length or base.max_target_length}) and its length "
            f"limits ({base.max_source_length}/{base.max_target_length}), not the preset, "
            "tokenizer, vocabulary size or max length options",
            file=sys.stderr,
        )
        _warn_unknown_pieces(tokenizers, new_pairs)
    elif tokenizer_model is not None:
        decoding = DecodingConfig()
        tokenizers = _tokenizers_from_models(out_dir, tokenizer_model, write=chief)
        if chief:
            presets.write_decoding(out_dir, decoding)
        print(
            f"Your SentencePiece model{'s' if isinstance(tokenizer_model, (list, tuple)) else ''}: "
            f"{tokenizers.source_vocabulary_size} source and "
            f"{tokenizers.target_vocabulary_size} target ids (4 reserved, then its pieces)",
            file=sys.stderr,
        )
        _warn_unknown_pieces(tokenizers, new_pairs)
    else:
        decoding = DecodingConfig()
        # Every worker learns the same tokenizers from the same corpus; the chief saves them.
        tokenizers, reused = _tokenizers_for(out_dir, train_corpus, options, write=chief)
        if chief:
            presets.write_decoding(out_dir, decoding)
        print(
            f"{'Reusing' if reused else 'Learned'} {options.tokenizer} tokenizers: "
            f"{tokenizers.source_vocabulary_size} shared ids in {out_dir}/{TOKENIZERS_DIR}",
            file=sys.stderr,
        )
    max_length = max_length or max(base.max_source_length, base.max_target_length)
    config = base.replace(
        source_vocabulary_size=tokenizers.source_vocabulary_size,
        target_vocabulary_size=tokenizers.target_vocabulary_size,
        max_source_length=max_length,
        max_target_length=max_length,
    )
    bucket_boundaries = source_buckets(max_length)
    if batch_size is None and batch_tokens is None:
        batch_tokens = fitted_batch_tokens(
            train_corpus, tokenizers, max_length=max_length, bucket_boundaries=bucket_boundaries
        )
        print(
            f"Batches of at most {batch_tokens} tokens (the default: {DEFAULT_BATCH_TOKENS}, "
            f"or less for {MIN_BATCHES_PER_EPOCH} batches an epoch; --batch-tokens sets it)",
            file=sys.stderr,
        )
    if gradient_accumulation_steps and gradient_accumulation_steps > 1:
        size = (f"{gradient_accumulation_steps * batch_size} pairs" if batch_size else
                f"at most {gradient_accumulation_steps * batch_tokens} tokens")
        print(
            f"One update every {gradient_accumulation_steps} batches: {size} an update; "
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
    # Epoch e's batches depend on (seed, e) alone: a resumed run reads the
    # batches an uninterrupted one would. With `steps`, epochs of the data
    # follow each other whatever the steps per epoch.
    train_set = make_dataset_by_epoch(train_corpus, tokenizers, seed=options.seed, **data_options)
    valid_set = None
    if valid_corpus is not None:
        valid_set = make_dataset(valid_corpus, tokenizers, shuffle=False, **data_options)
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
    replay = replay_corpus is not None
    if replay:
        print(f"Replay: {len(train_corpus) - len(new_pairs)} pairs of the replay corpus mixed "
              f"into the {len(new_pairs)} training pairs", file=sys.stderr)
    peak = learning_rate or (fine_tuning_peak_learning_rate(config.d_model, replay)
                             if initial is not None else paper_peak_learning_rate(config.d_model))
    print(
        f"Learning rate: a warm-up to a peak of {peak:.2g} "
        + (f"(the fine-tuning default: {'twice' if replay else 'a tenth of'} the from-scratch "
           f"peak{' with replay' if replay else ''}; --learning-rate sets it)"
           if initial is not None and learning_rate is None else
           "(--learning-rate)" if learning_rate is not None else
           "(the paper's peak for this d_model; --learning-rate sets it)")
        + (f"; LoRA of rank {lora_rank} on {', '.join(lora_targets)}" if lora_rank else ""),
        file=sys.stderr,
    )
    if chief:
        presets.write_options(
            out_dir, options, train_pairs=len(new_pairs),
            replay_pairs=len(train_corpus) - len(new_pairs),
            valid_pairs=len(valid_corpus) if valid_corpus is not None else 0,
        )
        presets.write_metadata(
            out_dir,
            {"rank": lora_rank, "target_layer_names": sorted(lora_targets)} if lora_rank else None,
        )
    # Through the module: tests replace trainer.train to see what it is handed.
    model, history = trainer.train(
        config,
        train_set,
        valid_set,
        out_dir=out_dir,
        epochs=options.epochs,
        steps_per_epoch=options.steps,
        strategy=strategy,
        jit_compile=jit_compile,
        mixed_precision=options.mixed_precision,
        warmup_steps=options.warmup_steps,
        peak_learning_rate=peak if initial is not None else learning_rate,
        gradient_accumulation_steps=gradient_accumulation_steps,
        label_smoothing=options.label_smoothing,
        seed=options.seed,
        backup_every=backup_every,
        validation_bleu=validation_bleu,
        keep_best=keep_best,
        early_stopping=options.early_stopping,
        keep_checkpoints=options.keep_checkpoints,
        max_minutes=options.max_minutes,
        initial_model=initial.backbone if initial is not None else None,
        lora_rank=lora_rank,
        lora_target_layer_names=tuple(lora_targets),
        verbose=verbose,
    )
    preprocessor = Seq2SeqPreprocessor(tokenizers, config.max_source_length, config.max_target_length)
    return Seq2SeqTranslator(model, preprocessor, decoding), history


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
