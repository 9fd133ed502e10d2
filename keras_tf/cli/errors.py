"""User errors at the command line: one line on stderr, a non-zero exit, no traceback.

A command raises `UserError` for a mistake the user can fix (a missing file,
a folder that is not a model directory, an option out of range); `main`
prints it as `keras-tf <command>: error: <message>` and exits with
`EXIT_USER_ERROR`. argparse's own complaints take the same one-line form
(`ArgumentParser.error`); `--help` still prints the usage.
"""

import argparse
import os

from keras_tf.frozen_config import MAX_INT

# argparse's own exit status for a bad command line.
EXIT_USER_ERROR = 2


class UserError(Exception):
    """A mistake the user can fix, reported as one line without a traceback."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, raising `UserError` instead of printing the usage and exiting.

    A command that sets the default `unknown_options=[]` receives the
    options it does not know there, in order, instead of an error
    (`translate-bulk` passes them on to Beam).
    """

    def error(self, message):
        raise UserError(message)

    def parse_args(self, args=None, namespace=None):
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            if not isinstance(getattr(parsed, "unknown_options", None), list):
                self.error(f"unrecognized arguments: {' '.join(unknown)}")
            parsed.unknown_options = unknown
        return parsed


def one_line(text):
    """`text` with its line breaks and runs of whitespace collapsed to single spaces."""
    return " ".join(str(text).split())


def int_in_range(low, high=None):
    """An argparse `type`: an integer in `[low, high]` (`high=None`: up to int32's `MAX_INT`).

    Example:
        >>> int_in_range(1)("3")
        3
    """
    bound = f">= {low}" if high is None else f"in [{low}, {high}]"
    most = MAX_INT if high is None else high

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer {bound}; received {text!r}")
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer {bound}; received {value}")
        if value > most:
            raise argparse.ArgumentTypeError(f"expected an integer <= {most}; received {value}")
        return value

    parse.__name__ = "integer"
    return parse


class StoreGiven(argparse.Action):
    """argparse's `store`, noting that the flag was given (`given(args, dest)`).

    For a flag that only works with another: its default stays in the help
    and in `args`, and the command still knows whether the user typed it.
    """

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given_flags = getattr(namespace, "given_flags", frozenset()) | {self.dest}


def given(args, dest):
    """Whether the flag of `dest` (declared with `action=StoreGiven`) was on the command line."""
    return dest in getattr(args, "given_flags", ())


def readable_file(path, option):
    """Raise `UserError` unless `path` is a file this process can open for reading.

    Args:
        path: the path given on the command line.
        option: the option that named it, e.g. `"--train"`, for the message.
    """
    if not os.path.exists(path):
        raise UserError(f"{option}: no such file: {path}")
    if os.path.isdir(path):
        raise UserError(f"{option}: {path} is a directory, expected a file")
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise UserError(f"{option}: cannot read {path}: {error.strerror}") from None

