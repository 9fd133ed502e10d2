"""What the defaults learn: `keras-tf train` with its defaults against the keras-hub peer.

On the verse-aligned Bible, English->French (`keras_tf.datasets.load_bible`),
with `--corpus demo` on the demo corpus of JupyterLab UI strings
(`keras_tf.datasets.load_jupyterlab_fr`), or with `--corpus reverse` on the
reverse task written as words (`ReverseCorpus`), in one run and for the same number
of epochs:

* ours: `keras-tf train --train ... --valid ... --epochs E --out DIR`, no
  other option (each extra `--ours "ARGS"` adds a variant with those
  options), then `keras-tf evaluate --beam-size 1` on the test split;
* the peer: the keras-hub recipe that issue 13 measured, a 30-line script:
  WordPiece vocabularies per side (8,000 each), TokenAndPositionEmbedding
  plus 3 TransformerEncoder and 3 TransformerDecoder layers (d 256, 8 heads,
  d_ff 1024, dropout 0.1), Adam at a constant 5e-4, batches of 64 pairs of
  at most 64 tokens, plain cross-entropy, greedy decoding.

Prints sacreBLEU BLEU and chrF on the test split and the training time of
each, and the BLEU difference. The full run (29,867 training pairs,
3 epochs) takes hours on 2 CPU cores; `--max-pairs` trains on an evenly
spaced subset and `--test-pairs` scores fewer verses.

Ours logs validation BLEU and chrF after every epoch (`val_bleu`,
`val_chrf` in OUT/<run>/history.csv). With `--peer-every-epoch` the peer
greedy-decodes the validation split after each of its epochs too, scored the
same way (`keras_tf.training.bleu.corpus_scores`, kept in OUT/results.json),
and the script prints both per epoch, the epochs at which ours is at least
the peer in BLEU, and the first epoch at which each reaches `--reach` BLEU.

With `--peer opennmt-tf` the peer is OpenNMT-tf 2.32 instead, in its own
virtual environment (benchmarks/opennmt_venv.sh makes it), run by
benchmarks/opennmt_peer.py: its `--auto_config` recipe at our default
preset's size, SentencePiece through its tokenizer configuration, its
evaluation (BLEU, chrF) every `--onmt-eval-steps`, the average of its last
checkpoints, beam search (its default) and greedy on the test split. With
`--minutes M` both sides train for M minutes of training time: ours with
`keras-tf train --max-minutes M`, each OpenNMT-tf setting for M minutes
(benchmarks/opennmt_budget.py), one after the other. The settings: its
untouched recipe (`recipe`: 3,072-token batches accumulated to 25,000,
8,000 warm-up updates), `cpu` (2,048-token batches, no accumulation, a
4,000-update warm-up) and each `--onmt "KEY=VALUE ..."` (keys in
`opennmt_peer.KEYS`). The script prints the validation BLEU of each side
at a quarter, half, three quarters and all of the budget (ours greedy after
each epoch, OpenNMT-tf's own evaluation), then the test scores with each
side's default decoding and with greedy.

It also draws OUT/learning.png: the validation BLEU and chrF of our runs
by epoch, their test scores and the peer's (its validation curve dashed,
when measured); with --minutes, each side's validation BLEU by minutes of
training and its test BLEU at the end.

Usage: python benchmarks/learning.py [--corpus bible|demo|reverse] [--epochs 3] [--max-pairs N]
           [--peer keras-hub|opennmt-tf] [--minutes M] [--onmt "KEY=VALUE ..."]
           [--onmt-eval-steps N] [--onmt-venv DIR]
           [--test-pairs N] [--valid-pairs N] [--ours "--preset transformer_base"]
           [--peer-every-epoch] [--reach 10] [--seed 0] [--average-last N] [--out DIR]
           [--skip-peer] [--skip-ours] [--peer-checkpoint DIR] [--replot]
"""

import argparse
import contextlib
import json
import os
import shlex
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# keras-hub's layers warn that masks meet layers without mask support; the peer is as written.
warnings.filterwarnings("ignore", category=UserWarning)

import keras_tf  # noqa: E402

keras_tf.quiet_tensorflow()  # first: TensorFlow's C++ start-up lines kept off stderr
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_tf.cli.main import main as keras_tf_main  # noqa: E402
from keras_tf.datasets import load_bible, load_jupyterlab_fr  # noqa: E402
from keras_tf.text import ParallelCorpus  # noqa: E402
from keras_tf.training.bleu import corpus_scores  # noqa: E402

class ReverseCorpus:
    """The reverse task as text: the source's words in reverse order.

    `make_reverse_task`'s distribution (4 to 10 words from 60) with words
    that both tokenizers keep whole (two-letter syllables, no digits), drawn
    with one seed: 5,000 training, 300 validation and 500 test pairs.
    """

    WORDS = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"][:60]

    def __init__(self, counts=(5000, 300, 500), seed=0):
        rng = np.random.default_rng(seed)
        self.train, self.valid, self.test = (self._pairs(rng, count) for count in counts)

    def _pairs(self, rng, count):
        sources = [" ".join(rng.choice(self.WORDS, size=rng.integers(4, 11))) for _ in range(count)]
        return ParallelCorpus(sources, [" ".join(s.split()[::-1]) for s in sources])


