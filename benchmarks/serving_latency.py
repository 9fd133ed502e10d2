"""Serving latency: the SavedModel as TF Serving runs it, against XLA, generate and CTranslate2.

One model, one pool of sentences, each way to translate them timed in one run:

* in process: `Seq2SeqTranslator.generate` on strings (tokenize,
  `keras_tf.decoding.generate` compiled with XLA, detokenize), as a Python
  service would run it; also `keras_tf.decoding.generate` alone on ready
  token ids;
* CTranslate2 float32 on the same model (`keras_tf.serving.ctranslate2.convert`),
  greedy, `max_decoding_length` = `--max-length`, `inter_threads=1`,
  `intra_threads` = the CPU count, in this process. Token ids in and out: the
  source ids become CTranslate2's token names once, before timing, so its
  figure excludes tokenization and detokenization (which the SavedModel and
  `Seq2SeqTranslator.generate` figures include). Before timing, its greedy
  ids are compared with `generate`'s on the timed sentences (the count of
  equal ones is printed). Skipped, with a line saying so, without `ctranslate2`;
* the default export (`xla=False`), the `xla=True` export and, with `--int8`,
  the default export of a copy of the model (same weights) after
  `quantize("int8")`, each loaded as TF
  Serving's `LoadSavedModel` loads it: into a TF1 session (the `serve`
  MetaGraph, its restore and initializer ops), in a fresh process that
  imports only tensorflow, tensorflow_text and TF Serving's request protos
  (asserted: never keras_tf or keras_hub). A call feeds the `text` input of
  the `serving_default` SignatureDef and fetches all its outputs by tensor
  name with `session.run`, as a Predict request without an output filter.
  XLA is left enabled there, as in a model server started with
  `--xla_cpu_compilation_enabled`; the default export holds no XLA op, so the
  flag changes nothing for it.

Each way is measured in interleaved rounds, so machine noise hits all alike:
p50 and p95 latency of one ~20-token sentence, and sentences/s at batch 8
and at batch 32 (medians). The ratios the serving issue's targets name are
printed from the same medians.

First request after load, before the timed rounds: for each export, twice in a fresh process each
(`--fresh-loads` times, medians): the session load timed, then the first and
the second call of one sentence. Once as TF Serving loads the export as
written, replaying its warm-up records (`assets.extra/tf_serving_warmup_requests`,
each PredictionLog's request run through the session, untimed by the
client: its time counts in the load), once without replaying them.

The model has transformer_small's shape (d_model 128, 4 heads, d_ff 512,
2 + 2 layers) with SentencePiece vocabularies learned from the JupyterLab
French demo corpus (generated text without the demo extra), and untrained
weights: an untrained model rarely ends a sentence, so nearly every call
generates `--max-length` tokens; the script prints the mean generated length.

Usage: python benchmarks/serving_latency.py [--rounds 5] [--max-length 32] [--int8]
    [--fresh-loads 1] [--keep DIR]
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

BATCH_SIZES = (1, 8, 32)
SOURCE_TOKENS = (18, 22)  # "a ~20-token sentence"
# What a serving process may not import: it runs as the model server does.
FORBIDDEN_MODULES = ("keras_tf", "keras_hub")
# As keras_tf.serving.export and keras_tf.serving.warmup name them; the
# serving process may not import keras_tf to read them.
SIGNATURE, TEXT_INPUT = "serving_default", "text"
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")


# --- The fresh serving process: tensorflow, tensorflow_text and TF Serving's protos only ---


def serving_tensorflow():
    """Import tensorflow and tensorflow_text, with the TF1 loader's deprecation lines silenced."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  the tokenizers' ops, as the model server links them

    tf.get_logger().setLevel("ERROR")
    return tf


def load_session(export_dir):
    """`(session, signature)`: the SavedModel loaded as TF Serving's LoadSavedModel loads it."""
    tf = serving_tensorflow()
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph)
    with graph.as_default():
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
    return session, meta_graph.signature_def


