"""Cache writes: `update_at` (a select, runs without XLA) against `keras.ops.slice_update`.

Decoding writes one new position per step into the key/value caches and the
token buffers. keras_tf writes with `keras_tf.layers.cache_update.update_at`,
a select over the positions that runs as plain ops everywhere, so the
SavedModel export needs no XLA. The peer is `keras.ops.slice_update`
(`XlaDynamicUpdateSlice` on TensorFlow), which XLA updates in place but TF
Serving cannot run without its XLA flag.

Both run inside `generate` (one XLA program each), on two bench-small models
with the same weights, batch 8, 64-token sources, exactly N new tokens,
interleaved rounds. Prints median seconds, tokens/s and the ratio
update_at / slice_update (below 1: update_at is faster).

Usage:
    python benchmarks/cache_write.py [--lengths 64 256] [--repeats 5]
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

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
    ours = Seq2SeqTransformer(config)
    peer = Seq2SeqTransformer(config)
    peer.set_weights(ours.get_weights())
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
        use(update_at)
        a = run(ours, n, method)
        use(slice_update_at)
        b = run(peer, n, method)
        use(update_at)
        same = np.array_equal(a, b)
        print(f"{method} {n}: same tokens: {same}", flush=True)

    times = {(who, key): [] for who in ("update_at", "slice_update") for key in keys}
    for _ in range(args.repeats):
        for key in keys:
            for who, model in (("update_at", ours), ("slice_update", peer)):
                start = time.perf_counter()
                run(model, key[1], key[0])
                times[who, key].append(time.perf_counter() - start)
    print()
    print("| method | new tokens | update_at s (tok/s) | slice_update s (tok/s) | ratio |")
    print("|---|---|---|---|---|")
    for method, n in keys:
        a = float(np.median(times["update_at", (method, n)]))
        b = float(np.median(times["slice_update", (method, n)]))
        print(
            f"| {method} | {n} | {a:.3f} ({BATCH_SIZE * n / a:,.0f}) | "
            f"{b:.3f} ({BATCH_SIZE * n / b:,.0f}) | {a / b:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
