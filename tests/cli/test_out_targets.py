"""`--out` folders: a command refuses a non-empty one that is not its own to replace.

`train` accepts its own run with the same options (a resume), `import-marian`,
`average` and `export` only a new or empty folder; `--overwrite` replaces any
of them on purpose. A refusal is one line naming `--overwrite`, and changes no
file.
"""

import os
import pathlib
import shutil

import keras
import pytest

from keras_tf.cli.main import main
from tests.cli.conftest import TRAIN_OPTIONS
from tests.helpers import folder_snapshot as snapshot

MARIAN = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "marian_tiny"


@pytest.fixture
def user_folder(tmp_path):
    """A folder of someone's files, with names that `train` also writes."""
    folder = tmp_path / "mine"
    (folder / "logs").mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes\n", encoding="utf-8")
    (folder / "config.json").write_text('{"theme": "dark"}\n', encoding="utf-8")
    (folder / "history.csv").write_text("date,amount\n2026-12-01,3\n", encoding="utf-8")
    (folder / "logs" / "app.log").write_text("started\n", encoding="utf-8")
    return folder


def _refused(capsys, command, fragment):
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if "lines read" not in line]
    assert len(lines) == 1 and lines[0].startswith(f"keras-tf {command}: error: "), captured.err
    assert fragment in lines[0] and "--overwrite" in lines[0], lines[0]
    assert "Traceback" not in captured.err


def _train(corpus, out, *extra):
    return ["train", "--train", corpus["train"], "--out", str(out), "--epochs", "1",
            "--steps", "2", *TRAIN_OPTIONS, *extra]


def test_train_refuses_a_folder_of_other_files(corpus, user_folder, capsys):
    before = snapshot(user_folder)
    assert main(_train(corpus, user_folder)) == 2
    _refused(capsys, "train", f"--out: {user_folder} holds files that are not a keras-tf run")
    assert snapshot(user_folder) == before
    # --overwrite replaces it (as it does a run of other options: the same path).
    assert main(_train(corpus, user_folder, "--overwrite")) == 0
    capsys.readouterr()
    left = set(os.listdir(user_folder))
    assert "notes.txt" not in left and "model.keras" in left, left
    assert not (user_folder / "logs" / "app.log").exists()
    keras.models.load_model(user_folder / "model.keras", compile=False)


def test_train_refuses_a_run_of_other_options_naming_overwrite(untrained_model_dir, corpus,
                                                               tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(untrained_model_dir, run)
    (run / "options.json").write_text(
        '{"preset": "transformer_small", "tokenizer": "sentencepiece", "vocabulary_size": 8000, '
        '"max_length": null, "mixed_precision": null}', encoding="utf-8")
    before = snapshot(run)
    assert main(_train(corpus, run)) == 2
    _refused(capsys, "train", "holds a run made with other options")
    assert snapshot(run) == before


def test_train_resumes_a_run_killed_before_its_options_were_written(untrained_model_dir, corpus,
                                                                   tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(os.path.join(untrained_model_dir, "tokenizers"), run / "tokenizers")
    (run / ".partial-4242-0a1b2c3d-model.keras").write_bytes(b"half")  # what a kill left
    assert main(_train(corpus, run)) == 0
    assert "Reusing sentencepiece tokenizers" in capsys.readouterr().err


def test_a_failed_train_leaves_no_staging_folder(corpus, tmp_path, capsys, monkeypatch):
    from keras_tf.text import Seq2SeqTokenizers

    def full_disk(self, directory):
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "shared.spm"), "wb") as file:
            file.write(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Seq2SeqTokenizers, "save", full_disk)
    out = tmp_path / "run"
    out.mkdir()  # the user's empty folder: kept, and left empty
    assert main(_train(corpus, out)) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert os.listdir(out) == []


