"""Merge a fine-tuned model with the one it started from: θ₀ + α(θ_ft − θ₀), a new model directory.

    keras-tf train --init-from base --train new.tsv --out tuned
    keras-tf merge --base base --tuned tuned --alpha 0.5 --out merged
    keras-tf evaluate --model merged --test old-domain.tsv

Every weight of --out is (1 − α) times --base's plus α times --tuned's
("WiSE-FT"): α 0 is the base model, 1 the tuned one, and the values between
trade what fine-tuning learned for what the base model knew, at no training
cost. Both must have one architecture and vocabulary (a run fine-tuned
from the other, LoRA runs included); --out gets --tuned's tokenizers and
decoding settings. A non-empty --out is refused unless --overwrite is given.
"""

from keras_tf.cli.targets import add_overwrite_argument


def _alpha(text):
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise argparse.ArgumentTypeError(f"must be in [0, 1]; received {text}")
    return value


def add_arguments(parser):
    parser.add_argument("--base", required=True, metavar="DIR",
                        help="the model fine-tuning started from (θ₀)")
    parser.add_argument("--tuned", required=True, metavar="DIR",
                        help="the fine-tuned model (θ_ft), e.g. from keras-tf train --init-from")
    parser.add_argument(
        "--alpha", required=True, metavar="A", type=_alpha,
        help="the share of the tuned weights, in [0, 1]: 0 the base, 1 the tuned model",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="the new model directory")
    add_overwrite_argument(parser, "the merge")


def run(args):
    from keras_tf.cli.model_dir import check_model_dir
    from keras_tf.cli.outputs import write_folder
    from keras_tf.cli.targets import check_not_holding, check_target
    from keras_tf.training.merging import merge_presets

    check_model_dir(args.base, "--base")
    check_model_dir(args.tuned, "--tuned")
    check_not_holding(args.out, "--out", {"--base": args.base, "--tuned": args.tuned})
    check_target(args.out, "--out", args.overwrite, "is not empty")
    # Written beside --out, then renamed: a failure leaves --out as it was.
    write_folder(args.out, lambda path: merge_presets(args.base, args.tuned, args.alpha, path))
    print(f"Merged {args.base} and {args.tuned} at alpha {args.alpha:g} into {args.out}")
    return 0
