"""Decoding speed: the tutorials' uncached loop against cached XLA greedy and beam search.

Bench-small (vocabulary 8000, d_model 256, 8 heads, d_ff 1024, 3 + 3
layers), random weights, sources of 64 tokens, at each batch size of
`--batch-sizes` (default 1, 8 and 64, issue 50's: one user, the batch of the
earlier figures, bulk translation); a batch of b decodes the first b rows of
the same sources. The end token is disabled, so each run generates exactly N
new tokens. In the same run, measurements interleaved so that machine load
hits all of them alike:

- uncached, at batch 8 only (they are slow): the full model re-run on the
  whole prefix for every new token, from a Python loop, as the TensorFlow
  "Transformer" tutorial and the keras.io translation example do
  (`greedy_search_uncached`, eager), and the same loop with the model in a
  `tf.function` (graph mode, one trace for all prefix lengths), a stronger
  version of the same algorithm; they run only when 8 is among the batch
  sizes, since their ratios are against cached greedy at batch 8;
- cached greedy: `generate(method="greedy")`, one XLA program per batch
  size and length;
- beam 4: `generate(method="beam", beam_size=4)`.

Prints, a row per batch size and length, median seconds per batch and new
tokens per second (batch × N / time; beam search counts the returned tokens,
not the 4 hypotheses), and the ratios of the earlier issues' targets: cached
>= 25x uncached at 64 new tokens (batch 8), time(256) <= 5x time(64) and
beam 4 <= 4x greedy (at each batch size).

`--quantize int8` also times the same model with int8 weights
(`Seq2SeqTransformer.quantize`), greedy and beam 4 at each batch size,
interleaved with the float32 runs, and prints int8 / float32 tokens per
second and how many sequences decode to the same tokens.

`--ctranslate2` also times CTranslate2 (`pip install -e ".[bench]"`), the
same model converted by `ctranslate2_convert.py`, in float32 and with int8
weights (compute_type="int8"; intra_threads = the CPU count, inter_threads
1), greedy and beam 4 with exactly N new tokens at each batch size,
interleaved with our runs. It prints one table per method, a row per batch
size and length: keras_tf float32 (and, with `--quantize int8`, int8),
CTranslate2 float32 and int8 tokens per second, keras_tf / CTranslate2
float32 and our int8 / its int8. Then issue 50's targets at 64 new tokens,
each as a `ratio (target ≥ x: met/missed)` line: float32 greedy and beam 4
≥ 1.2× CTranslate2 float32 at batch 1, 8 and 64; with `--quantize int8`, our
int8 ≥ CTranslate2 int8 at batch 64. First it checks the conversion, at
batch 8: per-token log-probabilities of a random target, teacher-forced
(CTranslate2's `score_batch` against our log-softmax), must agree within
LOG_PROB_TOLERANCE, and it prints the largest difference and the fraction of
sequences whose greedy tokens equal ours.

`--backend jax` runs the same on JAX; there `generate` is one `jax.jit`
program and uncached_graph is the forward pass under `jax.jit`, compiled
once per prefix length during the warm-up. `benchmarks/backends.py`
compares the backends in one run (at batch 8).

Usage:
    python benchmarks/decode_speed.py [--lengths 16 32 64 128 256]
        [--batch-sizes 1 8 64] [--repeats 5] [--uncached-max-length 128]
        [--uncached-repeats 3] [--backend tensorflow|jax] [--quantize int8]
        [--ctranslate2]

Issue 50's table (64 new tokens, batch 1, 8 and 64, the peer and int8):
    python benchmarks/decode_speed.py --lengths 64 --ctranslate2 --quantize int8
        --uncached-max-length 0
"""

import argparse
import importlib.util
import os
import tempfile
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend_flag import add_backend_argument, set_backend_from_argv  # noqa: E402

BACKEND = set_backend_from_argv()

import keras_tf  # noqa: E402

keras_tf.quiet_tensorflow()  # first: TensorFlow's C++ start-up lines kept off stderr
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