CORPORA = {
    "bible": ("Bible en->fr", lambda: load_bible("fr")),
    "demo": ("JupyterLab UI strings en->fr", load_jupyterlab_fr),
    "reverse": ("Reverse the words", ReverseCorpus),
}
PEER = dict(vocabulary_size=8000, d_model=256, num_heads=8, d_ff=1024, layers=3,
            dropout=0.1, learning_rate=5e-4, batch_size=64, max_length=64)


def subset(corpus, count):
    """`count` evenly spaced pairs of `corpus` (all of it if `count` is None or larger)."""
    if count is None or count >= len(corpus):
        return corpus
    picked = np.linspace(0, len(corpus) - 1, count).round().astype(int)
    return ParallelCorpus([corpus.sources[i] for i in picked], [corpus.targets[i] for i in picked])


# --- ours: the command line ---


def run_ours(name, extra, paths, epochs, out, beam_sizes=(1,)):
    model_dir = os.path.join(out, name)
    argv = ["train", "--train", paths["train"], "--valid", paths["valid"], "--out", model_dir,
            "--epochs", str(epochs), *extra]
    print(f"\n== ours ({name}): keras-tf {' '.join(argv)}", flush=True)
    start = time.perf_counter()
    assert keras_tf_main(argv) == 0
    seconds = time.perf_counter() - start
    return [evaluate_ours(model_dir, paths, out, beam) for beam in beam_sizes], seconds


def average_ours(name, last, paths, out, beams=(1,)):
    """`keras-tf average --last N` of run `name` into OUT/<name>-avgN; its test hypotheses.

    One list of hypotheses for each beam size in `beams`.
    """
    model_dir = os.path.join(out, f"{name}-avg{last}")
    argv = ["average", "--model", os.path.join(out, name), "--last", str(last), "--out", model_dir]
    print(f"\n== ours ({name}, averaged): keras-tf {' '.join(argv)}", flush=True)
    assert keras_tf_main(argv) == 0
    return [evaluate_ours(model_dir, paths, out, beam) for beam in beams]


def evaluate_ours(model_dir, paths, out, beam=1):
    """`keras-tf evaluate --beam-size BEAM` of `model_dir` on the test split; the hypotheses.

    Beam 4 is `evaluate`'s default decoding (with the model's length penalty).
    """
    hypotheses = os.path.join(out, f"{os.path.basename(model_dir)}-beam{beam}.hyp")
    buffer = _Capture()
    with contextlib.redirect_stdout(buffer):
        assert keras_tf_main(["evaluate", "--model", model_dir, "--test", paths["test"],
                              "--beam-size", str(beam), "--output", hypotheses]) == 0
    with open(hypotheses, encoding="utf-8") as file:
        return [line.rstrip("\n") for line in file]


class _Capture:
    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass


# --- the keras-hub peer ---


def peer_model(source_size, target_size):
    p = PEER
    encoder_tokens = keras.Input((None,), dtype="int32", name="encoder_tokens")
    decoder_tokens = keras.Input((None,), dtype="int32", name="decoder_tokens")
    x = keras_hub.layers.TokenAndPositionEmbedding(
        source_size, p["max_length"], p["d_model"], mask_zero=True)(encoder_tokens)
    for _ in range(p["layers"]):
        x = keras_hub.layers.TransformerEncoder(p["d_ff"], p["num_heads"], dropout=p["dropout"])(x)
    y = keras_hub.layers.TokenAndPositionEmbedding(
        target_size, p["max_length"], p["d_model"], mask_zero=True)(decoder_tokens)
    for _ in range(p["layers"]):
        y = keras_hub.layers.TransformerDecoder(p["d_ff"], p["num_heads"], dropout=p["dropout"])(
            y, x)
    logits = keras.layers.Dense(target_size)(y)
    return keras.Model([encoder_tokens, decoder_tokens], logits)


class PeerText:
    """The peer's WordPiece tokenizers (one per side, fitted on `train`) and its packers."""

    def __init__(self, train):
        p = PEER
        reserved = ["[PAD]", "[UNK]", "[START]", "[END]"]

        def wordpiece(texts):
            data = tf.data.Dataset.from_tensor_slices(texts).batch(1000)
            vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
                data, p["vocabulary_size"], reserved_tokens=reserved)
            return keras_hub.tokenizers.WordPieceTokenizer(vocabulary=vocabulary, oov_token="[UNK]")

        self.source_tokenizer = wordpiece(train.sources)
        self.target_tokenizer = wordpiece(train.targets)
        self.source_packer = keras_hub.layers.StartEndPacker(p["max_length"], pad_value=0)
        self.target_packer = keras_hub.layers.StartEndPacker(
            p["max_length"] + 1, start_value=2, end_value=3, pad_value=0)

    def preprocess(self, sources, targets):
        encoder = self.source_packer(self.source_tokenizer(sources))
        target = self.target_packer(self.target_tokenizer(targets))
        return (encoder, target[:, :-1]), target[:, 1:]


