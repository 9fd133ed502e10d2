"""Print the model's log-probability of each given translation (teacher forcing).

    keras-tf score --model run1 --pairs pairs.tsv > scores.txt

For each `source<TAB>target` line of --pairs, one line on stdout:
`log_probability<TAB>tokens<TAB>source<TAB>target`, the natural-log
probability the model gives to the whole target (END included) and the
number of target tokens scored. Higher is more probable; divide by the
token count to compare targets of different lengths.
"""

import sys

from keras_tf.cli.errors import int_in_range


def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="DIR", help="from keras-tf train")
    parser.add_argument("--pairs", required=True, metavar="FILE", help="source<TAB>target, TSV")
    parser.add_argument(
        "--batch-size", metavar="N", type=int_in_range(1), default=32, help="default: 32"
    )
    parser.add_argument(
        "--skip-bad-lines", action="store_true",
        help="skip malformed TSV lines (and report their count) instead of stopping",
    )


def run(args):
    from keras_tf.cli.corpus_files import read_tsv_option
    from keras_tf.cli.model_dir import check_model_dir, load_model_dir
    from keras_tf.training.scoring import pair_log_probabilities

    check_model_dir(args.model)
    pairs = read_tsv_option(args.pairs, "--pairs", args.skip_bad_lines)
    trained = load_model_dir(args.model)
    scores, lengths = pair_log_probabilities(
        trained.model, trained.tokenizers, pairs.sources, pairs.targets, args.batch_size
    )
    for score, length, (source, target) in zip(scores, lengths, pairs):
        sys.stdout.write(f"{score:.4f}\t{length}\t{source}\t{target}\n")
    return 0
