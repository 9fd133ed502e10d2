"""Adapting a trained translator to a new domain: the fine-tuning defaults against their peers.

A transformer_small trained on the Bible (`load_bible("fr")`, English->French,
`--bible-epochs` of `keras-tf train`'s defaults) is adapted to the JupyterLab
UI strings (`load_jupyterlab_fr`) for `--epochs` epochs in six ways, all in
one run, all through `train_preset_dir` (what `keras-tf train` runs):

* unadapted: the Bible model as it is;
* fine-tuned with the defaults (`init_from`: a short warm-up to the
  from-scratch peak; until issue #58's measurement, a tenth of it, which
  `defaults@0.1` runs);
* fine-tuned with replay, the defaults (`replay_corpus`: two Bible
  training pairs per UI pair mixed in, and a peak of twice the
  from-scratch one): mixed fine-tuning;
* fine-tuned at the from-scratch peak (`scratch-schedule`, the peer: the
  same as the defaults since issue #58, kept so the merge curve has its run);
* LoRA (`lora_rank`, the defaults' schedule);
* trained from scratch on the JupyterLab strings alone (its own tokenizers).

Each model is scored with sacreBLEU (greedy, batch 64) on the JupyterLab
test split (BLEU, chrF) and on `--bible-test` Bible test verses (BLEU): how
much of the Bible the adaptation keeps.

    python benchmarks/finetune.py --out finetune-run          # ~40 min on 2 cores

`--ways` runs other variants (the recipe search): `replay0.5` replays half
a Bible pair per UI pair, `lora16` trains LoRA of rank 16 (`lora-qv`, `lora16-qv`:
of the query and value projections alone, keras-hub's targets), and `@S` after a
way sets its peak to S times the from-scratch one (`replay@1`). The ways of
issue #58: `replay-source` (the old model's own translations of the old
domain's training sources, `--replay-source`), `general-valid` (the
from-scratch peak, then the largest merge keeping 90 % of the old model's
BLEU on 200 old-domain validation pairs, `--general-valid`), and `merge`
(the curve over α of the from-scratch-schedule run merged with the old
model, `keras-tf merge`; needs `scratch-schedule` first).

`--pair lengths` swaps the domains for a pair that shares one vocabulary:
a transformer_tiny trained to reverse sentences of 2-6 words (of 60) is
adapted to sentences of 8-12 words, which it never saw:

    python benchmarks/finetune.py --pair lengths --out lengths-run --bible-epochs 8 --epochs 2 --ways defaults,replay,replay-source,scratch-schedule,merge,general-valid,lora,scratch-ui
"""

import argparse
import os
import sys
import time

import common  # noqa: F401  (first: quiet TensorFlow start-up)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="finetune-run", help="where the runs go")
    parser.add_argument("--pair", choices=("bible-ui", "lengths"), default="bible-ui",
                        help="the old and new domains: the Bible and JupyterLab's UI strings, "
                             "or short and long sentences to reverse (one vocabulary)")
    parser.add_argument("--bible-epochs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5, help="in-domain epochs of each way")
    parser.add_argument("--bible-test", type=int, default=400, help="Bible test verses scored")
    parser.add_argument("--lora-rank", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0,
                        help="seeds each adaptation's shuffle, fresh weights and replay draw")
    parser.add_argument("--bible-dir", default=None,
                        help="a trained Bible model to reuse (default: OUT/bible, trained if "
                             "missing)")
    parser.add_argument("--ways", default="defaults,replay,scratch-schedule,lora,scratch-ui",
                        help="comma-separated ways: defaults, scratch-schedule, lora, scratch-ui, "
                             "replay; KIND@S sets the peak to S x the from-scratch one, "
                             "loraR for LoRA of rank R, replayN for N Bible pairs per UI pair")
    return parser.parse_args()


WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ri") for b in
         ("b", "d", "g", "l", "m", "n", "r", "s", "t", "z")]


