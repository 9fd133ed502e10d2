"""`--n-best K`: K hypotheses per sentence with beam scores, the best one what beam search gives."""

import io

from keras_tf.cli.main import main


def _parse(lines):
    rows = [line.split(" ||| ") for line in lines]
    return [(int(index), text, float(score)) for index, text, score in rows]


def test_translate_and_evaluate_n_best(untrained_model_dir, corpus, capsys, monkeypatch, tmp_path):
    sources = ["red cat", "open the file", "", "two dogs", "save"]
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(s + "\n" for s in sources)))
    assert main(["translate", "--model", untrained_model_dir, "--n-best", "3",
                 "--beam-size", "3", "--batch-size", "2"]) == 0
    rows = _parse(capsys.readouterr().out.splitlines())
    assert [index for index, _, _ in rows] == [i for i in range(5) for _ in range(3)]
    for i in range(5):
        scores = [score for index, _, score in rows if index == i]
        assert scores == sorted(scores, reverse=True)
    assert [text for index, text, _ in rows if index == 2] == ["", "", ""]  # the empty line
    # The first of each is the beam search translation.
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(s + "\n" for s in sources)))
    assert main(["translate", "--model", untrained_model_dir, "--beam-size", "3"]) == 0
    best = capsys.readouterr().out.split("\n")[:-1]
    assert best == [text for index, text, _ in rows[::3]]

    output = tmp_path / "nbest.txt"
    assert main(["evaluate", "--model", untrained_model_dir, "--test", corpus["test"],
                 "--n-best", "2", "--beam-size", "2", "--output", str(output)]) == 0
    assert capsys.readouterr().out.startswith("BLEU = ")
    rows = _parse(output.read_text(encoding="utf-8").splitlines())
    assert len(rows) == 2 * 20 and rows[-1][0] == 19
    assert main(["evaluate", "--model", untrained_model_dir, "--test", corpus["test"],
                 "--n-best", "2"]) == 2
    assert "--n-best: give --output" in capsys.readouterr().err
