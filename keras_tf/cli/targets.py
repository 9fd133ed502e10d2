"""The folders a command writes (`--out DIR`): refused when they hold what it did not make.

One rule for `train`, `import-marian`, `average` and `export`: a missing or
empty folder is written; a non-empty one only when the command may replace
it, its own run with the same options for `train` (a resume); anything else
is refused in one line that names `--overwrite`, which replaces it on
purpose. A file where a folder goes is always refused.

The commands then write the folder with `keras_tf.cli.outputs.write_folder`
(train, which resumes in place, clears it with `clear_folder`).
"""

import os
import shutil

from keras_tf.cli.errors import UserError


def add_overwrite_argument(parser, what):
    """`--overwrite`: replace a non-empty --out that the command would refuse."""
    parser.add_argument(
        "--overwrite", action="store_true",
        help=f"replace a non-empty --out (its files are deleted) with {what}, instead of "
        "refusing it",
    )


def check_not_a_file(path, option="--out"):
    """Raise `UserError` if `path` or a folder above it is an existing file (not a folder)."""
    path = os.path.abspath(path)
    while True:
        if os.path.lexists(path) and not os.path.isdir(path):
            raise UserError(f"{option}: {path} is a file; {option} names a folder")
        parent = os.path.dirname(path)
        if parent == path:
            return
        path = parent


def is_empty_folder(path):
    """Whether `path` is a folder holding nothing (a stale training lock file aside)."""
    from keras_tf.training.run_lock import LOCK_FILE  # keras_tf.training imports Keras

    return os.path.isdir(path) and not set(os.listdir(path)) - {LOCK_FILE}


def check_target(path, option, overwrite, what, *, ours=None):
    """Raise `UserError` unless the folder `path` may be written; return whether to replace it.

    Args:
        path: the target folder.
        option: its option, for the message.
        overwrite: `--overwrite` was given.
        what: why a non-empty folder is refused, e.g. "is not empty".
        ours: `ours(path)` is true for a non-empty folder the command may
            write into as it is (train's resume); None: none is.

    Returns:
        True when `path` is a non-empty folder that `--overwrite` replaces
        (even one that is `ours`: the flag asks for a fresh start); False
        when it is missing, empty, or `ours` without `--overwrite`.
    """
    check_not_a_file(path, option)
    if not os.path.exists(path) or is_empty_folder(path):
        return False
    if overwrite:
        return True
    if ours is not None and ours(path):
        return False
    raise UserError(
        f"{option}: {path} {what}; pass --overwrite to replace it (its files are deleted), "
        "or pick a new folder"
    )


def check_not_holding(path, option, others):
    """Raise `UserError` if the folder `path` is one of `others` or holds one.

    Args:
        others: `{option: folder}` of the folders the command reads, which
            replacing `path` would delete.
    """
    target = os.path.realpath(path)
    for other_option, other in others.items():
        source = os.path.realpath(other)
        if os.path.commonpath([target, source]) == target:
            raise UserError(f"{option}: {path} is the {other_option} directory, or holds it")


def clear_folder(path):
    """Delete what `path` holds, except the training lock file (held by this process)."""
    from keras_tf.training.run_lock import LOCK_FILE
    for name in os.listdir(path):
        if name == LOCK_FILE:
            continue
        entry = os.path.join(path, name)
        if os.path.isdir(entry) and not os.path.islink(entry):
            shutil.rmtree(entry)
        else:
            os.remove(entry)