def peer_translate(model, text, sources):
    """Greedy decoding, the whole prefix each step (the keras-hub tutorial's loop)."""
    max_length = PEER["max_length"]
    hypotheses = []
    for begin in range(0, len(sources), 64):
        encoder = text.source_packer(text.source_tokenizer(tf.constant(sources[begin:begin + 64])))
        batch = int(encoder.shape[0])
        tokens = np.zeros([batch, max_length], "int32")
        tokens[:, 0] = 2
        done = np.zeros([batch], bool)
        for index in range(max_length - 1):
            logits = model.predict_on_batch([encoder, tokens])
            next_ids = logits[:, index].argmax(-1)
            tokens[:, index + 1] = np.where(done, 0, next_ids)
            done |= next_ids == 3
            if done.all():
                break
        for row in tokens[:, 1:]:
            ids = [int(i) for i in row if i not in (0, 2)]
            ids = ids[: ids.index(3)] if 3 in ids else ids
            decoded = text.target_tokenizer.detokenize(tf.constant(ids, "int32")) if ids else ""
            hypotheses.append(decoded.numpy().decode() if hasattr(decoded, "numpy") else str(decoded))
    return hypotheses


class PeerValidation(keras.callbacks.Callback):
    """After each epoch, `peer_translate` the validation split; keep sacreBLEU BLEU and chrF.

    Scored as ours is (`corpus_scores`, greedy), into `self.scores`
    (`{"bleu": [...], "chrf": [...]}`, one value per epoch); the decoding
    time is kept in `self.seconds`. With `valid` None it only saves the
    peer to `checkpoint` after each epoch.
    """

    def __init__(self, text, valid, checkpoint=None):
        super().__init__()
        self.text, self.valid, self.checkpoint = text, valid, checkpoint
        self.scores = {"bleu": [], "chrf": []}
        self.seconds = 0.0
        if checkpoint and os.path.exists(os.path.join(checkpoint, "scores.json")):
            with open(os.path.join(checkpoint, "scores.json")) as file:
                saved = json.load(file)
            self.scores, self.seconds = saved["scores"], saved["seconds"]

    def on_epoch_end(self, epoch, logs=None):
        if self.valid is not None:
            start = time.perf_counter()
            hypotheses = peer_translate(self.model, self.text, self.valid.sources)
            bleu, chrf = corpus_scores(hypotheses, self.valid.targets)
            self.seconds += time.perf_counter() - start
            self.scores["bleu"].append(round(bleu.score, 2))
            self.scores["chrf"].append(round(chrf.score, 2))
            print(f"peer epoch {epoch + 1}: validation BLEU {bleu.score:.2f}, "
                  f"chrF {chrf.score:.2f}", flush=True)
        if self.checkpoint:
            save_peer(self.model, self.checkpoint, epoch + 1,
                      {"scores": self.scores, "seconds": self.seconds})


def save_peer(model, checkpoint, epochs_done, extra):
    """Write the peer (weights and Adam's state) and `extra` to `checkpoint`, then mark it done."""
    os.makedirs(checkpoint, exist_ok=True)
    model.save(os.path.join(checkpoint, "peer.keras"))
    with open(os.path.join(checkpoint, "scores.json"), "w") as file:
        json.dump(extra, file)
    with open(os.path.join(checkpoint, "epochs.json"), "w") as file:  # written last
        json.dump({"epochs": epochs_done}, file)


def run_peer(train, test, epochs, valid=None, seed=0, checkpoint=None):
    """Train the peer; greedy-decode `test`; with `valid`, score it after every epoch.

    `seed` seeds its weights, dropout and shuffle, as `--seed` does ours.
    With `checkpoint` (a folder), the peer is saved after each epoch (after
    its validation, with `valid`) and a rerun continues after the last saved
    epoch: its WordPiece vocabularies are fitted again (deterministic), its
    weights and Adam's state reloaded. The shuffle order starts again from the seed, so a
    resumed run is not bit for bit the uninterrupted one.

    Returns the test hypotheses, the training seconds (validation decoding
    included) and the `PeerValidation` callback (None without `valid`).
    """
    p = PEER
    print(f"\n== peer: keras-hub, WordPiece per side, Adam {p['learning_rate']} constant", flush=True)
    start = time.perf_counter()
    text = PeerText(train)
    dataset = (tf.data.Dataset.from_tensor_slices((train.sources, train.targets))
               .shuffle(len(train), seed=seed).batch(p["batch_size"]).map(text.preprocess)
               .prefetch(tf.data.AUTOTUNE))
    keras.utils.set_random_seed(seed)
    model = peer_model(text.source_tokenizer.vocabulary_size(),
                       text.target_tokenizer.vocabulary_size())
    model.compile(keras.optimizers.Adam(p["learning_rate"]),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
                  jit_compile=True)
    done = 0
    if checkpoint and os.path.exists(os.path.join(checkpoint, "epochs.json")):
        with open(os.path.join(checkpoint, "epochs.json")) as file:
            done = json.load(file)["epochs"]
        loss = model.loss
        model = keras.models.load_model(os.path.join(checkpoint, "peer.keras"))
        # Adam's moments and step count go on with the saved optimizer.
        model.compile(model.optimizer, loss, jit_compile=True)
        print(f"peer: continuing from {checkpoint} after epoch {done}", flush=True)
    callback = PeerValidation(text, valid, checkpoint) if valid is not None or checkpoint else None
    model.fit(dataset, epochs=epochs, initial_epoch=done, verbose=2,
              callbacks=[callback] if callback else [])
    seconds = time.perf_counter() - start
    validation = callback if valid is not None else None
    return peer_translate(model, text, test.sources), seconds, validation


# --- the OpenNMT-tf peer ---


