"""GPU check on JAX: training tok/s and MFU, cached decoding against the uncached loop, cached == uncached.

Made for a GPU host with only JAX and the keras and keras-hub wheels (no
TensorFlow): copy the repository, bring the wheels it lacks
(`benchmarks/gpu_wheels.sh`; CONTRIBUTING.md gives the steps), and run
`python benchmarks/gpu_check.py` from the repository root (keras_tf is
imported from the checkout). Under 4 minutes on an H200. In one run it
prints:

- the matmul peak of the device in bfloat16 and float32, measured first;
- training target tokens/s (median step of `model.fit`, XLA) and model FLOPs
  utilisation against that peak, for bench-small and transformer_base
  (vocabulary 32000), batch 64, 64 source and 64 target tokens, in
  mixed_bfloat16 and float32;
- decoding tokens/s with bench-small, 64 new tokens, batch 8 and 64: cached
  greedy and beam 4 (`generate`) against the uncached loop (the full model
  re-run on the whole prefix for every new token, the same greedy and beam
  loops, compiled as one XLA program with a fixed-size prefix buffer) and
  the ratio;
- the check that cached decoding gives the tokens of the uncached loop
  (greedy and beam 4; exit status 1 if not).

float32 matmuls run at full float32 precision ("highest"), for the peak as
for the models, so that the check compares like with like and "float32"
means float32 rather than TF32.

`--cpu` runs the same code on the CPU with small sizes (what CI runs).

Usage: python benchmarks/gpu_check.py [--cpu] [--repeats 3]
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run on the CPU with small sizes")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats of each decode")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps per model")
    return parser.parse_args(argv)


ARGS = parse_args(sys.argv[1:])
# Both must be set before JAX and Keras are imported.
if ARGS.cpu:
    os.environ["JAX_PLATFORMS"] = "cpu"
if os.environ.setdefault("KERAS_BACKEND", "jax") != "jax":
    sys.exit(f"gpu_check.py runs on JAX; received KERAS_BACKEND={os.environ['KERAS_BACKEND']!r}")
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]

import keras_tf  # noqa: E402

keras_tf.quiet_tensorflow()  # first: TensorFlow's C++ start-up lines kept off stderr
import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

import common  # noqa: E402
from keras_tf.decoding import beam_search, generate, greedy_search, tile_beams  # noqa: E402
from keras_tf.decoding.compile import xla_compile  # noqa: E402
from keras_tf.models import START_ID, Seq2SeqTransformer, get_preset  # noqa: E402
from keras_tf.training import MaskedSparseCategoricalCrossentropy  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")

if ARGS.cpu:
    # Small enough for CI on 2 cores; the figures only show that the code runs.
    SMALL = common.BENCH_SMALL.replace(
        source_vocabulary_size=256, target_vocabulary_size=256, d_model=64, num_heads=4,
        d_ff=128, num_encoder_layers=2, num_decoder_layers=2,
    )
    MODELS = {"bench-small (cpu size)": SMALL,
              "transformer_base (cpu size)": SMALL.replace(d_model=128, d_ff=256)}
    TRAIN_BATCH, LENGTH, DECODE_BATCHES, NEW_TOKENS, MATMUL_SIZE = 8, 16, (2,), 8, 256
else:
    MODELS = {"bench-small": common.BENCH_SMALL,
              "transformer_base": get_preset("transformer_base", source_vocabulary_size=32000,
                                             target_vocabulary_size=32000)}
    TRAIN_BATCH, LENGTH, DECODE_BATCHES, NEW_TOKENS, MATMUL_SIZE = 64, 64, (8, 64), 64, 8192
DTYPES = ("bfloat16", "float32")


def train_rate(config, dtype):
    """Median seconds per `fit` step after two warm-up steps, with XLA."""
    keras.utils.set_random_seed(0)
    policy = "mixed_bfloat16" if dtype == "bfloat16" else "float32"
    model = Seq2SeqTransformer(config, dtype=policy)
    model.compile(optimizer=keras.optimizers.Adam(1e-4),
                  loss=MaskedSparseCategoricalCrossentropy(), jit_compile=True)
    inputs, labels = common.random_batch(config, TRAIN_BATCH, LENGTH)
    steps = ARGS.steps + 2
    inputs = {k: np.tile(v, (steps, 1)) for k, v in inputs.items()}
    labels = np.tile(labels, (steps, 1))
    timer = common.StepTimer()
    model.fit(inputs, labels, batch_size=TRAIN_BATCH, epochs=1, verbose=0,
              shuffle=False, callbacks=[timer])
    return common.median(timer.times[2:])


def uncached_decoder(model, sources, beam_size):
    """The uncached loop, compiled: the full model on the whole prefix for every new token.

    The prefix lives in a fixed [rows, NEW_TOKENS] buffer (padding after the
    current position, which the causal and padding masks hide), so one XLA
    program serves every step; the buffer is the loop's cache, reordered
    with the beams like any cache.
    """
    rows = sources.shape[0] * beam_size
    encoder_tokens = tile_beams(ops.convert_to_tensor(sources), beam_size)

    def step_fn(tokens, prefix, index):
        prefix = ops.slice_update(prefix, [0, index], tokens)
        logits = model({"encoder_tokens": encoder_tokens, "decoder_tokens": prefix})
        return ops.take(logits, index, axis=1), prefix

    def run():
        prefix = ops.full((rows, NEW_TOKENS), START_ID, dtype="int32")
        if beam_size == 1:
            return greedy_search(step_fn, prefix, sources.shape[0], NEW_TOKENS, end_id=None)
        tokens, scores = beam_search(step_fn, prefix, sources.shape[0], NEW_TOKENS,
                                     beam_size=beam_size, end_id=None)
        return tokens[:, 0], scores[:, 0]

    compiled = xla_compile(run, lambda: model.variables)
    return lambda: tuple(np.asarray(ops.convert_to_numpy(x)) for x in compiled())


def timed(run):
    run()  # compile
    times = []
    for _ in range(ARGS.repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return common.median(times)


def main():
    start = time.perf_counter()
    device = jax.devices()[0]
    print(f"JAX {jax.__version__}, Keras {keras.__version__}, device: {device.device_kind} "
          f"({device.platform}){', --cpu sizes' if ARGS.cpu else ''}")

    peaks = {dtype: common.matmul_flops_per_second(MATMUL_SIZE, repeats=10, dtype=dtype)
             for dtype in DTYPES}
    print("matmul peak measured: " + ", ".join(
        f"{dtype} {peak / 1e12:.2f} TFLOP/s" for dtype, peak in peaks.items()))

    print(f"\ntraining, batch {TRAIN_BATCH}, {LENGTH} source and {LENGTH} target tokens, XLA")
    print(f"| model | dtype | median step s | target tok/s | MFU |\n|---|---|---|---|---|")
    for name, config in MODELS.items():
        flops = common.training_flops_per_step(config, TRAIN_BATCH, LENGTH, LENGTH)
        for dtype in DTYPES:
            step = train_rate(config, dtype)
            print(f"| {name} | {dtype} | {step:.4f} | {TRAIN_BATCH * LENGTH / step:,.0f} "
                  f"| {flops / step / peaks[dtype]:.1%} |", flush=True)

    name, config = next(iter(MODELS.items()))
    config = config.replace(dropout=0.0)
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(config)
    print(f"\ndecoding, {name}, float32, {NEW_TOKENS} new tokens, {LENGTH} source tokens")
    print("| batch | method | uncached tok/s | cached tok/s | cached / uncached |\n|---|---|---|---|---|")
    all_equal = True
    checks = []
    for batch in DECODE_BATCHES:
        sources = np.random.default_rng(batch).integers(
            4, config.source_vocabulary_size, size=(batch, LENGTH)).astype("int32")
        for method, beam_size in (("greedy", 1), ("beam4", 4)):
            kwargs = dict(method="beam", beam_size=4) if beam_size > 1 else {}
            cached = lambda: generate(model, sources, max_length=NEW_TOKENS, end_id=None, **kwargs)  # noqa: E731
            uncached = uncached_decoder(model, sources, beam_size)
            cached_out, uncached_out = cached(), uncached()
            equal = np.array_equal(cached_out.tokens, uncached_out[0])
            score_diff = float(np.max(np.abs(cached_out.scores - uncached_out[1])))
            all_equal &= equal
            checks.append(f"batch {batch} {method}: tokens equal {equal}, "
                          f"max |score difference| {score_diff:.1e}")
            cached_s, uncached_s = timed(cached), timed(uncached)
            tokens = batch * NEW_TOKENS
            print(f"| {batch} | {method} | {tokens / uncached_s:,.0f} | {tokens / cached_s:,.0f} "
                  f"| {uncached_s / cached_s:.1f}x |", flush=True)

    print("\ncached equals uncached:")
    for line in checks:
        print(f"  {line}")
    print(f"cached equals uncached: {all_equal}")
    print(f"total {time.perf_counter() - start:.0f} s")
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())
