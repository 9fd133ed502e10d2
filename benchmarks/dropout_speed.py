"""What dropout costs an XLA-compiled training step: keras_tf's Dropout (ThreeFry) against Keras's (Philox).

`transformer_small` with the Bible run's vocabulary (8,000) and batch
(2,048 target tokens: 64 pairs of 32 + 32 tokens), trained with
`model.fit(jit_compile=True)` on the TensorFlow backend, three ways in one
run, timed in interleaved rounds so machine noise hits all alike:

- `dropout 0`: no mask is drawn;
- `keras Dropout 0.1`: Keras's `Dropout` layer draws its masks (the same
  model, traced with `keras_tf.layers.dropout._in_xla_context` answering
  False, so each of our Dropout layers runs Keras's own `call`);
- `keras_tf Dropout 0.1`: keras_tf's, drawing with ThreeFry under XLA.

Prints the median step time of each, and the ratios to dropout 0 and
between the two generators. Nothing else should run on the machine.

Usage: python benchmarks/dropout_speed.py [--rounds 6] [--steps 20]
"""

import argparse
import contextlib
import dataclasses
import sys
from unittest import mock

sys.path.insert(0, __file__.rsplit("/", 1)[0])

import keras_tf  # noqa: E402

keras_tf.quiet_tensorflow()  # first: TensorFlow's C++ start-up lines kept off stderr
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from common import StepTimer, median, random_batch  # noqa: E402

from keras_tf.models import Seq2SeqTransformer, get_preset  # noqa: E402
from keras_tf.training import MaskedSparseCategoricalCrossentropy  # noqa: E402

VOCABULARY = 8000
BATCH, LENGTH = 64, 32
XLA_CONTEXT = "keras_tf.layers.dropout._in_xla_context"


def build(dropout, dataset, philox):
    """A compiled model, traced (two warm-up steps) with Keras's Dropout where `philox`."""
    config = get_preset(
        "transformer_small",
        source_vocabulary_size=VOCABULARY,
        target_vocabulary_size=VOCABULARY,
    )
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(dataclasses.replace(config, dropout=dropout))
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4),
        loss=MaskedSparseCategoricalCrossentropy(),
        jit_compile=True,
    )
    with mock.patch(XLA_CONTEXT, return_value=False) if philox else contextlib.nullcontext():
        model.fit(dataset, steps_per_epoch=2, epochs=1, verbose=0, shuffle=False)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per round")
    args = parser.parse_args()

    config = get_preset("transformer_small", source_vocabulary_size=VOCABULARY,
                        target_vocabulary_size=VOCABULARY)
    inputs, labels = random_batch(config, BATCH, LENGTH)
    dataset = tf.data.Dataset.from_tensors((inputs, labels)).repeat().prefetch(2)
    variants = {
        "dropout 0": build(0.0, dataset, philox=False),
        "keras Dropout 0.1": build(0.1, dataset, philox=True),
        "keras_tf Dropout 0.1": build(0.1, dataset, philox=False),
    }
    times = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, model in variants.items():
            timer = StepTimer()
            model.fit(dataset, steps_per_epoch=args.steps, epochs=1, verbose=0,
                      shuffle=False, callbacks=[timer])
            times[name].extend(timer.times)

    steps = {name: median(values) for name, values in times.items()}
    print(f"transformer_small, vocabulary {VOCABULARY}, batch {BATCH} x {LENGTH} + {LENGTH} "
          f"tokens, XLA, {args.rounds} x {args.steps} steps each")
    print(f"{'variant':<22} {'median step ms':>14} {'/ dropout 0':>12}")
    for name, step in steps.items():
        print(f"{name:<22} {step * 1000:>14.1f} {step / steps['dropout 0']:>12.3f}")
    ours, theirs = steps["keras_tf Dropout 0.1"], steps["keras Dropout 0.1"]
    print(f"keras_tf / keras step time = {ours / theirs:.3f}; dropout's cost: "
          f"{(ours - steps['dropout 0']) * 1000:.1f} ms against "
          f"{(theirs - steps['dropout 0']) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
