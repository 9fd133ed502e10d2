"""Bulk translation: `keras-tf translate-bulk` on Beam against its peers, on the same lines and model.

N lines (`--lines`, default 50,000) of the Bible's English side
(`keras_tf.datasets.load_bible("fr")`, train split, repeated when N is
larger), translated English -> French with a model trained by `keras-tf
train` (`--model DIR`, or a transformer_tiny trained here for
`--train-steps` steps), all greedy with the export's max length. Each peer
runs as its own process, one after another, from process start to its last
line written:

- `keras-tf translate-bulk` on Beam's FnApiRunner, 1 worker, over the
  default export and over the `xla=True` export; and 2 worker processes
  (`--direct_num_workers 2 --direct_running_mode multi_processing`) over
  both, unless `--no-two-workers`;
- the export's `serving_default` signature called in one process on batches
  of 64 lines, in file order (`--peer signature`): Beam's overhead is
  translate-bulk's time over this one's;
- `keras-tf translate --beam-size 1 --batch-size 64` (the Keras model in
  process, stdin -> stdout);
- CTranslate2's `Translator.translate_file` (`--peer ctranslate2`) on the
  same model exported with `keras-tf export --format ctranslate2`, float32
  and int8 weights, max_batch_size 64, intra_threads `--ct2-threads`
  (default 1: on a loaded 2-core machine, CTranslate2's float32 with 2
  OpenMP threads ran 17x slower than with 1, 39 against 681 lines/s). It
  reads pre-tokenized lines: tokenizing (and detokenizing) is left out of
  its time, which favours it.

Prints, a row per peer: lines/s, seconds, the time to the first output line
(translate-bulk writes its outputs at the end, atomically: its first line
comes with its last), lines equal to the signature's, the lines
translate-bulk rejected (sources over the export's max_source_length, which
the other peers translate cut; their output lines are the ones not equal),
and the ratios to
CTranslate2 float32 and to the in-process signature. Then the issue's two
targets: translate-bulk over the xla=True export >= CTranslate2 float32
lines/s, and Beam's overhead (1 worker, default export, against the
signature over the same export) <= 20 %.

    python benchmarks/bulk_translate.py --lines 50000
    python benchmarks/bulk_translate.py --lines 5000 --model run1 --no-two-workers
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

BATCH_SIZE = 64


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50000, help="default: 50000")
    parser.add_argument("--model", help="a keras-tf train model directory (English -> French); "
                        "default: train transformer_tiny here")
    parser.add_argument("--train-steps", type=int, default=600,
                        help="steps of the model trained here; default: 600")
    parser.add_argument("--workdir", help="default: a new temporary folder")
    parser.add_argument("--ct2-threads", type=int, default=1,
                        help="CTranslate2's intra_threads; default: 1")
    parser.add_argument("--no-two-workers", action="store_true",
                        help="skip translate-bulk on 2 worker processes")
    # The peers this script runs in processes of their own.
    parser.add_argument("--peer", choices=("signature", "ctranslate2"), help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--max-length", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def keras_tf_command():
    return [sys.executable, "-m", "keras_tf.cli.main"]


def run(command, **kwargs):
    completed = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stderr[-3000:]}")
    return completed


# --- The peers that run in this script, in a process of their own ---


def signature_peer(export_dir, source, target):
    """The export's signature on batches of 64 lines in file order; each batch written at once."""
    import keras_tf

    keras_tf.quiet_tensorflow()
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    translate = tf.saved_model.load(export_dir).signatures["serving_default"]
    with open(source, "rb") as file:
        lines = file.read().decode("utf-8").split("\n")[:-1]
    with open(target, "w", encoding="utf-8") as out:
        for start in range(0, len(lines), BATCH_SIZE):
            batch = tf.constant(lines[start:start + BATCH_SIZE])
            translations = translate(text=batch)["translation"].numpy().tolist()
            out.write("".join(t.decode("utf-8") + "\n" for t in translations))
            out.flush()


def ctranslate2_peer(ct2_dir, source, target, max_length, threads):
    """CTranslate2's translate_file on pre-tokenized lines (token names), greedy."""
    import ctranslate2

    translator = ctranslate2.Translator(ct2_dir, device="cpu", intra_threads=threads,
                                        inter_threads=1)
    translator.translate_file(
        source, target, max_batch_size=BATCH_SIZE, beam_size=1,
        max_decoding_length=max_length, suppress_sequences=[["<blank>"], ["<s>"]],
    )


# --- Timing ---


