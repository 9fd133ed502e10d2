"""Decoding speed: the tutorials' uncached loop against cached XLA greedy and beam search.

Bench-small (vocabulary 8000, d_model 256, 8 heads, d_ff 1024, 3 + 3
layers), random weights, a batch of 8 sources of 64 tokens. The end token
is disabled, so each run generates exactly N new tokens. In the same run,
measurements interleaved so that machine load hits all of them alike:

- uncached: the full model re-run on the whole prefix for every new token,
  from a Python loop, as the TensorFlow "Transformer" tutorial and the
  keras.io translation example do (`greedy_search_uncached`, eager), and
  the same loop with the model in a `tf.function` (graph mode, one trace
  for all prefix lengths), a stronger version of the same algorithm;
- cached greedy: `generate(method="greedy")`, one XLA program;
- beam 4: `generate(method="beam", beam_size=4)`.

Prints median seconds per batch, new tokens per second (batch × N / time;
beam search counts the returned tokens, not the 4 hypotheses) and the
ratios of the issue's targets: cached >= 25x uncached at 64 new tokens,
time(256) <= 5x time(64), beam 4 <= 4x greedy.

`--quantize int8` also times the same model with int8 weights
(`Seq2SeqTransformer.quantize`), greedy and beam 4, interleaved with the
float32 runs, and prints int8 / float32 tokens per second and how many
sequences decode to the same tokens.

`--backend jax` runs the same on JAX; there `generate` is one `jax.jit`
program and uncached_graph is the forward pass under `jax.jit`, compiled
once per prefix length during the warm-up. `benchmarks/backends.py`
compares the backends in one run.

Usage:
    python benchmarks/decode_speed.py [--lengths 16 32 64 128 256]
        [--repeats 5] [--uncached-max-length 128] [--uncached-repeats 3]
        [--backend tensorflow|jax] [--quantize int8]
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend_flag import add_backend_argument, set_backend_from_argv  # noqa: E402

BACKEND = set_backend_from_argv()

import keras_tf  # noqa: E402,F401  (first: TensorFlow's C++ start-up lines kept off stderr)
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

import common  # noqa: E402
from keras_tf.decoding import generate, greedy_search_uncached  # noqa: E402
from keras_tf.decoding.compile import xla_compile  # noqa: E402
from keras_tf.decoding.greedy import exclude_unpickable  # noqa: E402
from keras_tf.models import START_ID, Seq2SeqTransformer  # noqa: E402
from keras_tf.models.seq2seq_transformer import QUANTIZATION_MODES  # noqa: E402

BATCH_SIZE = 8
SOURCE_LENGTH = 64
# Bench-small with room for 64 source tokens and 256 new target tokens.
BENCH_SMALL = common.BENCH_SMALL.replace(
    max_source_length=SOURCE_LENGTH, max_target_length=320
)


def uncached_graph_loop(model):
    """The uncached loop with the full model in one `tf.function` traced for any prefix length.

    On JAX, which has no graph mode without XLA: the forward pass under
    `jax.jit`, one program per prefix length.
    """
    if BACKEND == "jax":
        next_tokens_jax = xla_compile(
            lambda encoder_tokens, decoder_tokens: ops.argmax(exclude_unpickable(model(
                {"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens}
            )[:, -1, :]), axis=-1),
            lambda: model.variables,
        )

        def run_jax(encoder_tokens, max_length):
            prefix = np.full((BATCH_SIZE, 1), START_ID, "int32")
            for _ in range(max_length):
                picked = np.asarray(ops.convert_to_numpy(next_tokens_jax(encoder_tokens, prefix)))
                prefix = np.concatenate([prefix, picked[:, None].astype("int32")], axis=1)
            return prefix[:, 1:]

        return run_jax

    return common.tf_uncached_greedy(model, BATCH_SIZE)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--uncached-max-length", type=int, default=128,
        help="time the uncached loops only up to this many new tokens (they grow quadratically)",
    )
    parser.add_argument("--uncached-repeats", type=int, default=3)
    parser.add_argument(
        "--quantize", choices=QUANTIZATION_MODES,
        help="also time the model with these weights, beside float32",
    )
    add_backend_argument(parser)
    args = parser.parse_args(argv)
    too_long = [n for n in args.lengths if not 1 <= n <= BENCH_SMALL.max_target_length]
    if too_long:
        parser.error(
            f"--lengths must be in [1, {BENCH_SMALL.max_target_length}]; received {too_long}"
        )
    return args


def main(argv=None):
    args = parse_args(argv)
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(BENCH_SMALL)
    sources = np.random.default_rng(0).integers(
        4, BENCH_SMALL.source_vocabulary_size, size=(BATCH_SIZE, SOURCE_LENGTH)
    ).astype("int32")
    graph_loop = uncached_graph_loop(model)
    quantized = None
    if args.quantize:
        quantized = Seq2SeqTransformer(BENCH_SMALL)
        quantized.set_weights(model.get_weights())
        quantized.quantize(args.quantize)

    runs = {}  # (name, length) -> callable
    for n in args.lengths:
        runs["greedy", n] = lambda n=n: generate(model, sources, max_length=n, end_id=None).tokens
        runs["beam4", n] = lambda n=n: generate(
            model, sources, max_length=n, method="beam", beam_size=4, end_id=None
        ).tokens
        if quantized is not None:
            runs["greedy_q", n] = lambda n=n: generate(
                quantized, sources, max_length=n, end_id=None
            ).tokens
            runs["beam4_q", n] = lambda n=n: generate(
                quantized, sources, max_length=n, method="beam", beam_size=4, end_id=None
            ).tokens
        if n <= args.uncached_max_length:
            runs["uncached_eager", n] = lambda n=n: greedy_search_uncached(
                model, sources, n, end_id=None
            ).tokens
            runs["uncached_graph", n] = lambda n=n: graph_loop(sources, n)

    print(f"backend {BACKEND}, Keras {keras.__version__}, {os.cpu_count()} CPUs")
    print("warm-up (XLA compiles each length once) ...", flush=True)
    outputs = {key: run() for key, run in runs.items()}
    for n in args.lengths:
        for name in ("uncached_eager", "uncached_graph"):
            if (name, n) in outputs and not np.array_equal(outputs[name, n], outputs["greedy", n]):
                print(f"WARNING: {name} tokens differ from cached greedy at {n} new tokens")

    times = {key: [] for key in runs}
    for repeat in range(max(args.repeats, args.uncached_repeats)):
        for (name, n), run in runs.items():
            wanted = args.uncached_repeats if name.startswith("uncached") else args.repeats
            if repeat < wanted:
                start = time.perf_counter()
                run()
                times[name, n].append(time.perf_counter() - start)
        print(f"repeat {repeat + 1} done", flush=True)
    median = {key: float(np.median(value)) for key, value in times.items()}

    names = ("uncached_eager", "uncached_graph", "greedy", "beam4")
    print()
    print("| new tokens | " + " | ".join(f"{name} s (tok/s)" for name in names)
          + " | greedy vs eager | greedy vs graph | beam4 / greedy |")
    print("|---" * (len(names) + 4) + "|")
    for n in args.lengths:
        cells = []
        for name in names:
            if (name, n) in median:
                seconds = median[name, n]
                cells.append(f"{seconds:.3f} ({BATCH_SIZE * n / seconds:,.0f})")
            else:
                cells.append("not run")
        ratios = []
        for baseline in ("uncached_eager", "uncached_graph"):
            ratios.append(
                f"{median[baseline, n] / median['greedy', n]:.1f}x"
                if (baseline, n) in median else "-"
            )
        ratios.append(f"{median['beam4', n] / median['greedy', n]:.2f}x")
        print(f"| {n} | " + " | ".join(cells + ratios) + " |")

    print()
    if 64 in args.lengths and 256 in args.lengths:
        for name in ("greedy", "beam4"):
            growth = median[name, 256] / median[name, 64]
            print(f"{name}: time(256) / time(64) = {growth:.2f} (target <= 5)")
    if ("uncached_eager", 64) in median:
        speedup = median["uncached_eager", 64] / median["greedy", 64]
        print(f"cached greedy vs the tutorials' loop at 64 new tokens: {speedup:.1f}x (target >= 25)")
    worst = max(median["beam4", n] / median["greedy", n] for n in args.lengths)
    print(f"beam 4 / greedy, worst length: {worst:.2f}x (target <= 4)")
    if quantized is not None:
        print_quantized(args.quantize, args.lengths, median, outputs)
    return 0


def print_quantized(mode, lengths, median, outputs):
    """float32 against `mode` weights: tokens per second, their ratio, same-token rows."""
    print()
    print(f"| new tokens | method | float32 tok/s | {mode} tok/s | {mode} / float32 "
          "| same tokens |")
    print("|---" * 6 + "|")
    for n in lengths:
        for name in ("greedy", "beam4"):
            fp32, quantized = BATCH_SIZE * n / median[name, n], BATCH_SIZE * n / median[name + "_q", n]
            same = (outputs[name, n] == outputs[name + "_q", n]).all(axis=-1).mean()
            print(f"| {n} | {name} | {fp32:,.0f} | {quantized:,.0f} | {quantized / fp32:.2f}x "
                  f"| {same:.0%} |")


if __name__ == "__main__":
    sys.exit(main())