def predict(session, signature, inputs):
    """Feed `{input: array}` to a SignatureDef's tensors; fetch every output, as Predict does."""
    feeds = {signature.inputs[name].name: value for name, value in inputs.items()}
    fetches = {name: info.name for name, info in signature.outputs.items()}
    return session.run(fetches, feeds)


def text_inputs(texts):
    import numpy as np

    return {TEXT_INPUT: np.array([t.encode("utf-8") for t in texts], dtype=object)}


def replay_warmup(session, signatures, export_dir):
    """Run the export's warm-up requests as TF Serving does at load; return how many there were."""
    tf = serving_tensorflow()
    from tensorflow_serving.apis import prediction_log_pb2

    count = 0
    for record in tf.data.TFRecordDataset(os.path.join(export_dir, WARMUP_FILE)):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        signature = signatures[request.model_spec.signature_name or SIGNATURE]
        inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
        predict(session, signature, inputs)
        count += 1
    return count


def forbidden_modules():
    return sorted(m for m in FORBIDDEN_MODULES if m in sys.modules)


def serve(exports_json):
    """Answer timing requests on stdin, one JSON line each, with the per-call seconds."""
    serving_tensorflow()
    exports = json.loads(exports_json)
    loaded = {}
    for key, path in exports.items():
        session, signatures = load_session(path)
        loaded[key] = session, signatures[SIGNATURE]
    print(json.dumps({"ready": True, "forbidden_modules": forbidden_modules()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        session, signature = loaded[request["export"]]
        inputs = text_inputs(request["texts"])
        times = []
        for _ in range(request["calls"]):
            start = time.perf_counter()
            predict(session, signature, inputs)
            times.append(time.perf_counter() - start)
        print(json.dumps({"times": times}), flush=True)


def first_request(spec_json):
    """Print, as one JSON line, the seconds of the load (and warm-up), the first and second call."""
    spec = json.loads(spec_json)
    serving_tensorflow()
    from tensorflow_serving.apis import prediction_log_pb2  # noqa: F401  imported before timing

    inputs = text_inputs(spec["texts"])
    start = time.perf_counter()
    session, signatures = load_session(spec["export_dir"])
    loaded = time.perf_counter()
    records = replay_warmup(session, signatures, spec["export_dir"]) if spec["warmup"] else 0
    ready = time.perf_counter()
    times = []
    for _ in range(2):
        start_call = time.perf_counter()
        predict(session, signatures[SIGNATURE], inputs)
        times.append(time.perf_counter() - start_call)
    print(json.dumps({
        "load": ready - start,
        "warmup": ready - loaded,
        "records": records,
        "first": times[0],
        "second": times[1],
        "forbidden_modules": forbidden_modules(),
    }), flush=True)


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


def serving_model(tokenizers):
    """The untrained model these serving benchmarks time: transformer_small's shape, seed 0."""
    import keras

    from keras_tf.models import Seq2SeqTransformer, get_preset

    keras.utils.set_random_seed(0)
    return Seq2SeqTransformer(get_preset(
        "transformer_small",
        source_vocabulary_size=tokenizers.source_vocabulary_size,
        target_vocabulary_size=tokenizers.target_vocabulary_size,
        dropout=0.0,
    ))


def percentile(values, q):
    import numpy as np

    return float(np.percentile(np.asarray(values), q))


def serving_env():
    # Away from the repository's PYTHONPATH; keras_tf stays importable (it is
    # installed), which makes "it was never imported" a real check.
    return dict(os.environ, PYTHONPATH="", TF_CPP_MIN_LOG_LEVEL="3")


def pass_on_stderr(lines):
    """Write a serving process's stderr lines here, without TensorFlow's start-up lines."""
    from keras_tf.tensorflow_import import is_start_up_line

    for line in lines:
        if not is_start_up_line(line):
            sys.stderr.write(line)


class ServingProcess:
    def __init__(self, exports):
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", json.dumps(exports)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=serving_env(),
        )
        threading.Thread(target=pass_on_stderr, args=(self.process.stderr,), daemon=True).start()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the serving process ended with exit status {self.process.wait()}")
        ready = json.loads(line)
        if ready["forbidden_modules"]:
            raise RuntimeError(f"the serving process imported {ready['forbidden_modules']}")

    def time_calls(self, export, texts, calls):
        request = {"export": export, "texts": texts, "calls": calls}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())["times"]

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


def time_first_request(export_dir, warmup, texts):
    """Load `export_dir` in a fresh serving process: its seconds, as `first_request` prints them."""
    spec = {"export_dir": export_dir, "warmup": warmup, "texts": texts}
    completed = subprocess.run(
        [sys.executable, __file__, "--first-request", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=serving_env(),
        timeout=600,
    )
    pass_on_stderr(completed.stderr.splitlines(keepends=True))
    if completed.returncode != 0:
        raise RuntimeError(f"the serving process ended with exit status {completed.returncode}")
    result = json.loads(completed.stdout.splitlines()[-1])
    if result["forbidden_modules"]:
        raise RuntimeError(f"the serving process imported {result['forbidden_modules']}")
    return result


def ctranslate2_peer(model, folder, source_ids, max_length):
    """`{batch size: call}` timing CTranslate2 float32 on token ids, and a check; None without it.

    `source_ids` maps each batch size to our encoder tokens `[batch, S]`
    (END included, padded with 0); each becomes CTranslate2 token names here,
    once. A call returns the hypotheses as id lists. The check returns the
    ids CTranslate2 gives each source, to compare with `generate`'s.
    """
    try:
        import ctranslate2

        from keras_tf.serving.ctranslate2 import (
            CT2_RESERVED_TOKENS,
            UNPICKABLE,
            convert,
            token_ids,
            token_names,
        )
    except ImportError:
        return None
    from keras_tf.special_tokens import PAD_ID

    path = convert(model, os.path.join(folder, "ctranslate2_float32"))
    translator = ctranslate2.Translator(
        path, device="cpu", compute_type="float32", inter_threads=1, intra_threads=os.cpu_count()
    )
    pad = CT2_RESERVED_TOKENS[PAD_ID]

    def call(names):
        results = translator.translate_batch(
            names,
            beam_size=1,
            max_decoding_length=max_length,
            suppress_sequences=UNPICKABLE,
        )
        return [token_ids([result.hypotheses[0]])[0] for result in results]

    calls = {}
    for size, ids in source_ids.items():
        names = [[n for n in row if n != pad] for row in token_names(ids)]
        calls[size] = lambda names=names: call(names)
    return calls


def generated_ids(tokens):
    """Our generated rows, END and padding dropped: lists of ids, as CTranslate2 returns them."""
    from keras_tf.special_tokens import END_ID, PAD_ID

    rows = []
    for row in tokens.tolist():
        ends = [i for i, token in enumerate(row) if token in (END_ID, PAD_ID)]
        rows.append(row[: ends[0]] if ends else row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--single-calls", type=int, default=30, help="per round")
    parser.add_argument("--batch-calls", type=int, default=5, help="per round and batch size")
    parser.add_argument("--max-length", type=int, default=32, help="tokens generated at most")
    parser.add_argument("--vocabulary-size", type=int, default=2000)
    parser.add_argument(
        "--int8", action="store_true",
        help='also time the default export of the model after quantize("int8")',
    )
    parser.add_argument(
        "--fresh-loads", type=int, default=1,
        help="fresh processes per export and warm-up setting for the first request",
    )
    parser.add_argument("--keep", help="write the exports here instead of a temporary folder")
    args = parser.parse_args()

    import keras_tf

    keras_tf.quiet_tensorflow()  # first: TensorFlow's C++ start-up lines kept off stderr
    import numpy as np

    import tensorflow as tf

    from keras_tf.decoding import DecodingConfig, generate
    from keras_tf.models import Seq2SeqTransformer
    from keras_tf.serving import export
    from keras_tf.text import Seq2SeqPreprocessor, Seq2SeqTokenizers, encode_source
    from keras_tf.translation import Seq2SeqTranslator

    tf.get_logger().setLevel("ERROR")

    sources, targets, corpus_name = corpus_sentences()
    tokenizers = Seq2SeqTokenizers.train(sources, targets, vocabulary_size=args.vocabulary_size)
    lengths = tokenizers.tokenize_source(sources).row_lengths().numpy()
    pool = [s for s, n in zip(sources, lengths) if SOURCE_TOKENS[0] <= n <= SOURCE_TOKENS[1]]
    # Batch 1: the first sentence; batches 8 and 32: the next ones, the 8 in the 32.
    texts = {size: [pool[0]] if size == 1 else (pool * size)[1 : size + 1] for size in BATCH_SIZES}

    model = serving_model(tokenizers)
    config = model.config
    task = Seq2SeqTranslator(
        model,
        Seq2SeqPreprocessor(tokenizers, config.max_source_length, config.max_target_length),
        DecodingConfig(max_length=args.max_length),
    )

    folder = args.keep or tempfile.mkdtemp(prefix="serving_latency_")
    start = time.perf_counter()
    export_names = {"default": "SavedModel, default (no XLA)", "xla": "SavedModel, xla=True"}
    exports = {
        key: export(
            model, tokenizers, os.path.join(folder, name), max_length=args.max_length, xla=xla
        )
        for key, name, xla in (("default", "translator", False), ("xla", "translator_xla", True))
    }
    if args.int8:
        # A copy from the same weights: the float model and its exports stay float32.
        int8_model = Seq2SeqTransformer(config)
        int8_model.set_weights(model.get_weights())
        int8_model.quantize("int8")
        exports["int8"] = export(
            int8_model, tokenizers, os.path.join(folder, "translator_int8"),
            max_length=args.max_length,
        )
        export_names["int8"] = "SavedModel, default export, int8"
    print(f"exported to {folder} in {time.perf_counter() - start:.0f}s", file=sys.stderr)

    # The work per call: generated tokens, END included, of every sentence timed.
    source_ids = {
        size: encode_source(tokenizers, texts[size], config.max_source_length).numpy()
        for size in BATCH_SIZES
    }
    greedy = {size: generate(model, ids, max_length=args.max_length).tokens
              for size, ids in source_ids.items()}
    generated = np.concatenate([(greedy[size] != 0).sum(axis=1) for size in (1, 32)])

    def generate_only(ids):
        return lambda: generate(model, ids, max_length=args.max_length)

    def task_generate(strings):
        return lambda: task.generate(strings)

    local = {
        "in-process Seq2SeqTranslator.generate (strings, XLA)": {
            size: task_generate(texts[size]) for size in BATCH_SIZES
        },
        "in-process generate only (ids, XLA)": {
            size: generate_only(source_ids[size]) for size in BATCH_SIZES
        },
    }
    ct2_name = "CTranslate2 float32 (ids, no tokenization)"
    ct2 = ctranslate2_peer(model, folder, source_ids, args.max_length)
    if ct2 is None:
        print("CTranslate2 peer skipped: `import ctranslate2` failed "
              '(pip install "keras-tf[ctranslate2]")')
    else:
        local[ct2_name] = ct2
        # Once, before timing: the same greedy ids as generate on the timed sentences?
        agree = total = 0
        for size in (1, 32):
            ours = generated_ids(greedy[size])
            theirs = [row.tolist() for row in ct2[size]()]
            agree += sum(a == b for a, b in zip(ours, theirs))
            total += len(ours)
        ct2_agreement = f"{agree} of {total}"
    for calls in local.values():  # compile and warm up
        for call in calls.values():
            call()

    # First request after a fresh load, before the timed rounds.
    fresh = {}
    for key in exports:
        for warmup in (True, False):
            results = [time_first_request(exports[key], warmup, texts[1])
                       for _ in range(args.fresh_loads)]
            fresh[key, warmup] = {
                field: float(np.median([r[field] for r in results]))
                for field in ("load", "warmup", "first", "second")
            }
            fresh[key, warmup]["records"] = results[0]["records"]

    server = ServingProcess(exports)
    for key in exports:  # trace and (xla) compile
        for size in BATCH_SIZES:
            server.time_calls(key, texts[size], 2 if size == 1 else 1)

    names = list(local) + list(export_names.values())
    times = {name: {size: [] for size in BATCH_SIZES} for name in names}
    repeats = {size: args.single_calls if size == 1 else args.batch_calls for size in BATCH_SIZES}
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name, calls in local.items():
            for size, call in calls.items():
                for _ in range(repeats[size]):
                    start = time.perf_counter()
                    call()
                    times[name][size].append(time.perf_counter() - start)
        for key, name in export_names.items():
            for size in BATCH_SIZES:
                times[name][size] += server.time_calls(key, texts[size], repeats[size])
    server.close()

    print(
        "\nModel: transformer_small shape, untrained, vocabulary "
        f"{tokenizers.source_vocabulary_size} "
        f"(SentencePiece on the {corpus_name}); greedy, max_length {args.max_length}, "
        f"{generated.mean():.1f} tokens generated per sentence on average (min "
        f"{generated.min()}, max {generated.max()}); source "
        f"{len(source_ids[1][0])} tokens (END included). {args.rounds} rounds of "
        f"{args.single_calls} single calls and {args.batch_calls} calls per batch size; "
        f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs."
    )
    if ct2 is not None:
        print(
            f"CTranslate2 float32 greedy ids equal generate's for {ct2_agreement} timed sentences "
            "(batch 1 and batch 32; an untrained model may differ on near ties). Its figures "
            "take token ids in and out: no tokenization or detokenization, which the "
            "SavedModel and Seq2SeqTranslator.generate figures include."
        )
    print(
        "SavedModels loaded into a TF1 session as TF Serving loads them, in a fresh process "
        "(tensorflow and tensorflow_text only), called through serving_default with session.run.\n"
    )
    print("| path | p50 latency, 1 sentence | p95 latency, 1 sentence "
          "| sentences/s, batch 8 | sentences/s, batch 32 |")
    print("|---|---|---|---|---|")
    p50, rate = {}, {}
    for name in names:
        p50[name] = percentile(times[name][1], 50) * 1000
        p95 = percentile(times[name][1], 95) * 1000
        rate[name] = {size: size / float(np.median(times[name][size])) for size in (8, 32)}
        print(f"| {name} | {p50[name]:.1f} ms | {p95:.1f} ms "
              f"| {rate[name][8]:.0f} | {rate[name][32]:.0f} |")

    print("\nFirst request after a fresh load (one sentence; load = session load, with the "
          f"warm-up replay where there is one; median of {args.fresh_loads} fresh processes):\n")
    print("| export | warm-up records replayed | load | of which warm-up "
          "| first request | second request |")
    print("|---|---|---|---|---|---|")
    for (key, warmup), result in fresh.items():
        replayed = f"yes ({result['records']})" if warmup else "no"
        print(f"| {export_names[key]} | {replayed} | {result['load']:.2f} s "
              f"| {result['warmup']:.2f} s | {result['first'] * 1000:.1f} ms "
              f"| {result['second'] * 1000:.1f} ms |")

    default, xla = export_names["default"], export_names["xla"]

    def target(value, goal, at_least):
        met = value >= goal if at_least else value <= goal
        return f"(target {'≥' if at_least else '≤'} {goal:g}: {'met' if met else 'missed'})"

    ratio = rate[default][32] / rate[xla][32]
    print(f"\ndefault ÷ xla=True export, sentences/s at batch 32: {ratio:.2f} "
          f"{target(ratio, 0.7, True)}")
    ratio = p50[default] / p50[xla]
    print(f"default ÷ xla=True export, p50 at batch 1: {ratio:.2f} {target(ratio, 2, False)}")
    if ct2 is not None:
        print(
            "default export ÷ CTranslate2 float32: p50 at batch 1 "
            f"{p50[default] / p50[ct2_name]:.2f}; "
            f"sentences/s at batch 8 {rate[default][8] / rate[ct2_name][8]:.2f}, "
            f"at batch 32 {rate[default][32] / rate[ct2_name][32]:.2f}"
        )
    if args.int8:
        ratio = rate[export_names["int8"]][32] / rate[default][32]
        print(f"int8 ÷ float32 default export, sentences/s at batch 32: {ratio:.2f} "
              f"{target(ratio, 1, True)}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--first-request":
        first_request(sys.argv[2])
    else:
        main()
