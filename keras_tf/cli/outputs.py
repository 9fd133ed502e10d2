"""The files a command writes for the user: checked first, written beside, renamed into place.

    check_output(args.output, "--output", inputs={"--test": args.test})   # before any work
    ...read the inputs, compute...
    with replaced_at_end(args.output) as path:                             # at the end
        write(path)

`check_output` opens nothing: it refuses a folder, a missing parent folder, a
folder or file this process cannot write to, and an output that is one of
the inputs (the same file by any name). `replaced_at_end` yields a temporary
name beside the output; the output is replaced by it only when the block
ends without an exception, so a failed run leaves an existing file
byte-identical and no temporary file behind. A symbolic link is written
through (its target is replaced); what is not a regular file (`/dev/null`,
`/dev/stdout`, a FIFO) is written to directly, as a stream.

Folders (`--out DIR` of import-marian, average, export) the same way:
`folder_replaced_at_end` yields a new folder beside the target and swaps it in
whole at the end; `keras_tf.cli.targets` decides first whether the target
may be replaced at all.
"""

import contextlib
import os
import shutil
import tempfile
import uuid

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


@contextlib.contextmanager
def replaced_at_end(path):
    """Yield a temporary path beside `path`; rename it to `path` when the block succeeds.

    The temporary name keeps `path`'s extension (matplotlib picks the image
    format from it). The file gets the mode of the file it replaces, or the
    umask's default for a new file. On an exception the temporary file is
    removed and `path` is left as it was.
    """
    if _is_stream(path):
        yield path
        return
    path = os.path.realpath(path)  # through a symbolic link, as `open` writes
    folder, name = os.path.split(path)
    suffix = os.path.splitext(name)[1]
    descriptor, temporary = tempfile.mkstemp(prefix=f".{name}.partial-", suffix=suffix, dir=folder)
    os.close(descriptor)
    try:
        yield temporary
        os.chmod(temporary, _mode_for(path))
        os.replace(temporary, path)
    finally:
        if os.path.lexists(temporary):
            os.remove(temporary)


def _mode_for(path):
    """The mode of the existing `path`, or 0o666 less the umask for a new file, as `open` gives."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def folder_replaced_at_end(path, *, create=True):
    """Yield a fresh folder path beside `path`; swap it into `path` when the block succeeds.

    Args:
        path: the target folder: missing, or one `check_target` allowed to replace.
        create: make the yielded folder (False: yield a free name, for a
            writer that refuses an existing folder).

    On an exception the new folder is deleted and `path` is left as it was.
    A symbolic link is followed: its target is replaced.
    """
    parent, name = os.path.split(os.path.realpath(path))
    os.makedirs(parent, exist_ok=True)
    staging = os.path.join(parent, f".{name}.partial-{uuid.uuid4().hex[:8]}")
    if create:
        os.mkdir(staging)  # the umask's mode, as any new folder
    try:
        yield staging
        swap_folder(staging, os.path.join(parent, name))
    finally:
        if os.path.lexists(staging):
            shutil.rmtree(staging, ignore_errors=True)


def swap_folder(new, path):
    """Put the folder `new` at `path`, deleting what was there only once `new` is in place."""
    if not os.path.lexists(path):
        os.rename(new, path)
        return
    parent, name = os.path.split(os.path.abspath(path))
    old = os.path.join(parent, f".{name}.old-{uuid.uuid4().hex[:8]}")
    os.rename(path, old)
    try:
        os.rename(new, path)
    except BaseException:
        os.rename(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)
