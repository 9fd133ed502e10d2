"""Print the model's log-probability of each given translation (teacher forcing).

    keras-tf score --model run1 --pairs pairs.tsv > scores.txt

For each `source<TAB>target` line of --pairs, one line on stdout:
`log_probability<TAB>tokens<TAB>source<TAB>target`, the natural-log
probability the model gives to the target (END included) and the number of
target tokens scored. Higher is more probable; divide by the token count to
compare targets of different lengths. As in training, a source is read from
its first max_source_length - 1 subword pieces and a target scored on its
first max_target_length - 1 pieces (then END); stderr counts the cut pairs.
"""

import logging
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
    from keras_tf.training.scoring import score_pairs

    check_model_dir(args.model)
    pairs = read_tsv_option(args.pairs, "--pairs", args.skip_bad_lines)
    trained = load_model_dir(args.model)
    result = score_pairs(
        trained.model, trained.tokenizers, pairs.sources, pairs.targets, args.batch_size
    )
    for score, length, (source, target) in zip(result.scores, result.lengths, pairs):
        sys.stdout.write(f"{score:.4f}\t{length}\t{source}\t{target}\n")
    sys.stdout.flush()
    message = cut_message(result, len(pairs), trained.model.config)
    if message:
        logging.getLogger("keras_tf.cli").warning(message)
    return 0


def cut_message(result, total, config):
    """One line that counts the pairs `score_pairs` cut to fit `config`, or None for none."""
    cut = sorted(set(result.cut_sources) | set(result.cut_targets))
    if not cut:
        return None
    sides = []
    for count, side, limit in (
        (len(result.cut_sources), "source", config.max_source_length),
        (len(result.cut_targets), "target", config.max_target_length),
    ):
        if count:
            sides.append(
                f"{count} {side}{'s' * (count != 1)} longer than max_{side}_length={limit} "
                f"(END included) allows, scored from the first {limit - 1} subword pieces"
            )
    shown = ", ".join(str(index + 1) for index in cut[:10]) + (", ..." if len(cut) > 10 else "")
    return (
        f"{len(cut)} of {total} pairs were cut to fit the model: {'; '.join(sides)}: "
        f"pairs {shown}"
    )
