"""Files and folders written whole or not at all: the one atomic writer of every on-disk format.

Each writer writes under a temporary name beside its target, unique to the
process and the call, then renames it into place. A rename within a
directory is atomic on POSIX file systems, so a reader (or a resume after a
kill) sees the old file or the new one, never half of one, and two
processes never write the same temporary file.
"""

import json
import os
import shutil
import uuid


def _temporary_name(path):
    directory, name = os.path.split(os.path.abspath(path))
    # The final suffix stays last (`.keras`, `.weights.h5`): Keras's savers require it.
    return os.path.join(directory, f".partial-{os.getpid()}-{uuid.uuid4().hex[:8]}-{name}")


def write_atomically(path, write):
    """`write(temporary_path)`, then rename what it wrote (a file or a folder) to `path`.

    An existing folder at `path` is replaced; if `write` fails, what it
    left under the temporary name is removed and `path` is untouched.

    Example:
        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
        >>> import pathlib
        >>> write_atomically(path, lambda p: pathlib.Path(p).write_text("hi"))
        >>> pathlib.Path(path).read_text()
        'hi'
    """
    temporary = _temporary_name(path)
    try:
        write(temporary)
        if os.path.isdir(temporary) and os.path.isdir(path):
            # A folder cannot replace a non-empty folder in one rename: move
            # the old one aside first, then drop it.
            old = _temporary_name(path)
            os.replace(path, old)
            os.replace(temporary, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(temporary, path)
    except OSError as error:
        raise user_named(error, temporary, path) from None
    finally:
        if os.path.isdir(temporary):
            shutil.rmtree(temporary, ignore_errors=True)
        elif os.path.lexists(temporary):
            os.remove(temporary)


def user_named(error, staging, path):
    """`error` (an `OSError`) naming `path` where it named the staging name `staging` or a file in it.

    A user asked for `path`: the temporary name it is written under is no
    name of theirs.

    Example:
        >>> str(user_named(PermissionError(13, "Permission denied", "out/.partial-1-x"),
        ...                "out/.partial-1-x", "out/model"))
        "[Errno 13] Permission denied: 'out/model'"
    """
    names = []
    for name in (error.filename, error.filename2):
        if isinstance(name, (str, os.PathLike)):
            name = os.fspath(name)
            for staged in {staging, os.path.abspath(staging)}:
                if name == staged or name.startswith(staged + os.sep):
                    name = path + name[len(staged):]
                    break
        names.append(name)
    if names == [error.filename, error.filename2]:
        return error
    if names[1] is None:
        return type(error)(error.errno, error.strerror, names[0])
    return type(error)(error.errno, error.strerror, names[0], None, names[1])


def _dump_json(values, path):
    with open(path, "w", encoding="utf-8") as file:
        # No NaN or Infinity: they are not JSON, and no reader of ours expects them.
        json.dump(values, file, indent=2, ensure_ascii=False, allow_nan=False)
        file.write("\n")


def write_json(path, values):
    """Write `values` as indented UTF-8 JSON to `path`, atomically."""
    write_atomically(path, lambda temporary: _dump_json(values, temporary))


def read_json(path):
    """The JSON value in `path`, read as UTF-8."""
    with open(path, encoding="utf-8") as file:
        return json.load(file)
