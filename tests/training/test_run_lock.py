"""`run_lock`: one training run per folder, released by the kernel when its holder dies."""

import os
import signal
import time

import pytest

from keras_tf.training.run_lock import LOCK_FILE, RunLockedError, run_lock
from tests.helpers import start_lock_holder


def test_a_second_process_is_refused_naming_the_holder(tmp_path):
    holder = start_lock_holder(tmp_path)
    try:
        with pytest.raises(RunLockedError) as caught:
            with run_lock(tmp_path):
                pass
        assert caught.value.pid == holder.pid
        assert f"--out {tmp_path}: another keras-tf train (process {holder.pid})" in \
            caught.value.as_flags()
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holder_does_not_block(tmp_path):
    holder = start_lock_holder(tmp_path)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert os.path.exists(tmp_path / LOCK_FILE)  # left behind by the kill, stale
    started = time.monotonic()
    with run_lock(tmp_path):
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    assert time.monotonic() - started < 5
    assert not os.path.exists(tmp_path / LOCK_FILE)  # a run that ends removes it


def test_the_lock_is_reentrant_in_one_process(tmp_path):
    with run_lock(tmp_path):
        with run_lock(tmp_path / "."):
            pass
        assert os.path.exists(tmp_path / LOCK_FILE)  # still held by the outer block
    assert not os.path.exists(tmp_path / LOCK_FILE)