def ours_schedule(out, name, epochs):
    """(warm-up updates, peak learning rate) of our run OUT/<name>, from its backup.

    The peak is read back from the rate its history logged at the end of
    the first epoch past the warm-up (`peak * sqrt(warmup / update)`): the
    default peak follows the run's token budget, which the backup does not
    keep.
    """
    from keras_tf.models.schedules import WarmupInverseSqrtSchedule, planned_warmup_steps

    with open(os.path.join(out, name, "backup", "state.json")) as file:
        state = json.load(file)
    per_epoch = state["steps_per_epoch"] // state.get("batches_per_update", 1)
    warmup = planned_warmup_steps(epochs * per_epoch)
    unit = WarmupInverseSqrtSchedule(1.0, warmup)  # the schedule's shape at a peak of 1
    for epoch, row in enumerate(state["history"], 1):
        if epoch * per_epoch + 1 >= warmup:  # the first epoch's end past the warm-up
            return warmup, row["learning_rate"] / float(unit(epoch * per_epoch))
    raise SystemExit(f"{out}/{name}: no epoch past the warm-up of {warmup} updates; "
                     "its peak is not in its history")


def ours_curve(out, name):
    """`[(training seconds, val BLEU, val chrF)]` at each finished epoch of our run OUT/<name>.

    And at the time budget's stop inside an epoch, when it stopped there.
    """
    with open(os.path.join(out, name, "backup", "state.json")) as file:
        state = json.load(file)
    curve = [(seconds, row.get("val_bleu"), row.get("val_chrf"))
             for seconds, row in zip(state["epoch_train_seconds"], state["history"])]
    stop = state.get("stopped_inside_epoch")  # the validation where the budget stopped
    if stop:
        curve.append((stop["train_seconds"], stop.get("val_bleu"), stop.get("val_chrf")))
    return curve


def run_opennmt(args, splits, out, ours_name):
    """Each OpenNMT-tf setting trained for `args.minutes`; `{label: (runs' outputs)}`.

    Returns `{setting: {"curve": [(seconds, bleu, chrf)], "test": {decoding: hypotheses},
    "seconds": wall seconds, "settings": {...}}}`.
    """
    import opennmt_peer
    from keras_tf.models import get_preset

    preset = get_preset("transformer_small")
    model = {"d_model": preset.d_model, "num_heads": preset.num_heads, "d_ff": preset.d_ff,
             "layers": preset.num_encoder_layers, "max_length": preset.max_target_length}
    files = opennmt_peer.write_split_files(splits, os.path.join(out, "opennmt-data"))
    vocabulary = args.onmt_vocabulary
    if vocabulary is None and os.path.exists(os.path.join(out, ours_name, "config.json")):
        with open(os.path.join(out, ours_name, "config.json")) as file:
            vocabulary = json.load(file)["source_vocabulary_size"]  # ours: shared, 4 reserved ids
    vocabulary = vocabulary or 8000
    variants = [(label, settings) for label, settings in (
        ("recipe", {}),
        ("cpu", {"batch_size": 2048, "effective_batch_size": None, "warmup_steps": 4000}))
        if label not in args.onmt_skip]
    variants += [(f"onmt-{i + 1}", opennmt_peer.parse_variant(text))
                 for i, text in enumerate(args.onmt)]
    ours = None
    results = {}
    for label, settings in variants:
        if "ours" in (settings.get("warmup_steps"), settings.get("peak")):
            if ours is None:
                ours = ours_schedule(out, ours_name, args.epochs)
            warmup, peak = ours
            if settings.get("warmup_steps") == "ours":
                settings["warmup_steps"] = warmup
            if settings.get("peak") == "ours":
                d_model = 512 if settings.get("size") == "base" else model["d_model"]
                settings["learning_rate"] = opennmt_peer.noam_scale_for_peak(
                    peak, d_model, settings.get("warmup_steps", opennmt_peer.RECIPE["warmup_steps"]))
                del settings["peak"]
        if settings.get("tokenizer") == "ours":
            settings["tokenizer"] = os.path.join(out, ours_name, "tokenizers", "shared.spm")
        shown = {**opennmt_peer.RECIPE, **settings}
        print(f"\n== OpenNMT-tf ({label}): {json.dumps(shown)}, {args.minutes:g} minutes", flush=True)
        run = opennmt_peer.OpenNmtRun(os.path.join(out, f"opennmt-{label}"), files, settings, model,
                                      vocabulary, args.onmt_eval_steps, venv=args.onmt_venv)
        start = time.perf_counter()
        evaluations = run.train(args.minutes)
        seconds = time.perf_counter() - start
        for row in evaluations:
            print(f"  step {row['step']}, {row['seconds'] / 60:.1f} min: validation BLEU "
                  f"{row.get('bleu', float('nan')):.2f}, chrF {row.get('chrf', float('nan')):.2f}")
        test_sources = files["test"][0]
        epochs = run.epochs_by_step()
        results[label] = {
            "settings": shown,
            "curve": [(row["seconds"], row.get("bleu"), row.get("chrf")) for row in evaluations],
            "steps": evaluations[-1]["step"] if evaluations else None,
            "epochs": round(epochs[-1][1], 2) if epochs else None,
            "seconds": seconds,
            "test": {"averaged, beam 4": run.translate(test_sources, "test-avg-beam"),
                     "averaged, greedy": run.translate(test_sources, "test-avg-greedy",
                                                       greedy=True),
                     "last, beam 4": run.translate(test_sources, "test-last-beam",
                                                   averaged=False),
                     **opennmt_length_penalties(run, test_sources)},
        }
        print(f"  {results[label]['epochs']} epochs of the training pairs by step "
              f"{epochs[-1][0] if epochs else '-'} (estimated from its log)")
        target = ours_epochs(out, ours_name)
        if target:
            results[label]["equal_epochs"] = opennmt_at_epochs(
                run, epochs, target, evaluations, args.onmt_eval_steps, test_sources)
    return results


