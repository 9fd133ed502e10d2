"""Kill `train` with SIGKILL and run the same command again.

Mid-epoch: the rerun resumes after the last backed-up epoch and ends with the
weights of an uninterrupted run. During a write: the kill lands halfway
through writing the best model or the backup (through the real write path,
with Keras's own saver), and the previous file stays loadable.
"""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

import keras_tf.training  # noqa: F401  (registers the loss and metric for load_model)
from keras_tf.models import Seq2SeqTransformer, get_preset
from keras_tf.training import make_reverse_task
from keras_tf.training.trainer import train

RUN_TIMEOUT_S = 240
# Two epochs of 8 batches; the subprocess and the reference share these.
TRAIN_ARGS = dict(epochs=2, batch_size=32, learning_rate=3e-3, seed=7, jit_compile=False, verbose=0)

RUN = r"""
import json, os, signal, sys, time
args = json.loads(sys.argv[1])
import keras, numpy as np
from keras_tf.training import make_reverse_task
from keras_tf.training.trainer import train

class PauseMidEpoch(keras.callbacks.Callback):
    # Tells the test where it is, then waits to be killed.
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
    def on_train_batch_end(self, batch, logs=None):
        if [self.epoch, batch] == args["pause_at"]:
            open(args["marker"], "w").close()
            time.sleep(600)

if args.get("kill_in"):
    # Keras's saver, made to die halfway through its second write.
    method = args["kill_in"]
    original = getattr(keras.Model, method)
    calls = []
    def write_then_die(self, filepath, *a, **k):
        original(self, filepath, *a, **k)
        calls.append(filepath)
        if len(calls) == 2:
            with open(filepath, "r+b") as f:
                f.truncate(os.path.getsize(filepath) // 2)
            os.kill(os.getpid(), signal.SIGKILL)
    setattr(keras.Model, method, write_then_die)

model, history = train(
    "transformer_tiny", make_reverse_task(256), out_dir=args["out_dir"],
    callbacks=[PauseMidEpoch()] if args.get("pause_at") else [], **args["train"]
)
np.savez(os.path.join(args["out_dir"], "final.npz"), *model.get_weights())
with open(os.path.join(args["out_dir"], "epochs_run.json"), "w") as f:
    json.dump(history.epoch, f)
"""


class Run:
    """The training command, run in a subprocess that is always cleaned up."""

    def __init__(self, tmp_path):
        self.script = tmp_path / "run.py"
        self.script.write_text(RUN)
        self.out_dir = tmp_path / "out"

    def start(self, **extra):
        env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
        args = {"out_dir": str(self.out_dir), "train": TRAIN_ARGS, **extra}
        return subprocess.Popen(
            [sys.executable, str(self.script), json.dumps(args)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )

    def __call__(self, **extra):
        """Run to the end; return (returncode, output)."""
        process = self.start(**extra)
        try:
            output, _ = process.communicate(timeout=RUN_TIMEOUT_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        return process.returncode, output

    def final_weights(self):
        weights = np.load(self.out_dir / "final.npz")
        return [weights[f"arr_{i}"] for i in range(len(weights.files))]

    def epochs_run(self):
        return json.loads((self.out_dir / "epochs_run.json").read_text())

    def backup_state(self):
        return json.loads((self.out_dir / "backup" / "state.json").read_text())


@pytest.fixture(scope="module")
def uninterrupted_weights(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("uninterrupted")
    model, _ = train("transformer_tiny", make_reverse_task(256), out_dir=str(out_dir), **TRAIN_ARGS)
    return model.get_weights()


def _assert_same_weights(run, reference):
    # The same batches in the same order from the same state: equal up to
    # float32 rounding (in practice bit for bit).
    for a, b in zip(run.final_weights(), reference):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_sigkill_mid_epoch_then_rerun_resumes(tmp_path, uninterrupted_weights):
    run = Run(tmp_path)
    marker = tmp_path / "paused"
    # Pause in the second epoch (index 1) after 5 of its 8 batches.
    process = run.start(pause_at=[1, 4], marker=str(marker))
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not marker.exists():
            assert process.poll() is None, process.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the run never reached the pause"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL
    assert run.backup_state()["epoch"] == 1

    returncode, output = run()
    assert returncode == 0, output[-3000:]
    assert run.epochs_run() == [1]  # started at the epoch after the backup
    rows = (run.out_dir / "history.csv").read_text().splitlines()[1:]
    assert [row.split(",")[0] for row in rows] == ["0", "1"]
    _assert_same_weights(run, uninterrupted_weights)


def test_sigkill_while_writing_the_best_model_keeps_the_previous_one(tmp_path):
    run = Run(tmp_path)
    returncode, output = run(kill_in="save")  # the second write: end of epoch 2
    assert returncode == -signal.SIGKILL, output[-3000:]
    partial = run.out_dir / ".partial-model.keras"
    with pytest.raises(Exception):
        keras.models.load_model(partial)  # the kill landed mid-write

    best = keras.models.load_model(run.out_dir / "model.keras")
    state = run.backup_state()
    assert state["epoch"] == 1
    first_epoch = Seq2SeqTransformer(get_preset("transformer_tiny"))
    first_epoch.load_weights(run.out_dir / "backup" / state["weights"])
    for a, b in zip(best.get_weights(), first_epoch.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_sigkill_while_writing_the_backup_keeps_the_previous_one(tmp_path, uninterrupted_weights):
    run = Run(tmp_path)
    returncode, output = run(kill_in="save_weights")  # the second backup: end of epoch 2
    assert returncode == -signal.SIGKILL, output[-3000:]
    partial = run.out_dir / "backup" / ".partial-epoch-0002.weights.h5"
    with pytest.raises(Exception):
        Seq2SeqTransformer(get_preset("transformer_tiny")).load_weights(partial)

    state = run.backup_state()
    assert state["epoch"] == 1
    Seq2SeqTransformer(get_preset("transformer_tiny")).load_weights(
        run.out_dir / "backup" / state["weights"]
    )

    returncode, output = run()
    assert returncode == 0, output[-3000:]
    assert run.epochs_run() == [1]
    assert sorted(os.listdir(run.out_dir / "backup")) == ["epoch-0002.weights.h5", "state.json"]
    _assert_same_weights(run, uninterrupted_weights)
