"""A short training run on a CPU: the train step compiled with XLA, against TensorFlow's graph runtime.

`keras-tf train` and `Seq2SeqTranslator.fit` compile the train step with XLA
by default (`--no-xla` / `jit_compile=False` turn it off). The peer is the
same model, data and optimizer in TensorFlow's graph runtime (Grappler and
oneDNN), in the same run. Each repeat starts a fresh process for each arm
(so neither finds the other's compiled program), and the two arms alternate,
so machine load hits both alike. Each process trains one epoch (trace,
compile, run), then `--epochs` more, and reports its CPU seconds (user +
system) for both parts: the first is what a short run pays once, the second
what each step costs after it. Prints each repeat, the medians, their ratios
and the step count at which XLA's compile is paid back.

Two tasks: `reverse` (default), `transformer_tiny` on reverse-task ids of one
shape, as the test suite's short runs; `demo`, the README's `fit` on the
embedded English->French strings with `transformer_small` (its batches come in
length buckets, so XLA compiles a program for each bucket). `--threads 1` (the
default) runs one TensorFlow thread per op, as the test suite does; `--threads 0`
leaves TensorFlow's own pools, as a user's run has them.

Usage:
    python benchmarks/xla_short_run.py [--task reverse|demo] [--threads 1] [--epochs 2]
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
if args["task"] == "reverse":
    data = make_reverse_task(args["pairs"], seed=1)
    model = Seq2SeqTransformer(get_preset(args["preset"]))
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=MaskedSparseCategoricalCrossentropy(),
                  jit_compile=args["xla"])
    fit_args = dict(batch_size=args["batch_size"])
else:  # the README's fit
    from keras_tf.datasets import load_jupyterlab_fr
    from keras_tf.translation import Seq2SeqTranslator
    from keras_tf.text import Seq2SeqTokenizers
    train = load_jupyterlab_fr().train
    data = (train.sources, train.targets)
    tokenizers = Seq2SeqTokenizers.train(*data, vocabulary_size=2000)
    model = Seq2SeqTranslator.from_preset(args["preset"], tokenizers=tokenizers,
                                          max_source_length=32, max_target_length=32)
    model.compile(jit_compile=args["xla"])
    fit_args = {}


class Steps(keras.callbacks.Callback):
    count = 0

    def on_train_batch_end(self, batch, logs=None):
        self.count += 1


start = cpu()
model.fit(*data, epochs=1, verbose=0, **fit_args)
first = cpu()
steps = Steps()
history = model.fit(*data, epochs=args["epochs"], verbose=0, callbacks=[steps], **fit_args)
print(json.dumps({"first_epoch": first - start, "later": cpu() - first, "steps": steps.count,
                  "loss": history.history["loss"][-1]}))
"""


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("reverse", "demo"), default="reverse")
    parser.add_argument("--preset", help="default: transformer_tiny (reverse), "
                        "transformer_small (demo)")
    parser.add_argument("--pairs", type=int, default=512, help="reverse-task pairs an epoch")
    parser.add_argument("--batch-size", type=int, default=64, help="reverse task only")
    parser.add_argument("--threads", type=int, default=1,
                        help="TensorFlow threads per op; 0: TensorFlow's own pools")
    parser.add_argument("--epochs", type=int, default=2, help="epochs timed after the first")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    args.preset = args.preset or ("transformer_tiny" if args.task == "reverse" else "transformer_small")
    return args


def run_arm(args, xla):
    env = {key: value for key, value in os.environ.items() if not key.startswith("TF_NUM_")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if args.threads:
        env["TF_NUM_INTRAOP_THREADS"] = env["TF_NUM_INTEROP_THREADS"] = str(args.threads)
    arm = {"task": args.task, "preset": args.preset, "pairs": args.pairs,
           "batch_size": args.batch_size, "epochs": args.epochs, "xla": xla}
    result = subprocess.run([sys.executable, "-c", ARM, json.dumps(arm)], env=env,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    args = parse_args()
    data = (f"{args.pairs} reverse-task pairs, batch {args.batch_size}" if args.task == "reverse"
            else "the demo corpus's training split (strings)")
    threads = f"{args.threads} thread(s) per op" if args.threads else "TensorFlow's own thread pools"
    print(f"{args.preset}, {data}, {threads}: CPU seconds of the first epoch and of "
          f"{args.epochs} more")
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
    later_steps = runs[True][0]["steps"]
    print(f"{later_steps // args.epochs} steps an epoch")
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
