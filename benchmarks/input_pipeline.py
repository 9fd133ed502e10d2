"""Is the input pipeline ever the bottleneck? Padding and throughput on the demo corpus.

On the training split of the JupyterLab French demo corpus, with a shared
SentencePiece vocabulary and bench-small's batch (64) and maximum lengths
(64 + 64), this prints:

1. the padding fraction of `encoder_tokens` + `decoder_tokens`, with and
   without length bucketing, padded to the batch's longest sequence or to the
   bucket boundary (fixed shapes for XLA);
2. the pipeline's examples/s on its own: the one-off tokenize-and-cache pass
   that `make_dataset` runs (on the corpus repeated 20 times, so tracing
   does not dominate), then full epochs from the cache (median);
3. the examples/s a bench-small `Seq2SeqTransformer` consumes in `model.fit`
   on the same batches (float32, `jit_compile=False`, after a warm-up epoch),
   and the ratio of the two;
4. the tokenize-and-cache pass with the framing's rows joined by
   `keras_tf.text.ragged.concat_rows` (a gather) against the ragged
   `tf.concat(..., axis=1)` it replaced, alternately, median of 3 each.

Usage: python benchmarks/input_pipeline.py [--epochs 7] [--vocabulary-size 2000]
"""

import argparse
import logging
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import BATCH_SIZE, BENCH_SMALL, StepTimer, median  # noqa: E402

from keras_tf.datasets import load_jupyterlab_fr  # noqa: E402
from keras_tf.text import (  # noqa: E402
    ParallelCorpus,
    Seq2SeqTokenizers,
    make_dataset,
    overlong_stats,
    padding_fraction,
)


def pipeline(corpus, tokenizers, **options):
    return make_dataset(
        corpus,
        tokenizers,
        batch_size=BATCH_SIZE,
        max_source_length=BENCH_SMALL.max_source_length,
        max_target_length=BENCH_SMALL.max_target_length,
        seed=0,
        **options,
    )


def padding_table(corpus, tokenizers):
    print("Padding fraction (encoder + decoder positions), one epoch:")
    for bucketing in (False, True):
        for boundary in (False, True):
            fraction = padding_fraction(
                pipeline(corpus, tokenizers, bucketing=bucketing, pad_to_bucket_boundary=boundary)
            )
            label = (
                f"bucketing={'on ' if bucketing else 'off'} "
                f"pad to {'bucket boundary' if boundary else 'longest in batch'}"
            )
            print(f"  {label:<46} {fraction:6.1%}")


def pipeline_throughput(corpus, tokenizers, epochs):
    start = time.perf_counter()
    dataset = pipeline(corpus, tokenizers)
    first_build = time.perf_counter() - start
    # Tokenizing once per run costs tracing plus a pass over the corpus; a
    # 20-fold corpus shows the steady tokenization rate.
    large = ParallelCorpus(corpus.sources * 20, corpus.targets * 20)
    start = time.perf_counter()
    pipeline(large, tokenizers)
    tokenize_rate = len(large) / (time.perf_counter() - start)
    rates = []
    for _ in range(epochs):
        start = time.perf_counter()
        # Pairs, not rows: a bucket's short last batch is filled with padding rows.
        examples = sum(int(np.count_nonzero(labels.numpy().any(1))) for _, labels in dataset)
        rates.append(examples / (time.perf_counter() - start))
    print("Input pipeline on its own:")
    print(f"  make_dataset, first call (tracing included): {first_build:10.2f} s")
    print(f"  tokenize + cache pass, {len(large):,} pairs:      {tokenize_rate:10,.0f} pairs/s")
    print(f"  epochs from the cache, median of {epochs}:        {median(rates):10,.0f} examples/s")
    return dataset, median(rates)


def framing_peer(corpus, tokenizers, repeats=3):
    """The tokenize-and-cache pass, rows joined by `concat_rows` and by ragged `tf.concat`."""
    import tensorflow as tf

    from keras_tf.text import pipeline as pipeline_module

    large = ParallelCorpus(corpus.sources * 20, corpus.targets * 20)
    ways = {
        "concat_rows (gather)": pipeline_module.concat_rows,
        "ragged tf.concat, axis=1": lambda first, second: tf.concat([first, second], axis=1),
    }
    rates = {name: [] for name in ways}
    try:
        for _ in range(repeats):
            for name, join in ways.items():
                pipeline_module.concat_rows = join
                start = time.perf_counter()
                pipeline(large, tokenizers)
                rates[name].append(len(large) / (time.perf_counter() - start))
    finally:
        pipeline_module.concat_rows = ways["concat_rows (gather)"]
    print(f"Framing, tokenize + cache pass of {len(large):,} pairs, median of {repeats}:")
    for name, values in rates.items():
        print(f"  {name:<28} {median(values):10,.0f} pairs/s")
    ours, peer = (median(values) for values in rates.values())
    print(f"  concat_rows / tf.concat: {ours / peer:.2f}x")


def model_throughput(dataset):
    import keras

    from keras_tf.models import Seq2SeqTransformer
    from keras_tf.training import MaskedSparseCategoricalCrossentropy

    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(BENCH_SMALL)
    model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy(), jit_compile=False)
    model.fit(dataset, epochs=1, verbose=0, shuffle=False)  # warm-up: traces every bucket shape
    timer = StepTimer()
    model.fit(dataset, epochs=1, verbose=0, shuffle=False, callbacks=[timer])
    examples = sum(int(labels.shape[0]) for _, labels in dataset)
    rate = examples / sum(timer.times)
    print("bench-small training step (model.fit, float32, no XLA):")
    print(f"  median step {median(timer.times) * 1000:8.1f} ms over {len(timer.times)} steps")
    print(f"  consumption {rate:10,.0f} examples/s")
    return rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=7, help="pipeline epochs to time")
    parser.add_argument(
        "--vocabulary-size",
        type=int,
        default=2000,
        help="shared SentencePiece vocabulary (the demo corpus allows at most ~3,800)",
    )
    parser.add_argument("--skip-model", action="store_true", help="time the pipeline only")
    args = parser.parse_args()

    corpus = load_jupyterlab_fr().train
    tokenizers = Seq2SeqTokenizers.train(
        corpus.sources, corpus.targets, vocabulary_size=args.vocabulary_size
    )
    print(
        f"Demo corpus: {len(corpus)} training pairs; SentencePiece unigram, shared "
        f"vocabulary {tokenizers.source_vocabulary_size}; batch {BATCH_SIZE}, max lengths "
        f"{BENCH_SMALL.max_source_length} + {BENCH_SMALL.max_target_length}"
    )
    stats = overlong_stats(
        corpus,
        tokenizers,
        max_source_length=BENCH_SMALL.max_source_length,
        max_target_length=BENCH_SMALL.max_target_length,
    )
    print(f"Over-long: {stats}")
    # make_dataset logs the same count on every build; once is enough here.
    logging.getLogger("keras_tf.text").setLevel(logging.ERROR)
    padding_table(corpus, tokenizers)
    dataset, pipeline_rate = pipeline_throughput(corpus, tokenizers, args.epochs)
    framing_peer(corpus, tokenizers)
    if args.skip_model:
        return
    model_rate = model_throughput(dataset)
    print(
        f"Pipeline / model: {pipeline_rate / model_rate:,.0f}x "
        "(above 1: the pipeline is not the bottleneck)"
    )


if __name__ == "__main__":
    main()
