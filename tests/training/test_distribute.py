"""`train` under MultiWorkerMirroredStrategy and MirroredStrategy, against one process.

One process trains transformer_tiny (one block each side) under
MirroredStrategy over two logical CPUs, then again without a strategy, on
the same global batches. Two worker processes on
127.0.0.1 train the same, are killed inside epoch 2 (one worker by SIGKILL,
the other stops) and restarted, and must end as the MirroredStrategy run,
which must end as the single process. Every process is killed if the test's
time runs out.
"""

import csv
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import types

import numpy as np
import pytest
import tensorflow as tf

from keras_tf.training.distribute import (
    make_strategy,
    read_tf_config,
    remove_worker_dir,
    resolve_jit_compile,
    worker_dir,
)
from tests.helpers import one_block_tiny

RUN_TIMEOUT_S = 300

WORKER = r"""
import json, os, sys, time
args = json.loads(sys.argv[1])
strategy = args["strategy"]
if strategy == "mirrored-2cpu,default":
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
if args.get("heartbeat_timeout_ms"):
    # Before the strategy, which then keeps this coordination service. A
    # private call: TensorFlow has no public way to set the timeout (10 s).
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.eager import context
    context.context().configure_coordination_service(
        service_type="standalone", service_leader="/job:worker/replica:0/task:0",
        heartbeat_timeout_in_ms=args["heartbeat_timeout_ms"],
        coordinated_jobs=[coordination_config_pb2.CoordinatedJob(name="worker", num_tasks=2)],
    )
import keras, numpy as np
from keras_tf.training import make_reverse_task
from keras_tf.training.trainer import train

class Pause(keras.callbacks.Callback):
    # On a worker to be killed: say where it is, then wait for the kill.
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
    def on_train_batch_end(self, batch, logs=None):
        if [self.epoch, batch] == args.get("pause_at"):
            open(args["marker"], "w").close()
            time.sleep(600)

# Equal lengths: each replica's half of a batch holds the same number of
# tokens, so the mean of the replicas' losses is the global batch's loss.
train_data = make_reverse_task(256, min_length=6, max_length=6)
# 72 = 2 batches and 8: the last is filled with padding rows, all of the
# second replica's share of it.
valid_data = make_reverse_task(72, min_length=6, max_length=6, seed=1)
# The mirrored process then trains without a strategy, on the first logical
# CPU: the single-process run, without starting TensorFlow a third time.
runs = [(strategy, "")] if isinstance(strategy, str) else [(strategy, ""), ("default", "single-")]
for strategy, prefix in runs:
    model, history = train(
        args["config"], train_data, valid_data, out_dir=args["out_dir"] + prefix,
        epochs=2, batch_size=32, learning_rate=3e-3, strategy=strategy,
        jit_compile=False, verbose=0, backup_every=args.get("backup_every"), callbacks=[Pause()],
    )
    np.savez(os.path.join(args["result_dir"], prefix + "weights.npz"), *model.get_weights())
    with open(os.path.join(args["result_dir"], prefix + "history.json"), "w") as f:
        json.dump(history.history, f)
    with open(os.path.join(args["result_dir"], prefix + "epochs.json"), "w") as f:
        json.dump(history.epoch, f)
if strategy == "multi-worker":
    from tensorflow.python.eager import context
    with open(os.path.join(args["result_dir"], "heartbeat_timeout_ms"), "w") as f:
        f.write(str(context.context().config.experimental.coordination_config.heartbeat_timeout_in_ms))
"""


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _start(script, root, name, strategy, tf_config=None, out_name=None, **extra):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    # The non-chief's temporary files go here, for the test to find.
    (root / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(root / "tmp")
    out_dir = root / (out_name or f"{name}_out")
    result_dir = root / f"{name}_result"
    result_dir.mkdir()
    args = {"strategy": strategy, "config": one_block_tiny().to_dict(), "out_dir": str(out_dir),
            "result_dir": str(result_dir), **extra}
    process = subprocess.Popen(
        [sys.executable, str(script), json.dumps(args)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    return process, result_dir, out_dir


def _start_pair(script, root, name, out_name, extra=({}, {})):
    """Two multi-worker processes `{name}0`, `{name}1` writing to root/out_name."""
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    return {
        f"{name}{index}": _start(
            script, root, f"{name}{index}", "multi-worker",
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}},
            out_name=out_name, **extra[index],
        )
        for index in (0, 1)
    }


def _weights(result_dir):
    weights = np.load(result_dir / "weights.npz")
    return [weights[f"arr_{i}"] for i in range(len(weights.files))]


def _history(result_dir, prefix=""):
    return json.loads((result_dir / f"{prefix}history.json").read_text())


def _finish(runs, deadline):
    for name, (process, _, _) in runs.items():
        try:
            output, _ = process.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} did not finish within {RUN_TIMEOUT_S}s")
        assert process.returncode == 0, f"{name} failed:\n{output[-3000:]}"