import common  # noqa: E402
from keras_tf.decoding import generate, greedy_search_uncached  # noqa: E402
from keras_tf.decoding.compile import xla_compile  # noqa: E402
from keras_tf.decoding.greedy import exclude_unpickable  # noqa: E402
from keras_tf.models import END_ID, START_ID, Seq2SeqTransformer  # noqa: E402
from keras_tf.models.seq2seq_transformer import QUANTIZATION_MODES  # noqa: E402

# The batch sizes of issue 50's table: one user, the batch of the earlier
# figures, bulk translation.
BATCH_SIZES = (1, 8, 64)
# The uncached loops re-run the full model on the prefix every step: one batch size only.
UNCACHED_BATCH_SIZE = 8
SOURCE_LENGTH = 64
# Bench-small with room for 64 source tokens and 256 new target tokens.
BENCH_SMALL = common.BENCH_SMALL.replace(
    max_source_length=SOURCE_LENGTH, max_target_length=320
)
# Largest |log-probability difference| accepted between CTranslate2 float32 and ours.
LOG_PROB_TOLERANCE = 1e-3
# Issue 50's targets against CTranslate2, at TARGET_LENGTH new tokens:
# (our precision, its precision, least ratio of tokens per second, batch sizes).
TARGET_LENGTH = 64
TARGETS = (
    ("float32", "float32", 1.2, (1, 8, 64)),
    ("int8", "int8", 1.0, (64,)),
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
            prefix = np.full((UNCACHED_BATCH_SIZE, 1), START_ID, "int32")
            for _ in range(max_length):
                picked = np.asarray(ops.convert_to_numpy(next_tokens_jax(encoder_tokens, prefix)))
                prefix = np.concatenate([prefix, picked[:, None].astype("int32")], axis=1)
            return prefix[:, 1:]

        return run_jax

    return common.tf_uncached_greedy(model, UNCACHED_BATCH_SIZE)


def ctranslate2_translators(model):
    """CTranslate2 `Translator`s of `model`: {"float32": ..., "int8": ...} (int8 weights).

    The int8 model is converted with quantization="int8" and run with
    compute_type="int8" (int8 matmuls, the rest in float32).
    """
    import ctranslate2
    from ctranslate2_convert import convert

    translators = {}
    # The translators hold the weights in memory: the directories can go.
    with tempfile.TemporaryDirectory() as directory:
        for compute_type, quantization in (("float32", None), ("int8", "int8")):
            path = convert(model, os.path.join(directory, compute_type), quantization)
            translators[compute_type] = ctranslate2.Translator(
                path, device="cpu", compute_type=compute_type,
                intra_threads=os.cpu_count(), inter_threads=1,
            )
    return translators


def check_ctranslate2(model, translator, sources, length=SOURCE_LENGTH):
    """CTranslate2 float32 against ours: `(max |log-probability difference|, greedy agreement)`.

    The log-probabilities are those of a random target of `length` tokens and
    the end token, teacher-forced (CTranslate2's `score_batch` against our
    log-softmax of the logits); the agreement is the fraction of sources
    whose `length` greedy tokens are the same.
    """
    from ctranslate2_convert import token_names, translate

    batch_size = sources.shape[0]
    targets = np.random.default_rng(1).integers(
        4, BENCH_SMALL.target_vocabulary_size, size=(batch_size, length)
    ).astype("int32")
    start = np.full((batch_size, 1), START_ID, "int32")
    end = np.full((batch_size, 1), END_ID, "int32")
    logits = model({"encoder_tokens": sources, "decoder_tokens": np.concatenate([start, targets], 1)})
    # ours: [batch, length + 1], the log-probability of each target token and of the end
    labels = np.concatenate([targets, end], axis=1)
    ours = np.take_along_axis(
        ops.convert_to_numpy(ops.log_softmax(logits, axis=-1)), labels[..., None], axis=-1
    )[..., 0]
    scored = translator.score_batch(token_names(sources), token_names(targets))
    theirs = np.array([result.log_probs for result in scored], dtype="float32")
    if theirs.shape != ours.shape:
        raise AssertionError(
            f"CTranslate2 scored {theirs.shape} tokens; expected {ours.shape} (the targets + end)"
        )
    greedy = generate(model, sources, max_length=length, end_id=None).tokens
    same = (translate(translator, token_names(sources), length) == greedy).all(axis=-1)
    return float(np.abs(ours - theirs).max()), float(same.mean())


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    parser.add_argument(
        "--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES),
        help="time every cached figure at each of these batch sizes "
        f"(the uncached loops at {UNCACHED_BATCH_SIZE} only)",
    )
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
    parser.add_argument(
        "--ctranslate2", action="store_true",
        help="also time CTranslate2 (float32 and int8) on the same model",
    )
    add_backend_argument(parser)
    args = parser.parse_args(argv)
    if args.ctranslate2 and importlib.util.find_spec("ctranslate2") is None:
        sys.exit('--ctranslate2 needs CTranslate2: pip install -e ".[bench]"')
    too_long = [n for n in args.lengths if not 1 <= n <= BENCH_SMALL.max_target_length]
    if too_long:
        parser.error(
            f"--lengths must be in [1, {BENCH_SMALL.max_target_length}]; received {too_long}"
        )
    if min(args.batch_sizes) < 1:
        parser.error(f"--batch-sizes must be positive; received {args.batch_sizes}")
    args.batch_sizes = sorted(set(args.batch_sizes))
    return args


def main(argv=None):
    args = parse_args(argv)
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(BENCH_SMALL)
    # Every batch size decodes the first rows of the same sources.
    all_sources = np.random.default_rng(0).integers(
        4, BENCH_SMALL.source_vocabulary_size,
        size=(max(*args.batch_sizes, UNCACHED_BATCH_SIZE), SOURCE_LENGTH),
    ).astype("int32")
    uncached_lengths = [
        n for n in args.lengths
        if n <= args.uncached_max_length and UNCACHED_BATCH_SIZE in args.batch_sizes
    ]
    graph_loop = uncached_graph_loop(model) if uncached_lengths else None
    quantized = None
    if args.quantize:
        quantized = Seq2SeqTransformer(BENCH_SMALL)
        quantized.set_weights(model.get_weights())
        quantized.quantize(args.quantize)
    translators = ctranslate2_translators(model) if args.ctranslate2 else {}

    runs = {}  # (name, batch size, new tokens) -> callable
    for b in args.batch_sizes:
        sources = all_sources[:b]
        for n in args.lengths:
            for suffix, decoder in (("", model), ("_q", quantized)):
                if decoder is None:
                    continue
                runs["greedy" + suffix, b, n] = lambda m=decoder, s=sources, n=n: generate(
                    m, s, max_length=n, end_id=None
                ).tokens
                runs["beam4" + suffix, b, n] = lambda m=decoder, s=sources, n=n: generate(
                    m, s, max_length=n, method="beam", beam_size=4, end_id=None
                ).tokens
            if b == UNCACHED_BATCH_SIZE and n in uncached_lengths:
                runs["uncached_eager", b, n] = lambda s=sources, n=n: greedy_search_uncached(
                    model, s, n, end_id=None
                ).tokens
                runs["uncached_graph", b, n] = lambda s=sources, n=n: graph_loop(s, n)
    if translators:
        from ctranslate2_convert import token_names, translate

        for b in args.batch_sizes:
            source_names = token_names(all_sources[:b])
            for n in args.lengths:
                for precision, translator in translators.items():
                    suffix = "" if precision == "float32" else "_int8"
                    runs["ct2_greedy" + suffix, b, n] = lambda s=source_names, n=n, t=translator: (
                        translate(t, s, n)
                    )
                    runs["ct2_beam4" + suffix, b, n] = lambda s=source_names, n=n, t=translator: (
                        translate(t, s, n, beam_size=4)
                    )

    print(f"backend {BACKEND}, Keras {keras.__version__}, {os.cpu_count()} CPUs, "
          f"batch sizes {args.batch_sizes}")
    if translators:
        checked = all_sources[:UNCACHED_BATCH_SIZE]
        difference, agreement = check_ctranslate2(model, translators["float32"], checked)
        print(f"CTranslate2 float32 against keras_tf: max |log-prob difference| {difference:.2e} "
              f"(tolerance {LOG_PROB_TOLERANCE:g}), same greedy tokens in {agreement:.0%} "
              f"of {len(checked)} sequences of {SOURCE_LENGTH}", flush=True)
        if not difference < LOG_PROB_TOLERANCE:
            sys.exit("CTranslate2's log-probabilities differ from ours: the conversion is wrong")
    print("warm-up (XLA compiles each batch size and length once) ...", flush=True)
    outputs = {key: run() for key, run in runs.items()}
    for name, b, n in outputs:
        if name.startswith("uncached") and not np.array_equal(
            outputs[name, b, n], outputs["greedy", b, n]
        ):
            print(f"WARNING: {name} tokens differ from cached greedy at batch {b}, {n} new tokens")

    times = {key: [] for key in runs}
    for repeat in range(max(args.repeats, args.uncached_repeats if uncached_lengths else 0)):
        for (name, b, n), run in runs.items():
            wanted = args.uncached_repeats if name.startswith("uncached") else args.repeats
            if repeat < wanted:
                start = time.perf_counter()
                run()
                times[name, b, n].append(time.perf_counter() - start)
        print(f"repeat {repeat + 1} done", flush=True)
    median = {key: float(np.median(value)) for key, value in times.items()}

    print_cached(args.batch_sizes, args.lengths, median)
    print_ratios(args, median, uncached_lengths)
    if quantized is not None:
        print_quantized(args.quantize, args.batch_sizes, args.lengths, median, outputs)
    if translators:
        print_ctranslate2(args.batch_sizes, args.lengths, median, outputs, args.quantize)
        print_targets(args.batch_sizes, args.lengths, median, args.quantize)
    return 0


def tokens_per_second(median, key):
    """New tokens per second of the run `key` = (name, batch size, new tokens)."""
    _, batch_size, new_tokens = key
    return batch_size * new_tokens / median[key]


def print_cached(batch_sizes, lengths, median):
    """Seconds (tokens per second) of each decoder, a row per batch size and length."""
    names = ("uncached_eager", "uncached_graph", "greedy", "beam4")
    print()
    print("| batch | new tokens | " + " | ".join(f"{name} s (tok/s)" for name in names)
          + " | greedy vs eager | greedy vs graph | beam4 / greedy |")
    print("|---" * (len(names) + 5) + "|")
    for b in batch_sizes:
        for n in lengths:
            cells = []
            for name in names:
                if (name, b, n) in median:
                    seconds = median[name, b, n]
                    cells.append(f"{seconds:.3f} ({tokens_per_second(median, (name, b, n)):,.0f})")
                else:
                    cells.append("not run")
            ratios = []
            for baseline in ("uncached_eager", "uncached_graph"):
                ratios.append(
                    f"{median[baseline, b, n] / median['greedy', b, n]:.1f}x"
                    if (baseline, b, n) in median else "-"
                )
            ratios.append(f"{median['beam4', b, n] / median['greedy', b, n]:.2f}x")
            print(f"| {b} | {n} | " + " | ".join(cells + ratios) + " |")


def print_ratios(args, median, uncached_lengths):
    """The earlier issues' targets: growth with length, cached against uncached, beam 4 / greedy."""
    print()
    for b in args.batch_sizes:
        if 64 in args.lengths and 256 in args.lengths:
            for name in ("greedy", "beam4"):
                growth = median[name, b, 256] / median[name, b, 64]
                print(f"batch {b}, {name}: time(256) / time(64) = {growth:.2f} (target <= 5)")
    b = UNCACHED_BATCH_SIZE
    if ("uncached_eager", b, 64) in median:
        speedup = median["uncached_eager", b, 64] / median["greedy", b, 64]
        print(f"cached greedy vs the tutorials' loop at 64 new tokens, batch {b}: "
              f"{speedup:.1f}x (target >= 25)")
    elif not uncached_lengths and args.uncached_max_length >= min(args.lengths):
        print(f"uncached loops not run: they run at batch {b} only, which --batch-sizes lacks")
    for b in args.batch_sizes:
        worst = max(median["beam4", b, n] / median["greedy", b, n] for n in args.lengths)
        print(f"batch {b}, beam 4 / greedy, worst length: {worst:.2f}x (target <= 4)")


def print_quantized(mode, batch_sizes, lengths, median, outputs):
    """float32 against `mode` weights: tokens per second, their ratio, same-token rows."""
    print()
    print(f"| batch | new tokens | method | float32 tok/s | {mode} tok/s | {mode} / float32 "
          "| same tokens |")
    print("|---" * 7 + "|")
    for b in batch_sizes:
        for n in lengths:
            for name in ("greedy", "beam4"):
                fp32 = tokens_per_second(median, (name, b, n))
                quantized = tokens_per_second(median, (name + "_q", b, n))
                same = (outputs[name, b, n] == outputs[name + "_q", b, n]).all(axis=-1).mean()
                print(f"| {b} | {n} | {name} | {fp32:,.0f} | {quantized:,.0f} "
                      f"| {quantized / fp32:.2f}x | {same:.0%} |")


def print_ctranslate2(batch_sizes, lengths, median, outputs, mode=None):
    """keras_tf against CTranslate2, one table per method: tokens per second and the ratios."""
    for name in ("greedy", "beam4"):
        header = "| batch | new tokens | keras_tf float32 tok/s"
        if mode is not None:
            header += f" | keras_tf {mode} tok/s"
        header += " | CT2 float32 tok/s | CT2 int8 tok/s | keras_tf / CT2 float32"
        if mode is not None:
            header += f" | keras_tf {mode} / CT2 int8"
        header += " | same tokens as CT2 float32 |"
        print(f"\n{name}, keras_tf against CTranslate2:")
        print(header)
        print("|---" * (header.count("|") - 1) + "|")
        for b in batch_sizes:
            for n in lengths:
                ours = tokens_per_second(median, (name, b, n))
                theirs = tokens_per_second(median, ("ct2_" + name, b, n))
                theirs_int8 = tokens_per_second(median, ("ct2_" + name + "_int8", b, n))
                cells = [f"{ours:,.0f}"]
                if mode is not None:
                    ours_q = tokens_per_second(median, (name + "_q", b, n))
                    cells.append(f"{ours_q:,.0f}")
                cells += [f"{theirs:,.0f}", f"{theirs_int8:,.0f}", f"{ours / theirs:.2f}x"]
                if mode is not None:
                    cells.append(f"{ours_q / theirs_int8:.2f}x")
                same = (outputs[name, b, n] == outputs["ct2_" + name, b, n]).all(axis=-1).mean()
                print(f"| {b} | {n} | " + " | ".join(cells) + f" | {same:.0%} |")


def print_targets(batch_sizes, lengths, median, mode=None):
    """Issue 50's targets against CTranslate2 at TARGET_LENGTH new tokens: met or missed."""
    print()
    if TARGET_LENGTH not in lengths:
        print(f"issue 50's targets are set at {TARGET_LENGTH} new tokens: not checked "
              f"(--lengths has no {TARGET_LENGTH})")
        return
    n = TARGET_LENGTH
    print(f"issue 50's targets, {n} new tokens:")
    for ours, theirs, least, target_batch_sizes in TARGETS:
        if ours != "float32" and ours != mode:
            print(f"keras_tf {ours} / CT2 {theirs}: not checked (needs --quantize {ours})")
            continue
        suffix = "" if ours == "float32" else "_q"
        their_suffix = "" if theirs == "float32" else "_int8"
        for name in ("greedy", "beam4"):
            for b in target_batch_sizes:
                label = f"{name}, batch {b}: keras_tf {ours} / CT2 {theirs}"
                if b not in batch_sizes:
                    print(f"{label}: not measured (add {b} to --batch-sizes)")
                    continue
                ratio = (tokens_per_second(median, (name + suffix, b, n))
                         / tokens_per_second(median, ("ct2_" + name + their_suffix, b, n)))
                status = "met" if ratio >= least else "missed"
                print(f"{label} = {ratio:.2f}x (target ≥ {least:g}: {status})")


if __name__ == "__main__":
    sys.exit(main())
