"""Average the weights of a run's last N epoch checkpoints into a new model directory.

    keras-tf train ... --keep-checkpoints 5 --out run1
    keras-tf average --model run1 --last 5 --out run1-avg5
    keras-tf evaluate --model run1-avg5 --test test.tsv

The new directory holds the same tokenizers, config and options as --model,
and a model.keras whose every weight is the mean over the checkpoints of the
last N epochs (run1/backup/epoch-NNNN.weights.h5), as the paper averaged its
last checkpoints. `keras-tf train --keep-checkpoints N` keeps them. A non-empty
--out is refused unless --overwrite is given.
"""

from keras_tf.cli.errors import int_in_range
from keras_tf.cli.targets import add_overwrite_argument


def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="DIR", help="from keras-tf train")
    parser.add_argument(
        "--last", required=True, metavar="N", type=int_in_range(1),
        help="average the checkpoints of the last N epochs",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="the new model directory")
    add_overwrite_argument(parser, "the average")


def run(args):
    from keras_tf.cli.model_dir import check_model_dir
    from keras_tf.cli.outputs import write_folder
    from keras_tf.cli.targets import check_not_holding, check_target
    from keras_tf.training.preset_dir import average_preset_dir

    check_model_dir(args.model)
    check_not_holding(args.out, "--out", {"--model": args.model})
    check_target(args.out, "--out", args.overwrite, "is not empty")
    # Written beside --out, then renamed: a failure leaves --out as it was.
    epochs = write_folder(args.out, lambda path: average_preset_dir(args.model, args.last, path))
    print(f"Averaged epochs {', '.join(map(str, epochs))} of {args.model} into {args.out}")
    return 0
