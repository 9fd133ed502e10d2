"""`keras-tf train` killed with SIGKILL inside epoch 2, then run again: the uninterrupted run, bit for bit.

The kill lands after a mid-epoch backup (`--backup-every`); a resume from an
epoch-end backup is `tests/training/test_trainer.py`'s rerun test.

The killed command runs under `sh`, which reports its exit status: 137
(128 + SIGKILL). The rerun, the same command, runs in process. Both are
compared with an uninterrupted run of the same command: the final backup's
weights file (model and optimizer variables, Adam's step count included),
history.csv and the TensorBoard curves.
"""

import json
import os
import random
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest
import tensorflow as tf

from keras_tf.cli.main import main
from tests.cli.conftest import RUN_EPOCHS as EPOCHS
from tests.cli.conftest import RUN_STEPS as STEPS
from tests.cli.conftest import keras_tf_command, run_argv

TIMEOUT_S = 300


def _state(out):
    try:
        with open(os.path.join(out, "backup", "state.json")) as file:
            state = json.load(file)
        return state["epoch"], state["step"]
    except (FileNotFoundError, json.JSONDecodeError):
        return 0, 0


def _h5_arrays(path):
    arrays = {}
    with h5py.File(path, "r") as file:
        file.visititems(
            lambda name, item: arrays.__setitem__(name, item[()])
            if isinstance(item, h5py.Dataset) else None
        )
    return arrays


def _curves(out):
    """`[(run, tag, step, value)]` of every scalar in out/logs, sorted."""
    points = []
    for directory, _, files in os.walk(os.path.join(out, "logs")):
        for name in files:
            for record in tf.data.TFRecordDataset(os.path.join(directory, name)):
                event = tf.compat.v1.Event.FromString(record.numpy())
                for value in event.summary.value:
                    scalar = float(tf.make_ndarray(value.tensor))
                    points.append((os.path.basename(directory), value.tag, event.step, scalar))
    return sorted(points)


@pytest.fixture(scope="module")
def uninterrupted(trained_run):
    """The shared run, never killed: the same command without --backup-every."""
    return trained_run[0]


def _kill_when(argv, log_path, ready, delay_s=0.0):
    """Run `keras-tf ARGV` under sh, SIGKILL it once `ready()` and `delay_s` later; return sh's $?."""
    pid_file, status_file = log_path.with_suffix(".pid"), log_path.with_suffix(".status")
    script = '"$@" & echo $! > "$0.pid"; wait $!; echo $? > "$0.status"'
    # Its own XLA cache files (tests/conftest.py): a kill in the middle of
    # writing one must not leave a half-written file for the rerun to read.
    flags = os.environ.get("TF_XLA_FLAGS", "").replace(
        "--tf_xla_persistent_cache_prefix=", "--tf_xla_persistent_cache_prefix=killed-"
    )
    with open(log_path, "wb") as log:
        shell = subprocess.Popen(
            ["sh", "-c", script, str(log_path.with_suffix("")), *keras_tf_command(), *argv],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, TF_XLA_FLAGS=flags),
        )
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while not (pid_file.exists() and ready()):
                assert shell.poll() is None, (
                    "train exited before the kill:\n" + log_path.read_text(errors="replace")[-3000:]
                )
                assert time.monotonic() < deadline, f"not ready after {TIMEOUT_S} s"
                time.sleep(0.01)
            time.sleep(delay_s)
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
            shell.wait(timeout=60)
        finally:
            if shell.poll() is None:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
                shell.kill()
                shell.wait()
    return int(status_file.read_text())


def _assert_same_run(out, uninterrupted):
    final = f"backup/epoch-{EPOCHS:04d}.weights.h5"
    resumed, reference = _h5_arrays(out / final), _h5_arrays(uninterrupted / final)
    assert sorted(resumed) == sorted(reference)
    for name in reference:
        np.testing.assert_array_equal(resumed[name], reference[name], err_msg=name)
    assert (out / "history.csv").read_text() == (uninterrupted / "history.csv").read_text()
    curves = _curves(out)
    assert curves == _curves(uninterrupted)
    # One point per epoch and curve: nothing duplicated, nothing missing.
    assert [step for run, tag, step, _ in curves if (run, tag) == ("train", "epoch_loss")] == [0, 1]


def test_killed_after_a_mid_epoch_backup_trains_exactly_the_remaining_batches(
    tmp_path, corpus, capsys, uninterrupted
):
    out = tmp_path / "run"
    argv = run_argv(corpus, out, "--backup-every", "7")
    # Steps 63, 70, ... of the run are steps 3, 10, ..., 59 of epoch 2: wait for a random one.
    wanted = random.choice(range(3, STEPS, 7))
    status = _kill_when(
        argv, tmp_path / "killed.log", lambda: _state(out)[0] == 1 and _state(out)[1] >= wanted
    )
    assert status == 137
    epoch, step = _state(out)
    assert epoch == 1 and wanted <= step < STEPS and (STEPS + step) % 7 == 0, (epoch, step)

    assert main(argv) == 0
    rerun = capsys.readouterr()
    assert "Reusing sentencepiece tokenizers" in rerun.err
    backup = os.path.join(out, "backup")
    assert (
        f"Resuming from {backup} after epoch 1 and {step} steps of epoch 2: "
        f"continuing at step {step + 1}/{STEPS} of epoch 2/2"
    ) in rerun.err
    # Keras's epoch line counts the batches trained: exactly those after the backup.
    remaining = STEPS - step
    assert f"{remaining}/{remaining} - " in rerun.out and "Epoch 1/" not in rerun.out
    _assert_same_run(out, uninterrupted)
    iterations = [v for k, v in _h5_arrays(out / "backup/epoch-0002.weights.h5").items()
                  if k.endswith("optimizer/vars/0")]
    assert iterations == [EPOCHS * STEPS]
