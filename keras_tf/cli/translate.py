"""Translate stdin to stdout, one line out for each line in.

    echo "Save the notebook" | keras-tf translate --model run1
    keras-tf translate --model run1 --beam-size 1 < sentences.txt > translations.txt

Lines are read and translated --batch-size at a time (each line as soon as
it is typed, in a terminal). Lines end at "\n" (or "\r\n") only: a lone CR
stays inside its line. An empty line gives an empty line. A line longer
than the model's max_source_length is translated from its first pieces, and
stderr says which lines were cut.

--sampling top-k or top-p samples each translation instead of searching for
the best (back-translation, data augmentation); --seed makes a run
repeatable: the same input and seed give the same lines.

    keras-tf translate --model fr-en --sampling top-p --top-p 0.9 --seed 7 < mono.fr
"""

import io
import itertools
import logging
import sys

from keras_tf.cli.errors import StoreGiven, UserError, given, int_in_range
from keras_tf.cli.model_dir import add_quantize_argument
from keras_tf.frozen_config import MAX_SEED

# The sampling flags -> the --sampling methods that read them.
SAMPLING_FLAGS = {"top_k": ("top-k",), "top_p": ("top-p",), "temperature": ("top-k", "top-p"),
                  "seed": ("top-k", "top-p")}


def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="DIR", help="from keras-tf train")
    parser.add_argument(
        "--beam-size", metavar="N", type=int_in_range(1), default=4,
        help="1 for greedy decoding; default: 4, the paper's",
    )
    add_quantize_argument(parser)
    parser.add_argument(
        "--batch-size", metavar="N", type=int_in_range(1), default=32, help="default: 32"
    )
    parser.add_argument(
        "--n-best", metavar="K", type=int_in_range(1),
        help="K lines per input line, `index ||| translation ||| score`, best first "
        "(beam search of at least K)",
    )
    parser.add_argument(
        "--sampling", choices=("top-k", "top-p"),
        help="sample each translation from the K likeliest tokens (top-k) or the smallest "
        "set of probability mass P (top-p) at every step; --beam-size is then unused",
    )
    parser.add_argument(
        "--top-k", metavar="K", type=int_in_range(1), default=50, action=StoreGiven,
        help="with --sampling top-k, at most the target vocabulary size; default: 50 (the "
        "vocabulary size when it is smaller)",
    )
    parser.add_argument(
        "--top-p", metavar="P", type=float, default=0.9, action=StoreGiven,
        help="with --sampling top-p, in (0, 1]; default: 0.9",
    )
    parser.add_argument(
        "--temperature", metavar="T", type=float, default=1.0, action=StoreGiven,
        help="with --sampling, divides the logits before sampling, in (0, 100]; default: 1.0",
    )
    parser.add_argument(
        "--seed", metavar="S", type=int_in_range(0, MAX_SEED), default=0, action=StoreGiven,
        help="the seed of --sampling: the same input and seed give the same lines; default: 0",
    )


def read_batches(stream, batch_size):
    """Lists of at most `batch_size` lines of `stream`, without their line endings.

    `stream` must split lines at "\\n" only (`newline="\\n"`), as the
    corpus readers do: a lone CR stays inside its line.
    """
    from keras_tf.text.corpora import strip_line_end

    lines = (strip_line_end(line) for line in stream)
    while batch := list(itertools.islice(lines, batch_size)):
        yield batch


def run(args):
    from keras_tf.cli.batch_translation import decoding_for
    from keras_tf.cli.model_dir import check_model_dir, load_model_dir
    from keras_tf.translation import overlong_message
    from keras_tf.translation.batches import (
        format_n_best,
        n_best_in_batches,
        translate_in_batches,
    )

    # The checks that need no model first.
    check_sampling_flags(args)
    if args.n_best and args.sampling:
        raise UserError("--n-best lists come from beam search; give no --sampling with it")
    if sys.stdin is None:  # `keras-tf translate <&-`: Python has no stdin to give
        raise UserError(
            "stdin is closed; give the sentences on it, one a line: "
            f"keras-tf translate --model {args.model} < sentences.txt"
        )
    check_model_dir(args.model)
    trained = load_model_dir(args.model, quantize=args.quantize)
    translator = trained.translator
    beam_size = max(args.beam_size, args.n_best, 2) if args.n_best else args.beam_size
    decoding = decoding_for(beam_size, translator.decoding)
    if args.sampling:
        decoding = sampling_for(args, decoding)
    batch_size = 1 if sys.stdin.isatty() else args.batch_size
    stdin = sys.stdin
    if hasattr(stdin, "buffer"):
        # Bytes that are not UTF-8 become U+FFFD, as in the export, not an error.
        # Lines end at "\n" only: a lone CR is part of its line.
        stdin = io.TextIOWrapper(
            stdin.buffer, encoding="utf-8", errors="replace", newline="\n"
        )
    done = 0
    overlong = []  # line numbers, from 1
    for batch in read_batches(stdin, batch_size):
        overlong += [
            done + 1 + index for index in translator.overlong_sources(batch, decoding)
        ]
        if args.n_best:
            results = n_best_in_batches(
                translator, batch, batch_size, args.n_best, decoding, pad_remainder=done > 0
            )
            lines = format_n_best(results, start=done)
        else:
            # A short last chunk of stdin reuses the full chunks' program.
            lines = translate_in_batches(
                translator, batch, batch_size, decoding, pad_remainder=done > 0,
                # One seed a chunk of stdin, drawn from --seed: the run repeats.
                seed=(args.seed + done) % (MAX_SEED + 1) if args.sampling else None,
            )
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        done += len(batch)
    limit = translator.resolve_decoding(decoding).max_source_length
    message = overlong_message(len(overlong), done, limit, "lines")
    if message:
        shown = ", ".join(map(str, overlong[:10])) + (", ..." if len(overlong) > 10 else "")
        logging.getLogger("keras_tf.cli").warning(f"{message}: lines {shown}")
    return 0


def check_sampling_flags(args):
    """Refuse a sampling flag that the command would ignore, and bad sampling values.

    `--top-k 5` without `--sampling top-k` would run beam search: one line
    names the flag it needs. The values are `DecodingConfig`'s to check
    (`keras_tf.option_error.OptionError`, shown with the flags).
    """
    for dest, methods in SAMPLING_FLAGS.items():
        if given(args, dest) and args.sampling not in methods:
            flag = "--" + dest.replace("_", "-")
            needs = " or ".join(f"--sampling {method}" for method in methods)
            raise UserError(f"{flag} applies to {needs} only; give it with that, or leave it out")
    if args.sampling:
        sampling_for(args, None)


def sampling_for(args, decoding):
    """The `DecodingConfig` of `--sampling`, keeping the preset's max_length (of `decoding`)."""
    from keras_tf.decoding import DecodingConfig

    method = {"top-k": "top_k", "top-p": "top_p"}[args.sampling]
    return DecodingConfig(
        method=method, top_k=args.top_k if given(args, "top_k") else None, top_p=args.top_p,
        temperature=args.temperature, max_length=None if decoding is None else decoding.max_length,
    )
