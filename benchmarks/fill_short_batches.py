"""The first epochs of `keras-tf train` under XLA: each bucket's short last batch filled with padding rows, against left short.

`make_dataset` fills the short last batch of each length bucket up to the
bucket's batch size with rows of padding alone (`fill_short_batches=True`,
the default), so XLA compiles one train step and one test step per bucket,
not two. The peer, in the same run, is the same training with
`fill_short_batches=False`. Both read `keras-tf train`'s batches of the demo
corpus (`transformer_small`, the fitted token budget, the power-of-two
buckets) and validate on its valid split each epoch, as the command does.

Each repeat starts a fresh process for each arm (neither finds the other's
compiled programs) and the arms alternate, so machine load hits both alike.
Each process trains `--epochs` epochs and reports the CPU seconds (user +
system) and wall seconds of the first (trace, compile, run) and of the rest,
the XLA programs it compiled (the files of a cache folder of its own), and
its last losses. Prints each repeat, the medians and their ratios.

Usage:
    python benchmarks/fill_short_batches.py [--preset transformer_small] [--epochs 2] [--repeats 2]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ARM = r"""
import json, os, resource, sys, time
args = json.loads(sys.argv[1])
import keras_tf, keras
from keras_tf.datasets import load_jupyterlab_fr
from keras_tf.decoding.generate import source_buckets
from keras_tf.models import Seq2SeqTransformer, get_preset
from keras_tf.text import Seq2SeqTokenizers, fitted_batch_tokens, make_dataset
from keras_tf.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

keras.utils.set_random_seed(0)
corpus = load_jupyterlab_fr()
tokenizers = Seq2SeqTokenizers.train(corpus.train.sources, corpus.train.targets,
                                     vocabulary_size=2000)
max_length = args["max_length"]
buckets = source_buckets(max_length)
options = dict(batch_tokens=fitted_batch_tokens(corpus.train, tokenizers, max_length=max_length,
                                                bucket_boundaries=buckets),
               max_source_length=max_length, max_target_length=max_length,
               bucket_boundaries=buckets, fill_short_batches=args["fill"])
train_set = make_dataset(corpus.train, tokenizers, seed=0, **options)
valid_set = make_dataset(corpus.valid, tokenizers, shuffle=False, **options)
config = get_preset(args["preset"], source_vocabulary_size=tokenizers.source_vocabulary_size,
                    target_vocabulary_size=tokenizers.target_vocabulary_size,
                    max_source_length=max_length, max_target_length=max_length)
model = Seq2SeqTransformer(config)
model.compile(optimizer=keras.optimizers.Adam(5e-4, beta_2=0.98, epsilon=1e-9),
              loss=MaskedSparseCategoricalCrossentropy(), metrics=[MaskedTokenAccuracy()],
              jit_compile=True)
cpu0, wall0 = cpu(), time.perf_counter()
model.fit(train_set, validation_data=valid_set, epochs=1, verbose=0)
cpu1, wall1 = cpu(), time.perf_counter()
programs = len(os.listdir(args["cache"]))
history = model.fit(train_set, validation_data=valid_set, epochs=args["epochs"] - 1, verbose=0)
print(json.dumps({"first_cpu": cpu1 - cpu0, "first_wall": wall1 - wall0,
                  "later_cpu": cpu() - cpu1, "later_wall": time.perf_counter() - wall1,
                  "programs": programs, "batches": int(train_set.cardinality()),
                  "loss": history.history["loss"][-1], "val_loss": history.history["val_loss"][-1]}))
"""


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="transformer_small")
    parser.add_argument("--max-length", type=int, default=64, help="keras-tf train's default: 64")
    parser.add_argument("--epochs", type=int, default=2, help="at least 2: the first, then the rest")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error(f"--epochs must be at least 2; received {args.epochs}")
    return args


def run_arm(args, fill):
    with tempfile.TemporaryDirectory(prefix="xla_cache_") as cache:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_XLA_FLAGS=" ".join(filter(None, [
            os.environ.get("TF_XLA_FLAGS"), f"--tf_xla_persistent_cache_directory={cache}"])))
        arm = {"preset": args.preset, "max_length": args.max_length, "epochs": args.epochs,
               "fill": fill, "cache": cache}
        result = subprocess.run([sys.executable, "-c", ARM, json.dumps(arm)], env=env,
                                capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"the arm fill_short_batches={fill} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    args = parse_args()
    print(f"{args.preset} under XLA on the demo corpus (keras-tf train's batches, max length "
          f"{args.max_length}), validating each epoch: the first epoch, then {args.epochs - 1} more")
    runs = {True: [], False: []}
    for repeat in range(args.repeats):
        for fill in (True, False):
            row = run_arm(args, fill)
            runs[fill].append(row)
            print(f"repeat {repeat + 1} {'filled' if fill else 'short '}: first epoch "
                  f"{row['first_cpu']:6.1f} s CPU {row['first_wall']:6.1f} s wall, "
                  f"{row['programs']} XLA programs; later {row['later_cpu']:6.1f} s CPU; "
                  f"loss {row['loss']:.4f}, val_loss {row['val_loss']:.4f}", flush=True)
    keys = ("first_cpu", "first_wall", "later_cpu", "later_wall")
    medians = {fill: {key: statistics.median(r[key] for r in rows) for key in keys}
               for fill, rows in runs.items()}
    print(f"{runs[True][0]['batches']} batches an epoch")
    print()
    print("| | first epoch CPU s | first epoch wall s | later epochs CPU s | XLA programs |")
    print("|---|---|---|---|---|")
    for fill, name in ((True, "filled (default)"), (False, "short (peer)")):
        m = medians[fill]
        print(f"| {name} | {m['first_cpu']:.1f} | {m['first_wall']:.1f} | {m['later_cpu']:.1f} | "
              f"{runs[fill][0]['programs']} |")
    f, s = medians[True], medians[False]
    print(f"| filled / short | {f['first_cpu'] / s['first_cpu']:.2f} | "
          f"{f['first_wall'] / s['first_wall']:.2f} | {f['later_cpu'] / s['later_cpu']:.2f} | |")


if __name__ == "__main__":
    main()
