"""Gradient accumulation: the update of a large batch in the memory of a small one.

Bench-small (float32) takes updates of `--batch-size` x `--accumulate` pairs of
64 + 64 tokens, two ways, each in its own process so that each has its own
peak memory:

- accumulated: `--accumulate` batches of `--batch-size` pairs, one update
  (`keras_tf.training.paper_adam(..., gradient_accumulation_steps=N)`);
- the peer: one batch of all the pairs, one update.

The processes run in turn for `--rounds` rounds (machine noise hits both),
each after a warm-up that traces and compiles. Prints the target tokens/s
(median over the timed batches of all rounds), the peak resident memory of
each process (`ru_maxrss`: the model, XLA's compile and the largest step),
what that peak grew by over the process's size before its first step, and
the ratios.

Usage: python benchmarks/gradient_accumulation.py [--accumulate 4] [--batch-size 64]
    [--updates 3] [--rounds 3] [--no-xla]
"""

import argparse
import json
import os
import subprocess
import sys


def child(args):
    """One setting in this process: print its batch times and memory as JSON."""
    import resource

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import BENCH_SMALL, SEQUENCE_LENGTH, StepTimer, random_batch

    import tensorflow as tf

    from keras_tf.models import Seq2SeqTransformer
    from keras_tf.training import MaskedSparseCategoricalCrossentropy, paper_adam

    accumulate = args.accumulate if args.child == "accumulated" else 1
    batch_size = args.batch_size * args.accumulate // accumulate
    inputs, labels = random_batch(batch_size=batch_size)
    dataset = tf.data.Dataset.from_tensors((inputs, labels)).repeat().prefetch(2)
    model = Seq2SeqTransformer(BENCH_SMALL)
    model.compile(
        optimizer=paper_adam(1e-4, gradient_accumulation_steps=accumulate),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
        jit_compile=args.xla,
    )
    model.optimizer.build(model.trainable_variables)
    before_mb = _resident_mb()
    model.fit(dataset, steps_per_epoch=accumulate, epochs=1, verbose=0)  # warm-up: one update
    timer = StepTimer()
    model.fit(dataset, steps_per_epoch=accumulate * args.updates, epochs=1, verbose=0,
              callbacks=[timer])
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({
        "times": timer.times,
        "tokens": batch_size * SEQUENCE_LENGTH,
        "before_mb": before_mb,
        "peak_mb": peak_mb,
        "updates": int(model.optimizer.iterations),
    }))


def _resident_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accumulate", type=int, default=4, help="batches per update")
    parser.add_argument("--batch-size", type=int, default=64, help="pairs per accumulated batch")
    parser.add_argument("--updates", type=int, default=3, help="timed updates per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-xla", dest="xla", action="store_false")
    parser.add_argument("--child", choices=("accumulated", "one_batch"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.accumulate < 2:
        parser.error("--accumulate must be at least 2")

    import statistics

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    runs = {"accumulated": [], "one_batch": []}
    for _ in range(args.rounds):
        for name in runs:
            argv = [sys.executable, __file__, "--child", name, *sys.argv[1:]]
            result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
            if result.returncode:
                sys.exit(f"{name} failed:\n{result.stderr[-3000:]}")
            runs[name].append(json.loads(result.stdout.strip().splitlines()[-1]))

    pairs = args.batch_size * args.accumulate
    print(f"bench-small, float32, XLA {'on' if args.xla else 'off'}: updates of {pairs} pairs "
          f"({pairs * 64:,} target tokens), {args.rounds} rounds of {args.updates} timed updates")
    print("| setting | batches an update | median batch s | target tok/s | peak RSS MB | "
          "growth over the start MB |")
    print("|---|---|---|---|---|---|")
    figures = {}
    for name, results in runs.items():
        assert all(r["updates"] == args.updates + 1 for r in results), results
        step = statistics.median(t for r in results for t in r["times"])
        rate = results[0]["tokens"] / step
        peak = statistics.median(r["peak_mb"] for r in results)
        growth = statistics.median(r["peak_mb"] - r["before_mb"] for r in results)
        figures[name] = rate, peak, growth
        label = f"accumulated, {args.accumulate} x {args.batch_size} pairs" if name == "accumulated" \
            else f"peer: one batch of {pairs} pairs"
        batches = args.accumulate if name == "accumulated" else 1
        print(f"| {label} | {batches} | {step:.3f} | {rate:,.0f} | {peak:,.0f} | {growth:,.0f} |")
    (rate_a, peak_a, growth_a), (rate_b, peak_b, growth_b) = figures.values()
    print(f"accumulated / one batch: tok/s {rate_a / rate_b:.2f}x, peak RSS {peak_a / peak_b:.2f}x, "
          f"growth {growth_a / growth_b:.2f}x")


if __name__ == "__main__":
    main()