def opennmt_length_penalties(run, test_sources, alphas=(0.6, 1.0)):
    """OpenNMT-tf's averaged beam 4 with GNMT length penalties in place of its default none.

    Ours' default normalizes by length; these give the peer the same chance.
    """
    return {f"averaged, beam 4, GNMT α {alpha:g}": run.translate(
        test_sources, f"test-avg-beam-lp{alpha:g}", length_penalty=alpha) for alpha in alphas}


def ours_epochs(out, name):
    """The epochs our run OUT/<name> finished, or None when it did not run."""
    path = os.path.join(out, name, "backup", "state.json")
    if not os.path.exists(path):
        return None
    with open(path) as file:
        return len(json.load(file)["history"])


def opennmt_at_epochs(run, epochs_by_step, target, evaluations, eval_steps, test_sources):
    """OpenNMT-tf at the saved checkpoint nearest `target` epochs: its validation and test.

    Averaged as its recipe averages (the last kept checkpoints up to that
    one) and decoded with its default beam 4. Returns `{"step", "epochs",
    "valid_bleu", "averaged", "test"}`, or `{"reached": epochs}` when the run
    never saw `target` epochs.
    """
    import opennmt_peer

    exact = opennmt_peer.step_at_epochs(epochs_by_step, target)
    if exact is None:
        seen = epochs_by_step[-1][1] if epochs_by_step else 0.0
        print(f"  it saw {seen:.1f} epochs, fewer than ours' {target}: no equal-epochs point")
        return {"reached": round(seen, 2)}
    step = max(eval_steps, eval_steps * round(exact / eval_steps))
    checkpoint, averaged = run.average_up_to(step)
    valid = next((row.get("bleu") for row in evaluations if row["step"] == step), None)
    hypotheses = run.translate(test_sources, f"test-step{step}-avg-beam", checkpoint=checkpoint)
    print(f"  at ours' {target} epochs: step {step} (its {target} epochs at step {exact:.0f}), "
          f"validation BLEU {valid if valid is None else round(valid, 2)}; checkpoints "
          f"{averaged} averaged for the test")
    return {"step": step, "epochs": target, "valid_bleu": valid, "averaged": averaged,
            "test": hypotheses}


def value_at(curve, seconds):
    """The last validation BLEU of `curve` known within `seconds` of training, or None.

    A point's time is when its score was known: after its evaluation.
    """
    within = [bleu for at, bleu, _ in curve if at <= seconds and bleu is not None]
    return within[-1] if within else None


