"""Script examples of the README and docs run as written, in fresh processes, with no UserWarning.

Each test runs the blocks of one document in one empty folder, in order (a
later block may read what an earlier one wrote, as a reader would run them).
"""

import ast
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def python_blocks(path):
    """The ```python blocks of a Markdown file, in order."""
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


# What TensorFlow's C++ code writes to stderr: absl's log lines (INFO,
# WARNING, ERROR, FATAL), the banner before absl is initialised, and the
# CPU-feature note's second line.
TENSORFLOW_LOG_LINE = re.compile(
    r"^([IWEF]\d{4} \d\d:\d\d:\d+\.\d+ |WARNING: All log messages before absl::|"
    r"To enable the following instructions: )"
)


def imports_tensorflow_first(block):
    """Whether the block's first import is TensorFlow's own (its start-up lines are then TensorFlow's)."""
    first = re.search(r"^(?:import|from) (\w+)", block, flags=re.M)
    return bool(first) and first.group(1).startswith("tensorflow")


def asks_for_quiet(block):
    """Whether the block calls `keras_tf.quiet_tensorflow()` (before TensorFlow starts)."""
    return "keras_tf.quiet_tensorflow()" in block


def run_blocks(blocks, folder, env=None):
    """Run each block in a fresh `python -W error::UserWarning` in `folder`; return stdout lines.

    As on a user's terminal: `TF_CPP_MIN_LOG_LEVEL` unset. A block that calls
    `keras_tf.quiet_tensorflow()` must write none of TensorFlow's C++ log
    lines to stderr, at start-up or later. Any other block that imports
    keras_tf before TensorFlow gets TensorFlow's start-up lines, as
    TensorFlow prints them (`import keras_tf` leaves that to the user), but
    no other TensorFlow log line. (Not `-W error`: NumPy 2 raises a
    DeprecationWarning inside Keras's TensorFlow backend, which Python's
    default filters hide from users.)
    """
    from keras_tf.tensorflow_import import is_start_up_line

    # As a user runs it: without the suite's log level, and without its XLA
    # compilation cache (whose entries, written by other processes of the
    # run, make XLA log errors a user would never see).
    env = {**{key: value for key, value in os.environ.items()
              if key not in ("TF_CPP_MIN_LOG_LEVEL", "TF_XLA_FLAGS")},
           **(env or {})}
    env["PYTHONPATH"] = str(ROOT)
    outputs = []
    for block in blocks:
        result = subprocess.run(
            [sys.executable, "-W", "error::UserWarning", "-c", block],
            cwd=folder, capture_output=True, text=True, errors="replace", env=env, timeout=900,
        )
        assert result.returncode == 0, f"{block}\n---\n{result.stderr[-4000:]}"
        if not imports_tensorflow_first(block):
            noise = [line for line in result.stderr.splitlines() if TENSORFLOW_LOG_LINE.match(line)
                     and (asks_for_quiet(block) or not is_start_up_line(line))]
            assert noise == [], f"{block}\n---\n" + "\n".join(noise)
        outputs.append(result.stdout.strip().splitlines())
    return outputs


def one_string_list(line):
    """Whether `line` is the printed list of one string (Python quotes it either way)."""
    try:
        value = ast.literal_eval(line)
    except (ValueError, SyntaxError):
        return False
    return isinstance(value, list) and len(value) == 1 and isinstance(value[0], str)


def hub_cache_holding(tmp_path, repo_id, folder):
    """A Hugging Face Hub cache under `tmp_path` whose snapshot of `repo_id` is `folder`'s files.

    With `HF_HUB_OFFLINE=1` and `HF_HUB_CACHE` set to it, `hf://ORG/NAME`
    resolves to that snapshot, as after a download: the Hub form, run on a
    local fixture.
    """
    import shutil

    cache = tmp_path / "hub-cache"
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    revision = "0" * 40
    shutil.copytree(folder, repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}


