"""Every command-line option declared with a number refuses NaN, inf, -1, 0 and 10**20 in one line.

The table is the parsers themselves: each option of each command whose
argparse `type` is a number is given each value, with the command's required
paths pointing nowhere. A refused value is one line, `keras-tf CMD: error:`,
naming the flag, exit status 2, before any file is read. A value with a
documented meaning (ALLOWED) passes the option checks: the command then stops
at the missing input, and its line does not blame the option.
"""

import argparse

import pytest

from keras_tf.cli.errors import EXIT_USER_ERROR
from keras_tf.cli.main import COMMANDS, build_parser, main

VALUES = ("nan", "inf", "-1", "0", "1e20", str(10**20))

# Required arguments of each command, naming paths that do not exist.
REQUIRED = {
    "train": ["--train", "{tmp}/none.tsv", "--out", "{tmp}/run"],
    "evaluate": ["--model", "{tmp}/none", "--test", "{tmp}/none.tsv"],
    "translate": ["--model", "{tmp}/none"],
    "export": ["--model", "{tmp}/none", "--out", "{tmp}/export/1"],
    "average": ["--model", "{tmp}/none", "--last", "1", "--out", "{tmp}/average"],
    "score": ["--model", "{tmp}/none", "--pairs", "{tmp}/none.tsv"],
    "attention": ["--model", "{tmp}/none", "--text", "hi", "--out", "{tmp}/a.png"],
    "plot-encoding": ["--out", "{tmp}/pe.png"],
    "demo": [],
    "import-marian": ["--model", "{tmp}/none", "--out", "{tmp}/imported"],
    "merge": ["--base", "{tmp}/none", "--tuned", "{tmp}/none2", "--out", "{tmp}/merged"],
    "translate-bulk": ["--export", "{tmp}/none", "--input", "{tmp}/none.txt",
                       "--output", "{tmp}/bulk"],
}

# Flags an option needs to be read at all (without them it is refused, whatever its value).
CONTEXT = {
    ("translate", "--top-k"): ["--sampling", "top-k"],
    ("translate", "--top-p"): ["--sampling", "top-p"],
    ("translate", "--temperature"): ["--sampling", "top-p"],
    ("translate", "--seed"): ["--sampling", "top-p"],
    ("train", "--replay-ratio"): ["--replay-corpus", "{tmp}/none.tsv"],
}

# (command, flag, value) -> the documented meaning that makes the value valid.
ALLOWED = {
    ("train", "--dropout", "0"): "no dropout (transformer_small's own default)",
    ("train", "--label-smoothing", "0"): "the plain cross-entropy",
    ("train", "--seed", "0"): "the default seed",
    ("translate", "--seed", "0"): "the default seed",
    ("export", "--length-penalty", "0"): "alpha 0: no length penalty",
    ("export", "--length-penalty", "-1"): "a negative alpha favours shorter outputs, as in "
                                          "Hugging Face's generate",
    ("attention", "--layer", "0"): "the first decoder layer",
    ("attention", "--head", "0"): "the first head",
    ("merge", "--alpha", "0"): "the base model's weights (theta_0)",
}


def numeric_options():
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    found = []
    for command, sub in subparsers.choices.items():
        for action in sub._actions:
            if action.type is None or not action.option_strings:
                continue
            try:
                numeric = isinstance(action.type("1"), (int, float))
            except (argparse.ArgumentTypeError, ValueError, TypeError):
                numeric = True  # "1" is refused: a number with a bound (e.g. >= 2)
            if numeric:
                found.append((command, action.option_strings[0]))
    return found


OPTIONS = numeric_options()


def test_the_table_covers_every_command():
    assert set(REQUIRED) == set(COMMANDS)
    assert len(OPTIONS) >= 30, OPTIONS
    assert {command for command, _ in OPTIONS} >= {"train", "translate", "export", "evaluate"}
    for command, flag, _ in ALLOWED:
        assert (command, flag) in OPTIONS


@pytest.mark.parametrize("command, flag", OPTIONS)
def test_a_bad_number_is_one_line_and_exit_2(command, flag, tmp_path, capsys):
    fill = lambda args: [arg.format(tmp=tmp_path) for arg in args]  # noqa: E731
    for value in VALUES:
        argv = [command, *fill(REQUIRED[command]), *fill(CONTEXT.get((command, flag), [])),
                flag, value]
        status = main(argv)
        out, err = capsys.readouterr()
        lines = err.splitlines()
        assert status == EXIT_USER_ERROR, (argv, err)
        assert len(lines) == 1 and lines[0].startswith(f"keras-tf {command}: error: "), (argv, err)
        assert out == "", argv
        if (command, flag, value) in ALLOWED:
            assert flag not in lines[0], (argv, lines[0])  # the missing input, not the option
        else:
            assert flag in lines[0], (argv, lines[0])
