"""Cache writes: `update_at` (a scatter, runs without XLA) against `keras.ops.slice_update`.

Decoding writes one new position per step into the key/value caches and the
token buffers. keras_tf writes with `keras_tf.layers.cache_update.update_at`,
`keras.ops.scatter_update`, which runs as a plain op everywhere, so the
SavedModel export needs no XLA. The peer is `keras.ops.slice_update`
(`XlaDynamicUpdateSlice` on TensorFlow), which XLA updates in place but TF
Serving cannot run without its XLA flag. A third variant, a select over all
positions (`ops.where`), also runs everywhere but rewrites the whole cache.

All run inside `generate` (one XLA program each), on bench-small models with
the same weights, batch 8, 64-token sources, exactly N new tokens,
interleaved rounds. Prints median seconds, tokens/s and each time over the
slice_update peer's (below 1: faster than the peer).

Usage:
    python benchmarks/cache_write.py [--lengths 64 256] [--repeats 5]
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras_tf  # noqa: E402

keras_tf.quiet_tensorflow()  # first: TensorFlow's C++ start-up lines kept off stderr
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from keras_tf.decoding import generate  # noqa: E402
from keras_tf.layers.cache_update import update_at  # noqa: E402
from keras_tf.models import Seq2SeqTransformer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BENCH_SMALL  # noqa: E402

BATCH_SIZE = 8
SOURCE_LENGTH = 64
# The modules that write into decoding buffers (by module name: the package
# `keras_tf.decoding` re-exports functions under the same names).
MODULES = [
    sys.modules[name]
    for name in (
        "keras_tf.layers.multi_head_attention",
        "keras_tf.decoding.greedy",
        "keras_tf.decoding.beam_search",
    )
]


def slice_update_at(tensor, index, update, axis):
    """The peer: the same write with `keras.ops.slice_update`."""
    start = [0] * len(tensor.shape)
    start[axis] = index
    return ops.slice_update(tensor, start, ops.cast(update, tensor.dtype))


def select_at(tensor, index, update, axis):
    """A select over all positions: runs everywhere, rewrites the whole buffer."""
    broadcast = [1] * len(tensor.shape)
    broadcast[axis] = -1
    positions = ops.reshape(ops.arange(ops.shape(tensor)[axis], dtype="int32"), broadcast)
    return ops.where(ops.equal(positions, index), ops.cast(update, tensor.dtype), tensor)


VARIANTS = {"update_at": update_at, "slice_update": slice_update_at, "select": select_at}


def use(write):
    for module in MODULES:
        module.update_at = write


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    config = BENCH_SMALL.replace(max_target_length=max(args.lengths))
    keras.utils.set_random_seed(0)
    models = {name: Seq2SeqTransformer(config) for name in VARIANTS}
    for model in models.values():
        model.set_weights(models["update_at"].get_weights())
    sources = np.random.default_rng(0).integers(
        4, config.source_vocabulary_size, size=(BATCH_SIZE, SOURCE_LENGTH)
    ).astype("int32")

    def run(model, n, method):
        return generate(
            model, sources, max_length=n, method=method, beam_size=4, end_id=None
        ).tokens

    # Each model traces (and compiles) once with its write op; later calls
    # reuse that program, whatever `update_at` names then.
    print(f"Keras {keras.__version__} ({keras.backend.backend()}), {os.cpu_count()} CPUs")
    keys = [(method, n) for method in ("greedy", "beam") for n in args.lengths]
    for method, n in keys:
        tokens = {}
        for name, write in VARIANTS.items():
            use(write)
            tokens[name] = run(models[name], n, method)
        use(update_at)
        same = all(np.array_equal(t, tokens["slice_update"]) for t in tokens.values())
        print(f"{method} {n}: same tokens from all variants: {same}", flush=True)

    times = {(name, key): [] for name in VARIANTS for key in keys}
    for _ in range(args.repeats):
        for key in keys:
            for name, model in models.items():
                start = time.perf_counter()
                run(model, key[1], key[0])
                times[name, key].append(time.perf_counter() - start)
    print()
    print("| method | new tokens | " + " | ".join(f"{n} s (tok/s)" for n in VARIANTS)
          + " | update_at / slice_update | select / slice_update |")
    print("|---" * (len(VARIANTS) + 4) + "|")
    for method, n in keys:
        m = {name: float(np.median(times[name, (method, n)])) for name in VARIANTS}
        cells = [f"{m[name]:.3f} ({BATCH_SIZE * n / m[name]:,.0f})" for name in VARIANTS]
        ratios = [f"{m['update_at'] / m['slice_update']:.2f}", f"{m['select'] / m['slice_update']:.2f}"]
        print(f"| {method} | {n} | " + " | ".join(cells + ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
