"""One training run at a time in a folder: an `fcntl.flock` on a lock file inside it.

    with run_lock(out_dir):
        ...train into out_dir...

A second process that asks for the same folder's lock gets `RunLockedError`
at once, naming the holder's process id. The kernel releases a flock when
its holder dies, even by SIGKILL, so a killed run never blocks its resume;
the lock file it leaves is reused. In one process the lock is re-entrant:
the command line takes it before its checks, `train_preset_dir` again
around the run.
"""

import contextlib
import fcntl
import os

from keras_tf.option_error import OptionError

LOCK_FILE = ".keras-tf-train.lock"

# realpath of a folder -> [file descriptor, depth], for the locks this process holds.
_held = {}


class RunLockedError(OptionError):
    """Another process holds the lock of the folder (`out`); `pid` is its process id or None."""

    def __init__(self, out_dir, pid):
        self.pid = pid
        holder = f"process {pid}" if pid else "another process"
        super().__init__(
            [("out", out_dir)],
            f"another keras-tf train ({holder}) is training into this folder; wait for it to "
            "end, or train into another folder",
        )


@contextlib.contextmanager
def run_lock(out_dir):
    """Hold the lock of the existing folder `out_dir` for the `with` block.

    Raises:
        RunLockedError: another process holds it.
    """
    key = os.path.realpath(out_dir)
    if key in _held:
        _held[key][1] += 1
        try:
            yield
        finally:
            _held[key][1] -= 1
        return
    path = os.path.join(out_dir, LOCK_FILE)
    descriptor = _locked(path, out_dir)
    _held[key] = [descriptor, 1]
    try:
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        yield
    finally:
        del _held[key]
        # Removed while still held: a process that opened it meanwhile finds it
        # locked, or (below) finds that the name now points elsewhere.
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        os.close(descriptor)


def _locked(path, out_dir):
    """A descriptor of `path` holding its exclusive flock."""
    while True:
        # O_CLOEXEC: a child process must not keep the lock after we end.
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(descriptor)
            os.close(descriptor)
            raise RunLockedError(out_dir, pid) from None
        # The holder we waited on may have removed the file between our open
        # and our flock: then we hold a lock on a name nobody else sees.
        try:
            same = os.path.samestat(os.fstat(descriptor), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return descriptor
        os.close(descriptor)


def _holder(descriptor):
    """The process id written in the lock file, or None (not written yet, or garbage)."""
    try:
        text = os.pread(descriptor, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
