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


def test_translate_samples_repeatably_and_top_k_1_is_greedy(untrained_model_dir, monkeypatch,
                                                            capsys):
    """`--sampling` for back-translation: the same seed gives the same lines."""
    text = "".join(f"{line}\n" for line in ["save file", "close the tab", "open", "run cell"])

    def translate(*options):
        monkeypatch.setattr("sys.stdin", _stdin(text.encode()))
        assert main(["translate", "--model", untrained_model_dir, *options]) == 0
        return capsys.readouterr().out.splitlines()

    sampled = translate("--sampling", "top-k", "--top-k", "8", "--temperature", "2", "--seed", "3")
    assert len(sampled) == 4
    assert translate("--sampling", "top-k", "--top-k", "8", "--temperature", "2",
                     "--seed", "3") == sampled
    # Another seed and method: 4 lines of near-uniform samples over 48 ids differ.
    assert translate("--sampling", "top-p", "--top-p", "0.95", "--temperature", "2",
                     "--seed", "4") != sampled
    assert translate("--sampling", "top-k", "--top-k", "1") == translate("--beam-size", "1")
    monkeypatch.setattr("sys.stdin", _stdin(text.encode()))
    assert main(["translate", "--model", untrained_model_dir, "--sampling", "top-p",
                 "--top-p", "1.5"]) == 2
    err = capsys.readouterr().err
    assert err == "keras-tf translate: error: --top-p 1.5: must be a number in (0, 1]\n"
