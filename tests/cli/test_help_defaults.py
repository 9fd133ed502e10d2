"""Each `keras-tf COMMAND --help` states the defaults that the parser uses."""

import argparse
import re

import pytest

from keras_tf.cli.main import COMMANDS, build_parser

# "default: 32", "default: 4, the paper's", "default: ./keras-tf-demo",
# "default: the preset's" (worked out by the code: the parser's default is None).
STATED = re.compile(r"\bdefault: (?P<value>[^\s,;()]+)(?P<rest>,? ?\w*)")


def subparsers():
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices


def options_with_help():
    for name, command in subparsers().items():
        for action in command._actions:
            if action.help and action.help != argparse.SUPPRESS and action.dest != "help":
                yield name, action


def literal(text):
    """`text` as the number or the word it states."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def stated_default(action):
    """What the help says the default is: `(True, value)`, `(False, None)` for a worked-out one, or None."""
    match = STATED.search(action.help)
    if match:
        value, rest = match.group("value"), match.group("rest")
        if rest.startswith(", or"):  # "512, or less on a small corpus": worked out
            return False, None
        stated = literal(value)
        if isinstance(stated, (int, float)) or "/" in value or "." in value:
            return True, stated
        if action.choices and value in action.choices:
            return True, value
        return False, None  # in words: "the preset's", "average", "every 5 minutes"
    marked = action.help.find("(default)")
    if marked >= 0 and action.choices:
        # The choice named last before the "(default)" mark.
        named = max(action.choices, key=lambda choice: action.help.rfind(choice, 0, marked))
        return True, named
    if marked >= 0:
        # "transformer_tiny, transformer_small (default), ...": the word before the mark.
        return True, re.findall(r"[\w.-]+", action.help[:marked])[-1]
    return None


def test_every_command_is_checked():
    assert set(subparsers()) == set(COMMANDS)


@pytest.mark.parametrize(
    "command,action", list(options_with_help()),
    ids=lambda value: value if isinstance(value, str) else "/".join(value.option_strings),
)
def test_the_help_states_the_default_the_parser_uses(command, action):
    stated = stated_default(action)
    if stated is None:
        return  # the help states no default
    is_value, value = stated
    if not is_value:
        assert action.default is None, (command, action.help, action.default)
    elif isinstance(value, str) and ("/" in value or "." in value):
        assert str(action.default).removeprefix("./") == value.removeprefix("./"), (
            command, action.help, action.default)
    else:
        assert action.default == value, (command, action.help, action.default)


def test_the_help_states_defaults_for_most_options():
    # The parser is checked through what its help says: enough of it says something.
    stated = [stated_default(action) for _, action in options_with_help()]
    assert sum(s is not None for s in stated) >= 25, stated


def test_train_describes_the_kept_model_as_the_code_picks_it():
    description = subparsers()["train"].description
    text = " ".join(description.split())
    assert "best model on the validation loss" not in text
    assert "validation BLEU" in text


def test_a_wrong_stated_default_is_caught():
    parser = argparse.ArgumentParser()
    action = parser.add_argument("--batch-size", type=int, default=16, help="default: 32")
    assert stated_default(action) == (True, 32) and action.default != 32
    action = parser.add_argument("--preset", choices=("a", "b"), default="a", help="a, b (default)")
    assert stated_default(action) == (True, "b")
    action = parser.add_argument("--size", default="small", help="tiny, small (default) or big")
    assert stated_default(action) == (True, "small")


def test_the_preset_option_names_its_default():
    (action,) = [a for a in subparsers()["train"]._actions if a.dest == "preset"]
    assert stated_default(action) == (True, action.default) == (True, "transformer_small")
    assert "untrained" in action.help