def test_a_failed_backup_leaves_no_partial_file(corpus, tmp_path, capsys, monkeypatch):
    def full_disk(self, filepath, *args, **kwargs):
        with open(filepath, "wb") as file:
            file.write(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(keras.Model, "save_weights", full_disk)
    out = tmp_path / "run"
    out.mkdir()
    assert main(_train(corpus, out)) == 1
    assert "No space left on device" in capsys.readouterr().err
    left = [name for name in snapshot(out) if ".partial" in name]
    assert not left and os.path.isdir(out / "tokenizers")


def test_import_marian_refuses_a_non_empty_folder(user_folder, tmp_path, capsys):
    before = snapshot(user_folder)
    assert main(["import-marian", "--model", str(MARIAN), "--out", str(user_folder)]) == 2
    _refused(capsys, "import-marian", f"--out: {user_folder} is not empty")
    assert snapshot(user_folder) == before
    # --overwrite replaces it whole: nothing of the old folder is left beside the model.
    assert main(["import-marian", "--model", str(MARIAN), "--out", str(user_folder),
                 "--overwrite"]) == 0
    assert capsys.readouterr().out.startswith(f"Wrote {user_folder}: ")
    assert "notes.txt" not in os.listdir(user_folder)
    assert os.path.isfile(user_folder / "model.keras")
    assert sorted(os.listdir(tmp_path)) == ["mine"]  # no staging or old folder beside it
    # An empty folder is fine.
    (tmp_path / "empty").mkdir()
    assert main(["import-marian", "--model", str(MARIAN), "--out", str(tmp_path / "empty")]) == 0
    assert os.path.isfile(tmp_path / "empty" / "model.keras")


def test_average_refuses_a_non_empty_folder(untrained_model_dir, user_folder, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(untrained_model_dir, run)
    (run / "backup").mkdir()
    model = keras.models.load_model(run / "model.keras", compile=False)
    model.save_weights(run / "backup" / "epoch-0001.weights.h5")
    before = snapshot(user_folder)
    argv = ["average", "--model", str(run), "--last", "1", "--out", str(user_folder)]
    assert main(argv) == 2
    _refused(capsys, "average", f"--out: {user_folder} is not empty")
    assert snapshot(user_folder) == before
    assert main(argv + ["--overwrite"]) == 0
    capsys.readouterr()
    assert "notes.txt" not in os.listdir(user_folder)
    assert os.path.isfile(user_folder / "model.keras")
    assert sorted(os.listdir(tmp_path)) == ["mine", "run"]
    # The model directory itself is never a target, --overwrite or not.
    assert main(["average", "--model", str(run), "--last", "1", "--out", str(run),
                 "--overwrite"]) == 2
    assert "is the --model directory" in capsys.readouterr().err


def test_export_over_a_file_is_one_line(untrained_model_dir, tmp_path, capsys):
    precious = tmp_path / "precious.txt"
    precious.write_bytes(b"mine\n")
    for out in (precious, precious / "1"):
        assert main(["export", "--model", untrained_model_dir, "--out", str(out),
                     "--beam-size", "1"]) == 2
        captured = capsys.readouterr()
        assert captured.err.startswith("keras-tf export: error: --out: ")
        assert f"{precious} is a file" in captured.err and captured.err.count("\n") == 1
        assert "Traceback" not in captured.err
    assert precious.read_bytes() == b"mine\n"


def test_export_overwrite_replaces_a_version(untrained_model_dir, tmp_path, capsys):
    version = tmp_path / "translator" / "1"
    version.mkdir(parents=True)
    (version / "notes.txt").write_text("old\n", encoding="utf-8")
    argv = ["export", "--model", untrained_model_dir, "--out", str(version), "--beam-size", "1"]
    assert main(argv) == 2
    _refused(capsys, "export", "exists, and TF Serving versions are immutable")
    assert main(argv + ["--overwrite"]) == 0
    assert capsys.readouterr().out.strip() == str(version)
    assert sorted(os.listdir(version)) == [
        "assets", "assets.extra", "fingerprint.pb", "saved_model.pb", "variables"
    ]
    assert os.listdir(tmp_path / "translator") == ["1"]
