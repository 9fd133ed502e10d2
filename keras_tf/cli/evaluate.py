"""Score a trained model on a held-out TSV file with sacreBLEU: BLEU and chrF (and TER).

    keras-tf evaluate --model run1 --test test.tsv --beam-size 4 --output hyps.txt
    keras-tf evaluate --model zh-run --test test.tsv --tokenize zh --metrics bleu,chrf,ter

Translates the source side in batches (a progress bar on stderr when it is a
terminal, one plain line when it is a file), then prints sacreBLEU's corpus
score lines on stdout, as sacreBLEU prints them (one reference per sentence),
one line per --metrics, then each metric's sacreBLEU signature (the settings
a paper reports beside the score: tokenizer, case, smoothing, version). stderr
counts the test sources longer than the model's max_source_length, which
are translated from their first pieces. --output is written at the end under a
temporary name and renamed into place; an --output that is the --test file is
refused.
"""

import logging
import sys

from keras_tf.cli.errors import StoreGiven, UserError, given, int_in_range
from keras_tf.cli.model_dir import add_quantize_argument


def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="DIR", help="from keras-tf train")
    parser.add_argument("--test", required=True, metavar="FILE", help="source<TAB>reference, TSV")
    parser.add_argument(
        "--beam-size", metavar="N", type=int_in_range(1), default=4,
        help="1 for greedy decoding; default: 4, the paper's",
    )
    add_quantize_argument(parser)
    parser.add_argument(
        "--batch-size", metavar="N", type=int_in_range(1), default=32, help="default: 32"
    )
    parser.add_argument("--output", metavar="FILE", help="also write the translations here")
    parser.add_argument(
        "--n-best", metavar="K", type=int_in_range(1),
        help="write the K best translations of each sentence with their beam scores to "
        "--output (`index ||| translation ||| score`); BLEU scores the best. Beam search "
        "of at least K",
    )
    parser.add_argument(
        "--skip-bad-lines", action="store_true",
        help="skip malformed TSV lines (and report their count) instead of stopping",
    )
    parser.add_argument(
        "--metrics", metavar="LIST", type=metric_list, default="bleu,chrf",
        help="comma-separated sacreBLEU metrics among bleu, chrf, ter; bleu,chrf when not given",
    )
    parser.add_argument(
        "--tokenize", choices=TOKENIZERS, default="13a", action=StoreGiven,
        help="BLEU's tokenizer (zh for Chinese targets, char for Japanese), with --metrics "
        "bleu (chrF and TER tokenize their own way); default: 13a",
    )


# sacreBLEU's choices that need nothing more than sacreBLEU (keras_tf.training.bleu).
TOKENIZERS = ("13a", "intl", "zh", "char", "none")
METRICS = ("bleu", "chrf", "ter")


def metric_list(value):
    """`--metrics bleu,chrf`: a tuple of known metric names, or an argparse error."""
    import argparse

    names = tuple(name.strip().lower() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in METRICS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"expected some of {','.join(METRICS)}, comma-separated; received {value!r}"
        )
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise argparse.ArgumentTypeError(
            f"{', '.join(twice)} named more than once; received {value!r}"
        )
    return names


def score(hypotheses, references, metrics=("bleu", "chrf"), tokenize="13a"):
    """sacreBLEU's `[(score, signature)]` of each metric: `keras_tf.training.bleu.corpus_metrics`."""
    from keras_tf.training.bleu import corpus_metrics

    return corpus_metrics(hypotheses, references, metrics, tokenize=tokenize)


def run(args):
    import sacrebleu  # noqa: F401  (missing without the demo extra: fail before translating)

    from keras_tf.cli.batch_translation import decoding_for
    from keras_tf.cli.corpus_files import read_tsv_option
    from keras_tf.cli.model_dir import check_model_dir, load_model_dir
    from keras_tf.cli.outputs import check_output, write_output

    if given(args, "tokenize") and "bleu" not in args.metrics:
        raise UserError(
            f"--tokenize {args.tokenize} is BLEU's tokenizer; --metrics "
            f"{','.join(args.metrics)} does not use it: add bleu, or leave --tokenize out"
        )
    check_model_dir(args.model)
    if args.n_best and not args.output:
        raise UserError("--n-best: give --output, the file the n-best list goes to")
    if args.output:
        check_output(args.output, "--output", inputs={"--test": args.test})  # opens nothing
    test = read_tsv_option(args.test, "--test", args.skip_bad_lines)
    from keras_tf.translation import overlong_message
    from keras_tf.translation.batches import (
        format_n_best,
        n_best_in_batches,
        translate_in_batches,
    )

    trained = load_model_dir(args.model, quantize=args.quantize)
    translator = trained.translator
    beam_size = max(args.beam_size, args.n_best, 2) if args.n_best else args.beam_size
    decoding = decoding_for(beam_size, translator.decoding)
    if args.n_best:
        results = n_best_in_batches(
            translator, test.sources, args.batch_size, args.n_best, decoding
        )
        hypotheses = [hypotheses[0][0] for hypotheses in results]
        lines = format_n_best(results)
    else:
        hypotheses = translate_in_batches(
            translator, test.sources, args.batch_size, decoding, progress=True
        )
        lines = hypotheses
    overlong = translator.overlong_sources(test.sources, decoding)
    message = overlong_message(
        len(overlong), len(test.sources), translator.resolve_decoding(decoding).max_source_length,
        "test sources",
    )
    if message:
        logging.getLogger("keras_tf.cli").warning(message)
    scores = score(hypotheses, test.targets, args.metrics, args.tokenize)
    if args.output:
        write_output(args.output, lambda path: _write_lines(path, lines))
    for result, _ in scores:
        print(result)
    for result, signature in scores:
        print(f"{result.name} signature: {signature}")
    sys.stdout.flush()
    return 0


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8", newline="\n") as file:
        file.writelines(line + "\n" for line in lines)
