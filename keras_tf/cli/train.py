"""Train a preset on a TSV corpus with model.fit under XLA; the same command again resumes.

    keras-tf train --train train.tsv --valid valid.tsv --preset transformer_small --out run1

Each line of a TSV file is `source<TAB>target`, UTF-8. The command learns a
shared SentencePiece (or WordPiece) vocabulary from the training file, then
trains with `keras_tf.training.train`: `model.fit` with `jit_compile=True`,
the best model in DIR/model.keras (on the validation BLEU with --valid, which
is decoded each epoch; on the loss without it, or with --keep-best loss),
replaced at the end by the mean of the last 5 epochs' weights when that
scores at least as well on the validation BLEU (--average-last; from scratch),
TerminateOnNaN, a backup in DIR/backup at every epoch end and every
`--backup-every` steps (by default every 5 minutes), and TensorBoard logs in
DIR/logs. A killed run
resumes from the backup, at the next unseen batch, when the same command is
run again, and ends as the uninterrupted run would have. DIR also gets the
tokenizers, the model config and options.json: all that `evaluate`,
`translate`, `export` and `attention` need.

A non-empty DIR that is not a run of the same options (which resumes) is
refused, every file unchanged; --overwrite deletes what it holds instead. A
run holds a lock on DIR (DIR/.keras-tf-train.lock): a second `train` into it
stops at once, naming the first one's process id.
"""

import contextlib
import os
import sys
import time

from keras_tf.cli.errors import StoreGiven, UserError, given, int_in_range
from keras_tf.cli.targets import add_overwrite_argument
from keras_tf.frozen_config import MAX_SEED