def timed(command, output, stdin=None):
    """Run `command`; `(seconds, seconds to the first output line)`, from its start."""
    first = []
    done = threading.Event()

    def watch():
        while not done.is_set():
            try:
                if os.path.getsize(output) > 0:
                    with open(output, "rb") as file:
                        if b"\n" in file.read(1 << 16):
                            first.append(time.perf_counter())
                            return
            except OSError:
                pass
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    started = time.perf_counter()
    watcher.start()
    stdin_file = open(stdin, "rb") if stdin else None
    try:
        stdout = open(output, "wb") if stdin else None
        completed = subprocess.run(command, stdin=stdin_file, stdout=stdout or subprocess.PIPE,
                                   stderr=subprocess.PIPE)
    finally:
        if stdin_file:
            stdin_file.close()
            stdout.close()
    ended = time.perf_counter()
    done.set()
    watcher.join()
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stderr.decode()[-3000:]}")
    return ended - started, (first[0] if first else ended) - started


# --- Preparing the lines, the model and its exports ---


def prepare(args, workdir):
    from keras_tf.datasets import load_bible

    bible = load_bible("fr")
    sources = [source for source, _ in bible.train]
    lines = (sources * (args.lines // len(sources) + 1))[: args.lines]
    os.makedirs(os.path.join(workdir, "input"), exist_ok=True)
    source = os.path.join(workdir, "input", "bible.en")
    with open(source, "w", encoding="utf-8") as file:
        file.write("".join(line + "\n" for line in lines))
    model = args.model
    if model is None:
        model = os.path.join(workdir, "run")
        corpus = os.path.join(workdir, "train.tsv")
        with open(corpus, "w", encoding="utf-8") as file:
            file.write("".join(f"{s}\t{t}\n" for s, t in bible.train))
        started = time.perf_counter()
        run([*keras_tf_command(), "train", "--train", corpus, "--out", model,
             "--preset", "transformer_tiny", "--epochs", "1", "--steps", str(args.train_steps),
             "--batch-size", "64", "--vocabulary-size", "4000", "--no-xla"])
        print(f"trained transformer_tiny for {args.train_steps} steps in "
              f"{time.perf_counter() - started:.0f} s")
    exports = {}
    for name, flags in (("default", []), ("xla", ["--xla"])):
        base = os.path.join(workdir, "exports", name)
        run([*keras_tf_command(), "export", "--model", model, "--out", base,
             "--beam-size", "1", "--no-warmup", *flags])
        exports[name] = os.path.join(base, "1")
    for name, flags in (("ct2_float32", []), ("ct2_int8", ["--quantize", "int8"])):
        exports[name] = os.path.join(workdir, "exports", name)
        run([*keras_tf_command(), "export", "--model", model, "--format", "ctranslate2",
             "--out", exports[name], "--beam-size", "1", *flags])
    return source, model, exports


def ct2_tokens(export_dir, ct2_dir, source):
    """The source lines as CTranslate2 token names (what its translate_file reads), and a detokenizer."""
    import keras_tf

    keras_tf.quiet_tensorflow()
    import numpy as np

    from keras_tf.serving.ctranslate2 import CTranslate2Translator, token_ids, token_names
    from keras_tf.serving.export import read_export_config

    ct2 = CTranslate2Translator(ct2_dir)
    with open(source, encoding="utf-8") as file:
        lines = file.read().split("\n")[:-1]
    tokens_path = source + ".ct2-tokens"
    with open(tokens_path, "w", encoding="utf-8") as out:
        for start in range(0, len(lines), 1024):
            strings = np.array(lines[start:start + 1024], dtype=object)
            ids = ct2.preprocessor.encoder_tokens(ct2.preprocessor.source_ids(strings)).numpy()
            out.write("".join(" ".join(name for name in row if name != "<blank>") + "\n"
                              for row in token_names(ids)))

    def detokenize(path):
        with open(path, encoding="utf-8") as file:
            rows = [line.split() for line in file.read().split("\n")[:-1]]
        texts = []
        for start in range(0, len(rows), 1024):
            chunk = rows[start:start + 1024]
            width = max([len(r) for r in chunk] + [1])
            ids = np.zeros((len(chunk), width), np.int32)
            for row, names in enumerate(chunk):
                ids[row, : len(names)] = token_ids([names])[0] if names else []
            texts += [t.decode("utf-8") for t in ct2.preprocessor.detokenize(ids).numpy().tolist()]
        return texts

    return tokens_path, read_export_config(export_dir)["max_length"], detokenize


def read_lines(path):
    with open(path, "rb") as file:
        return file.read().decode("utf-8").split("\n")[:-1]


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.peer == "signature":
        return signature_peer(args.model, args.source, args.target)
    if args.peer == "ctranslate2":
        return ctranslate2_peer(args.model, args.source, args.target, args.max_length,
                                args.ct2_threads)

    import keras_tf

    keras_tf.quiet_tensorflow()
    workdir = args.workdir or tempfile.mkdtemp(prefix="bulk-bench-")
    source, model, exports = prepare(args, workdir)
    tokens, max_length, detokenize = ct2_tokens(exports["default"], exports["ct2_float32"], source)
    script = os.path.abspath(__file__)
    out = os.path.join(workdir, "out")
    os.makedirs(out, exist_ok=True)

    def bulk(export, workers):
        folder = os.path.join(out, f"bulk-{export}-{workers}")
        extra = (["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
                 if workers == 2 else [])
        command = [*keras_tf_command(), "translate-bulk", "--export", exports[export],
                   "--input", source, "--output", folder, "--overwrite", *extra]
        return command, os.path.join(folder, "bible.en"), None

    peers = {
        "signature, default export": (
            [sys.executable, script, "--peer", "signature", "--model", exports["default"],
             "--source", source, "--target", os.path.join(out, "signature-default")],
            os.path.join(out, "signature-default"), None),
        "signature, xla=True export": (
            [sys.executable, script, "--peer", "signature", "--model", exports["xla"],
             "--source", source, "--target", os.path.join(out, "signature-xla")],
            os.path.join(out, "signature-xla"), None),
        "translate-bulk, 1 worker, default export": bulk("default", 1),
        "translate-bulk, 1 worker, xla=True export": bulk("xla", 1),
    }
    if not args.no_two_workers:
        peers["translate-bulk, 2 workers, default export"] = bulk("default", 2)
        peers["translate-bulk, 2 workers, xla=True export"] = bulk("xla", 2)
    peers["keras-tf translate --beam-size 1 --batch-size 64"] = (
        [*keras_tf_command(), "translate", "--model", model, "--beam-size", "1",
         "--batch-size", "64"], os.path.join(out, "translate"), source)
    for name in ("float32", "int8"):
        target = os.path.join(out, f"ct2-{name}")
        peers[f"CTranslate2 translate_file, {name}"] = (
            [sys.executable, script, "--peer", "ctranslate2", "--model", exports[f"ct2_{name}"],
             "--source", tokens, "--target", target, "--max-length", str(max_length),
             "--ct2-threads", str(args.ct2_threads)],
            target, None)

    results = {}
    for name, (command, output, stdin) in peers.items():
        seconds, first = timed(command, output, stdin)
        texts = detokenize(output) if name.startswith("CTranslate2") else read_lines(output)
        results[name] = (seconds, first, texts)
        print(f"  {name}: {seconds:.1f} s", flush=True)

    reference = results["signature, default export"][2]
    lines = len(reference)
    rate = {name: lines / seconds for name, (seconds, _, _) in results.items()}
    ct2 = rate["CTranslate2 translate_file, float32"]
    signature = rate["signature, default export"]
    print(f"\n{lines} lines of the Bible's English side, greedy, max_length {max_length}, "
          f"{os.cpu_count()} CPUs, CTranslate2 intra_threads {args.ct2_threads}")
    print("| peer | lines/s | seconds | first output (s) | lines equal to the signature's "
          "| rejected | / CTranslate2 float32 | / signature |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (seconds, first, texts) in results.items():
        equal = sum(a == b for a, b in zip(texts, reference))
        rejects = os.path.join(os.path.dirname(peers[name][1]), "rejects.tsv")
        rejected = len(read_lines(rejects)) if name.startswith("translate-bulk") else "-"
        print(f"| {name} | {rate[name]:.0f} | {seconds:.1f} | {first:.1f} | {equal} of {lines} "
              f"| {rejected} | {rate[name] / ct2:.2f} | {rate[name] / signature:.2f} |")
    bulk_xla = rate["translate-bulk, 1 worker, xla=True export"]
    overhead = signature / rate["translate-bulk, 1 worker, default export"] - 1
    print(f"\ntarget 1: translate-bulk (xla=True export) {bulk_xla:.0f} lines/s vs CTranslate2 "
          f"float32 {ct2:.0f} lines/s: {bulk_xla / ct2:.2f}x (target >= 1): "
          f"{'met' if bulk_xla >= ct2 else 'missed'}")
    print(f"target 2: Beam's overhead (1 worker, default export, against the signature in one "
          f"process) {100 * overhead:.0f} % (target <= 20 %): "
          f"{'met' if overhead <= 0.20 else 'missed'}")


if __name__ == "__main__":
    sys.exit(main())
