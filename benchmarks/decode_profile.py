"""Where a decoding step's time goes: XLA:CPU's own timing of every operation of the compiled loop.

Runs `generate` on bench-small (vocabulary 8000, d_model 256, 8 heads, d_ff
1024, 3 + 3 layers; 64-token sources, 64 new tokens, end token off) once
under TensorFlow's profiler, in a fresh process per batch size and method.
XLA:CPU runs the compiled program as a sequence of thunks, one per fused
operation, and the profiler times each one. Each thunk is named after the
TensorFlow op it was compiled from (XLA's optimized HLO, dumped in the same
process), and the times are summed per part of a step and divided by the
number of steps:

* projections: the decoder's q/k/v product, the attention outputs, the
  cross-attention query;
* attention: the products with the cached keys and values, softmax and masks;
* feed-forward; layer norms; cache writes;
* output layer: the product over the vocabulary;
* search: log-softmax, top-k and the bookkeeping of greedy or beam search;
* before the loop: the encoder and the cross-attention keys and values,
  once per call (shown per step).

    python benchmarks/decode_profile.py --batch-sizes 64 --methods greedy beam
"""

import argparse
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NEW_TOKENS = 64

# (part, test on the TensorFlow op name and type), the first match wins.
PARTS = [
    ("before the loop", lambda name, kind: not name.startswith("while/")),
    ("layer norms", lambda name, kind: "_norm" in name),
    ("feed-forward", lambda name, kind: "feed_forward" in name),
    ("output layer", lambda name, kind: "step_head" in name and kind == "MatMul"),
    ("cache writes", lambda name, kind: kind == "TensorScatterUpdate" and "decoder_block" in name),
    ("projections", lambda name, kind: kind == "MatMul" and "decoder_block" in name),
    ("attention", lambda name, kind: "decoder_block" in name),
    ("search", lambda name, kind: True),
]


def part_of(op_name, op_type):
    return next(part for part, test in PARTS if test(op_name, op_type))


def hlo_ops(dump_dir):
    """`{instruction name: (TensorFlow op name, op type)}` of the largest optimized module."""
    files = glob.glob(os.path.join(dump_dir, "*cpu_after_optimizations.txt"))
    text = open(max(files, key=os.path.getsize)).read()
    pattern = re.compile(
        r'^\s*(?:ROOT )?%(\S+) = .*?op_type="([^"]+)" op_name="([^"]+)"', re.MULTILINE
    )
    return {m.group(1): (m.group(3), m.group(2)) for m in pattern.finditer(text)}


def thunk_times(profile_dir):
    """`{thunk name: total ms}` over XLA:CPU's worker threads."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = glob.glob(os.path.join(profile_dir, "**", "*.xplane.pb"), recursive=True)
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    times = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            if "Eigen" not in line.name:  # the intra-op threads that run the thunks
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if name not in ("ThunkExecutor::Execute", "SlinkyThreadPool::Await"):
                    times[name] += event.duration_ps / 1e9
    return times


def profile_one(batch, method):
    """Runs in its own process: XLA_FLAGS must name the dump folder before TensorFlow starts."""
    work = tempfile.mkdtemp(prefix="decode_profile_")
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={work}/hlo --xla_dump_hlo_as_text"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, HERE)
    import keras_tf

    keras_tf.quiet_tensorflow()
    import keras
    import numpy as np
    import tensorflow as tf

    from decode_speed import BENCH_SMALL
    from keras_tf.decoding import generate
    from keras_tf.models import Seq2SeqTransformer

    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(BENCH_SMALL)
    sources = np.random.default_rng(0).integers(4, 8000, size=(batch, 64)).astype("int32")
    settings = dict(max_length=NEW_TOKENS, end_id=None, method=method, beam_size=4)
    generate(model, sources, **settings)  # compile
    seconds = []
    for _ in range(3):
        start = time.perf_counter()
        generate(model, sources, **settings)
        seconds.append(time.perf_counter() - start)
    tf.profiler.experimental.start(f"{work}/profile")
    generate(model, sources, **settings)
    tf.profiler.experimental.stop()

    ops = hlo_ops(f"{work}/hlo")
    times = thunk_times(f"{work}/profile")
    parts = collections.Counter()
    unnamed = 0.0
    for thunk, ms in times.items():
        if thunk in ops:
            parts[part_of(*ops[thunk])] += ms / NEW_TOKENS
        else:
            unnamed += ms / NEW_TOKENS
    rows = batch * (4 if method == "beam" else 1)
    step = float(np.median(seconds)) / NEW_TOKENS * 1e3
    total = sum(parts.values()) + unnamed
    print(f"\n### batch {batch}, {method} ({rows} rows a step): a step takes {step:.2f} ms "
          f"(median of 3 calls / {NEW_TOKENS}); its thunks {total:.2f} ms")
    print("\n| part | ms per step | share |\n|---|---|---|")
    for part, _ in PARTS:
        if parts[part]:
            print(f"| {part} | {parts[part]:.2f} | {parts[part] / total:.0%} |")
    if unnamed:
        print(f"| (thunks without a TensorFlow op) | {unnamed:.2f} | {unnamed / total:.0%} |")
    print("\nThe largest thunks:\n\n| thunk | ms per step | TensorFlow op |\n|---|---|---|")
    for thunk, ms in times.most_common(8):
        op_name, op_type = ops.get(thunk, ("?", "?"))
        print(f"| {thunk} | {ms / NEW_TOKENS:.2f} | {op_type} `{op_name[-70:]}` |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64])
    parser.add_argument("--methods", nargs="+", default=["greedy", "beam"],
                        choices=["greedy", "beam"])
    parser.add_argument("--profile-one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profile_one:
        profile_one(int(args.profile_one[0]), args.profile_one[1])
        return
    for batch in args.batch_sizes:
        for method in args.methods:
            subprocess.run([sys.executable, __file__, "--profile-one", str(batch), method],
                           check=True)


if __name__ == "__main__":
    main()
