"""Training throughput of keras_tf against the keras-hub build of the same model.

Bench-small (vocabulary 8000, d_model 256, 8 heads, d_ff 1024, 3 + 3 layers,
batch 64, 64 source and 64 target tokens, float32), timed with `model.fit`
after warm-up, with XLA on and off, in one run. The four models are timed in
interleaved rounds so that machine noise hits all of them alike. Prints target
tokens/s (median over steps), the ratio, and model FLOPs utilisation against a
float32 matmul measured in the same run.

`--backend jax` runs the same models on JAX (numpy batches instead of
`tf.data`; XLA only by default, since JAX without jit runs op by op);
`--models` and `--jit` pick a subset. `benchmarks/backends.py` compares the
backends in one run.

Usage: python benchmarks/train_throughput.py [--rounds 4] [--steps 5]
    [--backend tensorflow|jax] [--models keras_tf keras_hub] [--jit on off]
"""

import argparse
import sys
import warnings

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from backend_flag import add_backend_argument, set_backend_from_argv  # noqa: E402

BACKEND = set_backend_from_argv()

import keras_tf  # noqa: E402

keras_tf.quiet_tensorflow()  # first: TensorFlow's C++ start-up lines kept off stderr
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402

from common import (  # noqa: E402
    BATCH_SIZE,
    BENCH_SMALL,
    SEQUENCE_LENGTH,
    StepTimer,
    matmul_flops_per_second,
    median,
    random_batch,
    training_flops_per_step,
)

from keras_tf.models import Seq2SeqTransformer  # noqa: E402
from keras_tf.training import MaskedSparseCategoricalCrossentropy  # noqa: E402


# keras-hub's TokenAndPositionEmbedding hands its mask to sub-layers that drop
# it, and Keras says so for each when the peer is traced. The peer is built as
# keras-hub documents it, so those notices are not this script's to print.
warnings.filterwarnings("ignore", message=".*does not support masking", category=UserWarning)


def keras_hub_build(config):
    """The same architecture from keras-hub's building blocks (learned positions)."""
    encoder_tokens = keras.Input((None,), dtype="int32", name="encoder_tokens")
    decoder_tokens = keras.Input((None,), dtype="int32", name="decoder_tokens")
    x = keras_hub.layers.TokenAndPositionEmbedding(
        config.source_vocabulary_size, config.max_source_length, config.d_model, mask_zero=True
    )(encoder_tokens)
    for _ in range(config.num_encoder_layers):
        x = keras_hub.layers.TransformerEncoder(
            config.d_ff, config.num_heads, dropout=config.dropout
        )(x)
    y = keras_hub.layers.TokenAndPositionEmbedding(
        config.target_vocabulary_size, config.max_target_length, config.d_model, mask_zero=True
    )(decoder_tokens)
    for _ in range(config.num_decoder_layers):
        y = keras_hub.layers.TransformerDecoder(
            config.d_ff, config.num_heads, dropout=config.dropout
        )(y, x)
    logits = keras.layers.Dense(config.target_vocabulary_size)(y)
    return keras.Model({"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens}, logits)


def build(kind, jit):
    keras.utils.set_random_seed(0)
    if kind == "keras_tf":
        model = Seq2SeqTransformer(BENCH_SMALL)
        loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.0)
    else:
        model = keras_hub_build(BENCH_SMALL)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=loss, jit_compile=jit)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5, help="timed fit steps per round")
    add_backend_argument(parser)
    parser.add_argument("--models", nargs="+", choices=("keras_tf", "keras_hub"),
                        default=["keras_tf", "keras_hub"])
    parser.add_argument("--jit", nargs="+", choices=("on", "off"),
                        default=["on", "off"] if BACKEND == "tensorflow" else ["on"])
    args = parser.parse_args()

    peak = matmul_flops_per_second()
    inputs, labels = random_batch()
    if BACKEND == "tensorflow":
        import tensorflow as tf

        dataset = tf.data.Dataset.from_tensors((inputs, labels)).repeat().prefetch(2)

        def fit(model, steps, callbacks=()):
            model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=callbacks,
                      shuffle=False)
    else:
        def fit(model, steps, callbacks=()):
            model.fit({k: np.tile(v, (steps, 1)) for k, v in inputs.items()},
                      np.tile(labels, (steps, 1)), batch_size=BATCH_SIZE, shuffle=False,
                      epochs=1, verbose=0, callbacks=callbacks)

    variants = [(kind, jit == "on") for kind in args.models for jit in args.jit]
    models = {v: build(*v) for v in variants}
    times = {v: [] for v in variants}
    for model in models.values():  # warm-up: tracing and compilation
        fit(model, 2)
    for _ in range(args.rounds):
        for variant, model in models.items():
            timer = StepTimer()
            fit(model, args.steps, [timer])
            times[variant].extend(timer.times)

    peak = max(peak, matmul_flops_per_second())  # measured before and after
    flops = training_flops_per_step(BENCH_SMALL, BATCH_SIZE, SEQUENCE_LENGTH, SEQUENCE_LENGTH)
    tokens = BATCH_SIZE * SEQUENCE_LENGTH
    print(f"backend {BACKEND}, Keras {keras.__version__}")
    print(f"float32 matmul peak measured: {peak / 1e9:.1f} GFLOP/s; model FLOPs per step: {flops / 1e9:.1f} G")
    print(f"{'model':<10} {'jit':<5} {'median step s':>13} {'target tok/s':>12} {'MFU':>6}")
    best = {}
    for (kind, jit), values in times.items():
        step = median(values)
        rate = tokens / step
        best[kind] = max(best.get(kind, 0.0), rate)
        print(f"{kind:<10} {str(jit):<5} {step:>13.3f} {rate:>12.0f} {flops / step / peak:>6.1%}")
    if len(best) == 2:
        print(f"best keras_tf / best keras_hub = {best['keras_tf'] / best['keras_hub']:.2f}x")


if __name__ == "__main__":
    main()
