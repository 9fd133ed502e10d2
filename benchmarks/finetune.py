"""Adapting a trained translator to a new domain: the fine-tuning defaults against their peers.

A transformer_small trained on the Bible (`load_bible("fr")`, English->French,
`--bible-epochs` of `keras-tf train`'s defaults) is adapted to the JupyterLab
UI strings (`load_jupyterlab_fr`) for `--epochs` epochs in six ways, all in
one run, all through `train_preset_dir` (what `keras-tf train` runs):

* unadapted: the Bible model as it is;
* fine-tuned with the defaults (`init_from`: a short warm-up to a tenth of
  the from-scratch peak);
* fine-tuned with replay, the defaults (`replay_corpus`: two Bible
  training pairs per UI pair mixed in, and a peak of twice the
  from-scratch one): mixed fine-tuning;
* fine-tuned with the from-scratch schedule (the peer: what `--init-from`
  planned before, the paper's peak);
* LoRA (`lora_rank`, the defaults' schedule);
* trained from scratch on the JupyterLab strings alone (its own tokenizers).

Each model is scored with sacreBLEU (greedy, batch 64) on the JupyterLab
test split (BLEU, chrF) and on `--bible-test` Bible test verses (BLEU): how
much of the Bible the adaptation keeps.

    python benchmarks/finetune.py --out finetune-run          # ~40 min on 2 cores

`--ways` runs other variants (the recipe search): `replay0.5` replays half
a Bible pair per UI pair, `lora16` trains LoRA of rank 16, and `@S` after a
way sets its peak to S times the from-scratch one (`replay@1`).
"""

import argparse
import os
import sys
import time

import common  # noqa: F401  (first: quiet TensorFlow start-up)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="finetune-run", help="where the runs go")
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


def main():
    args = parse_args()
    from keras_tf.datasets import load_bible, load_jupyterlab_fr
    from keras_tf.decoding import DecodingConfig
    from keras_tf.training.bleu import corpus_metrics
    from keras_tf.training.preset_dir import train_preset_dir
    from keras_tf.models.schedules import paper_peak_learning_rate
    from keras_tf.translation.training_options import REPLAY_RATIO
    from keras_tf.translation import Seq2SeqTranslator
    from keras_tf.translation.batches import translate_in_batches

    bible, ui = load_bible("fr"), load_jupyterlab_fr()
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
        train_preset_dir(bible_dir, bible.train, bible.valid, preset="transformer_small",
                         epochs=args.bible_epochs, verbose=2)
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
            rank = int(kind[4:] or args.lora_rank)
            label = f"LoRA rank {rank}"
            options["lora_rank"] = rank
        elif kind.startswith("replay"):
            ratio = float(kind[6:] or REPLAY_RATIO)
            label = f"fine-tuned with replay, {ratio:g} Bible pair(s) per UI pair"
            options.update(replay_corpus=bible.train, replay_ratio=ratio)
        elif kind == "scratch-ui":
            label = "from scratch on the UI strings (peer)"
            options = dict(preset="transformer_small")
        else:
            raise SystemExit(f"unknown way {spec!r}")
        if scale:
            options["learning_rate"] = float(scale) * scratch_peak
            label += f", peak {scale}x from-scratch"
        elif kind not in ("defaults", "scratch-schedule", "scratch-ui"):
            label += ", defaults"
        return label, options

    # spec -> (label, scores, train seconds)
    rows = {"unadapted": ("Bible model, unadapted", scores(bible_dir), 0.0)}
    for spec in args.ways.split(","):
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
