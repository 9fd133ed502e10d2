"""`keras-tf translate-bulk` on Beam's FnApiRunner: every line back in place, rejects named, counts that add up."""

import contextlib
import io
import os
import subprocess
import sys

import pytest

from keras_tf.bulk import BulkOptions, LoadedExport, TranslationModelHandler, translate_files
from keras_tf.cli.main import main
from tests.bulk.conftest import input_files
from tests.test_docs_examples import ROOT, python_blocks

BAD = {("a.txt", 4): "not UTF-8: byte 0xff", ("a.txt", 5): "overlong: more than 31"}


def translate_bulk(*argv):
    """Run the command in this process: `(exit status, stdout, stderr)`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["translate-bulk", *map(str, argv)])
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def one_worker(greedy_export, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bulk")
    lines = input_files(folder / "in")
    status, out, err = translate_bulk(
        "--export", greedy_export.export_dir, "--input", folder / "in" / "*.txt",
        "--output", folder / "out", "--batch-size", 2, "--lines-per-part", 2,
    )
    assert status == 0, err
    return folder, lines, out


def read_lines(path):
    return path.read_bytes().decode("utf-8").split("\n")[:-1]


def test_every_line_comes_back_in_place_equal_to_generate(one_worker, greedy_export):
    folder, lines, _ = one_worker
    assert sorted(os.listdir(folder / "out")) == ["a.txt", "b.txt", "c.txt", "rejects.tsv"]
    good = [(name, number, source.decode("utf-8")) for name, sources in lines.items()
            for number, source in enumerate(sources, start=1)
            if (name, number) not in BAD and source.strip()]
    expected = dict(zip([(name, number) for name, number, _ in good],
                        greedy_export.translator.generate([source for _, _, source in good])))
    assert len(expected) == 5
    for name, sources in lines.items():
        out = read_lines(folder / "out" / name)
        assert len(out) == len(sources)
        assert out == [expected.get((name, number), "") for number in range(1, len(out) + 1)]


def test_the_rejects_name_exactly_the_bad_lines_and_the_counts_add_up(one_worker):
    folder, lines, out = one_worker
    rejects = [line.split("\t") for line in read_lines(folder / "out" / "rejects.tsv")]
    assert [(os.path.basename(path), int(number)) for path, number, _ in rejects] == list(BAD)
    for (_, _, reason), expected in zip(rejects, BAD.values()):
        assert reason.startswith(expected), reason
    total = sum(len(sources) for sources in lines.values())
    assert out == (f"translate-bulk: 3 files, {total} lines in = {total - 2} translated + 2 "
                   f"rejected (rejects: {folder / 'out' / 'rejects.tsv'})\n")


def test_two_worker_processes_write_the_same_bytes(one_worker, greedy_export, tmp_path):
    folder, _, _ = one_worker
    status, _, err = translate_bulk(
        "--export", greedy_export.export_dir, "--input", folder / "in" / "*.txt",
        "--output", tmp_path, "--batch-size", 2, "--lines-per-part", 2,
        "--direct_num_workers", 2, "--direct_running_mode", "multi_processing",
    )
    assert status == 0, err
    for name in ("a.txt", "b.txt", "c.txt", "rejects.tsv"):
        assert (tmp_path / name).read_bytes() == (folder / "out" / name).read_bytes(), name


def test_pairs_hold_each_source_and_its_translation(one_worker, greedy_export, tmp_path):
    folder, lines, _ = one_worker
    status, _, err = translate_bulk(
        "--export", greedy_export.export_dir, "--input", folder / "in" / "b.txt",
        "--output", tmp_path, "--pairs", "translation-source",
    )
    assert status == 0, err
    translations = read_lines(folder / "out" / "b.txt")
    expected = [f"{t}\t{s.decode()}" if s.strip() else "\t"
                for s, t in zip(lines["b.txt"], translations)]
    assert read_lines(tmp_path / "b.txt") == expected


def test_a_non_empty_output_is_refused_and_kept(one_worker, greedy_export):
    folder, _, _ = one_worker
    before = (folder / "out" / "a.txt").read_bytes()
    status, _, err = translate_bulk(
        "--export", greedy_export.export_dir, "--input", folder / "in" / "a.txt",
        "--output", folder / "out",
    )
    assert status == 1
    assert err == (f"keras-tf translate-bulk: error: {folder / 'out' / 'a.txt'} exists and is "
                   "not empty; overwrite=True (--overwrite) replaces it\n")
    assert (folder / "out" / "a.txt").read_bytes() == before


def test_a_failed_run_leaves_no_output(one_worker, greedy_export, tmp_path):
    folder, _, _ = one_worker
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-r", greedy_export.export_dir, broken], check=True)
    for name in os.listdir(broken / "variables"):
        if name.startswith("variables.data"):
            (broken / "variables" / name).write_bytes(b"not a checkpoint")
    with pytest.raises(Exception):
        translate_files(BulkOptions(str(broken), str(folder / "in" / "*.txt"),
                                    str(tmp_path / "out")))
    assert os.listdir(tmp_path / "out") == []


def test_options_are_checked_with_their_names():
    with pytest.raises(ValueError, match=r"^lines_per_part=0: must be an integer >= 1$"):
        BulkOptions("e", "i", "o", lines_per_part=0)
    with pytest.raises(ValueError, match=r"^pairs='both': must be None or one of"):
        BulkOptions("e", "i", "o", pairs="both")


def test_the_handler_gives_the_same_lines_from_the_default_and_the_xla_export(
        greedy_export, xla_export):
    texts = ["open save file", "café crème über straße", "tab"]  # the XLA batch: 3 + 1 empty
    expected = greedy_export.translator.generate(texts)
    for exported in (greedy_export, xla_export):
        handler = TranslationModelHandler(exported.export_dir, max_batch_size=4)
        results = handler.run_inference(texts, handler.load_model())
        assert [r.example for r in results] == texts
        assert [r.inference for r in results] == [(t, None) for t in expected]


def test_a_failed_batch_is_retried_line_by_line(greedy_export):
    class FailsOnBatches(LoadedExport):
        def translate(self, texts):
            if len(texts) > 1 or texts[0] == "boom":
                raise ValueError("no batches here")
            return super().translate(texts)

    handler = TranslationModelHandler(greedy_export.export_dir)
    results = handler.run_inference(["open file", "boom"], FailsOnBatches(greedy_export.export_dir))
    assert results[0].inference == (greedy_export.translator.generate(["open file"])[0], None)
    assert results[1].inference == (
        None, "failed: ValueError: no batches here (its batch failed: ValueError)")


def test_the_docs_pipeline_block_runs_as_written(greedy_export, tmp_path, monkeypatch, capsys):
    (block,) = python_blocks(ROOT / "docs" / "bulk.md")
    (tmp_path / "models" / "translator").mkdir(parents=True)
    (tmp_path / "models" / "translator" / "1").symlink_to(greedy_export.export_dir)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/bulk.md", "exec"), {})
    printed = sorted(capsys.readouterr().out.splitlines())
    expected = greedy_export.translator.generate(["Save the notebook", "Close the tab"])
    assert printed == [f"(('doc-1', {n}), ({s!r}, {t!r}, None))" for n, s, t in
                       ((1, "Save the notebook", expected[0]), (2, "Close the tab", expected[1]))]


def test_the_command_line_imports_no_beam_until_translate_bulk_runs():
    code = ("import sys, contextlib, io\nfrom keras_tf.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: main(['translate-bulk', '--help'])\n"
            "    except SystemExit: pass\n"
            "print('apache_beam' in sys.modules, 'tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.stdout.split() == ["False", "False"], result.stderr[-2000:]


def test_without_beam_the_command_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "apache_beam", None)
    status, _, err = translate_bulk("--export", tmp_path, "--input", tmp_path, "--output", tmp_path)
    assert status == 2
    assert err == ('keras-tf translate-bulk: error: translate-bulk needs Apache Beam: '
                   'pip install "keras-tf[beam]"\n')


def test_beam_options_pass_through_in_order_and_other_commands_still_refuse_them():
    from keras_tf.cli.errors import UserError
    from keras_tf.cli.main import build_parser

    args = build_parser(["translate-bulk"]).parse_args([
        "translate-bulk", "--export", "e", "--runner", "DataflowRunner", "--input", "i",
        "--output", "o", "--temp_location=gs://b/tmp", "--pairs", "--project", "p"])
    assert (args.export, args.input, args.output, args.pairs) == ("e", "i", "o",
                                                                  "source-translation")
    assert args.unknown_options == ["--runner", "DataflowRunner", "--temp_location=gs://b/tmp",
                                    "--project", "p"]
    with pytest.raises(UserError, match="^unrecognized arguments: --runner DataflowRunner$"):
        build_parser(["translate"]).parse_args(
            ["translate", "--model", "m", "--runner", "DataflowRunner"])