def test_readme_script_example(tmp_path):
    blocks = python_blocks(ROOT / "README.md")
    assert len(blocks) == 2, "the README has a script and an OPUS-MT example; these tests run them"
    assert asks_for_quiet(blocks[0])  # the first example a user runs shows the quiet helper
    (lines,) = run_blocks(blocks[:1], tmp_path)
    # generate: a list of one string; score: one negative log-probability; export: the folder.
    assert one_string_list(lines[-3]), lines[-3:]
    assert re.fullmatch(r"\[-\d+\.\d+\]", lines[-2]), lines[-2:]
    assert lines[-1].endswith(os.path.join("models", "translator", "1")), lines[-1]
    assert (tmp_path / "my_translator" / "model.keras").is_file()
    assert (tmp_path / "models" / "translator" / "1" / "saved_model.pb").is_file()


def test_readme_opus_mt_example_runs_on_the_marian_fixture_through_the_hub_form(tmp_path):
    # The tiny fixture stands in for Helsinki-NLP/opus-mt-en-de in the Hub's cache.
    blocks = python_blocks(ROOT / "README.md")
    assert 'from_preset("hf://Helsinki-NLP/opus-mt-en-de")' in blocks[1]
    env = hub_cache_holding(tmp_path, "Helsinki-NLP/opus-mt-en-de",
                            ROOT / "tests" / "fixtures" / "marian_tiny")
    (lines,) = run_blocks(blocks[1:], tmp_path, env=env)
    assert one_string_list(lines[-1]), lines


def test_user_guide_script_and_reload_examples(tmp_path):
    blocks = python_blocks(ROOT / "docs" / "user-guide.md")
    assert len(blocks) == 3
    script, train, reload = run_blocks(blocks, tmp_path)
    assert one_string_list(script[-3]) and one_string_list(script[-2]), script[-3:]
    assert script[-1].endswith(os.path.join("models", "translator", "1"))
    assert (tmp_path / "run1" / "decoding.json").is_file()
    # train_preset_dir with TrainingOptions: options.json holds them; a translator comes back.
    assert train[0] == "True 1" and one_string_list(train[1]), train
    assert reload == [], reload  # the reload block prints nothing; it must run


@pytest.mark.parametrize("document", ["decoding.md"])
def test_self_contained_doc_examples(tmp_path, document):
    blocks = python_blocks(ROOT / "docs" / document)
    run_blocks(blocks[:1], tmp_path)


def test_pretrained_example_runs_on_the_marian_fixture(tmp_path):
    # The tiny fixture stands in for the downloaded Helsinki-NLP/opus-mt-en-de.
    import shutil

    shutil.copytree(ROOT / "tests" / "fixtures" / "marian_tiny", tmp_path / "opus-mt-en-de")
    # The fine-tuning block's corpora: the fixture's reference pairs, a few times over.
    reference = json.loads((ROOT / "tests" / "fixtures" / "marian_tiny" / "reference.json")
                           .read_text(encoding="utf-8"))
    pairs = "".join(f"{s}\t{t}\n" for s, t in zip(reference["sources"], reference["targets"]))
    for name, copies in (("domain-train", 4), ("domain-valid", 1), ("general-train", 12)):
        (tmp_path / f"{name}.tsv").write_text(pairs * copies, encoding="utf-8")
    blocks = python_blocks(ROOT / "docs" / "pretrained.md")
    assert len(blocks) == 2
    lines, tuned = run_blocks(blocks, tmp_path)
    assert lines[0] == "beam 4 power", lines
    assert one_string_list(lines[1]), lines
    assert lines[2].endswith(os.path.join("models", "en-de", "1")), lines
    assert (tmp_path / "en-de" / "model.keras").is_file()
    assert one_string_list(tuned[-1]), tuned
    options = json.loads((tmp_path / "en-de-domain" / "options.json").read_text())
    # Two replayed pairs per new pair, the default.
    assert options["replay_pairs"] == 2 * options["train_pairs"] == 8 * len(reference["sources"])


