"""Draw the sinusoidal positional-encoding matrix of the paper (section 3.5) to a PNG.

    keras-tf plot-encoding --out pe.png --d-model 128 --length 64

Rows are positions, columns the d_model dimensions: sin on even dimensions,
cos on odd ones, wavelengths from 2π to 10000·2π.
"""

from keras_tf.cli.errors import int_in_range
from keras_tf.cli.outputs import check_output, write_output


def add_arguments(parser):
    parser.add_argument("--out", default="positional_encoding.png", metavar="FILE",
                        help="the PNG to write; default: positional_encoding.png")
    parser.add_argument("--d-model", metavar="N", type=int_in_range(2, 4096), default=128,
                        help="model width; default: 128")
    parser.add_argument("--length", metavar="N", type=int_in_range(1, 10000), default=64,
                        help="positions; default: 64")


def run(args):
    import keras_tf.plots
    from keras_tf.layers.positional_embedding import sinusoidal_encoding

    check_output(args.out, "--out")
    encoding = sinusoidal_encoding(args.length, args.d_model)
    write_output(args.out, lambda path: keras_tf.plots.positional_encoding(encoding, path))
    print(args.out)
    return 0
