"""Two `keras-tf train` into one --out: the second stops at once, the first is unharmed."""

import contextlib
import os
import signal
import subprocess
import time

import keras

from keras_tf.cli.main import main
from keras_tf.training.run_lock import LOCK_FILE
from tests.cli.conftest import TRAIN_OPTIONS, keras_tf_command
from tests.helpers import folder_snapshot, start_lock_holder


def _argv(corpus, out):
    return ["train", "--train", corpus["train"], "--out", str(out), "--epochs", "1",
            "--steps", "8", *TRAIN_OPTIONS]


def test_train_into_a_locked_folder_stops_at_once(corpus, untrained_model_dir, tmp_path,
                                                   capsys):
    out = tmp_path / "run"
    os.mkdir(out)
    (out / "model.keras").write_bytes(b"another run's model")
    (out / "options.json").write_text("{}", encoding="utf-8")
    holder = start_lock_holder(out)
    try:
        before = folder_snapshot(out)
        assert main(_argv(corpus, out)) == 2
        err = capsys.readouterr().err
        assert err == (f"keras-tf train: error: --out {out}: another keras-tf train (process "
                       f"{holder.pid}) is training into this folder; wait for it to end, or "
                       "train into another folder\n")
        assert folder_snapshot(out) == before
    finally:
        holder.kill()
        holder.wait()


def test_two_train_processes_into_one_folder(corpus, tmp_path):
    out = tmp_path / "run"
    first = subprocess.Popen(keras_tf_command() + _argv(corpus, out),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Wait until the first holds the lock, then freeze it there: the second
        # meets the lock whatever the machine's speed.
        deadline = time.monotonic() + 300
        while not os.path.exists(out / LOCK_FILE):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGSTOP)
        started = time.monotonic()
        second = subprocess.run(keras_tf_command() + _argv(corpus, out),
                                capture_output=True, text=True, timeout=300)
        elapsed = time.monotonic() - started
        assert second.returncode == 2, second.stderr
        assert second.stderr.strip().splitlines()[-1] == (
            f"keras-tf train: error: --out {out}: another keras-tf train (process "
            f"{first.pid}) is training into this folder; wait for it to end, or train into "
            "another folder"), second.stderr
        assert elapsed < 120  # the start of Python and TensorFlow, no waiting on the first
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    keras.models.load_model(out / "model.keras", compile=False)
    assert not os.path.exists(out / LOCK_FILE)
    assert not [name for name in os.listdir(out) if name.startswith(".")]
