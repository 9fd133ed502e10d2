"""A flag that only works with another is refused without it, in one line naming the other.

Checked before any file is read: the paths here point nowhere.
"""

import pytest

from keras_tf.cli.errors import EXIT_USER_ERROR
from keras_tf.cli.main import main

CASES = {
    "top-k without sampling": (
        ["translate", "--model", "{tmp}/none", "--top-k", "5"],
        "keras-tf translate: error: --top-k applies to --sampling top-k only"),
    "top-k with top-p sampling": (
        ["translate", "--model", "{tmp}/none", "--sampling", "top-p", "--top-k", "5"],
        "keras-tf translate: error: --top-k applies to --sampling top-k only"),
    "top-p without sampling": (
        ["translate", "--model", "{tmp}/none", "--top-p", "0.5"],
        "keras-tf translate: error: --top-p applies to --sampling top-p only"),
    "temperature without sampling": (
        ["translate", "--model", "{tmp}/none", "--temperature", "2"],
        "keras-tf translate: error: --temperature applies to --sampling top-k or "
        "--sampling top-p only"),
    "seed without sampling": (
        ["translate", "--model", "{tmp}/none", "--seed", "3"],
        "keras-tf translate: error: --seed applies to --sampling top-k or --sampling top-p only"),
    "a seed beyond 64 bits": (
        ["translate", "--model", "{tmp}/none", "--sampling", "top-k", "--seed",
         "99999999999999999999"],
        "keras-tf translate: error: argument --seed: expected an integer <= 4294967295"),
    "an infinite temperature": (
        ["translate", "--model", "{tmp}/none", "--sampling", "top-p", "--temperature", "inf"],
        "keras-tf translate: error: --temperature inf: must be a number in (0, 100]"),
    "lora targets without a rank": (
        ["train", "--train", "{tmp}/none.tsv", "--out", "{tmp}/run", "--lora-targets", "query"],
        "keras-tf train: error: --lora-targets applies to --lora-rank only"),
    "a replay ratio without a replay corpus": (
        ["train", "--train", "{tmp}/none.tsv", "--out", "{tmp}/run", "--replay-ratio", "1"],
        "keras-tf train: error: --replay-ratio applies to --replay-corpus or --replay-source only"),
    "keep without a general valid set": (
        ["train", "--train", "{tmp}/none.tsv", "--out", "{tmp}/run", "--keep", "0.8"],
        "keras-tf train: error: --keep applies to --general-valid only"),
    "a lora rank beyond d_model": (
        ["train", "--train", "{tmp}/none.tsv", "--out", "{tmp}/run", "--preset",
         "transformer_tiny", "--lora-rank", "100000"],
        "keras-tf train: error: --lora-rank 100000: must be at most the model's d_model, 32"),
    "an infinite learning rate": (
        ["train", "--train", "{tmp}/none.tsv", "--out", "{tmp}/run", "--learning-rate", "inf"],
        "keras-tf train: error: --learning-rate inf: must be a number in (0, 1.0]"),
    "tokenize with ter alone": (
        ["evaluate", "--model", "{tmp}/none", "--test", "{tmp}/none.tsv", "--metrics", "ter",
         "--tokenize", "zh"],
        "keras-tf evaluate: error: --tokenize zh is BLEU's tokenizer; --metrics ter does not "
        "use it"),
    "a metric twice": (
        ["evaluate", "--model", "{tmp}/none", "--test", "{tmp}/none.tsv", "--metrics",
         "bleu,bleu,TER"],
        "keras-tf evaluate: error: argument --metrics: bleu named more than once"),
    "export length penalty nan": (
        ["export", "--model", "{tmp}/none", "--out", "{tmp}/e/1", "--length-penalty", "nan"],
        "keras-tf export: error: --length-penalty nan: must be a number in [-10, 10]"),
    "ctranslate2 length penalty inf": (
        ["export", "--model", "{tmp}/none", "--out", "{tmp}/ct2", "--format", "ctranslate2",
         "--length-penalty", "inf"],
        "keras-tf export: error: --length-penalty inf: must be a number in [-10, 10]"),
}


@pytest.mark.parametrize("argv, message", CASES.values(), ids=CASES.keys())
def test_refused_in_one_line(argv, message, tmp_path, capsys):
    status = main([arg.format(tmp=tmp_path) for arg in argv])
    out, err = capsys.readouterr()
    assert status == EXIT_USER_ERROR and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(message), err
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("argv", [
    ["evaluate", "--model", "{tmp}/none", "--test", "{tmp}/none.tsv", "--metrics", "ter,bleu",
     "--tokenize", "zh"],
    ["translate", "--model", "{tmp}/none", "--sampling", "top-k", "--top-k", "5",
     "--temperature", "0.5", "--seed", "7"],
    ["train", "--train", "{tmp}/none.tsv", "--out", "{tmp}/run", "--lora-rank", "2",
     "--lora-targets", "query"],
])
def test_with_the_flag_they_need_they_pass(argv, tmp_path, capsys):
    status = main([arg.format(tmp=tmp_path) for arg in argv])
    _, err = capsys.readouterr()
    assert status == EXIT_USER_ERROR and ("no such" in err), err  # stopped at the missing input


def test_an_opus_mt_folder_for_a_model_directory_names_import_marian(tmp_path, capsys):
    import pathlib

    marian = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "marian_tiny"
    for argv in (["train", "--train", str(tmp_path / "none.tsv"), "--out", str(tmp_path / "run"),
                  "--init-from", str(marian)],
                 ["translate", "--model", str(marian)]):
        status = main(argv)
        err = capsys.readouterr().err
        assert status == EXIT_USER_ERROR and len(err.splitlines()) == 1, err
        assert "is an OPUS-MT (Hugging Face Marian) model" in err, err
        assert f"keras-tf import-marian --model {marian} --out DIR" in err, err


def test_a_lora_rank_beyond_the_init_from_models_d_model(untrained_model_dir, tmp_path, capsys):
    status = main(["train", "--train", str(tmp_path / "none.tsv"), "--out", str(tmp_path / "run"),
                   "--init-from", untrained_model_dir, "--lora-rank", "33"])
    err = capsys.readouterr().err
    assert status == EXIT_USER_ERROR and err == (
        "keras-tf train: error: --lora-rank 33: must be at most the --init-from model's "
        "d_model, 32\n")
