"""The files and folders a command writes for the user: checked first, written beside, renamed.

    check_output(args.output, "--output", inputs={"--test": args.test})   # before any work
    ...read the inputs, compute...
    write_output(args.output, write_lines)                                 # at the end

`check_output` opens nothing: it refuses a folder, a missing parent folder, a
folder or file this process cannot write to, and an output that is one of
the inputs (the same file by any name). `write_output` and `write_folder`
write with `keras_tf.atomic_files.write_atomically`: under a temporary name
beside the target, renamed into place only when the writer succeeds, so a
failed run leaves an existing file or folder as it was and no temporary
one behind. A symbolic link is written through (its target is replaced); a
file keeps the mode of the file it replaces; what is not a regular file
(`/dev/null`, `/dev/stdout`, a FIFO) is written to directly, as a stream.
`keras_tf.cli.targets` decides first whether a folder may be replaced at all.
"""

import os

from keras_tf.atomic_files import write_atomically
from keras_tf.cli.errors import UserError


def check_output(path, option, inputs=None):
    """Raise `UserError` unless `path` can be written at the end of the command; open nothing.

    Args:
        path: the output file named on the command line.
        option: its option, e.g. `"--output"`, for the message.
        inputs: `{option: path}` of the files the command reads; an output
            that is one of them (same file, whatever the name) is refused.
    """
    for input_option, input_path in (inputs or {}).items():
        if input_path is not None and _same_file(path, input_path):
            raise UserError(
                f"{option}: {path} is the {input_option} file; the output would replace the "
                "input, write it elsewhere"
            )
    if os.path.isdir(path):
        raise UserError(f"{option}: {path} is a directory, expected a file")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UserError(f"{option}: cannot write {path}: Permission denied")
    if _is_stream(path):
        return
    folder = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(folder):
        raise UserError(f"{option}: cannot write {path}: No such file or directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{option}: cannot write {path}: Permission denied (its folder)")


def _is_stream(path):
    """Whether `path` exists and is not a regular file: a device, a FIFO, /dev/stdout."""
    return os.path.exists(path) and not os.path.isfile(path)


def _same_file(a, b):
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def write_output(path, write):
    """`write(temporary_path)`, then rename the file it wrote to `path`; return what `write` returns.

    The temporary name ends with `path`'s name, so its extension stays
    (matplotlib picks the image format from it).
    """
    if _is_stream(path):
        return write(path)
    path = os.path.realpath(path)  # through a symbolic link, as `open` writes
    mode = _mode_for(path)
    returned = []

    def write_with_mode(temporary):
        returned.append(write(temporary))
        os.chmod(temporary, mode)

    write_atomically(path, write_with_mode)
    return returned[0]


def _mode_for(path):
    """The mode of the existing `path`, or 0o666 less the umask for a new file, as `open` gives."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_folder(path, write):
    """`write(temporary_path)`, which makes a folder; swap it in for the folder `path`.

    `path` is missing, or a folder `keras_tf.cli.targets.check_target`
    allowed to replace; a symbolic link to it is followed. Returns what
    `write` returns.
    """
    returned = []
    write_atomically(os.path.realpath(path), lambda temporary: returned.append(write(temporary)))
    return returned[0]