def test_which_blocks_must_keep_tensorflows_lines_off_stderr():
    # The user guide's script imports keras_tf first; its serving block is TensorFlow alone.
    blocks = python_blocks(ROOT / "docs" / "user-guide.md")
    assert [imports_tensorflow_first(block) for block in blocks] == [False, False, True]
    for line in (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1796494586.748145   16486 cudart_stub.cc:31] Could not find cuda drivers",
        "W0000 00:00:1796494586.748145   16486 local_rendezvous.cc:404] Local rendezvous is aborting",
        "E0000 00:00:1796494594.108806   16486 cuda_platform.cc:52] failed call to cuInit: INTERNAL",
        "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow",
    ):
        assert TENSORFLOW_LOG_LINE.match(line), line
    # keras_tf's own counted skips stay.
    assert not TENSORFLOW_LOG_LINE.match("155 of 2442 pairs over-long and truncated (118 by the source)")


# Every page a user reads, the new ones included: a page with a Python block
# must say here how its blocks are checked.
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")], key=str
)
RUN_IN_THIS_MODULE = {"README.md", "docs/user-guide.md", "docs/decoding.md", "docs/pretrained.md"}
RUN_ELSEWHERE = {
    "docs/backends.md": "tests/test_backends.py runs its example",
    "docs/text.md": "tests/datasets/test_bible.py runs the Bible block; the others are "
                    "fragments that continue the page's prose",
    "docs/serving.md": "fragments over a trained preset; tests/serving checks the signatures "
                       "and requests they show",
    "docs/distributed.md": "fragments of a training script on several devices",
    "docs/bulk.md": "tests/bulk/test_translate_bulk.py runs its TranslateLines block",
}


def relative(page):
    return str(page.relative_to(ROOT))


def shell_blocks(path):
    """The ```bash blocks of a Markdown file (indented ones too), in order."""
    text = path.read_text(encoding="utf-8")
    blocks = re.findall(r"^ *```bash\n(.*?)^ *```", text, flags=re.S | re.M)
    return [textwrap.dedent(block) for block in blocks]


def shell_commands(block):
    """Each command of a shell block as argv: continuations joined, comments dropped, split at | && ;."""
    joined = re.sub(r"\\\n", " ", block)
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        command = []
        redirect = False
        for word in words + ["|"]:
            if redirect:  # the file after < or >
                redirect = False
            elif word in ("<", ">", ">>", "2>"):
                redirect = True
            elif word in ("|", "&&", ";", "||"):
                if command:
                    yield command
                command = []
            else:
                command.append(word)


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_every_page_with_python_examples_has_them_checked(page):
    if not page.exists() or not python_blocks(page):
        return
    name = relative(page)
    assert name in RUN_IN_THIS_MODULE or name in RUN_ELSEWHERE, (
        f"{name} has Python examples that no test runs: run them here, or say in "
        "RUN_ELSEWHERE which test checks them"
    )


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_shell_examples_name_commands_and_options_that_exist(page):
    # keras-tf lines parse as written (the parser is the command's own); a
    # benchmark or example script exists and defines every option the line gives.
    from keras_tf.cli.main import build_parser

    if not page.exists():
        return
    parser = build_parser()
    checked = 0
    for block in shell_blocks(page):
        for argv in shell_commands(block):
            if argv[0] == "keras-tf":
                if "--help" in argv or "--version" in argv:
                    continue
                try:
                    parser.parse_args(argv[1:])
                except SystemExit:
                    raise AssertionError(f"{relative(page)}: {' '.join(argv)} does not parse") from None
                checked += 1
            elif argv[0] == "python" and len(argv) > 1 and argv[1].endswith(".py"):
                script = ROOT / argv[1]
                assert script.is_file(), f"{relative(page)}: no {argv[1]}"
                source = script.read_text(encoding="utf-8")
                for word in argv[2:]:
                    if word.startswith("--"):
                        flag = word.split("=")[0]
                        assert f'"{flag}"' in source, f"{relative(page)}: {argv[1]} has no {flag}"
                checked += 1
    if relative(page) in ("README.md", "docs/benchmarks.md", "docs/user-guide.md"):
        assert checked > 0, relative(page)
