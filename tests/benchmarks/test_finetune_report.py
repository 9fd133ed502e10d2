"""benchmarks/finetune_report.py: the seeds' means, the shares, and the default it chooses."""

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "finetune_report", ROOT / "benchmarks" / "finetune_report.py")
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

HEADER = ("Bible model: ...\n| way | UI test BLEU | UI test chrF | Bible test BLEU | "
          "Bible BLEU kept | train s |\n|---|---|---|---|---|---|\n")


def _table(path, rows):
    """`rows`: (label, new BLEU, old BLEU), as finetune.py prints them (chrF: 2 x BLEU)."""
    text = HEADER + "".join(f"| {label} | {new} | {2 * new} | {old} | - | 10 |\n"
                            for label, new, old in rows)
    path.write_text(text + "UI BLEU, defaults / from scratch: 1 / 2 = 0.5x\n")
    return str(path)


def _seed(tmp_path, name, defaults, full, merged):
    return _table(tmp_path / name, [
        (report.UNADAPTED, 10.0, 40.0),
        ("fine-tuned, defaults", *defaults),
        (report.FULL, *full),
        ("from-scratch-schedule run merged, alpha 0.5", *merged),
        ("from scratch on the UI strings (peer)", 5.0, 0.0),
    ])


def test_means_ranges_and_shares_over_seeds(tmp_path):
    seeds = [report.read_table(_seed(tmp_path, "a", (20.0, 30.0), (50.0, 10.0), (30.0, 36.0))),
             report.read_table(_seed(tmp_path, "b", (30.0, 20.0), (30.0, 20.0), (20.0, 38.0)))]
    summary = report.summarize(seeds)
    defaults = summary["fine-tuned, defaults"]
    assert defaults["new BLEU"] == [20.0, 30.0] and defaults["new chrF"] == [40.0, 60.0]
    assert defaults["kept"] == [0.75, 0.5]
    # Gain over the unadapted 10, as a share of the full run's gain (40, then 20).
    assert defaults["gain share"] == [0.25, 1.0]
    assert summary[report.FULL]["gain share"] == [1.0, 1.0]
    assert report._cell(defaults["kept"], 0, percent=True) == "62 % [50, 75]"
    assert report._cell([0.5, 0.5], 2) == "0.50"


def test_the_default_is_the_keeper_that_learns_most_else_the_best_balance(tmp_path):
    # Only the merge keeps 90 % (36/40 and 38/40): it wins, though it learns least.
    keeps = {"p": report.summarize([report.read_table(
        _seed(tmp_path, "k", (20.0, 30.0), (50.0, 10.0), (30.0, 36.0)))])}
    label, why = report.choose_default(keeps)
    assert label == "from-scratch-schedule run merged, alpha 0.5" and "gain share 0.50" in why
    # Nothing keeps 90 %: the best (kept + gain share) / 2. Defaults: (0.75 + 0.25) / 2 = 0.5;
    # full: (0.25 + 1) / 2 = 0.625; merge: (0.5 + 0.5) / 2 = 0.5.
    none = {"p": report.summarize([report.read_table(
        _seed(tmp_path, "n", (20.0, 30.0), (50.0, 10.0), (30.0, 20.0)))])}
    label, why = report.choose_default(none)
    assert label == report.FULL and "= 0.62" in why
    assert report.report(none)[-1] == f"Default for --init-from alone: {label}: {why}"


def test_a_bad_row_names_its_file_and_line(tmp_path):
    path = tmp_path / "bad.out"
    path.write_text(HEADER + f"| {report.UNADAPTED} | 10.0 | x | 40.0 | 100% | 0 |\n")
    with pytest.raises(SystemExit, match=rf"{path}:4: not a row of finetune.py's table"):
        report.read_table(str(path))
    path.write_text("nothing\n")
    with pytest.raises(SystemExit, match="no 'Bible model, unadapted' row"):
        report.read_table(str(path))
