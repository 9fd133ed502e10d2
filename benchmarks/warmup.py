"""First-request latency of a freshly loaded export, without and with replaying its warm-up requests.

TF Serving replays `assets.extra/tf_serving_warmup_requests` when it loads a
version, before it serves it. This script does what the server does, in a
fresh process that imports only tensorflow, tensorflow_text and
tensorflow_serving's protos: `tf.saved_model.load`, then (for "warm") each
warm-up record through `serving_default`, then one client request (a
~20-token sentence, batch 1) timed. "cold" skips the replay: the first
client pays for the runtime's first run instead.

Both the default export and the `xla=True` export (the server run with
`--xla_cpu_compilation_enabled`) are measured, each in `--processes` fresh
processes per mode, interleaved; the figures are medians. The model is
`serving_latency.py`'s: transformer_small's shape, SentencePiece vocabulary
of 2,000 from the JupyterLab French corpus, untrained weights, at most
`--max-length` tokens generated.

Usage: python benchmarks/warmup.py [--processes 5] [--max-length 32]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SOURCE_TOKENS = (18, 22)  # "a ~20-token sentence"


def serve(export_dir, mode, text):
    """In a fresh process: load, replay the warm-up for "warm", then time two client requests."""
    start = time.perf_counter()
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the tokenizers' ops
    from tensorflow_serving.apis import prediction_log_pb2

    signature = tf.saved_model.load(export_dir).signatures["serving_default"]
    loaded = time.perf_counter()
    replayed = 0
    if mode == "warm":
        path = os.path.join(export_dir, "assets.extra", "tf_serving_warmup_requests")
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            request = prediction_log_pb2.PredictionLog.FromString(record).predict_log.request
            inputs = {k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()}
            signature(**inputs)["translation"].numpy()
            replayed += 1
    warmed = time.perf_counter()
    times = []
    for _ in range(2):
        call = time.perf_counter()
        signature(text=tf.constant([text]))["translation"].numpy()
        times.append(time.perf_counter() - call)
    forbidden = sorted(m for m in ("keras_tf", "keras_hub") if m in sys.modules)
    print(json.dumps({
        "load_s": loaded - start, "warmup_s": warmed - loaded, "replayed": replayed,
        "first_s": times[0], "second_s": times[1], "forbidden_modules": forbidden,
    }))


def fresh_process(export_dir, mode, text):
    completed = subprocess.run(
        [sys.executable, __file__, "--serve", export_dir, mode, text],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=""), check=True,
    )
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    if result["forbidden_modules"]:
        raise RuntimeError(f"the serving process imported {result['forbidden_modules']}")
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=5, help="per export and mode")
    parser.add_argument("--max-length", type=int, default=32, help="tokens generated at most")
    parser.add_argument("--vocabulary-size", type=int, default=2000)
    args = parser.parse_args()

    import keras_tf

    keras_tf.quiet_tensorflow()
    from keras_tf.serving import export
    from keras_tf.text import Seq2SeqTokenizers
    from serving_latency import corpus_sentences, serving_model

    sources, targets, corpus_name = corpus_sentences()
    tokenizers = Seq2SeqTokenizers.train(sources, targets, vocabulary_size=args.vocabulary_size)
    lengths = tokenizers.tokenize_source(sources).row_lengths().numpy()
    text = next(s for s, n in zip(sources, lengths) if SOURCE_TOKENS[0] <= n <= SOURCE_TOKENS[1])
    model = serving_model(tokenizers)
    folder = tempfile.mkdtemp(prefix="warmup_")
    exports = {
        key: export(model, tokenizers, os.path.join(folder, key), max_length=args.max_length,
                    xla=xla)
        for key, xla in (("default", False), ("xla", True))
    }

    results = {(key, mode): [] for key in exports for mode in ("cold", "warm")}
    for _ in range(args.processes):
        for key, export_dir in exports.items():
            for mode in ("cold", "warm"):
                results[key, mode].append(fresh_process(export_dir, mode, text))

    print(f"corpus: {corpus_name}; transformer_small shape, untrained; greedy, at most "
          f"{args.max_length} tokens; one {len(text.split())}-word sentence, batch 1; "
          f"median of {args.processes} fresh processes each")
    print("| export | first request, cold | first request, after warm-up | ratio "
          "| second request | warm-up replay at load | load |")
    print("|---|---|---|---|---|---|---|")
    for key in exports:
        cold, warm = results[key, "cold"], results[key, "warm"]

        def med(rows, field):
            return statistics.median(r[field] for r in rows)

        ratio = med(cold, "first_s") / med(warm, "first_s")
        print(f"| {key} | {1000 * med(cold, 'first_s'):.0f} ms | "
              f"{1000 * med(warm, 'first_s'):.1f} ms | {ratio:.0f}x | "
              f"{1000 * med(warm, 'second_s'):.1f} ms | "
              f"{med(warm, 'warmup_s'):.2f} s ({warm[0]['replayed']} requests) | "
              f"{med(cold, 'load_s'):.2f} s |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(*sys.argv[2:5])
    else:
        main()
