"""Translating a test set in batches: the short last batch padded to a full one, against sent as it is.

`translate_in_batches` (what `keras-tf evaluate` and the validation BLEU of
training use) sends a short last batch as `batch_size` rows, its longest
sentence repeated, so that it reuses the full batches' compiled decoding
program instead of compiling one more. The peer, in the same run, is the
same call with `pad_remainder=False`: the last batch as it is, one more XLA
program. The copies cost decoding work; the saved compile is what pays.

Each repeat builds a fresh `transformer_small` (random weights, seed 0, so
every repeat decodes the same tokens) and translates the demo corpus's test
split (`keras_tf.datasets.load_jupyterlab_fr`, tokenizers trained on its
train split as the README does), so every repeat pays its compiles, as a
`keras-tf evaluate` run does. The two variants alternate, so machine load
hits both alike. Prints each variant's median wall and CPU seconds, their
ratios, the number of batches and the remainder's size, and whether both
gave the same translations.

Usage:
    python benchmarks/batch_remainder.py [--batch-size 32] [--beam-size 4] [--repeats 3]
"""

import argparse
import time

import common  # noqa: F401  (first: quiet TensorFlow start-up)
import keras

from keras_tf.datasets import load_jupyterlab_fr
from keras_tf.decoding import DecodingConfig
from keras_tf.translation import Seq2SeqTranslator
from keras_tf.translation.batches import translate_in_batches
from keras_tf.text import Seq2SeqTokenizers


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=32, help="longest output, in tokens")
    parser.add_argument("--repeats", type=int, default=3)
    return parser.parse_args()


def main():
    args = parse_args()
    corpus = load_jupyterlab_fr()
    tokenizers = Seq2SeqTokenizers.train(
        corpus.train.sources, corpus.train.targets, vocabulary_size=2000
    )
    texts = list(corpus.test.sources)
    decoding = DecodingConfig.for_beam_size(args.beam_size, max_length=args.max_length)

    def run(pad_remainder):
        keras.utils.set_random_seed(0)
        translator = Seq2SeqTranslator.from_preset(
            "transformer_small", tokenizers=tokenizers, max_source_length=32,
            max_target_length=32,
        )
        wall, cpu = time.perf_counter(), time.process_time()
        out = translate_in_batches(
            translator, texts, args.batch_size, decoding, pad_remainder=pad_remainder
        )
        return time.perf_counter() - wall, time.process_time() - cpu, out

    remainder = len(texts) % args.batch_size
    batches = -(-len(texts) // args.batch_size)
    print(f"{len(texts)} test sentences, batch {args.batch_size}: {batches} batches, the last "
          f"of {remainder or args.batch_size}; beam {args.beam_size}, at most {args.max_length} "
          f"tokens; transformer_small, random weights")
    times = {True: [], False: []}
    outputs = {}
    for _ in range(args.repeats):
        for pad in (True, False):
            wall, cpu, outputs[pad] = run(pad)
            times[pad].append((wall, cpu))
    print("| last batch | median wall s | median CPU s |\n|---|---|---|")
    medians = {}
    for pad, name in ((True, "padded to a full batch"), (False, "as it is (peer)")):
        medians[pad] = [common.median([t[i] for t in times[pad]]) for i in (0, 1)]
        print(f"| {name} | {medians[pad][0]:.1f} | {medians[pad][1]:.1f} |")
    print(f"padded / as it is: wall {medians[True][0] / medians[False][0]:.2f}, "
          f"CPU {medians[True][1] / medians[False][1]:.2f}")
    print(f"same translations: {outputs[True] == outputs[False]}")


if __name__ == "__main__":
    main()
