"""Saving and reloading a `.keras` file: ours against keras-hub's same-size model, in one run.

Bench-small, float32. For each model this prints the CPU seconds of
`model.save(path)` and of `keras.models.load_model(path)`, median over
`--repeats`, alternating ours and the peer (the same architecture from
keras-hub's blocks, as `train_throughput.py` builds it), and their ratios.
Ours is timed twice: as it is, and with `dir(model)` listing the decoding
sub-model properties again, as before they were left out of it (Keras's
saving reads every name `dir` lists, and each of those properties builds a
functional model on first read).

Usage: python benchmarks/save_load.py [--repeats 5]
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import BENCH_SMALL, median  # noqa: E402
from train_throughput import keras_hub_build  # noqa: E402

import keras  # noqa: E402

from keras_tf.models import Seq2SeqTransformer  # noqa: E402


class ListsEverything(Seq2SeqTransformer):
    """Ours with `dir` as Python gives it: what saving and loading read before."""

    def __dir__(self):
        return keras.Model.__dir__(self)


def cpu_seconds(function):
    start = time.process_time()
    function()
    return time.process_time() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    builders = {
        "keras_tf": lambda: Seq2SeqTransformer(BENCH_SMALL),
        "keras_tf, dir lists the sub-models (before)": lambda: ListsEverything(BENCH_SMALL),
        "keras-hub peer": lambda: keras_hub_build(BENCH_SMALL),
    }
    times = {name: {"save": [], "load": []} for name in builders}
    folder = tempfile.mkdtemp()
    for _ in range(args.repeats):
        for name, build in builders.items():
            path = os.path.join(folder, "model.keras")
            model = build()  # a fresh model: a sub-model, once built, is kept
            save = cpu_seconds(lambda: model.save(path))
            load = cpu_seconds(
                lambda: keras.models.load_model(
                    path, custom_objects={"ListsEverything": ListsEverything}
                )
            )
            times[name]["save"].append(save)
            times[name]["load"].append(load)
    peer = times["keras-hub peer"]
    print(f"bench-small, CPU seconds, median of {args.repeats}")
    print("| model | save | load | save / peer | load / peer |")
    print("|---|---|---|---|---|")
    for name, measured in times.items():
        save, load = median(measured["save"]), median(measured["load"])
        print(f"| {name} | {save:.2f} | {load:.2f} | {save / median(peer['save']):.2f}x "
              f"| {load / median(peer['load']):.2f}x |")


if __name__ == "__main__":
    main()
