"""`Seq2SeqTranslator.fit` on a list of string pairs: one iterator for the run, against one an epoch.

`fit` on a list of pairs reads an endless dataset (reshuffled each pass) with
`steps_per_epoch` set to one pass, so Keras keeps one dataset iterator for the
whole run. The peer, in the same run, is what `fit` did before and still does
for a `tf.data` of string pairs: the same pairs, shuffled each epoch, as a
dataset Keras reads through a new iterator every epoch, which instantiates the
tokenizing map function (and optimizes its graph) again each time.

Each repeat builds a fresh translator (the same seed), fits it one epoch to
compile its train step, then times `--epochs` more epochs. Both variants train
on the same pairs in the same number of steps; the two alternate, so machine
load hits both alike. Prints each variant's median wall and CPU seconds and
their ratios.

Usage:
    python benchmarks/fit_on_strings.py [--preset transformer_tiny] [--pairs 256] [--epochs 12]
"""

import argparse
import time

import common  # noqa: F401  (first: quiet TensorFlow start-up)
import keras
import tensorflow as tf

from keras_tf.datasets import load_jupyterlab_fr
from keras_tf.translation import Seq2SeqTranslator
from keras_tf.text import Seq2SeqTokenizers


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="transformer_tiny")
    parser.add_argument("--pairs", type=int, default=256, help="training pairs from the demo corpus")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=12, help="timed epochs, after one to compile")
    parser.add_argument("--repeats", type=int, default=3)
    return parser.parse_args()


def main():
    args = parse_args()
    corpus = load_jupyterlab_fr()
    sources = list(corpus.train.sources[: args.pairs])
    targets = list(corpus.train.targets[: args.pairs])
    tokenizers = Seq2SeqTokenizers.train(sources, targets, vocabulary_size=500)

    def run(as_list):
        keras.utils.set_random_seed(0)
        translator = Seq2SeqTranslator.from_preset(
            args.preset, tokenizers=tokenizers, max_source_length=32, max_target_length=32,
        )
        if as_list:
            data = dict(x=sources, y=targets, batch_size=args.batch_size, seed=0)
        else:
            pairs = tf.data.Dataset.from_tensor_slices((sources, targets))
            pairs = pairs.shuffle(len(sources), seed=0, reshuffle_each_iteration=True)
            data = dict(x=pairs.batch(args.batch_size))
        translator.fit(**data, epochs=1, verbose=0)  # compiles the train step
        wall, cpu = time.perf_counter(), time.process_time()
        history = translator.fit(**data, epochs=1 + args.epochs, initial_epoch=1, verbose=0)
        return time.perf_counter() - wall, time.process_time() - cpu, history.history["loss"][-1]

    steps = -(-len(sources) // args.batch_size)
    print(f"{args.preset}, {len(sources)} demo pairs, batch {args.batch_size}: {steps} steps an "
          f"epoch, {args.epochs} timed epochs, {args.repeats} repeats")
    times = {True: [], False: []}
    losses = {}
    for _ in range(args.repeats):
        for as_list in (True, False):
            wall, cpu, losses[as_list] = run(as_list)
            times[as_list].append((wall, cpu))
    print("| data | median wall s | median CPU s | last loss |\n|---|---|---|---|")
    medians = {}
    for as_list, name in ((True, "a list of pairs: one iterator"),
                          (False, "a tf.data of pairs: one iterator an epoch (peer)")):
        medians[as_list] = [common.median([t[i] for t in times[as_list]]) for i in (0, 1)]
        print(f"| {name} | {medians[as_list][0]:.2f} | {medians[as_list][1]:.2f} "
              f"| {losses[as_list]:.3f} |")
    for as_list, name in ((True, "one iterator"), (False, "peer")):
        print(f"{name}, each repeat (wall s, CPU s): "
              + ", ".join(f"({wall:.2f}, {cpu:.2f})" for wall, cpu in times[as_list]))
    print(f"ratio (one iterator / peer): wall {medians[True][0] / medians[False][0]:.2f}, "
          f"CPU {medians[True][1] / medians[False][1]:.2f}")


if __name__ == "__main__":
    main()
