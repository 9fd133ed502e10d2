"""The recipes of `benchmarks/finetune.py` over several seeds: means, ranges, and the default chosen.

Reads the tables that `finetune.py` prints (its stdout, one file per seed;
give the files of one pair of domains after `--pair NAME`, as many pairs as
measured) and prints, per pair, each way's mean and range over the seeds of
the new domain's BLEU and chrF, the old domain's BLEU kept (its BLEU over
the unadapted model's), the gain share (its new-domain gain over the gain of
the from-scratch-schedule run, full fine-tuning at the paper's peak) and the
train seconds. Then it applies the criterion `docs/pretrained.md` states for
the default of `--init-from` when nothing of the old domain is given:

* among the ways that need nothing but the new pairs (`NOTHING_NEEDED`),
  those that keep at least `KEEP` of the old domain's BLEU on every pair
  (mean over seeds) win, the one with the largest mean gain share first;
* if none does, the one with the largest mean over pairs and seeds of
  (kept + gain share) / 2: the balance of the two, each a share of 1.

    python benchmarks/finetune_report.py --pair bible-ui s0.out s1.out s2.out --pair lengths l0.out l1.out l2.out
"""

import argparse
import statistics

# The ways a user with nothing of the old domain can run, by the label `finetune.py` prints.
NOTHING_NEEDED = (
    "fine-tuned, defaults",
    "fine-tuned, defaults, peak 0.1x from-scratch",
    "fine-tuned, from-scratch schedule (peer)",
    "from-scratch-schedule run merged, alpha 0.25",
    "from-scratch-schedule run merged, alpha 0.5",
    "from-scratch-schedule run merged, alpha 0.75",
    "LoRA rank 8, defaults",
    "LoRA rank 8, peak 1x from-scratch",
    "LoRA rank 8, peak 3x from-scratch",
)
UNADAPTED = "Bible model, unadapted"
FULL = "fine-tuned, from-scratch schedule (peer)"
KEEP = 0.9


def read_table(path):
    """`{label: (new BLEU, new chrF, old BLEU, train s)}` of one `finetune.py` output, in order."""
    rows = {}
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not line.startswith("| ") or len(cells) != 6 or cells[0] == "way":
                continue
            try:
                rows[cells[0]] = (float(cells[1]), float(cells[2]), float(cells[3]),
                                  float(cells[5]))
            except ValueError:
                raise SystemExit(f"{path}:{number}: not a row of finetune.py's table: "
                                 f"{line.strip()!r}") from None
    if UNADAPTED not in rows:
        raise SystemExit(f"{path}: no {UNADAPTED!r} row: not an output of finetune.py")
    return rows


def shares(rows):
    """`{label: (kept, gain share)}` of one seed's rows; gain share is None without the FULL row."""
    base_new, base_old = rows[UNADAPTED][0], rows[UNADAPTED][2]
    full_gain = rows[FULL][0] - base_new if FULL in rows else None
    result = {}
    for label, (new, _, old, _) in rows.items():
        kept = old / base_old if base_old else float("nan")
        gain = (new - base_new) / full_gain if full_gain else None
        result[label] = (kept, gain)
    return result


def summarize(seeds):
    """`{label: {figure: [value per seed]}}` over the seeds' tables of one pair."""
    summary = {}
    for rows in seeds:
        seed_shares = shares(rows)
        for label, (new, chrf, old, seconds) in rows.items():
            kept, gain = seed_shares[label]
            figures = summary.setdefault(label, {})
            for name, value in (("new BLEU", new), ("new chrF", chrf), ("kept", kept),
                                ("gain share", gain), ("train s", seconds)):
                if value is not None:
                    figures.setdefault(name, []).append(value)
    return summary


def choose_default(summaries):
    """`(label, why)`: the default for `--init-from` alone by the criterion above."""
    candidates = [label for label in NOTHING_NEEDED
                  if all(label in summary and "gain share" in summary[label]
                         for summary in summaries.values())]
    if not candidates:
        raise SystemExit("no way that needs nothing of the old domain was measured on every pair")

    def mean(label, figure):
        return statistics.mean(statistics.mean(summary[label][figure])
                               for summary in summaries.values())

    keeping = [label for label in candidates
               if all(statistics.mean(summary[label]["kept"]) >= KEEP
                      for summary in summaries.values())]
    if keeping:
        best = max(keeping, key=lambda label: mean(label, "gain share"))
        return best, (f"keeps at least {KEEP:.0%} on every pair, and learns the most of those "
                      f"(gain share {mean(best, 'gain share'):.2f})")
    balance = {label: (mean(label, "kept") + mean(label, "gain share")) / 2
               for label in candidates}
    best = max(candidates, key=balance.get)
    return best, (f"no way that needs nothing keeps {KEEP:.0%} on every pair; the best balance "
                  f"(kept + gain share) / 2 = {balance[best]:.2f}, against "
                  + ", ".join(f"{label}: {balance[label]:.2f}" for label in candidates
                              if label != best))


def _cell(values, digits, percent=False):
    scale, unit = (100, " %") if percent else (1, "")
    mean = statistics.mean(values) * scale
    low, high = (f"{value * scale:.{digits}f}" for value in (min(values), max(values)))
    if low == high:
        return f"{mean:.{digits}f}{unit}"
    return f"{mean:.{digits}f}{unit} [{low}, {high}]"


def report(summaries):
    """The printed tables and the chosen default, as lines."""
    lines = []
    for pair, summary in summaries.items():
        seeds = len(summary[UNADAPTED]["new BLEU"])
        lines += [f"{pair}: mean [min, max] over {seeds} seed(s)", "",
                  "| way | new BLEU | new chrF | old BLEU kept | gain share | train s |",
                  "|---|---|---|---|---|---|"]
        for label, figures in summary.items():
            gain = figures.get("gain share")
            lines.append(
                f"| {label} | {_cell(figures['new BLEU'], 1)} | {_cell(figures['new chrF'], 1)} "
                f"| {_cell(figures['kept'], 0, percent=True)} | "
                f"{_cell(gain, 2) if gain else '-'} | {_cell(figures['train s'], 0)} |")
        lines.append("")
    label, why = choose_default(summaries)
    lines.append(f"Default for --init-from alone: {label}: {why}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", nargs="+", action="append", required=True,
                        metavar=("NAME", "OUTPUT"),
                        help="a pair's name, then the finetune.py outputs of its seeds")
    args = parser.parse_args(argv)
    summaries = {}
    for name, *paths in args.pair:
        if not paths:
            parser.error(f"--pair {name}: give the finetune.py outputs of its seeds after it")
        summaries[name] = summarize([read_table(path) for path in paths])
    print("\n".join(report(summaries)))


if __name__ == "__main__":
    main()
