"""A short training run on a CPU: the train step compiled with XLA, against TensorFlow's graph runtime.

`keras-tf train` and `Seq2SeqTranslator.fit` compile the train step with XLA
by default (`--no-xla` / `jit_compile=False` turn it off). The peer is the
same model, data and optimizer in TensorFlow's graph runtime (Grappler and
oneDNN), in the same run. Each repeat starts a fresh process for each arm
(so neither finds the other's compiled program) with one TensorFlow thread per
op, as the test suite runs, and the two arms alternate, so machine load hits
both alike. Each process trains the reverse task one epoch (trace, compile,
run), then `--epochs` more, and reports its CPU seconds (user + system) for
both parts: the first is what a short run pays once, the second what each
step costs after it. Prints each repeat, the medians, their ratios and the
step count at which XLA's compile is paid back.

Usage:
    python benchmarks/xla_short_run.py [--preset transformer_tiny] [--pairs 512] [--epochs 2]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ARM = r"""
import json, resource, sys
args = json.loads(sys.argv[1])
import keras_tf, keras
from keras_tf.models import Seq2SeqTransformer, get_preset
from keras_tf.training import MaskedSparseCategoricalCrossentropy, make_reverse_task

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

keras.utils.set_random_seed(0)
inputs, labels = make_reverse_task(args["pairs"], seed=1)
model = Seq2SeqTransformer(get_preset(args["preset"]))
model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=MaskedSparseCategoricalCrossentropy(),
              jit_compile=args["xla"])
start = cpu()
model.fit(inputs, labels, batch_size=args["batch_size"], epochs=1, verbose=0)
first = cpu()
history = model.fit(inputs, labels, batch_size=args["batch_size"], epochs=args["epochs"], verbose=0)
print(json.dumps({"first_epoch": first - start, "later": cpu() - first,
                  "loss": history.history["loss"][-1]}))
"""


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="transformer_tiny")
    parser.add_argument("--pairs", type=int, default=512, help="reverse-task pairs a epoch")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2, help="epochs timed after the first")
    parser.add_argument("--repeats", type=int, default=3)
    return parser.parse_args()


def run_arm(args, xla):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_NUM_INTRAOP_THREADS="1",
               TF_NUM_INTEROP_THREADS="1")
    arm = {"preset": args.preset, "pairs": args.pairs, "batch_size": args.batch_size,
           "epochs": args.epochs, "xla": xla}
    result = subprocess.run([sys.executable, "-c", ARM, json.dumps(arm)], env=env,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    args = parse_args()
    steps = -(-args.pairs // args.batch_size)
    print(f"{args.preset}, {args.pairs} pairs, batch {args.batch_size}: {steps} steps an epoch; "
          f"CPU seconds of the first epoch and of {args.epochs} more")
    runs = {True: [], False: []}
    for repeat in range(args.repeats):
        for xla in (True, False):
            runs[xla].append(run_arm(args, xla))
            row = runs[xla][-1]
            print(f"repeat {repeat + 1} {'XLA  ' if xla else 'graph'} first epoch "
                  f"{row['first_epoch']:6.2f} s, later {row['later']:6.2f} s, loss {row['loss']:.4f}",
                  flush=True)
    medians = {xla: {key: statistics.median(r[key] for r in rows) for key in ("first_epoch", "later")}
               for xla, rows in runs.items()}
    later_steps = args.epochs * steps
    print()
    print("| | first epoch CPU s | CPU ms a later step |")
    print("|---|---|---|")
    for xla, name in ((True, "XLA"), (False, "graph (peer)")):
        m = medians[xla]
        print(f"| {name} | {m['first_epoch']:.2f} | {1000 * m['later'] / later_steps:.1f} |")
    xla, graph = medians[True], medians[False]
    print(f"| XLA / graph | {xla['first_epoch'] / graph['first_epoch']:.2f} | "
          f"{xla['later'] / graph['later']:.2f} |")
    saved_per_step = (graph["later"] - xla["later"]) / later_steps
    extra = xla["first_epoch"] - graph["first_epoch"]
    if saved_per_step > 0:
        print(f"XLA's compile ({extra:.1f} s more in the first epoch) is paid back after about "
              f"{extra / saved_per_step:,.0f} steps")
    else:
        print("XLA's steps are no faster here: its compile is never paid back")


if __name__ == "__main__":
    main()
