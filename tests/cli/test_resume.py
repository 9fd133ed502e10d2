"""`keras-tf train` killed with SIGKILL after an epoch resumes from its backup when run again."""

import csv
import json
import os
import signal
import subprocess
import time

from keras_tf.cli.main import main
from tests.cli.conftest import TRAIN_OPTIONS, keras_tf_command

EPOCHS = 8


def _backed_up_epochs(state_path):
    try:
        with open(state_path) as file:
            return json.load(file)["epoch"]
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def test_killed_train_resumes_from_backup(tmp_path, corpus, capsys):
    out = str(tmp_path / "run")
    argv = ["train", "--train", corpus["train"], "--valid", corpus["valid"], "--out", out,
            "--epochs", str(EPOCHS), "--steps", "40", *TRAIN_OPTIONS]
    state_path = os.path.join(out, "backup", "state.json")
    log_path = tmp_path / "first_run.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(keras_tf_command() + argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while _backed_up_epochs(state_path) < 1:
                assert process.poll() is None, (
                    f"train exited ({process.returncode}) before its first backup:\n"
                    + log_path.read_text(errors="replace")[-3000:]
                )
                assert time.monotonic() < deadline, "no backup after 300 s"
                time.sleep(0.02)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == -signal.SIGKILL
    done = _backed_up_epochs(state_path)
    assert 1 <= done < EPOCHS, f"the run finished {done} epochs before the kill landed"

    # The same command again, in process.
    assert main(argv) == 0
    rerun = capsys.readouterr()
    assert f"Resuming from {os.path.join(out, 'backup')} after epoch {done}" in rerun.err
    assert "Reusing sentencepiece tokenizers" in rerun.err
    # Keras counts epochs from 1: the rerun starts after the backed-up ones.
    assert f"Epoch {done + 1}/{EPOCHS}" in rerun.out
    assert "Epoch 1/" not in rerun.out
    assert _backed_up_epochs(state_path) == EPOCHS
    with open(os.path.join(out, "history.csv"), newline="") as file:
        epochs = [int(row["epoch"]) for row in csv.DictReader(file)]
    # No epoch trained twice. (A kill between the backup's commit and the
    # CSV row of the same epoch may leave that one row out.)
    assert len(epochs) == len(set(epochs))
    assert epochs[-(EPOCHS - done):] == list(range(done, EPOCHS))
