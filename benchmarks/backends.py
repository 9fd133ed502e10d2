"""JAX against TensorFlow on this machine, in one run: bench-small training and greedy/beam decoding.

A process has one Keras backend, so this driver runs `train_throughput.py`
(keras_tf, XLA) and `decode_speed.py` (cached greedy and beam 4, batch 8,
64 source tokens, 64 new tokens) as subprocesses, alternating the backends
round by round (tensorflow, jax, tensorflow, jax, ...) so that machine load
hits both alike. Prints each figure per backend (the median over rounds of
each subprocess's median) and the ratio JAX / TensorFlow.

Usage: python benchmarks/backends.py [--rounds 2] [--train-steps 3] [--decode-repeats 3]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = ("tensorflow", "jax")


def run(script, backend, *args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, os.path.join(HERE, script), "--backend", backend, *args],
        capture_output=True, text=True, env=env,
    )
    if result.returncode != 0:
        sys.exit(f"{script} --backend {backend} failed:\n{result.stderr[-3000:]}")
    return result.stdout


def training_rate(output):
    """Target tokens/s of keras_tf with XLA, from train_throughput.py's table."""
    match = re.search(r"^keras_tf\s+True\s+[\d.]+\s+(\d+)", output, re.MULTILINE)
    return float(match.group(1))


def decoding_rates(output, new_tokens):
    """{method: tokens/s} at `new_tokens`, from decode_speed.py's table."""
    row = re.search(rf"^\| {new_tokens} \|(.*)$", output, re.MULTILINE).group(1)
    cells = [cell.strip() for cell in row.split("|")]
    # Columns: uncached_eager, uncached_graph, greedy, beam4, then ratios.
    rate = lambda cell: float(re.search(r"\(([\d,]+)\)", cell).group(1).replace(",", ""))  # noqa: E731
    return {"greedy": rate(cells[2]), "beam4": rate(cells[3])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--train-steps", type=int, default=3, help="timed steps per fit round")
    parser.add_argument("--decode-repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=64)
    args = parser.parse_args()

    figures = {backend: {} for backend in BACKENDS}
    for round_index in range(args.rounds):
        for backend in BACKENDS:
            out = run("train_throughput.py", backend, "--models", "keras_tf", "--jit", "on",
                      "--rounds", "2", "--steps", str(args.train_steps))
            figures[backend].setdefault("training target tok/s", []).append(training_rate(out))
            out = run("decode_speed.py", backend, "--lengths", str(args.new_tokens),
                      "--repeats", str(args.decode_repeats), "--uncached-max-length", "0")
            for method, rate in decoding_rates(out, args.new_tokens).items():
                figures[backend].setdefault(f"{method} tok/s", []).append(rate)
            print(f"round {round_index + 1}: {backend} done", flush=True)

    print(f"\nbench-small, {os.cpu_count()} CPUs, medians over {args.rounds} interleaved rounds")
    print("| figure | TensorFlow | JAX | JAX / TensorFlow | per round (TF / JAX) |")
    print("|---|---|---|---|---|")
    for name in figures["tensorflow"]:
        tf_values, jax_values = figures["tensorflow"][name], figures["jax"][name]
        tf_value, jax_value = statistics.median(tf_values), statistics.median(jax_values)
        rounds = ", ".join(f"{a:,.0f} / {b:,.0f}" for a, b in zip(tf_values, jax_values))
        print(f"| {name} | {tf_value:,.0f} | {jax_value:,.0f} | {jax_value / tf_value:.2f}x "
              f"| {rounds} |")


if __name__ == "__main__":
    main()
