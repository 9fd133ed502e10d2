"""`keras-tf train --average-last N` (default 5): with `--valid`, the run ends with the
mean of its last N epochs' weights when that validates at least as well as the kept epoch."""

import json

import keras
import numpy as np
import pytest

import keras_tf.training.trainer
from keras_tf.cli.main import main
from keras_tf.training.averaging import epoch_checkpoints
from tests.cli.conftest import TRAIN_OPTIONS


def _weights_of_each_epoch(run):
    model = keras.models.load_model(run / "model.keras", compile=False)
    each = {}
    for epoch, path in epoch_checkpoints(run / "backup"):
        model.load_weights(path)
        each[epoch] = model.get_weights()
    return each


def test_the_run_ends_with_the_better_of_its_kept_epoch_and_their_mean(trained_run):
    run = trained_run[0]  # 2 epochs, --valid, the default --average-last 5
    options = json.loads((run / "options.json").read_text())
    state = json.loads((run / "backup" / "state.json").read_text())
    record = options["average"]
    assert options["average_last"] == 5 and record["epochs"] == [1, 2]
    # The kept epoch, scored again the same way, scores what it scored when it was kept.
    assert record["kept_bleu"] == pytest.approx(state["best"], abs=1e-9)
    assert record["chosen"] == (record["bleu"] >= record["kept_bleu"])

    each = _weights_of_each_epoch(run)
    assert not np.array_equal(each[1][0], each[2][0])  # the epochs differ
    if record["chosen"]:
        want = [np.mean(pair, axis=0) for pair in zip(each[1], each[2])]
    else:
        best = 1 + int(np.argmax([row["val_bleu"] for row in state["history"]]))
        want = each[best]
    got = keras.models.load_model(run / "model.keras", compile=False).get_weights()
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    # Either way model.keras keeps the run's loss: a mean read back from
    # model.keras and written uncompiled loaded without one.
    loss = keras.saving.load_model(run / "model.keras").loss
    assert type(loss).__name__ == "MaskedSparseCategoricalCrossentropy"


class _Stop(Exception):
    pass


@pytest.mark.parametrize("extra, valid, kept", [
    ([], True, 5),                                     # averaging keeps the epochs it averages
    (["--average-last", "3", "--keep-checkpoints", "4"], True, 4),
    (["--average-last", "1"], True, 1),                # no averaging
    ([], False, 1),                                    # no --valid: no averaging
])
def test_the_checkpoints_kept_are_those_averaged(corpus, tmp_path, monkeypatch, extra, valid,
                                                 kept):
    seen = []

    def capture(config, *args, keep_checkpoints, **kwargs):
        seen.append(keep_checkpoints)
        raise _Stop

    monkeypatch.setattr(keras_tf.training.trainer, "train", capture)
    argv = ["train", "--train", corpus["train"], "--out", str(tmp_path / "run"),
            *(["--valid", corpus["valid"]] if valid else []), *extra, *TRAIN_OPTIONS]
    with pytest.raises(_Stop):
        main(argv)
    assert seen == [kept]


def test_average_last_zero_is_one_line(corpus, tmp_path, capsys):
    argv = ["train", "--train", corpus["train"], "--valid", corpus["valid"],
            "--out", str(tmp_path / "run"), "--average-last", "0", *TRAIN_OPTIONS]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == ("keras-tf train: error: argument --average-last: expected an integer >= 1; "
                    "received 0")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("without_valid", [True, False])
def test_average_last_without_its_companion_is_one_line(corpus, tmp_path, capsys, trained_run,
                                                        without_valid):
    extra = [] if without_valid else ["--valid", corpus["valid"], "--init-from",
                                      str(trained_run[0])]
    argv = ["train", "--train", corpus["train"], "--out", str(tmp_path / "run"),
            "--average-last", "3", *extra, *TRAIN_OPTIONS]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == ("keras-tf train: error: --average-last applies to a run from scratch with "
                    "--valid (it picks by validation BLEU); give --valid, and leave out "
                    "--init-from")
    assert not (tmp_path / "run").exists()
