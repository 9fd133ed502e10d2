"""Kill `train` with SIGKILL and run the same call again: it ends as the uninterrupted run.

transformer_tiny (one block each side) with dropout 0.1, so the dropout seed generators' states
matter. Mid-epoch: the rerun resumes at the batch after the last backup,
trains exactly the remaining batches, and ends with the weights (bit for bit)
and the history of an uninterrupted run (the kill during a backup checks this;
`tests/cli/test_resume.py` kills `keras-tf train` mid-epoch). During a write: the kill lands
halfway through writing the best model or a backup (through the real write
path, with Keras's own saver), and the previous file stays loadable.
"""

import json
import logging
import os
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_tf.training  # noqa: F401  (registers the loss and metric for load_model)
from keras_tf.models import Seq2SeqTransformer, TransformerConfig
from keras_tf.training import make_reverse_task
from keras_tf.training.trainer import train
from tests.helpers import BatchesPerEpoch, one_block_tiny

RUN_TIMEOUT_S = 240
CONFIG = one_block_tiny(dropout=0.1).to_dict()
# Two epochs of 8 batches, a backup every 3 steps (and at epoch ends); the
# subprocess and the reference share these.
TRAIN_ARGS = dict(
    epochs=2, batch_size=32, learning_rate=3e-3, seed=7, jit_compile=False, verbose=0,
    backup_every=3,
)
STEPS_PER_EPOCH = 8

RUN = r"""
import json, logging, os, signal, sys
args = json.loads(sys.argv[1])
import keras
from keras_tf.training import make_reverse_task
from keras_tf.training.trainer import train
logging.basicConfig(level=logging.INFO, format="%(message)s")

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

train(
    args["config"], make_reverse_task(256), make_reverse_task(64, seed=1),
    out_dir=args["out_dir"], **args["train"]
)
"""


class Run:
    """The training call, run in a subprocess (to be killed) that is always cleaned up."""

    def __init__(self, tmp_path, **train_args):
        self.script = tmp_path / "run.py"
        self.script.write_text(RUN)
        self.out_dir = tmp_path / "out"
        self.train_args = {**TRAIN_ARGS, **train_args}

    def start(self, **extra):
        env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
        args = {"out_dir": str(self.out_dir), "config": CONFIG, "train": self.train_args, **extra}
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

    def backup_state(self):
        return json.loads((self.out_dir / "backup" / "state.json").read_text())

    def history_csv(self):
        return (self.out_dir / "history.csv").read_text()


def _train(out_dir, callbacks=()):
    """The training call of the subprocess, in this process; return `(model, history)`."""
    return train(
        CONFIG, make_reverse_task(256), make_reverse_task(64, seed=1), out_dir=str(out_dir),
        callbacks=callbacks, **TRAIN_ARGS,
    )


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """(weights, history.csv text) of the run never killed."""
    out_dir = tmp_path_factory.mktemp("uninterrupted")
    model, _ = _train(out_dir)
    return model.get_weights(), (out_dir / "history.csv").read_text()


def _assert_same_run(run, model, uninterrupted):
    weights, history = uninterrupted
    for a, b in zip(model.get_weights(), weights):
        np.testing.assert_array_equal(a, b)
    assert run.history_csv() == history


