"""`keras-tf export` options: --max-length, --length-penalty, --no-warmup, and --format ctranslate2's errors."""

import os

import pytest

from keras_tf.cli.main import main
from keras_tf.serving.export import read_export_config
from keras_tf.serving.warmup import WARMUP_DIRNAME, WARMUP_FILENAME


def test_max_length_length_penalty_and_no_warmup(untrained_model_dir, capsys, tmp_path):
    out = tmp_path / "models" / "translator" / "1"
    assert main(["export", "--model", untrained_model_dir, "--out", str(out), "--beam-size", "2",
                 "--max-length", "7", "--length-penalty", "1.5", "--no-warmup"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    config = read_export_config(out)
    assert (config["method"], config["beam_size"]) == ("beam", 2)
    assert (config["max_length"], config["length_penalty"]) == (7, 1.5)
    assert config["warmup"] is False
    assert not os.path.exists(out / WARMUP_DIRNAME)


def test_warmup_is_written_by_default(untrained_model_dir, capsys, tmp_path):
    out = tmp_path / "models" / "translator"
    assert main(["export", "--model", untrained_model_dir, "--out", str(out),
                 "--beam-size", "1"]) == 0
    assert capsys.readouterr().out.strip() == str(out / "1")
    config = read_export_config(out / "1")
    assert config["warmup"] is True and config["max_length"] == 16  # the model's
    assert os.path.getsize(out / "1" / WARMUP_DIRNAME / WARMUP_FILENAME) > 0


def test_a_max_length_beyond_the_model_is_a_one_line_error(untrained_model_dir, capsys, tmp_path):
    assert main(["export", "--model", untrained_model_dir, "--out", str(tmp_path / "m"),
                 "--beam-size", "1", "--max-length", "99"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-length: 99 is beyond the model's max_target_length=16" in err


@pytest.mark.parametrize("extra, message", [
    (["--xla"], "--xla applies to the SavedModel; CTranslate2 has no XLA"),
    ([], "exists; pass a new directory"),
])
def test_ctranslate2_option_errors_are_one_line(untrained_model_dir, capsys, tmp_path, extra,
                                                message):
    (tmp_path / "ct2").mkdir()
    (tmp_path / "ct2" / "model.bin").write_bytes(b"")  # not empty: never overwritten
    assert main(["export", "--model", untrained_model_dir, "--format", "ctranslate2",
                 "--out", str(tmp_path / "ct2"), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("keras-tf export: error: ") and message in err


def test_an_unwritable_base_folder_is_named_as_given(untrained_model_dir, tmp_path, capsys):
    # The version exists and --overwrite asks to replace it: the staging
    # folder beside it cannot be made, and the line names the user's path.
    model_dir = untrained_model_dir
    base = tmp_path / "models" / "translator"
    (base / "1").mkdir(parents=True)
    os.chmod(base, 0o500)
    try:
        if os.access(base, os.W_OK):
            pytest.skip("this user writes into read-only folders (root)")
        status = main(["export", "--model", str(model_dir), "--out", str(base / "1"),
                       "--overwrite"])
    finally:
        os.chmod(base, 0o700)
    err = capsys.readouterr().err
    assert status == 2 and f"cannot write in {base}" in err and ".overwrite-" not in err, err
