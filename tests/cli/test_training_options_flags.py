"""`keras-tf train` builds one `TrainingOptions` from its flags; options.json and the trainer get it."""

import json

import pytest

import keras_tf.training.trainer
from keras_tf.cli.main import main
from keras_tf.training import TrainingOptions
from tests.cli.conftest import TRAIN_OPTIONS


class _Stop(Exception):
    pass


def test_the_flags_are_the_options_json_and_the_trainers_arguments(corpus, tmp_path, monkeypatch):
    seen = []

    def capture(config, *args, out_dir, **kwargs):
        with open(f"{out_dir}/options.json") as file:
            seen.append((json.load(file), kwargs))
        raise _Stop

    monkeypatch.setattr(keras_tf.training.trainer, "train", capture)
    argv = ["train", "--train", corpus["train"], "--out", str(tmp_path / "run"), "--epochs", "3",
            "--steps", "5", "--label-smoothing", "0.2", "--learning-rate", "0.002",
            "--seed", "7", "--keep-best", "loss", "--early-stopping", "2",
            "--lora-rank", "2", "--lora-targets", "query,key", "--keep-checkpoints", "2",
            "--max-minutes", "1.5", *TRAIN_OPTIONS]
    with pytest.raises(_Stop):
        main(argv)
    ((stored, kwargs),) = seen
    assert stored.pop("train_pairs") == 192 and stored.pop("valid_pairs") == 0
    assert TrainingOptions.from_dict(stored) == TrainingOptions(
        preset="transformer_tiny", batch_size=16, vocabulary_size=48, max_length=16,
        warmup_steps=40, epochs=3, steps=5, label_smoothing=0.2, learning_rate=0.002, seed=7,
        keep_best="loss", early_stopping=2, lora_rank=2, lora_targets=("query", "key"),
        keep_checkpoints=2, max_minutes=1.5,
    )
    # What the trainer runs with is what the file says.
    assert (kwargs["epochs"], kwargs["steps_per_epoch"], kwargs["label_smoothing"],
            kwargs["peak_learning_rate"], kwargs["warmup_steps"], kwargs["seed"],
            kwargs["keep_best"], kwargs["early_stopping"], kwargs["lora_rank"],
            kwargs["lora_target_layer_names"], kwargs["keep_checkpoints"],
            kwargs["max_minutes"]) == (
        3, 5, 0.2, 0.002, 40, 7, "loss", 2, 2, ("query", "key"), 2, 1.5)


def test_a_bad_label_smoothing_is_one_line_with_its_flag(corpus, tmp_path, capsys):
    argv = ["train", "--train", corpus["train"], "--out", str(tmp_path / "run"),
            "--label-smoothing", "1", *TRAIN_OPTIONS]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "keras-tf train: error: --label-smoothing 1.0: must be in [0, 1)"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "value, shown", [("0", "0.0"), ("-3", "-3.0"), ("inf", "inf"), ("1e7", "10000000.0")]
)
def test_a_bad_max_minutes_is_one_line_with_its_flag(corpus, tmp_path, capsys, value, shown):
    argv = ["train", "--train", corpus["train"], "--out", str(tmp_path / "run"),
            "--max-minutes", value, *TRAIN_OPTIONS]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"keras-tf train: error: --max-minutes {shown}: must be a number in (0, 1e+06]"
    assert not (tmp_path / "run").exists()


def test_the_closing_line_counts_only_whole_epochs_when_the_budget_cuts_one(
    corpus, tmp_path, capsys
):
    # A budget no step fits in: one step of the first epoch, which Keras still
    # validates and counts in its history.
    argv = ["train", "--train", corpus["train"], "--valid", corpus["valid"],
            "--out", str(tmp_path / "run"), "--epochs", "2", "--max-minutes", "1e-9",
            *TRAIN_OPTIONS]
    assert main(argv) == 0
    (line,) = [line for line in capsys.readouterr().err.splitlines()
               if line.startswith("Trained")]
    assert line.startswith("Trained 0 epochs and 1 step of epoch 1 in "), line
    assert line.endswith(f"model directory: {tmp_path / 'run'}"), line