def curve_table(curves, minutes):
    """Print each curve's validation BLEU at 10, 20, 30 minutes (or quarters of the budget).

    The last row is the model where the budget stopped, scored after the stop
    (both sides evaluate it once training has ended).
    """
    marks = [10, 20, 30] if minutes == 45 else [minutes * f for f in (0.25, 0.5, 0.75)]
    names = list(curves)
    print("\n| minutes of training | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for mark in marks:
        cells = []
        for name in names:
            value = value_at(curves[name], mark * 60)
            cells.append("-" if value is None else f"{value:.2f}")
        print(f"| {mark:g} | " + " | ".join(cells) + " |")
    last = [curves[name][-1][1] if curves[name] else None for name in names]
    print(f"| {minutes:g}, at the stop | "
          + " | ".join("-" if value is None else f"{value:.2f}" for value in last) + " |")
    for name in names:
        if curves[name]:
            at, bleu, _ = curves[name][-1]
            print(f"{name}: stopped model scored at {at / 60:.1f} min, BLEU {bleu:.2f}")


def plot(out, path):
    """Validation BLEU and chrF per epoch of our runs, with each run's test scores and the peer's.

    Reads OUT/results.json and OUT/<run>/history.csv, as `main` writes them;
    writes the PNG `path`. The peer's validation scores per epoch, when
    measured (`--peer-every-epoch`), are a dashed line; otherwise its test
    score is a dashed horizontal line.
    """
    from matplotlib.figure import Figure

    from keras_tf.plots import read_history

    with open(os.path.join(out, "results.json")) as file:
        results = json.load(file)
    figure = Figure(figsize=(10, 4), dpi=100, layout="constrained")
    panels = figure.subplots(1, 2)
    epochs = results["epochs"]
    for axes, metric, label in zip(panels, ("bleu", "chrf"), ("BLEU", "chrF")):
        for run, row in results["results"].items():
            if run == "keras-hub peer":
                per_epoch = row.get("valid_per_epoch")
                if per_epoch:
                    x = np.arange(1, len(per_epoch[metric]) + 1)
                    axes.plot(x, per_epoch[metric], color="black", linestyle="--", marker="o",
                              markersize=3, linewidth=1, label="keras-hub peer: validation")
                    if metric in row:  # absent where the run stopped before the test
                        axes.plot([epochs], [row[metric]], marker="*", markersize=12,
                                  linestyle="none", color="black", label="keras-hub peer: test")
                else:
                    axes.axhline(row[metric], color="black", linestyle="--", linewidth=1,
                                 label=f"keras-hub peer, test after {epochs} epochs")
                continue
            folder = row.get("folder")
            csv = os.path.join(out, folder, "history.csv") if folder else None
            # A run stopped by its time budget inside its first epoch has no history.
            history = read_history(csv) if csv and os.path.exists(csv) else {}
            line = None
            if f"val_{metric}" in history:
                x = np.arange(1, len(history[f"val_{metric}"]) + 1)
                (line,) = axes.plot(x, history[f"val_{metric}"], marker="o", markersize=3,
                                    label=f"{run}: validation")
            axes.plot([epochs], [row[metric]], marker="*", markersize=12, linestyle="none",
                      color=line.get_color() if line else None, label=f"{run}: test")
        axes.set_xlabel("epoch")
        axes.set_ylabel(f"{label} (sacreBLEU, greedy)")
        axes.set_xticks(range(1, epochs + 1))
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    title = CORPORA[results.get("corpus", "bible")][0]
    unit = "test verses" if results.get("corpus", "bible") == "bible" else "test pairs"
    figure.suptitle(f"{title}: {results['pairs']:,} training pairs, {results['test']} {unit}")
    figure.savefig(path)
    return path


def plot_minutes(out, path):
    """Validation BLEU by minutes of training of an equal-time run, each side's test BLEU.

    Reads OUT/results.json (`--minutes`): each run's `valid_curve`
    (`[[seconds, BLEU, chrF], ...]`; ours' from OUT/<folder>/backup/state.json
    when the results lack it) and its test BLEU with its default decoding,
    a star at the budget's end; writes the PNG `path`.
    """
    from matplotlib.figure import Figure

    with open(os.path.join(out, "results.json")) as file:
        results = json.load(file)
    minutes = results["minutes"]
    figure = Figure(figsize=(12, 4.5), dpi=100, layout="constrained")
    axes = figure.subplots()
    for run, row in results["results"].items():
        curve = row.get("valid_curve")
        state = os.path.join(out, row.get("folder") or "-", "backup", "state.json")
        if curve is None and os.path.exists(state):
            curve = ours_curve(out, row["folder"])
        if not curve:
            continue
        ours = not run.startswith("OpenNMT-tf")
        side = (run if run.startswith("ours") else f"ours ({run})") if ours else (
            run.removesuffix(", averaged, beam 4"))
        points = [(at / 60, bleu) for at, bleu, _ in curve if bleu is not None]
        (line,) = axes.plot(*zip(*points), marker="o", markersize=3,
                            linestyle="-" if ours else "--",
                            label=f"{side}: validation ({'greedy' if ours else 'its eval, beam 4'})")
        test = next((other for name, other in results["results"].items()
                     if name.startswith(run) and ("beam 4" in name)), None)
        if test:  # where its training stopped: ours may finish its epochs inside the budget
            axes.plot([min(minutes, test["train_seconds"] / 60)], [test["bleu"]], marker="*",
                      markersize=13, linestyle="none", color=line.get_color(),
                      label=f"{side}: test {test['bleu']:.2f} (its default decoding, beam 4)")
    axes.set_xlabel("minutes of training (2 CPU cores)")
    axes.set_ylabel("BLEU (sacreBLEU)")
    axes.set_xlim(0, minutes * 1.04)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    title = CORPORA[results.get("corpus", "bible")][0]
    figure.suptitle(f"{title}: {results['pairs']:,} training pairs, {minutes:g} minutes each, "
                    f"{results['valid']} validation and {results['test']} test pairs")
    figure.savefig(path)
    return path


def first_reaching(values, level):
    """The 1-based epoch at which `values` first reach `level`, or None."""
    return next((epoch for epoch, value in enumerate(values, 1) if value >= level), None)


def per_epoch_table(ours, peer, level):
    """Print ours' and the peer's validation BLEU and chrF per epoch, and who is ahead.

    `ours` and `peer` are `{"bleu": [...], "chrf": [...]}`, one value per epoch.
    """
    epochs = min(len(ours["bleu"]), len(peer["bleu"]))
    print("\n| epoch | ours val BLEU | peer val BLEU | ours val chrF | peer val chrF |")
    print("|---|---|---|---|---|")
    for i in range(epochs):
        print(f"| {i + 1} | {ours['bleu'][i]:.2f} | {peer['bleu'][i]:.2f} "
              f"| {ours['chrf'][i]:.2f} | {peer['chrf'][i]:.2f} |")
    ahead = [i + 1 for i in range(epochs) if ours["bleu"][i] >= peer["bleu"][i]]
    behind = [i + 1 for i in range(epochs) if ours["bleu"][i] < peer["bleu"][i]]
    print(f"ours >= peer in validation BLEU at {len(ahead)} of {epochs} epochs"
          + (f" (behind at epoch {', '.join(map(str, behind))})" if behind else ""))
    for name, values in (("ours", ours["bleu"]), ("peer", peer["bleu"])):
        epoch = first_reaching(values[:epochs], level)
        print(f"{name} first reaches {level:g} validation BLEU at "
              + (f"epoch {epoch}" if epoch else f"no epoch of {epochs}"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="bible",
                        help="the Bible (default), the demo corpus of JupyterLab UI strings, "
                        "or the reverse task as text")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max-pairs", type=int, help="train on this many pairs, evenly spaced")
    parser.add_argument("--test-pairs", type=int, help="score this many test pairs")
    parser.add_argument("--valid-pairs", type=int, help="validate on this many pairs")
    parser.add_argument("--ours", action="append", default=[], metavar="ARGS",
                        help="another variant of ours: extra `keras-tf train` options")
    parser.add_argument("--seed", type=int, default=0,
                        help="seeds both: `keras-tf train --seed` for ours, the weights, dropout "
                        "and shuffle of the peer (default: 0)")
    parser.add_argument("--average-last", type=int, metavar="N",
                        help="ours with its defaults also keeps its last N epoch checkpoints "
                        "(`--keep-checkpoints N`); their `keras-tf average` is scored as well")
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument("--skip-ours", action="store_true", help="train the peer alone")
    parser.add_argument("--peer-checkpoint", metavar="DIR",
                        help="save the peer after each epoch, and continue from DIR's last "
                        "epoch when it holds one (with --peer-every-epoch, after its "
                        "validation; without, the 10-epoch Bible peer trains in about "
                        "13 instead of 17 minutes an epoch on 2 cores)")
    parser.add_argument("--peer-every-epoch", action="store_true",
                        help="score the peer on the validation split after each epoch")
    parser.add_argument("--reach", type=float, default=10.0, metavar="BLEU",
                        help="report the first epoch at which each reaches this validation BLEU")
    parser.add_argument("--peer", choices=("keras-hub", "opennmt-tf"), default="keras-hub",
                        help="the keras-hub script (default) or OpenNMT-tf 2.32 in its own venv")
    parser.add_argument("--minutes", type=float, metavar="M",
                        help="with --peer opennmt-tf: train each side for M minutes of training "
                        "time (ours: keras-tf train --max-minutes M; --epochs plans its schedule)")
    parser.add_argument("--onmt", action="append", default=[], metavar="KEY=VALUE ...",
                        help="another OpenNMT-tf setting, e.g. \"batch_size=4096 "
                        "warmup_steps=ours peak=ours\" (keys: opennmt_peer.KEYS)")
    parser.add_argument("--onmt-skip", action="append", default=[], choices=("recipe", "cpu"),
                        help="leave out one of OpenNMT-tf's two standing settings: its untouched "
                        "recipe, or its CPU-sized one (2,048-token batches, no accumulation, a "
                        "4,000-update warm-up)")
    parser.add_argument("--onmt-eval-steps", type=int, default=500, metavar="N",
                        help="OpenNMT-tf evaluates and saves a checkpoint every N steps "
                        "(default: 500)")
    parser.add_argument("--onmt-vocabulary", type=int, metavar="N",
                        help="OpenNMT-tf's SentencePiece vocabulary; default: ours (its "
                        "config.json), else 8000")
    parser.add_argument("--onmt-venv", default=os.path.join(os.path.dirname(
                        os.path.abspath(__file__)), ".opennmt-venv"), metavar="DIR",
                        help="OpenNMT-tf's environment (default: benchmarks/.opennmt-venv)")
    parser.add_argument("--out", default="learning-benchmark")
    parser.add_argument("--replot", action="store_true",
                        help="only draw OUT/learning.png from an earlier run's results")
    args = parser.parse_args()
    if args.minutes is not None and args.peer != "opennmt-tf":
        parser.error("--minutes: only with --peer opennmt-tf")
    if args.peer == "opennmt-tf" and args.minutes is None:
        parser.error("--peer opennmt-tf: give --minutes, the budget of each run")
    if args.replot:
        with open(os.path.join(args.out, "results.json")) as file:
            draw = plot_minutes if json.load(file).get("minutes") else plot
        print(draw(args.out, os.path.join(args.out, "learning.png")))
        return 0

    title, load = CORPORA[args.corpus]
    corpus = load()
    train, valid, test = (subset(corpus.train, args.max_pairs), subset(corpus.valid, args.valid_pairs),
                          subset(corpus.test, args.test_pairs))
    os.makedirs(args.out, exist_ok=True)
    paths = {}
    for name, split in (("train", train), ("valid", valid), ("test", test)):
        paths[name] = os.path.join(args.out, f"{name}.tsv")
        split.write_tsv(paths[name])
    print(f"{title}: train {len(train)}, valid {len(valid)}, test {len(test)} pairs; "
          f"{args.epochs} epochs; {os.cpu_count()} CPUs", flush=True)

    results, folders = {}, {}
    seed = ["--seed", str(args.seed)] if args.seed else []
    keep = ["--keep-checkpoints", str(args.average_last)] if args.average_last else []
    budget = ["--max-minutes", f"{args.minutes:g}"] if args.minutes else []
    variants = [("defaults", seed + keep + budget)] + [
        (f"ours-{i + 1}", seed + budget + shlex.split(extra)) for i, extra in enumerate(args.ours)]
    # With the OpenNMT-tf peer, each side's default decoding (ours: beam 4) and greedy.
    beams = (1, 4) if args.peer == "opennmt-tf" else (1,)
    for name, extra in [] if args.skip_ours else variants:
        decoded, seconds = run_ours(name, extra, paths, args.epochs, args.out, beams)
        label = f"{name} {' '.join(extra)}".strip()
        results[label], folders[label] = (decoded[0], seconds), name
        if len(decoded) > 1:
            results[f"{label}, beam 4 (its default)"] = (decoded[1], seconds)
        if args.average_last and name == "defaults":
            label = f"defaults, average of the last {args.average_last}"
            averaged = average_ours(name, args.average_last, paths, args.out, beams)
            results[label] = (averaged[0], seconds)
            if len(averaged) > 1:
                results[f"{label}, beam 4"] = (averaged[1], seconds)
    peer_validation = None
    onmt = {}
    if args.peer == "opennmt-tf" and not args.skip_peer:
        onmt = run_opennmt(args, {"train": train, "valid": valid, "test": test}, args.out,
                           "defaults")
        for setting, row in onmt.items():
            for decoding, hypotheses in row["test"].items():
                results[f"OpenNMT-tf {setting}, {decoding}"] = (hypotheses, row["seconds"])
            if "test" in row.get("equal_epochs", {}):
                equal = row["equal_epochs"]
                results[f"OpenNMT-tf {setting} at {equal['epochs']} epochs (step {equal['step']})"
                        ", averaged beam 4"] = (equal["test"], row["seconds"])
    if args.peer == "keras-hub" and not args.skip_peer:
        hypotheses, seconds, peer_validation = run_peer(
            train, test, args.epochs, valid if args.peer_every_epoch else None, seed=args.seed,
            checkpoint=args.peer_checkpoint)
        results["keras-hub peer"] = (hypotheses, seconds)

    if args.minutes:
        curves = {} if args.skip_ours else {"ours (greedy)": ours_curve(args.out, "defaults")}
        curves.update({f"OpenNMT-tf {setting} (its eval)": row["curve"]
                       for setting, row in onmt.items()})
        print(f"\nValidation BLEU ({len(valid)} pairs) by minutes of training, "
              f"{args.minutes:g} minutes each:")
        curve_table(curves, args.minutes)
    budget_text = f"{args.minutes:g} minutes each" if args.minutes else f"{args.epochs} epochs"
    print(f"\n{title}, {len(train)} training pairs, {budget_text}, "
          f"{len(test)} test pairs, greedy decoding unless named")
    print(f"{'run':<48} {'BLEU':>6} {'chrF':>6} {'exact %':>8} {'train s':>8}")
    summary = {}
    for name, (hypotheses, seconds) in results.items():
        bleu, chrf = corpus_scores(hypotheses, test.targets)
        exact = 100 * np.mean([h == t for h, t in zip(hypotheses, test.targets)])
        summary[name] = {"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2),
                         "exact_percent": round(exact, 1), "train_seconds": round(seconds)}
        if name in folders:
            summary[name]["folder"] = folders[name]
        print(f"{name:<48} {bleu.score:6.2f} {chrf.score:6.2f} {exact:8.1f} {seconds:8.0f}")
    if peer_validation is not None:
        summary["keras-hub peer"]["valid_per_epoch"] = peer_validation.scores
        summary["keras-hub peer"]["valid_decoding_seconds"] = round(peer_validation.seconds)
    if onmt:
        best = max((name for name in summary if name.startswith("OpenNMT-tf")
                    and name.endswith(", averaged, beam 4")), key=lambda n: summary[n]["bleu"])
        peer = summary[best]["bleu"]
        print(f"best OpenNMT-tf run with its default decoding: {best}, BLEU {peer:.2f}")
        for name, row in summary.items():
            if not name.startswith("OpenNMT-tf"):
                print(f"{name}: BLEU {row['bleu'] - peer:+.2f} against it")
        best_any = max((name for name in summary if name.startswith("OpenNMT-tf")
                        and " at " not in name), key=lambda n: summary[n]["bleu"])
        if best_any != best:
            print(f"best OpenNMT-tf run with any of its decodings: {best_any}, "
                  f"BLEU {summary[best_any]['bleu']:.2f}")
        for setting, row in onmt.items():
            summary[f"OpenNMT-tf {setting}, averaged, beam 4"].update(
                settings=row["settings"], steps=row["steps"], epochs=row["epochs"],
                valid_curve=row["curve"],
                equal_epochs={k: v for k, v in row.get("equal_epochs", {}).items() if k != "test"})
    if args.minutes and not args.skip_ours:  # the figure redraws from results.json alone
        for name, row in summary.items():
            if row.get("folder") == "defaults":
                row["valid_curve"] = [list(point) for point in curves["ours (greedy)"]]
    if "keras-hub peer" in summary:
        peer = summary["keras-hub peer"]["bleu"]
        for name, row in summary.items():
            if name != "keras-hub peer":
                print(f"{name}: BLEU {row['bleu'] - peer:+.2f} against the peer "
                      f"(ratio {row['bleu'] / peer if peer else float('inf'):.2f})")
    if peer_validation is not None and not args.skip_ours:
        from keras_tf.plots import read_history

        history = read_history(os.path.join(args.out, "defaults", "history.csv"))
        print(f"\nValidation ({len(valid)} pairs, greedy) per epoch, ours with its defaults "
              "against the keras-hub peer:")
        per_epoch_table({"bleu": history["val_bleu"], "chrf": history["val_chrf"]},
                        peer_validation.scores, args.reach)
    with open(os.path.join(args.out, "results.json"), "w") as file:
        json.dump({"corpus": args.corpus, "pairs": len(train), "epochs": args.epochs,
                   "minutes": args.minutes, "peer": args.peer,
                   "valid": len(valid), "test": len(test), "seed": args.seed, "results": summary}, file, indent=2)
    print((plot_minutes if args.minutes else plot)(args.out, os.path.join(args.out, "learning.png")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
