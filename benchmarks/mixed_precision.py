"""Training throughput under mixed_bfloat16 against float32, on bench-small, in one run.

Bench-small (vocabulary 8000, d_model 256, 8 heads, d_ff 1024, 3 + 3 layers,
batch 64, 64 source and 64 target tokens), built and compiled as
`keras_tf.training.trainer.train` does: `Seq2SeqTransformer(config,
dtype=policy)`, the masked label-smoothed loss, `jit_compile=True`. The two
models are timed with `model.fit` in interleaved rounds after warm-up, so that
machine noise hits both alike. Prints the median step time and target
tokens/s of each, and the ratio.

Usage: python benchmarks/mixed_precision.py [--rounds 3] [--steps 5] [--no-jit]
"""

import argparse
import sys

import keras_tf  # noqa: E402

keras_tf.quiet_tensorflow()  # first: TensorFlow's C++ start-up lines kept off stderr
import keras
import tensorflow as tf

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import (  # noqa: E402
    BATCH_SIZE,
    BENCH_SMALL,
    SEQUENCE_LENGTH,
    StepTimer,
    median,
    random_batch,
)

from keras_tf.models import Seq2SeqTransformer  # noqa: E402
from keras_tf.training import MaskedSparseCategoricalCrossentropy  # noqa: E402

POLICIES = ("float32", "mixed_bfloat16")


def build(policy, jit):
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(BENCH_SMALL, dtype=policy)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=MaskedSparseCategoricalCrossentropy(),
        jit_compile=jit,
    )
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="timed fit steps per round")
    parser.add_argument("--jit", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()

    inputs, labels = random_batch()
    dataset = tf.data.Dataset.from_tensors((inputs, labels)).repeat().prefetch(2)
    models = {policy: build(policy, args.jit) for policy in POLICIES}
    times = {policy: [] for policy in POLICIES}
    for model in models.values():  # warm-up: tracing and compilation
        model.fit(dataset, steps_per_epoch=2, epochs=1, shuffle=False, verbose=0)
    for _ in range(args.rounds):
        for policy, model in models.items():
            timer = StepTimer()
            model.fit(
                dataset, steps_per_epoch=args.steps, epochs=1, shuffle=False, verbose=0,
                callbacks=[timer],
            )
            times[policy].extend(timer.times)

    tokens = BATCH_SIZE * SEQUENCE_LENGTH
    devices = ", ".join(sorted({d.device_type for d in tf.config.list_logical_devices()}))
    print(
        f"bench-small, batch {BATCH_SIZE}, jit_compile={args.jit}, devices: {devices}; "
        f"median of {args.rounds * args.steps} steps each"
    )
    print(f"{'policy':<15} {'median step s':>13} {'target tok/s':>12}")
    steps = {policy: median(values) for policy, values in times.items()}
    for policy, step in steps.items():
        print(f"{policy:<15} {step:>13.3f} {tokens / step:>12.0f}")
    print(f"mixed_bfloat16 / float32 throughput = {steps['float32'] / steps['mixed_bfloat16']:.2f}x")


if __name__ == "__main__":
    main()