def test_sigkill_while_writing_the_best_model_keeps_the_previous_one(tmp_path):
    run = Run(tmp_path, backup_every=None)  # backups at epoch ends only
    returncode, output = run(kill_in="save")  # the second write: end of epoch 2
    assert returncode == -signal.SIGKILL, output[-3000:]
    partial = run.out_dir / ".partial-model.keras"
    with pytest.raises(Exception):
        keras.models.load_model(partial)  # the kill landed mid-write

    best = keras.models.load_model(run.out_dir / "model.keras")
    state = run.backup_state()
    assert (state["epoch"], state["step"]) == (1, 0)
    first_epoch = Seq2SeqTransformer(TransformerConfig.from_dict(CONFIG))
    first_epoch.load_weights(run.out_dir / "backup" / state["weights"])
    for a, b in zip(best.get_weights(), first_epoch.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_sigkill_while_writing_a_backup_resumes_from_the_previous_one(
    tmp_path, uninterrupted, caplog
):
    run = Run(tmp_path)
    returncode, output = run(kill_in="save_weights")  # the second backup: step 6
    assert returncode == -signal.SIGKILL, output[-3000:]
    partial = run.out_dir / "backup" / ".partial-epoch-0000-step-000006.weights.h5"
    with pytest.raises(Exception):
        Seq2SeqTransformer(TransformerConfig.from_dict(CONFIG)).load_weights(partial)

    state = run.backup_state()
    assert (state["epoch"], state["step"]) == (0, 3)
    # A mid-epoch backup holds what the rest of the epoch needs: the dropout
    # seed generators' states and the epoch's running metric sums.
    assert len(state["seed_states"]) > 0 and state["metric_sums"] is not None
    Seq2SeqTransformer(TransformerConfig.from_dict(CONFIG)).load_weights(
        run.out_dir / "backup" / state["weights"]
    )

    # The same call again, in this process (the kill is what needed a process of its own).
    counts = BatchesPerEpoch()
    with caplog.at_level(logging.INFO, logger="keras_tf.training.trainer"):
        model, history = _train(run.out_dir, callbacks=[counts])
    assert "after epoch 0 and 3 steps of epoch 1: continuing at step 4/8 of epoch 1/2" in caplog.text
    assert history.epoch == [0, 1]
    assert sum(counts.batches) == 2 * STEPS_PER_EPOCH - 3
    assert sorted(os.listdir(run.out_dir / "backup")) == ["epoch-0002.weights.h5", "state.json"]
    _assert_same_run(run, model, uninterrupted)


def test_a_spent_time_budget_stops_after_the_step_and_a_larger_one_goes_on_exactly(
    tmp_path, uninterrupted, caplog
):
    out_dir = tmp_path / "budget"
    # A budget no step fits in: the run stops after its first step.
    tiny = 1e-9
    counts = BatchesPerEpoch()
    with caplog.at_level(logging.INFO, logger="keras_tf.training.trainer"):
        train(CONFIG, make_reverse_task(256), make_reverse_task(64, seed=1), out_dir=str(out_dir),
              callbacks=[counts], max_minutes=tiny, **TRAIN_ARGS)
    assert counts.batches == [1]
    assert "Stopped at the time budget of 1e-09 minutes" in caplog.text
    assert "after step 1/8 of epoch 1/2" in caplog.text
    state = json.loads((out_dir / "backup" / "state.json").read_text())
    # The backup is where it stopped, with the epoch's running sums, and no
    # epoch is finished; the part epoch's validation picked the kept model.
    assert (state["epoch"], state["step"]) == (0, 1) and state["metric_sums"] is not None
    assert state["history"] == [] and not (out_dir / "history.csv").exists()
    assert state["train_seconds"] > 0 and state["best"] < float("inf")
    # The part epoch's validation, at the training time of the stop.
    stop = state["stopped_inside_epoch"]
    assert stop["train_seconds"] > state["train_seconds"] and stop["val_loss"] == state["best"]
    keras.models.load_model(out_dir / "model.keras")

    # The same budget again: spent, nothing trained, the backup unchanged.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="keras_tf.training.trainer"):
        _, history = train(CONFIG, make_reverse_task(256), make_reverse_task(64, seed=1),
                           out_dir=str(out_dir), max_minutes=tiny, **TRAIN_ARGS)
    assert history.epoch == [] and "is spent" in caplog.text
    assert json.loads((out_dir / "backup" / "state.json").read_text()) == state

    # A larger budget goes on at step 2 and ends as the run never stopped.
    counts = BatchesPerEpoch()
    model, history = train(
        CONFIG, make_reverse_task(256), make_reverse_task(64, seed=1), out_dir=str(out_dir),
        callbacks=[counts], max_minutes=60, **TRAIN_ARGS,
    )
    assert sum(counts.batches) == 2 * STEPS_PER_EPOCH - 1 and history.epoch == [0, 1]
    weights, history_csv = uninterrupted
    for a, b in zip(model.get_weights(), weights):
        np.testing.assert_array_equal(a, b)
    assert (out_dir / "history.csv").read_text() == history_csv
    final = json.loads((out_dir / "backup" / "state.json").read_text())
    assert (final["epoch"], final["step"]) == (2, 0)
    assert final["train_seconds"] > state["train_seconds"]
    # The time axis of the learning curve: each finished epoch's end, in order.
    first, second = final["epoch_train_seconds"]
    assert state["train_seconds"] < first < second <= final["train_seconds"]


def test_max_minutes_is_checked():
    with pytest.raises(ValueError, match=r"max_minutes must be a finite number > 0 or None; "
                       r"received max_minutes=0"):
        train(CONFIG, make_reverse_task(64), out_dir="unused", max_minutes=0, **TRAIN_ARGS)
