"""JAX against TensorFlow on this machine, in one run: bench-small training and greedy/beam decoding.

A process has one Keras backend, so this driver runs `train_throughput.py`
(keras_tf, XLA) and `decode_speed.py` (cached greedy and beam 4, batch 8,
64 source tokens, 64 new tokens) as subprocesses, alternating the backends
round by round (tensorflow, jax, tensorflow, jax, ...) so that machine load
hits both alike. Prints each figure per backend (the median over rounds of
each subprocess's median) and the ratio JAX / TensorFlow.

A third arm runs JAX again with glibc told to keep freed memory
(`JAX_CPU_HEAP`): XLA's CPU runtime under JAX allocates each step's
temporary buffers (about 1.6 GB for bench-small's train step) from a worker
thread, which glibc serves with a fresh mmap and returns with munmap, so
every step page-faults all of it in again. The driver reports the page
faults and kernel and user CPU time of every arm's subprocesses, from `getrusage`.

Usage: python benchmarks/backends.py [--rounds 2] [--train-steps 3] [--decode-repeats 3]
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# glibc keeps what is freed instead of unmapping it: one heap for every
# thread (a worker thread's large block is otherwise always a fresh mmap),
# no mmap for large blocks, and no trimming of the heap's top.
JAX_CPU_HEAP = {
    "MALLOC_ARENA_MAX": "1",
    "MALLOC_MMAP_MAX_": "0",
    "MALLOC_TRIM_THRESHOLD_": str(1 << 40),
}
DECODE_BATCH_SIZE = 8
# (label, backend, extra environment), run in this order each round.
ARMS = (
    ("TensorFlow", "tensorflow", {}),
    ("JAX", "jax", {}),
    ("JAX, heap kept", "jax", JAX_CPU_HEAP),
)


def run(script, backend, env_extra, usage, *args):
    """Run `script --backend backend ARGS`; add its page faults and CPU seconds (kernel, user) to `usage`."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env_extra}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        [sys.executable, os.path.join(HERE, script), "--backend", backend, *args],
        capture_output=True, text=True, env=env,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"{script} --backend {backend} failed:\n{result.stderr[-3000:]}")
    usage["page faults"] = usage.get("page faults", 0) + after.ru_minflt - before.ru_minflt
    usage["kernel CPU s"] = usage.get("kernel CPU s", 0) + after.ru_stime - before.ru_stime
    usage["user CPU s"] = usage.get("user CPU s", 0) + after.ru_utime - before.ru_utime
    return result.stdout


def training_rate(output):
    """Target tokens/s of keras_tf with XLA, from train_throughput.py's table."""
    match = re.search(r"^keras_tf\s+True\s+[\d.]+\s+(\d+)", output, re.MULTILINE)
    return float(match.group(1))


def decoding_rates(output, new_tokens, batch_size=DECODE_BATCH_SIZE):
    """{method: tokens/s} at `batch_size` and `new_tokens`, from decode_speed.py's first table."""
    row = re.search(
        rf"^\| {batch_size} \| {new_tokens} \|(.*)$", output, re.MULTILINE
    ).group(1)
    cells = [cell.strip() for cell in row.split("|")]
    # Columns after batch and new tokens: uncached_eager, uncached_graph, greedy, beam4, ratios.
    rate = lambda cell: float(re.search(r"\(([\d,]+)\)", cell).group(1).replace(",", ""))  # noqa: E731
    return {"greedy": rate(cells[2]), "beam4": rate(cells[3])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--train-steps", type=int, default=3, help="timed steps per fit round")
    parser.add_argument("--decode-repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=64)
    args = parser.parse_args()

    figures = {label: {} for label, _, _ in ARMS}
    usage = {label: {} for label, _, _ in ARMS}
    for round_index in range(args.rounds):
        for label, backend, env_extra in ARMS:
            out = run("train_throughput.py", backend, env_extra, usage[label],
                      "--models", "keras_tf", "--jit", "on",
                      "--rounds", "2", "--steps", str(args.train_steps))
            figures[label].setdefault("training target tok/s", []).append(training_rate(out))
            out = run("decode_speed.py", backend, env_extra, usage[label],
                      "--lengths", str(args.new_tokens), "--batch-sizes", str(DECODE_BATCH_SIZE),
                      "--repeats", str(args.decode_repeats), "--uncached-max-length", "0")
            for method, rate in decoding_rates(out, args.new_tokens).items():
                figures[label].setdefault(f"{method} tok/s", []).append(rate)
            print(f"round {round_index + 1}: {label} done", flush=True)

    labels = [label for label, _, _ in ARMS]
    reference = labels[0]
    print(f"\nbench-small, {os.cpu_count()} CPUs, medians over {args.rounds} interleaved rounds")
    print("| figure | " + " | ".join(labels) + " | "
          + " | ".join(f"{label} / {reference}" for label in labels[1:]) + " | per round |")
    print("|---" * (2 * len(labels) + 1) + "|")
    for name in figures[reference]:
        medians = [statistics.median(figures[label][name]) for label in labels]
        ratios = [f"{value / medians[0]:.2f}x" for value in medians[1:]]
        rounds = ", ".join(" / ".join(f"{figures[label][name][i]:,.0f}" for label in labels)
                           for i in range(args.rounds))
        print(f"| {name} | " + " | ".join(f"{value:,.0f}" for value in medians)
              + " | " + " | ".join(ratios) + f" | {rounds} |")
    print("\nAll the subprocesses of each arm, summed (start-up and compiling included):")
    print("| arm | " + " | ".join(usage[reference]) + " |")
    print("|---" * (len(usage[reference]) + 1) + "|")
    for label in labels:
        print(f"| {label} | " + " | ".join(f"{value:,.0f}" for value in usage[label].values()) + " |")


if __name__ == "__main__":
    main()
