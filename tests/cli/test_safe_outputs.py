"""Outputs never destroy what they did not make: evaluate --output, plot-encoding --out.

Nothing is opened for writing before the inputs are read; each file is
written under a temporary name beside it and renamed into place at the end,
so a failed run leaves an existing file byte-identical; an output that is an
input is refused.
"""

import os
import pathlib
import shutil

import pytest

from keras_tf.cli.main import main

PRECIOUS = b"my notes, not a translation\n"


def _one_error_line(err, command):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"keras-tf {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_evaluate_refuses_an_output_that_is_the_test_file(untrained_model_dir, corpus, tmp_path,
                                                          capsys):
    test = tmp_path / "test.tsv"
    shutil.copy(corpus["test"], test)
    before = test.read_bytes()
    # Through another name: the same file is refused, not only the same string.
    os.symlink(test, tmp_path / "alias.tsv")
    for output in (str(test), str(tmp_path / "alias.tsv"), str(tmp_path / "." / "test.tsv")):
        status = main(["evaluate", "--model", untrained_model_dir, "--test", str(test),
                       "--output", output, "--beam-size", "1"])
        assert status == 2
        line = _one_error_line(capsys.readouterr().err, "evaluate")
        assert f"--output: {output} is the --test file" in line, line
        assert test.read_bytes() == before


def test_a_failed_evaluate_leaves_the_output_unchanged(untrained_model_dir, tmp_path, capsys):
    output = tmp_path / "hyps.txt"
    output.write_bytes(PRECIOUS)
    bad = tmp_path / "bad.tsv"
    bad.write_text("no tab here\n", encoding="utf-8")
    for test in (str(tmp_path / "missing.tsv"), str(bad)):
        assert main(["evaluate", "--model", untrained_model_dir, "--test", test,
                     "--output", str(output), "--beam-size", "1"]) == 2
        _one_error_line(capsys.readouterr().err, "evaluate")
        assert output.read_bytes() == PRECIOUS
    assert sorted(os.listdir(tmp_path)) == ["bad.tsv", "hyps.txt"]  # no temporary file left


def test_evaluate_replaces_the_output_at_the_end(untrained_model_dir, corpus, tmp_path, capsys,
                                                 monkeypatch):
    output = tmp_path / "hyps.txt"
    output.write_bytes(PRECIOUS)
    os.chmod(output, 0o640)
    seen = []
    import keras_tf.cli.evaluate as evaluate

    real_score = evaluate.score

    def score(hypotheses, references, *settings):
        # Translations done, not yet renamed into place: the old file is still whole.
        seen.append(output.read_bytes())
        return real_score(hypotheses, references, *settings)

    monkeypatch.setattr(evaluate, "score", score)
    assert main(["evaluate", "--model", untrained_model_dir, "--test", corpus["test"],
                 "--output", str(output), "--beam-size", "1"]) == 0
    capsys.readouterr()
    assert seen == [PRECIOUS]
    assert len(output.read_text(encoding="utf-8").split("\n")) == 20 + 1
    assert os.listdir(tmp_path) == ["hyps.txt"]
    assert os.stat(output).st_mode & 0o777 == 0o640  # the replaced file's mode is kept


def test_plot_encoding_output_is_renamed_into_place(tmp_path, capsys, monkeypatch):
    out = tmp_path / "pe.png"
    out.write_bytes(PRECIOUS)
    import keras_tf.plots

    def failing(encoding, path):
        with open(path, "wb") as file:
            file.write(b"half a png")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(keras_tf.plots, "positional_encoding", failing)
    assert main(["plot-encoding", "--out", str(out), "--d-model", "8", "--length", "4"]) == 1
    capsys.readouterr()
    assert out.read_bytes() == PRECIOUS
    assert os.listdir(tmp_path) == ["pe.png"]
    monkeypatch.undo()
    assert main(["plot-encoding", "--out", str(out), "--d-model", "8", "--length", "4"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert out.read_bytes().startswith(b"\x89PNG")
    assert os.listdir(tmp_path) == ["pe.png"]


def test_links_streams_and_read_only_files(tmp_path):
    from keras_tf.cli.errors import UserError
    from keras_tf.cli.outputs import check_output, write_output

    # A symbolic link is written through: its target gets the new text, the link stays.
    target, link = tmp_path / "target.txt", tmp_path / "link.txt"
    target.write_bytes(PRECIOUS)
    os.symlink(target, link)
    check_output(str(link), "--output")
    write_output(str(link), lambda path: pathlib.Path(path).write_text("new\n"))
    assert os.path.islink(link) and target.read_text() == "new\n"
    # A device is a stream, written in place, never renamed over.
    check_output(os.devnull, "--output")
    assert write_output(os.devnull, lambda path: path) == os.devnull
    assert not os.path.isfile(os.devnull)
    # A read-only file is refused, as opening it for writing would be.
    target.chmod(0o444)
    if not os.access(target, os.W_OK):  # root may write anything
        with pytest.raises(UserError, match="Permission denied"):
            check_output(str(target), "--output")