def test_two_workers_match_mirrored_and_one_process_and_resume_after_a_kill(tmp_path):
    # One test, so that pytest-xdist never starts these processes twice.
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    marker = tmp_path / "paused"
    runs = {}
    try:
        runs["mirrored"] = _start(script, tmp_path, "mirrored", "mirrored-2cpu,default")
        # The pair backs up every 3 steps; its worker 1 stops after 6 of
        # the 8 batches of epoch 2 (step 14 of the run; the last backup is
        # step 12's, epoch 1 step 4) and is killed.
        backup = {"backup_every": 3}
        pause = {**backup, "pause_at": [1, 5], "marker": str(marker)}
        killed = _start_pair(script, tmp_path, "killed", "killed_out", (backup, pause))
        runs.update(killed)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        victim, survivor = killed["killed1"][0], killed["killed0"][0]
        while not marker.exists():
            assert victim.poll() is None, victim.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "worker 1 never reached the pause"
            time.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        victim.stdout.close()  # its output is not read: only that it was killed
        assert victim.returncode == -signal.SIGKILL
        # Worker 0 finds its peer gone at the next collective and stops
        # (measured: about 15 s, heartbeats being what notice it).
        output, _ = survivor.communicate(timeout=120)
        assert survivor.returncode != 0, output[-3000:]
        state = json.loads((tmp_path / "killed_out" / "backup" / "state.json").read_text())
        assert (state["epoch"], state["step"]) == (1, 4)
        for name in killed:
            del runs[name]

        # The same command again on both workers. Nothing is killed now, so
        # the pair's heartbeats may wait 60 s, not 10: with the other pytest
        # worker compiling on the same 2 cores, a worker's own heartbeat once
        # went missing for 10 s and the coordination service stopped the run.
        steady = {**backup, "heartbeat_timeout_ms": 60_000}
        restarted = _start_pair(
            script, tmp_path, "restarted", "killed_out", (steady, steady)
        )
        runs.update(restarted)
        _finish(runs, time.monotonic() + RUN_TIMEOUT_S)
    finally:
        for process, _, _ in runs.values():
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stdout is not None and not process.stdout.closed:
                process.stdout.close()
    results = {name: result_dir for name, (_, result_dir, _) in runs.items()}
    for name in ("restarted0", "restarted1"):  # the strategy kept the longer timeout
        assert (results[name] / "heartbeat_timeout_ms").read_text() == "60000"

    # Killed in epoch 2 and restarted: each worker finished that epoch, from
    # step 5, with the same weights as the other...
    for name in ("restarted0", "restarted1"):
        assert json.loads((results[name] / "epochs.json").read_text()) == [1]
    for a, b in zip(_weights(results["restarted0"]), _weights(results["restarted1"])):
        np.testing.assert_array_equal(a, b)
    # ...and where the same two replicas in one process, never killed, end:
    # the same sums, up to float32 rounding.
    for a, b in zip(_weights(results["restarted0"]), _weights(results["mirrored"])):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)

    # The killed worker 1 left its temporary directory; restarted, it took
    # the same one back and removed it when it finished.
    assert [name for name in os.listdir(tmp_path / "tmp") if name.startswith("keras_tf_")] == []

    # Only the chief wrote to out_dir: one history row per epoch, not two.
    out_dir = tmp_path / "killed_out"
    assert sorted(os.listdir(out_dir)) == ["backup", "config.json", "history.csv", "logs", "model.keras"]
    assert json.loads((out_dir / "backup" / "state.json").read_text())["epoch"] == 2
    with open(out_dir / "history.csv") as file:
        rows = list(csv.DictReader(file))
    assert [row["epoch"] for row in rows] == ["0", "1"]
    # Epoch 1 from the killed pair, epoch 2 from the restarted one.
    multi_worker = {key: [float(row[key]) for row in rows] for key in rows[0] if key != "epoch"}

    # The same global batches as one process, with the same token count in
    # every replica's share: equal up to float32 rounding of the sums.
    single = _history(results["mirrored"], "single-")
    for distributed in (multi_worker, _history(results["mirrored"])):
        for key in ("masked_accuracy", "val_masked_accuracy"):
            np.testing.assert_allclose(distributed[key], single[key], atol=1e-6, err_msg=key)
        for key in ("loss", "val_loss"):
            np.testing.assert_allclose(distributed[key], single[key], rtol=1e-5, err_msg=key)


