"""Decoding speed at the OPUS-MT shape: cached XLA greedy and beam 4 against the uncached loop.

The shape of an imported Helsinki-NLP/opus-mt-* model (`keras_tf.translation.marian`):
d_model 512, 8 heads, d_ff 2048, 6 + 6 post-norm layers, SiLU, sinusoids
in halves, a tied output layer with a bias over 58,102 ids (Marian's 58,101
and the spare PAD row). Random weights of that shape (speed does not depend
on the values), a batch of 8 sources of 32 tokens, exactly 64 new tokens
(the end token is disabled). In the same run, interleaved so that machine
load hits every figure alike:

- uncached (the peer): the whole model re-run on the whole prefix for every
  new token, in one `tf.function` traced for any prefix length, picking
  greedily (the tutorials' loop in graph mode);
- greedy: `generate(method="greedy")`, KV-cached, one XLA program;
- beam 4: `generate(method="beam", beam_size=4, length_penalty_style="power")`.

Prints the median seconds per batch, new tokens per second (batch × 64 /
time; beam search counts the returned tokens, not the 4 hypotheses) and the
ratios to the uncached loop.

Usage:
    python benchmarks/opus_mt_speed.py [--new-tokens 64] [--repeats 3]
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras_tf  # noqa: E402

keras_tf.quiet_tensorflow()  # first: TensorFlow's C++ start-up lines kept off stderr
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import common  # noqa: E402
from keras_tf.decoding import generate  # noqa: E402
from keras_tf.models import Seq2SeqTransformer  # noqa: E402
from keras_tf.translation.marian import transformer_config  # noqa: E402

BATCH_SIZE = 8
SOURCE_LENGTH = 32
# Helsinki-NLP/opus-mt-en-de: the fields of its config.json that the converter reads.
OPUS_MT = transformer_config({
    "vocab_size": 58101,
    "d_model": 512,
    "encoder_attention_heads": 8,
    "encoder_ffn_dim": 2048,
    "encoder_layers": 6,
    "decoder_layers": 6,
    "max_position_embeddings": 512,
    "activation_function": "swish",
    "dropout": 0.1,
})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    n = args.new_tokens

    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(OPUS_MT)
    sources = np.random.default_rng(0).integers(
        4, OPUS_MT.source_vocabulary_size, size=(BATCH_SIZE, SOURCE_LENGTH)
    ).astype("int32")
    loop = common.tf_uncached_greedy(model, BATCH_SIZE)
    runs = {
        "uncached": lambda: loop(sources, n),
        "greedy": lambda: generate(model, sources, max_length=n, end_id=None).tokens,
        "beam4": lambda: generate(
            model, sources, max_length=n, method="beam", beam_size=4, length_penalty=1.0,
            length_penalty_style="power", end_id=None,
        ).tokens,
    }
    print(f"OPUS-MT shape, {model.count_params() / 1e6:.1f} M parameters; Keras "
          f"{keras.__version__}, TensorFlow {tf.__version__}, {os.cpu_count()} CPUs")
    print("warm-up (traces and XLA compiles once) ...", flush=True)
    outputs = {name: run() for name, run in runs.items()}
    if not np.array_equal(outputs["uncached"], outputs["greedy"]):
        print("WARNING: the uncached loop's tokens differ from cached greedy")

    times = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)

    peer = common.median(times["uncached"])
    print(f"\nbatch {BATCH_SIZE}, source {SOURCE_LENGTH} tokens, {n} new tokens, "
          f"median of {args.repeats}")
    print(f"{'decoder':<10} {'s/batch':>9} {'tok/s':>8} {'vs uncached':>12}")
    for name in runs:
        seconds = common.median(times[name])
        print(f"{name:<10} {seconds:9.3f} {BATCH_SIZE * n / seconds:8.1f} {peer / seconds:11.1f}x")


if __name__ == "__main__":
    main()
