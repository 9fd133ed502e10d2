"""Serving latency: the exported SavedModel, without and with XLA, against in-process generate.

One model, one set of sentences, three ways to translate them, timed in one run:

* in process: `Seq2SeqTranslator.generate` on strings (tokenize,
  `keras_tf.decoding.generate` compiled with XLA, detokenize), as a Python
  service would run it; also `keras_tf.decoding.generate` alone on ready
  token ids;
* the default export (`xla=False`) and the `xla=True` export, loaded with
  `tf.saved_model.load` in a fresh process that imports only tensorflow and
  tensorflow_text (asserted), called through `serving_default`. XLA is left
  enabled there, as in a model server started with `--xla_cpu_compilation_enabled`;
  the default export holds no XLA op, so the flag changes nothing for it.

Each way is measured in interleaved rounds, so machine noise hits all alike:
p50 and p95 latency of one ~20-token sentence, and sentences/s at batch 32.

The model has transformer_small's shape (d_model 128, 4 heads, d_ff 512,
2 + 2 layers) with SentencePiece vocabularies learned from the JupyterLab
French demo corpus (generated text without the demo extra), and untrained
weights: an untrained model rarely ends a sentence, so nearly every call
generates `--max-length` tokens; the script prints the mean generated length.

Usage: python benchmarks/serving_latency.py [--rounds 5] [--max-length 32] [--keep DIR]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

BATCH_SIZE = 32
SOURCE_TOKENS = (18, 22)  # "a ~20-token sentence"


# --- The fresh serving process: tensorflow and tensorflow_text only ---


def serve(exports_json):
    """Answer timing requests on stdin, one JSON line each, with the per-call seconds."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the tokenizers' ops

    exports = json.loads(exports_json)
    signatures = {
        key: tf.saved_model.load(path).signatures["serving_default"]
        for key, path in exports.items()
    }
    forbidden = sorted(m for m in ("keras_tf", "keras_hub") if m in sys.modules)
    print(json.dumps({"ready": True, "forbidden_modules": forbidden}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        signature = signatures[request["export"]]
        text = tf.constant(request["texts"], tf.string)
        times = []
        for _ in range(request["calls"]):
            start = time.perf_counter()
            signature(text=text)["translation"].numpy()
            times.append(time.perf_counter() - start)
        print(json.dumps({"times": times}), flush=True)


# --- The benchmark ---


def corpus_sentences():
    try:
        from keras_tf.datasets import load_jupyterlab_fr

        corpus = load_jupyterlab_fr()
        return corpus.train.sources, corpus.train.targets, "JupyterLab French demo corpus"
    except ImportError:
        import numpy as np

        rng = np.random.default_rng(0)
        words = [f"w{i}" for i in range(3000)]
        sources = [" ".join(rng.choice(words, rng.integers(3, 30))) for _ in range(3000)]
        return sources, sources, "generated text (install .[demo] for the real corpus)"


def percentile(values, q):
    import numpy as np

    return float(np.percentile(np.asarray(values), q))


class ServingProcess:
    def __init__(self, exports):
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", json.dumps(exports)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONPATH=""),
        )
        # The process may import only tensorflow and tensorflow_text, so its
        # stderr comes through here, without TensorFlow's start-up lines.
        threading.Thread(target=self._pass_on_stderr, daemon=True).start()
        ready = json.loads(self.process.stdout.readline())
        if ready["forbidden_modules"]:
            raise RuntimeError(f"the serving process imported {ready['forbidden_modules']}")

    def _pass_on_stderr(self):
        from keras_tf.tensorflow_import import is_start_up_line

        for line in self.process.stderr:
            if not is_start_up_line(line):
                sys.stderr.write(line)

    def time_calls(self, export, texts, calls):
        request = {"export": export, "texts": texts, "calls": calls}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())["times"]

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--single-calls", type=int, default=30, help="per round")
    parser.add_argument("--batch-calls", type=int, default=5, help="per round")
    parser.add_argument("--max-length", type=int, default=32, help="tokens generated at most")
    parser.add_argument("--vocabulary-size", type=int, default=2000)
    parser.add_argument("--keep", help="write the exports here instead of a temporary folder")
    args = parser.parse_args()

    import keras_tf  # noqa: F401  first: TensorFlow's start-up lines kept off stderr
    import keras
    import numpy as np

    import tensorflow as tf

    from keras_tf.decoding import DecodingConfig, generate
    from keras_tf.models import Seq2SeqTransformer, get_preset
    from keras_tf.serving import export
    from keras_tf.text import Seq2SeqPreprocessor, Seq2SeqTokenizers, encode_source
    from keras_tf.translation import Seq2SeqTranslator

    tf.get_logger().setLevel("ERROR")

    sources, targets, corpus_name = corpus_sentences()
    tokenizers = Seq2SeqTokenizers.train(sources, targets, vocabulary_size=args.vocabulary_size)
    lengths = tokenizers.tokenize_source(sources).row_lengths().numpy()
    pool = [s for s, n in zip(sources, lengths) if SOURCE_TOKENS[0] <= n <= SOURCE_TOKENS[1]]
    single = [pool[0]]
    batch = (pool * BATCH_SIZE)[1 : BATCH_SIZE + 1]

    keras.utils.set_random_seed(0)
    config = get_preset(
        "transformer_small",
        source_vocabulary_size=tokenizers.source_vocabulary_size,
        target_vocabulary_size=tokenizers.target_vocabulary_size,
        dropout=0.0,
    )
    model = Seq2SeqTransformer(config)
    task = Seq2SeqTranslator(
        model,
        Seq2SeqPreprocessor(tokenizers, config.max_source_length, config.max_target_length),
        DecodingConfig(max_length=args.max_length),
    )

    folder = args.keep or tempfile.mkdtemp(prefix="serving_latency_")
    start = time.perf_counter()
    exports = {
        key: export(
            model, tokenizers, os.path.join(folder, name), max_length=args.max_length, xla=xla
        )
        for key, name, xla in (("default", "translator", False), ("xla", "translator_xla", True))
    }
    print(f"exported to {folder} in {time.perf_counter() - start:.0f}s", file=sys.stderr)

    # The work per call: generated tokens, END included, of every sentence timed.
    single_ids = encode_source(tokenizers, single, config.max_source_length).numpy()
    batch_ids = encode_source(tokenizers, batch, config.max_source_length).numpy()
    generated = np.concatenate([
        (generate(model, ids, max_length=args.max_length).tokens != 0).sum(axis=1)
        for ids in (single_ids, batch_ids)
    ])

    def generate_only(ids):
        return lambda: generate(model, ids, max_length=args.max_length)

    def task_generate(texts):
        return lambda: task.generate(texts)

    local = {
        "in-process Seq2SeqTranslator.generate (strings, XLA)": (
            task_generate(single),
            task_generate(batch),
        ),
        "in-process generate only (ids, XLA)": (
            generate_only(single_ids),
            generate_only(batch_ids),
        ),
    }
    for single_call, batch_call in local.values():  # compile and warm up
        single_call(), batch_call()

    server = ServingProcess(exports)
    for key in exports:  # load, trace and (xla) compile
        server.time_calls(key, single, 2), server.time_calls(key, batch, 1)

    names = {"default": "SavedModel, default (no XLA)", "xla": "SavedModel, xla=True"}
    single_times = {name: [] for name in list(local) + list(names.values())}
    batch_times = {name: [] for name in single_times}
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name, (single_call, batch_call) in local.items():
            for _ in range(args.single_calls):
                start = time.perf_counter()
                single_call()
                single_times[name].append(time.perf_counter() - start)
            for _ in range(args.batch_calls):
                start = time.perf_counter()
                batch_call()
                batch_times[name].append(time.perf_counter() - start)
        for key, name in names.items():
            single_times[name] += server.time_calls(key, single, args.single_calls)
            batch_times[name] += server.time_calls(key, batch, args.batch_calls)
    server.close()

    print(
        "\nModel: transformer_small shape, untrained, vocabulary "
        f"{tokenizers.source_vocabulary_size} "
        f"(SentencePiece on the {corpus_name}); greedy, max_length {args.max_length}, "
        f"{generated.mean():.1f} tokens generated per sentence on average (min "
        f"{generated.min()}, max {generated.max()}); source "
        f"{len(single_ids[0])} tokens (END included). {args.rounds} rounds; "
        f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.\n"
    )
    print("| path | p50 latency, 1 sentence | p95 latency, 1 sentence | sentences/s, batch 32 |")
    print("|---|---|---|---|")
    for name in single_times:
        p50 = percentile(single_times[name], 50) * 1000
        p95 = percentile(single_times[name], 95) * 1000
        rate = BATCH_SIZE / float(np.median(batch_times[name]))
        print(f"| {name} | {p50:.1f} ms | {p95:.1f} ms | {rate:.0f} |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        main()