# --- strategy helpers, in this process ---


def test_make_strategy_names():
    assert make_strategy("default") is tf.distribute.get_strategy()
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert make_strategy(strategy) is strategy
    with pytest.raises(ValueError, match=r"Unknown strategy 'ring'; expected one of"):
        make_strategy("ring")


def test_multi_worker_needs_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="needs the cluster in TF_CONFIG"):
        make_strategy("multi-worker")


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not valid JSON"),
        ('{"cluster": {"worker": ["a:1"]}}', "needs a 'cluster' dict and a 'task' dict"),
        (
            '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}}',
            "task must name a job in its cluster and an index into it",
        ),
    ],
)
def test_read_tf_config_rejects(monkeypatch, text, message):
    monkeypatch.setenv("TF_CONFIG", text)
    with pytest.raises(ValueError, match=message):
        read_tf_config()


def test_read_tf_config(monkeypatch):
    config = {"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    assert read_tf_config() == config


def _fake_strategy(replicas=1, chief=True, task_id=1):
    return types.SimpleNamespace(
        num_replicas_in_sync=replicas,
        extended=types.SimpleNamespace(should_checkpoint=chief),
        cluster_resolver=types.SimpleNamespace(task_type="worker", task_id=task_id),
    )


def test_jit_compile_falls_back_with_several_replicas(caplog):
    assert resolve_jit_compile(True, tf.distribute.get_strategy()) is True
    assert resolve_jit_compile(False, tf.distribute.get_strategy()) is False
    with caplog.at_level("WARNING"):
        assert resolve_jit_compile(True, _fake_strategy(replicas=2)) is False
    assert "training with jit_compile=False" in caplog.text


def test_non_chief_writes_to_a_temporary_directory(tmp_path):
    assert worker_dir(str(tmp_path), _fake_strategy(chief=True)) == str(tmp_path)
    directory = worker_dir(str(tmp_path), _fake_strategy(chief=False))
    assert directory != str(tmp_path) and os.listdir(directory) == []
    # A worker killed without cleaning up leaves its files; the same worker,
    # restarted on the same out_dir, gets the same directory back, emptied.
    (pathlib.Path(directory) / "model.keras").write_bytes(b"left by a killed worker")
    assert worker_dir(str(tmp_path), _fake_strategy(chief=False)) == directory
    assert os.listdir(directory) == []
    # Another worker, or another out_dir, gets a directory of its own.
    others = {worker_dir(str(tmp_path), _fake_strategy(chief=False, task_id=2)),
              worker_dir(str(tmp_path / "other"), _fake_strategy(chief=False))}
    assert directory not in others and len(others) == 2
    for path in (directory, *others):
        remove_worker_dir(path, str(tmp_path))
        assert not os.path.exists(path)
    remove_worker_dir(str(tmp_path), str(tmp_path))
    assert os.path.isdir(tmp_path)