def lengths_pair(low, high, pairs, seed):
    """Sentences of `low`-`high` words of `WORDS`, each with its words reversed, as splits."""
    import random
    import types

    from keras_tf.text import ParallelCorpus

    rng = random.Random(seed)

    def split(count):
        sources = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))
                   for _ in range(count)]
        return ParallelCorpus(sources, [" ".join(reversed(s.split())) for s in sources])

    return types.SimpleNamespace(train=split(pairs), valid=split(200), test=split(400))


def main():
    args = parse_args()
    from keras_tf.datasets import load_bible, load_jupyterlab_fr
    from keras_tf.decoding import DecodingConfig
    from keras_tf.training import merging
    from keras_tf.training.bleu import corpus_metrics
    from keras_tf.training.preset_dir import train_preset_dir
    from keras_tf.models.schedules import paper_peak_learning_rate
    from keras_tf.translation.training_options import REPLAY_RATIO
    from keras_tf.translation import Seq2SeqTranslator
    from keras_tf.translation.batches import translate_in_batches

    if args.pair == "lengths":
        # "bible" is the old domain, "ui" the new one, whatever the pair.
        bible, ui = lengths_pair(2, 6, 6000, seed=1), lengths_pair(8, 12, 3000, seed=2)
        preset = "transformer_tiny"
    else:
        bible, ui = load_bible("fr"), load_jupyterlab_fr()
        preset = "transformer_small"
    bible_test = bible.test.sources[: args.bible_test], bible.test.targets[: args.bible_test]
    greedy = DecodingConfig(method="greedy")

    def scores(directory):
        translator = Seq2SeqTranslator.from_preset(directory)
        row = {}
        for name, (sources, targets) in (("ui", (ui.test.sources, ui.test.targets)),
                                         ("bible", bible_test)):
            hypotheses = translate_in_batches(translator, list(sources), 64, greedy)
            (bleu, _), (chrf, _) = corpus_metrics(hypotheses, list(targets))
            row[name] = (bleu.score, chrf.score)
        return row

    os.makedirs(args.out, exist_ok=True)
    bible_dir = args.bible_dir or os.path.join(args.out, "bible")
    start = time.perf_counter()
    trained = f"{args.bible_epochs} epochs of the defaults, reused from {bible_dir}"
    if not os.path.isfile(os.path.join(bible_dir, "model.keras")) or args.bible_epochs == 0:
        train_preset_dir(bible_dir, bible.train, bible.valid, preset=preset,
                         epochs=args.bible_epochs, verbose=2,
                         **(dict(max_length=32) if args.pair == "lengths" else {}))
        trained = (f"{args.bible_epochs} epochs of the defaults in "
                   f"{time.perf_counter() - start:.0f} s")
    d_model = Seq2SeqTranslator.from_preset(bible_dir).config.d_model
    scratch_peak = paper_peak_learning_rate(d_model)

    def way(spec):
        """`(label, train_preset_dir options)` of a `--ways` entry."""
        kind, _, scale = spec.partition("@")
        options, label = dict(init_from=bible_dir), None
        if kind == "defaults":
            label = "fine-tuned, defaults"
        elif kind == "scratch-schedule":
            label = "fine-tuned, from-scratch schedule (peer)"
            options["learning_rate"] = scratch_peak
        elif kind.startswith("lora"):
            # loraR-qv: keras-hub's targets, the query and value projections alone.
            rank, qv, _ = kind[4:].partition("-qv")
            rank = int(rank or args.lora_rank)
            label = f"LoRA rank {rank}"
            options["lora_rank"] = rank
            if qv:
                options["lora_targets"] = ("query", "value")
                label += " of the query and value projections"
        elif kind == "replay-source":
            label = f"fine-tuned, replaying its own translations of {len(bible.train)} sources"
            options["replay_source"] = replay_source
        elif kind.startswith("replay"):
            ratio = float(kind[6:] or REPLAY_RATIO)
            label = f"fine-tuned with replay, {ratio:g} Bible pair(s) per UI pair"
            options.update(replay_corpus=bible.train, replay_ratio=ratio)
        elif kind == "general-valid":
            label = "fine-tuned at the from-scratch peak, merged by 200 old-domain pairs"
            options.update(learning_rate=scratch_peak, general_valid=general_valid)
        elif kind == "scratch-ui":
            label = "from scratch on the UI strings (peer)"
            options = dict(preset=preset, **(dict(max_length=32) if args.pair == "lengths"
                                             else {}))
        else:
            raise SystemExit(f"unknown way {spec!r}")
        if scale:
            options["learning_rate"] = float(scale) * scratch_peak
            label += f", peak {scale}x from-scratch"
        elif kind not in ("defaults", "scratch-schedule", "scratch-ui", "general-valid"):
            label += ", defaults"
        return label, options

    replay_source = os.path.join(args.out, "old-sources.txt")
    with open(replay_source, "w", encoding="utf-8") as file:
        file.writelines(" ".join(line.split()) + "\n" for line in bible.train.sources)
    general_valid = os.path.join(args.out, "old-valid-200.tsv")
    with open(general_valid, "w", encoding="utf-8") as file:
        file.writelines(f"{' '.join(s.split())}\t{' '.join(t.split())}\n" for s, t in
                        zip(bible.valid.sources[:200], bible.valid.targets[:200]))

    # spec -> (label, scores, train seconds)
    rows = {"unadapted": ("Bible model, unadapted", scores(bible_dir), 0.0)}
    for spec in args.ways.split(","):
        if spec == "merge":
            tuned = os.path.join(args.out, "scratch-schedule")
            for alpha in (0.25, 0.5, 0.75):
                directory = os.path.join(args.out, f"merge{alpha:g}")
                began = time.perf_counter()
                if not os.path.isdir(directory):
                    merging.merge_presets(bible_dir, tuned, alpha, directory)
                rows[f"merge{alpha:g}"] = (f"from-scratch-schedule run merged, alpha {alpha:g}",
                                           scores(directory), time.perf_counter() - began)
            continue
        label, options = way(spec)
        directory = os.path.join(args.out, spec)
        began = time.perf_counter()
        train_preset_dir(directory, ui.train, ui.valid, epochs=args.epochs, seed=args.seed,
                         verbose=2, **options)
        rows[spec] = (label, scores(directory), time.perf_counter() - began)
        print(f"{label}: {rows[spec][1:]}", file=sys.stderr, flush=True)

    kept_base = rows["unadapted"][1]["bible"][0]
    print(f"Bible model: transformer_small, {trained}; adaptation: {args.epochs} epochs of "
          f"{len(ui.train)} UI pairs; greedy, sacreBLEU; Bible BLEU on {len(bible_test[0])} "
          "test verses")
    print("| way | UI test BLEU | UI test chrF | Bible test BLEU | Bible BLEU kept | train s |")
    print("|---|---|---|---|---|---|")
    for label, row, seconds in rows.values():
        kept = row["bible"][0] / kept_base if kept_base else float("nan")
        print(f"| {label} | {row['ui'][0]:.1f} | {row['ui'][1]:.1f} | {row['bible'][0]:.1f} | "
              f"{kept:.0%} | {seconds:.0f} |")
    if not {"scratch-ui", "scratch-schedule"} <= set(rows):
        return
    scratch, peer = rows["scratch-ui"][1], rows["scratch-schedule"][1]
    for ours in ("defaults", "replay"):
        if ours in rows:
            row = rows[ours][1]
            print(f"UI BLEU, {ours} / from scratch: {row['ui'][0]:.1f} / {scratch['ui'][0]:.1f} = "
                  f"{row['ui'][0] / max(scratch['ui'][0], 1e-9):.2f}x; Bible BLEU kept, {ours} / "
                  f"from-scratch schedule: {row['bible'][0] / kept_base:.0%} / "
                  f"{peer['bible'][0] / kept_base:.0%}")


if __name__ == "__main__":
    main()