TOKENIZERS = ("sentencepiece", "wordpiece")
STRATEGIES = ("default", "mirrored", "multi-worker")
MIXED_PRECISION = {"bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


def add_arguments(parser):
    parser.add_argument("--train", required=True, metavar="FILE", help="training pairs, TSV")
    parser.add_argument(
        "--valid", metavar="FILE", help="validation pairs, TSV; picks the best checkpoint"
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="the model directory")
    add_overwrite_argument(parser, "a new run")
    parser.add_argument(
        "--preset",
        default="transformer_small",
        metavar="NAME",
        help="the untrained architecture to train: transformer_tiny, transformer_small "
        "(default), transformer_base or transformer_big (keras_tf.models.list_presets())",
    )
    parser.add_argument(
        "--dropout", metavar="P", type=float,
        help="P_drop of every sub-layer output and of the embeddings (0 <= P < 1); "
        "default: the preset's (0 for transformer_small, 0.1 for transformer_base); "
        "from scratch, 0.1 instead of 0 for a run of 250,000 pairs read (epochs x pairs) or more",
    )
    parser.add_argument(
        "--epochs", metavar="N", type=int_in_range(1), default=10, help="default: 10"
    )
    parser.add_argument(
        "--steps", type=int_in_range(1), metavar="N",
        help="batches per epoch (the data repeats); default: one pass over --train",
    )
    parser.add_argument(
        "--batch-tokens", metavar="N", type=int_in_range(2),
        help="batches of at most N token positions (pairs times the padded length), "
        "as fairseq and OpenNMT batch; default: 2048, or less on a small corpus, for "
        "at least 200 batches an epoch (the budget is printed)",
    )
    parser.add_argument(
        "--batch-size", metavar="N", type=int_in_range(1),
        help="batches of N pairs instead of a token budget",
    )
    parser.add_argument(
        "--vocabulary-size", metavar="N", type=int_in_range(5),
        help="shared source and target vocabulary; default: fitted to the corpus "
        "(a third of its distinct words, 256 to 8000)",
    )
    parser.add_argument(
        "--tokenizer", choices=TOKENIZERS, default="sentencepiece",
        help="default: sentencepiece",
    )
    parser.add_argument(
        "--max-length", type=int_in_range(2), metavar="N",
        help="longest source and target, in tokens (longer pairs are truncated); "
        "default: the preset's",
    )
    parser.add_argument(
        "--warmup-steps", metavar="N", type=int_in_range(1),
        help="the warm-up, in updates (from scratch without --learning-rate: the paper's "
        "schedule with this warm-up); default: a tenth of the planned updates (at most "
        "4000) to the paper's peak rate, a fiftieth with --init-from",
    )
    parser.add_argument(
        "--gradient-accumulation-steps", metavar="N", type=int_in_range(1), default=1,
        help="update the weights once every N batches, with the mean of their gradients: "
        "batches N times as large (the paper's 25,000 tokens) in the memory of one; "
        "the warm-up counts updates; default: 1",
    )
    parser.add_argument(
        "--label-smoothing", metavar="EPS", type=float, default=0.1,
        help="ε of the label-smoothed loss (0 <= EPS < 1); default: 0.1, the paper's",
    )
    parser.add_argument(
        "--keep-best", choices=("bleu", "loss"),
        help="what picks DIR/model.keras: the validation BLEU (the default with --valid; "
        "each epoch greedy-decodes --valid and logs BLEU and chrF) or the loss",
    )
    parser.add_argument(
        "--early-stopping", metavar="N", type=int_in_range(1),
        help="stop after N epochs without a gain in the --keep-best quantity",
    )
    parser.add_argument(
        "--max-minutes", metavar="M", type=float,
        help="a budget of training time: stop after the step in progress once M minutes "
        "of training are spent, over the whole run (a resumed run adds to what it "
        "trained before), keeping the best model and a backup that a larger budget "
        "goes on from; default: none, every epoch",
    )
    parser.add_argument(
        "--init-from", metavar="DIR",
        help="fine-tune the model of this model directory (from keras-tf train or "
        "average): its tokenizers, config and weights; --preset, --tokenizer, "
        "--vocabulary-size and --max-length are then ignored",
    )
    parser.add_argument(
        "--learning-rate", metavar="LR", type=float,
        help="the peak of the warm-up schedule; default: the paper's peak for the model's "
        "d_model, from scratch times sqrt(tokens an update / 512) between 1 and 2 (with "
        "--init-from: twice the paper's peak with replay, three times it with --lora-rank)",
    )
    parser.add_argument(
        "--replay-corpus", metavar="FILE",
        help="pairs of the domain to keep (TSV, e.g. what the --init-from model was trained "
        "on): a sample, drawn once by --seed, is mixed into --train (mixed fine-tuning); "
        "with --init-from the default peak is then twice the paper's",
    )
    parser.add_argument(
        "--replay-source", metavar="FILE",
        help="with --init-from: source sentences of the domain to keep (UTF-8 text, one a "
        "line, e.g. any general text in the source language); the --init-from model "
        "translates them before training, into DIR/replay-pairs.tsv (a rerun or resume "
        "reads them back), and those pairs are replayed as --replay-corpus pairs are",
    )
    parser.add_argument(
        "--replay-ratio", metavar="R", type=float,
        help="with --replay-corpus or --replay-source, replayed pairs per --train pair; "
        "default: two",
    )
    parser.add_argument(
        "--general-valid", metavar="FILE",
        help="with --init-from: pairs of the domain to keep (TSV, a few hundred); after "
        "training, DIR/model.keras becomes the largest merge θ₀ + α(θ_ft − θ₀), α in 1.0, "
        "0.9, ..., 0, whose greedy BLEU on them is at least --keep times the --init-from "
        "model's; the fine-tuned model stays beside it in DIR/tuned.keras",
    )
    parser.add_argument(
        "--keep", metavar="K", type=float, default=0.9, action=StoreGiven,
        help="with --general-valid, the share of the --init-from model's BLEU to keep; "
        "default: 0.9",
    )
    parser.add_argument(
        "--merge-alpha", metavar="A", type=float,
        help="with --init-from: after training, DIR/model.keras becomes θ₀ + A(θ_ft − θ₀) "
        "(0: the --init-from model, 1: the fine-tuned one) instead of a chosen α",
    )
    parser.add_argument(
        "--lora-rank", metavar="R", type=int_in_range(1),
        help="train rank-R LoRA factors alone (Seq2SeqBackbone.enable_lora), at the LoRA "
        "peak rate with --init-from (ten times fine-tuning's); DIR/model.keras holds the "
        "merged kernels",
    )
    parser.add_argument(
        "--lora-targets", metavar="NAMES",
        help="with --lora-rank, the comma-separated Dense layers LoRA adapts (query, key, "
        "value, attention_output, inner_dense, output_dense); default: every one of them "
        "(attention and feed-forward)",
    )
    parser.add_argument(
        "--tokenizer-model", metavar="FILE", nargs="+",
        help="your SentencePiece model (one for both sides, or SOURCE TARGET) instead of "
        "learning tokenizers; its pieces are mapped after the four reserved ids",
    )
    parser.add_argument(
        "--keep-checkpoints", metavar="N", type=int_in_range(1), default=1,
        help="keep the weights of the last N epochs in DIR/backup, for keras-tf average; "
        "default: 1 (or --average-last's N)",
    )
    parser.add_argument(
        "--average-last", metavar="N", type=int_in_range(1), default=5,  # AVERAGE_LAST
        action=StoreGiven,
        help="with --valid, from scratch: at the end, the mean of the last N epochs' weights "
        "becomes the model when its validation BLEU is at least the best epoch's; 1: no "
        "averaging; default: 5",
    )
    parser.add_argument(
        "--skip-bad-lines", action="store_true",
        help="skip malformed TSV lines (and report their count) instead of stopping",
    )
    parser.add_argument(
        "--seed", metavar="N", type=int_in_range(0, MAX_SEED), default=0, help="default: 0"
    )
    parser.add_argument(
        "--mixed-precision", nargs="?", const="bfloat16", choices=sorted(MIXED_PRECISION),
        help="compute in bfloat16 (the default when given without a value) or float16 "
        "(GPUs, with loss scaling); variables stay float32",
    )
    parser.add_argument(
        "--backup-every", type=int_in_range(1), metavar="N",
        help="back up the training state every N steps, besides each epoch end; "
        "default: every 5 minutes of training",
    )
    parser.add_argument(
        "--no-xla", dest="xla", action="store_false",
        help="train in TensorFlow's graph runtime instead of compiling the train step "
        "with XLA: cheaper for a run of a few hundred steps on a CPU, where XLA's "
        "compile costs seconds (benchmarks/xla_short_run.py)",
    )
    parser.add_argument(
        "--strategy", choices=STRATEGIES, default="default",
        help="tf.distribute: default (one device), mirrored (local GPUs), "
        "multi-worker (the cluster in TF_CONFIG)",
    )


def run(args):
    from keras_tf.training.run_lock import run_lock

    shared = args.strategy == "multi-worker"
    if shared and args.overwrite:
        raise UserError(
            "--overwrite: not with --strategy multi-worker, whose workers share --out; "
            "empty the folder before starting them"
        )
    # A second run into an existing folder stops here, before any work; this
    # one holds the lock to its end. A multi-worker cluster's workers share
    # --out: its chief alone takes the lock, in train_preset_dir.
    locked = not shared and os.path.isdir(args.out)
    with run_lock(args.out) if locked else contextlib.nullcontext():
        return _run(args, check_out=not shared)


def _run(args, check_out):
    from keras_tf.cli.corpus_files import read_tsv_option
    from keras_tf.cli.model_dir import check_model_dir, check_preset
    from keras_tf.cli.targets import check_target, clear_folder
    from keras_tf.option_error import OptionError
    from keras_tf.training.preset_dir import check_same_options, train_preset_dir

    # The checks that need no data first, so a mistake costs no waiting.
    if given(args, "keep") and args.general_valid is None:
        raise UserError("--keep applies to --general-valid only; give both, or neither")
    if given(args, "average_last") and args.average_last > 1 and (
            args.valid is None or args.init_from is not None):
        raise UserError("--average-last applies to a run from scratch with --valid (it picks by "
                        "validation BLEU); give --valid, and leave out --init-from")
    if args.replay_ratio is not None and not (args.replay_corpus or args.replay_source):
        raise UserError(
            "--replay-ratio applies to --replay-corpus or --replay-source only; give one of them"
        )
    check_preset(args.preset)
    if args.init_from is not None:
        check_model_dir(args.init_from, option="--init-from")
    for path, option in ((args.replay_source, "--replay-source"),
                         (args.general_valid, "--general-valid")):
        if path is not None and not os.path.isfile(path) and not _made_before(args, option):
            raise UserError(f"{option}: no such file: {path}")
    options = training_options(args)
    if args.init_from is not None and args.lora_rank is not None:
        _check_lora_rank(args)
    replace = check_out and check_target(
        args.out, "--out", args.overwrite, "holds files that are not a keras-tf run", ours=_is_a_run
    )
    if not replace:
        try:
            check_same_options(args.out, options)
        except OptionError as error:
            if not args.overwrite:
                raise UserError(
                    f"{error.as_flags()}, or pass --overwrite to replace it (its files are "
                    "deleted)"
                ) from None
            replace = True
    train_corpus = read_tsv_option(args.train, "--train", args.skip_bad_lines)
    valid_corpus = None
    if args.valid:
        valid_corpus = read_tsv_option(args.valid, "--valid", args.skip_bad_lines)
    replay_corpus = None
    if args.replay_corpus:
        replay_corpus = read_tsv_option(args.replay_corpus, "--replay-corpus", args.skip_bad_lines)
    if replace:  # only now that the inputs are read
        clear_folder(args.out)
    start = time.perf_counter()
    _, history = train_preset_dir(
        args.out,
        train_corpus,
        valid_corpus,
        options=options,
        replay_corpus=replay_corpus,
        strategy=args.strategy,
        jit_compile=args.xla,
        backup_every=args.backup_every,
        # A progress bar in a terminal, one line per epoch in a log file.
        verbose="auto" if sys.stdout.isatty() else 2,
    )
    print(
        f"Trained {_epochs_trained(history)} in {time.perf_counter() - start:.0f} s; "
        f"model directory: {args.out}",
        file=sys.stderr,
    )
    return 0


def training_options(args):
    """The `TrainingOptions` of the parsed command line: each field is the flag of its name."""
    import dataclasses

    from keras_tf.translation.training_options import TrainingOptions

    converted = {
        "mixed_precision": MIXED_PRECISION.get(args.mixed_precision),
        "lora_targets": _lora_targets(args),
        "tokenizer_model": _tokenizer_model(args),
    }
    return TrainingOptions(**{
        field.name: converted[field.name] if field.name in converted else getattr(args, field.name)
        for field in dataclasses.fields(TrainingOptions)
    })


def _check_lora_rank(args):
    """--lora-rank at most the --init-from model's d_model (a preset's is TrainingOptions')."""
    from keras_tf.translation.presets import read_config

    config = read_config(args.init_from)
    if args.lora_rank > config.d_model:
        raise UserError(
            f"--lora-rank {args.lora_rank}: must be at most the --init-from model's d_model, "
            f"{config.d_model}"
        )


def _lora_targets(args):
    """The names of --lora-targets; every projection without it; one line without --lora-rank."""
    from keras_tf.translation.training_options import LORA_TARGETS

    if args.lora_targets is None:
        return LORA_TARGETS
    if args.lora_rank is None:
        raise UserError("--lora-targets applies to --lora-rank only; give both, or neither")
    return [name.strip() for name in args.lora_targets.split(",") if name.strip()]


def _tokenizer_model(args):
    """None, one path, or a (source, target) pair; one line for more than two."""
    models = args.tokenizer_model
    if models is None:
        return None
    if len(models) > 2:
        raise UserError(f"--tokenizer-model: one model, or two (source, target); received {models}")
    for path in models:
        if not os.path.isfile(path):
            raise UserError(f"--tokenizer-model: no such file: {path}")
    return models[0] if len(models) == 1 else tuple(models)


def _is_a_run(path):
    """Whether the non-empty folder `path` is a `train` run: one to resume, if its options agree.

    A run writes options.json before its first step; a run killed earlier
    leaves its learned tokenizers alone (and perhaps a staging folder).
    """
    from keras_tf.training.run_lock import LOCK_FILE
    from keras_tf.translation.presets import OPTIONS_FILE, TOKENIZERS_CONFIG, TOKENIZERS_DIR

    if os.path.isfile(os.path.join(path, OPTIONS_FILE)):
        return True
    names = set(os.listdir(path)) - {LOCK_FILE}
    names = {name for name in names if not name.startswith(".partial-")}  # a killed write
    return names == {TOKENIZERS_DIR} and os.path.isfile(
        os.path.join(path, TOKENIZERS_DIR, TOKENIZERS_CONFIG)
    )


def _epochs_trained(history):
    """'3 epochs', or '2 epochs and 40 steps of epoch 3' where a time budget cut the last one."""
    cut = getattr(history, "stopped_inside_epoch", None)
    whole = len(history.epoch) - (cut is not None)
    said = f"{whole} epoch{'s' * (whole != 1)}"
    if cut is None:
        return said
    epoch, step = cut
    return f"{said} and {step} step{'s' * (step != 1)} of epoch {epoch + 1}"


def _made_before(args, option):
    """Whether a rerun of `--out` keeps what `option`'s file made already: the replay pairs."""
    from keras_tf.translation import presets

    return option == "--replay-source" and not args.overwrite and os.path.isfile(
        os.path.join(args.out, presets.REPLAY_PAIRS_FILE))
