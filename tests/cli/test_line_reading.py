"""`keras-tf translate` reads stdin as the corpus readers read files: lines end at "\\n" only."""

import io

from keras_tf.cli.main import main


def _stdin(data):
    # A real stdin: text over a byte buffer, as Python opens file descriptor 0.
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")


def test_a_lone_cr_stays_inside_its_line(untrained_model_dir, monkeypatch, capsys):
    # A lone CR inside the first line, a CRLF ending the second.
    monkeypatch.setattr("sys.stdin", _stdin(b"save\rfile\nclose\r\n"))
    assert main(["translate", "--model", untrained_model_dir, "--beam-size", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 2, out  # N lines in, N lines out

    # Each line gives what it gives alone: nothing shifted, the CRLF stripped.
    alone = []
    for line in (b"save\rfile\n", b"close\n"):
        monkeypatch.setattr("sys.stdin", _stdin(line))
        assert main(["translate", "--model", untrained_model_dir, "--beam-size", "1"]) == 0
        alone.append(capsys.readouterr().out)
    assert out == "".join(alone)


def test_strip_line_end():
    from keras_tf.text.corpora import strip_line_end

    assert strip_line_end("a\rb\r\n") == "a\rb"
    assert strip_line_end("a\r\r\n") == "a\r"
    assert strip_line_end("a\n") == "a" and strip_line_end("a") == "a"
    assert strip_line_end("a\r") == "a\r"  # no "\n": not a line end
    assert strip_line_end(b"a\rb\r\n") == b"a\rb"


def test_closed_stdin_is_one_line(untrained_model_dir, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", None)  # what Python sets for `keras-tf translate <&-`
    assert main(["translate", "--model", untrained_model_dir]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("keras-tf translate: error: stdin is closed")
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
