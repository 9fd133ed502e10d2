"""What an epoch of `Seq2SeqTranslator.fit` on lists of strings costs in its input pipeline.

`fit(sources, targets)` tokenizes the pairs once, caches the ids and frames
them each epoch. The peer, in the same run, is the pipeline it replaced: a
map that tokenized and framed each batch of strings, every epoch. On the
training split of the embedded JupyterLab French corpus (transformer_small's
lengths, 32 pairs a batch, SentencePiece 2000), this prints the CPU seconds
of one epoch's input alone (a new iterator, as Keras makes one an epoch,
read to the end), median over the epochs, for both, alternately, and their
ratio. The first epoch of the cached pipeline (the one that tokenizes) is
reported on its own.

Usage: python benchmarks/translator_text_epochs.py [--epochs 5]
"""

import argparse
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import median  # noqa: E402

from keras_tf.datasets import load_jupyterlab_fr  # noqa: E402
from keras_tf.models import Seq2SeqTranslator  # noqa: E402
from keras_tf.text import Seq2SeqTokenizers  # noqa: E402


def per_batch_tokenization(translator, sources, targets, batch_size, seed):
    """The pipeline before: strings shuffled and batched, tokenized and framed in one map."""
    import tensorflow as tf

    preprocessor = translator.preprocessor
    return (
        tf.data.Dataset.from_tensor_slices((sources, targets))
        .shuffle(len(sources), seed=seed, reshuffle_each_iteration=True)
        .batch(batch_size)
        .map(lambda s, t: preprocessor.bucketed(*preprocessor(s, t)),
             num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )


def epoch_cpu_seconds(dataset):
    start = time.process_time()
    batches = sum(1 for _ in dataset)
    return time.process_time() - start, batches


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args(argv)

    train = load_jupyterlab_fr().train
    sources, targets = list(train.sources), list(train.targets)
    tokenizers = Seq2SeqTokenizers.train(sources, targets, vocabulary_size=2000)
    translator = Seq2SeqTranslator.from_preset(
        "transformer_small", tokenizers=tokenizers, max_source_length=32, max_target_length=32
    )
    ours, _, _ = translator._as_dataset(sources, targets, 32, True, 0)
    peer = per_batch_tokenization(translator, sources, targets, 32, 0)

    first, batches = epoch_cpu_seconds(ours)
    peer_first, peer_batches = epoch_cpu_seconds(peer)
    assert batches == peer_batches, (batches, peer_batches)
    times = {"ours": [], "peer": []}
    for _ in range(args.epochs):
        times["ours"].append(epoch_cpu_seconds(ours)[0])
        times["peer"].append(epoch_cpu_seconds(peer)[0])
    ours_s, peer_s = median(times["ours"]), median(times["peer"])
    print(f"{len(sources):,} pairs, {batches} batches an epoch, median of {args.epochs} epochs")
    print("| pipeline | first epoch CPU s | later epoch CPU s |")
    print("|---|---|---|")
    print(f"| fit on strings: tokenized once, cached ids framed | {first:.2f} | {ours_s:.3f} |")
    print(f"| peer: tokenized and framed every epoch | {peer_first:.2f} | {peer_s:.3f} |")
    print(f"later epochs, ours / peer: {ours_s / peer_s:.2f}x")


if __name__ == "__main__":
    main()
