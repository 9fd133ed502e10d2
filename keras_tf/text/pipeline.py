"""The `tf.data` input pipeline: parallel text in, padded model batches out.

`make_dataset` tokenizes in the graph, frames the sequences, caches the
tokenized corpus in memory, shuffles with a seed, buckets by length and
prefetches. Each element is

    ({"encoder_tokens": int32 [B, S], "decoder_tokens": int32 [B, T]},
     labels int32 [B, T])

padded with `PAD_ID` (0), so the model's padding mask falls out of the ids.

The framing rule, shared with serving through `frame_source`/`frame_target`:

* encoder_tokens = source ids truncated to `max_source_length - 1`, then END;
* target ids t are truncated to `max_target_length - 1`;
  decoder_tokens = [START] + t and labels = t + [END], so
  `labels[i] == decoder_tokens[i + 1]`: the decoder learns to predict the
  next token, and a truncated target still ends with END.

A pair is over-long when its source needs truncating (`len(source ids) >=
max_source_length`) or its target does (`len(target ids) >=
max_target_length`). `overlong="truncate"` (default) keeps it cut as above;
`overlong="filter"` drops it. Either way the counts are logged when the
dataset is built (`overlong_stats` returns them).
"""

import dataclasses
import logging

import numpy as np
import tensorflow as tf

from keras_tf.special_tokens import END_ID, PAD_ID, START_ID
from keras_tf.text.corpora import ParallelCorpus
from keras_tf.text.ragged import concat_rows

logger = logging.getLogger("keras_tf.text")

OVERLONG_CHOICES = ("truncate", "filter")

# The token budget of a batch when neither a budget nor a batch size is given
# (keras-tf train): at most 32 pairs padded to 64 tokens, 128 pairs of 16, and
# less on a small corpus, so that an epoch has at least
# MIN_BATCHES_PER_EPOCH batches (`fitted_batch_tokens`). OpenNMT-tf's CPU
# batch; with the peak scaled to it (`keras_tf.models.learning_rates.
# batch_peak_learning_rate`) it learns more in the same CPU time than 512
# tokens at the paper's peak: docs/benchmarks.md, "Why these defaults?".
DEFAULT_BATCH_TOKENS = 2048
MIN_BATCHES_PER_EPOCH = 200

# Sentences are tokenized this many at a time before the per-pair stages.
_TOKENIZE_BATCH = 1024


def _check_max_length(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 2:
        raise ValueError(
            f"{name} must be an integer >= 2 (one token plus START or END); "
            f"received {name}={value!r}"
        )


def _column(nrows, value):
    # A ragged [nrows, 1] column of `value`, to concatenate with ragged ids.
    return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([nrows, 1]), value))


def frame_source(ids, max_source_length):
    """Encoder tokens from source ids: the first `max_source_length - 1`, then END.

    Args:
        ids: int32 ragged `[batch, (tokens)]`, as `tokenize_source` gives.
        max_source_length: int >= 2, the longest encoder input.

    Returns:
        int32 ragged `[batch, (<= max_source_length)]`.

    Example:
        >>> frame_source(tf.ragged.constant([[7, 8, 9], [5]]), 3).to_list()
        [[7, 8, 3], [5, 3]]
    """
    _check_max_length("max_source_length", max_source_length)
    ids = tf.cast(ids, tf.int32)
    return concat_rows(ids[:, : max_source_length - 1], _column(ids.nrows(), END_ID))


def frame_target(ids, max_target_length):
    """Decoder inputs and labels from target ids, shifted by one.

    Args:
        ids: int32 ragged `[batch, (tokens)]`, as `tokenize_target` gives.
        max_target_length: int >= 2, the longest decoder input.

    Returns:
        `(decoder_tokens, labels)`, both int32 ragged
        `[batch, (<= max_target_length)]`: `[START] + t` and `t + [END]` for
        `t` the first `max_target_length - 1` ids.

    Example:
        >>> decoder_tokens, labels = frame_target(tf.ragged.constant([[7, 8, 9]]), 3)
        >>> decoder_tokens.to_list(), labels.to_list()
        ([[2, 7, 8]], [[7, 8, 3]])
    """
    _check_max_length("max_target_length", max_target_length)
    ids = tf.cast(ids, tf.int32)[:, : max_target_length - 1]
    decoder_tokens = concat_rows(_column(ids.nrows(), START_ID), ids)
    labels = concat_rows(ids, _column(ids.nrows(), END_ID))
    return decoder_tokens, labels


def encode_source(tokenizers, strings, max_source_length):
    """Source sentences to padded encoder tokens, as the pipeline frames them.

    For inference and serving: runs in eager code and in `tf.function`s.

    Args:
        tokenizers: a `Seq2SeqTokenizers`.
        strings: tf.string `[batch]`.
        max_source_length: int >= 2, the longest encoder input.

    Returns:
        int32 `[batch, S]`, padded with `PAD_ID` to the longest row,
        `S <= max_source_length`.
    """
    ids = frame_source(tokenizers.tokenize_source(strings), max_source_length)
    return ids.to_tensor(default_value=PAD_ID)


@dataclasses.dataclass(frozen=True)
class OverlongStats:
    """How many pairs exceed the maximum lengths, and what was done to them.

    Args:
        pairs: pairs in the corpus.
        source_overlong: pairs whose source needs truncating.
        target_overlong: pairs whose target needs truncating.
        overlong: pairs with either side too long.
        action: `"truncate"` or `"filter"`.
    """

    pairs: int
    source_overlong: int
    target_overlong: int
    overlong: int
    action: str

    def __str__(self):
        done = "truncated" if self.action == "truncate" else "filtered out"
        return (
            f"{self.overlong} of {self.pairs} pairs over-long and {done} "
            f"({self.source_overlong} by the source, {self.target_overlong} by the target)"
        )


def _tokenized(corpus, tokenizers, max_source_length, max_target_length, bucket_boundaries):
    """Per pair: `(encoder_tokens, decoder_tokens, labels, source_len, target_len, bucket)`.

    The lengths are those of the ids before truncation; `bucket` indexes the
    first boundary >= max(len(encoder_tokens), len(decoder_tokens)).
    """
    boundaries = tf.constant(bucket_boundaries, tf.int64)

    def tokenize(sources, targets):
        source_ids = tokenizers.tokenize_source(sources)
        target_ids = tokenizers.tokenize_target(targets)
        encoder_tokens = frame_source(source_ids, max_source_length)
        decoder_tokens, labels = frame_target(target_ids, max_target_length)
        length = tf.maximum(encoder_tokens.row_lengths(), decoder_tokens.row_lengths())
        return (
            encoder_tokens,
            decoder_tokens,
            labels,
            tf.cast(source_ids.row_lengths(), tf.int32),
            tf.cast(target_ids.row_lengths(), tf.int32),
            tf.searchsorted(boundaries, length, out_type=tf.int64),
        )

    return (
        corpus.to_dataset()
        .batch(_TOKENIZE_BATCH)
        .map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
        # Unbatched rows are 1-D ragged tensors (ragged_rank 0); a map makes
        # them plain tensors, which padded_batch requires.
        .map(lambda *row: row, num_parallel_calls=tf.data.AUTOTUNE)
    )


def _pair_lengths(tokenized):
    """`(source_len, target_len, bucket)` arrays over the pairs, in corpus order."""
    columns = ([], [], [])
    for batch in tokenized.map(lambda *element: element[3:]).batch(8192).as_numpy_iterator():
        for column, values in zip(columns, batch):
            column.append(values)
    if not columns[0]:
        return np.zeros([0], np.int32), np.zeros([0], np.int32), np.zeros([0], np.int64)
    return tuple(np.concatenate(column) for column in columns)


def _overlong(source_len, target_len, max_source_length, max_target_length):
    """Boolean masks: the pairs whose source, target needs truncating."""
    return source_len >= max_source_length, target_len >= max_target_length


def _count_overlong(source_len, target_len, max_source_length, max_target_length, action):
    source_over, target_over = _overlong(
        source_len, target_len, max_source_length, max_target_length
    )
    return OverlongStats(
        pairs=len(source_over),
        source_overlong=int(source_over.sum()),
        target_overlong=int(target_over.sum()),
        overlong=int((source_over | target_over).sum()),
        action=action,
    )


def overlong_stats(
    corpus, tokenizers, *, max_source_length, max_target_length, overlong="truncate"
):
    """Count the pairs of `corpus` that exceed the maximum lengths.

    `make_dataset` logs the same figures when it builds the dataset.

    Args:
        corpus: a `ParallelCorpus`.
        tokenizers: a `Seq2SeqTokenizers`.
        max_source_length: int >= 2, the longest encoder input.
        max_target_length: int >= 2, the longest decoder input.
        overlong: the action to report, `"truncate"` or `"filter"`.

    Returns:
        An `OverlongStats`.
    """
    _check_overlong(overlong)
    _check_max_length("max_source_length", max_source_length)
    _check_max_length("max_target_length", max_target_length)
    max_length = max(max_source_length, max_target_length)
    tokenized = _tokenized(corpus, tokenizers, max_source_length, max_target_length, [max_length])
    source_len, target_len, _ = _pair_lengths(tokenized)
    return _count_overlong(source_len, target_len, max_source_length, max_target_length, overlong)


def _check_overlong(overlong):
    if overlong not in OVERLONG_CHOICES:
        raise ValueError(
            f"overlong must be one of {OVERLONG_CHOICES}; received overlong={overlong!r}"
        )


def fitted_batch_tokens(
    corpus, tokenizers, *, max_length, bucket_boundaries=None,
    most=DEFAULT_BATCH_TOKENS, batches=MIN_BATCHES_PER_EPOCH,
):
    """The token budget `keras-tf train` uses by default: `most`, less on a small corpus.

    The budget is the padded token positions of one epoch (each pair padded
    to its bucket's bound) over `batches`, so that a small corpus still gets
    about `batches` updates an epoch, capped at `most` and never below
    `max_length` (a batch holds at least one pair of the longest length).
    On 30,000 Bible verses this is `most`; on the 2,442 pairs of the demo
    corpus, 255 tokens.

    Example:
        >>> from keras_tf.text import ParallelCorpus, Seq2SeqTokenizers
        >>> corpus = ParallelCorpus(["a b c"] * 1000, ["x y"] * 1000)
        >>> tokenizers = Seq2SeqTokenizers.train(corpus.sources, corpus.targets)
        >>> fitted_batch_tokens(corpus, tokenizers, max_length=16)  # 1,000 pairs of 8 / 200
        40

    Args:
        corpus: the training `ParallelCorpus`.
        tokenizers: its `Seq2SeqTokenizers`.
        max_length: int, the longest source and target.
        bucket_boundaries: as for `make_dataset` (default: every 8 tokens).
        most: int, the cap. Defaults to `DEFAULT_BATCH_TOKENS`.
        batches: int, the batches an epoch to aim for. Defaults to
            `MIN_BATCHES_PER_EPOCH`.

    Returns:
        An int, for `make_dataset(batch_tokens=...)`.
    """
    _check_max_length("max_length", max_length)
    if bucket_boundaries is None:
        bucket_boundaries = default_bucket_boundaries(max_length)
    bounds = np.minimum(sorted(set(bucket_boundaries) | {max_length}), max_length)
    tokenized = _tokenized(corpus, tokenizers, max_length, max_length, list(bounds))
    _, _, buckets = _pair_lengths(tokenized)
    padded = int(bounds[np.minimum(buckets, len(bounds) - 1)].sum())
    return int(max(max_length, min(most, padded // max(1, batches))))


def default_bucket_boundaries(max_length):
    """Bucket upper bounds: every 8 tokens to 64, then about a quarter wider each.

    Args:
        max_length: int, the longest sequence; it is the last boundary.

    Returns:
        A sorted list of ints ending with `max_length`.

    Example:
        >>> default_bucket_boundaries(100)
        [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 100]
    """
    boundaries = []
    boundary = 8
    while boundary < max_length:
        boundaries.append(boundary)
        boundary += max(8, boundary // 4 // 8 * 8)
    return boundaries + [max_length]


def make_dataset(
    corpus,
    tokenizers,
    *,
    batch_size=None,
    batch_tokens=None,
    max_source_length,
    max_target_length,
    overlong="truncate",
    bucketing=True,
    bucket_boundaries=None,
    pad_to_bucket_boundary=True,
    fill_short_batches=True,
    shuffle=True,
    seed=0,
):
    """A `tf.data.Dataset` of padded batches for `model.fit`.

    The corpus is tokenized once (in the graph, by TF-Text ops) and cached in
    memory when this function runs; every epoch then reshuffles the cached
    pairs, buckets and pads them. Every pair of the corpus appears exactly
    once per epoch (less the over-long ones with `overlong="filter"`). The
    last batch of each bucket is short; by default it is filled up to the
    bucket's batch size with rows of padding alone, which the loss and the
    metrics ignore, so that each bucket is one shape (see
    `fill_short_batches`).

    A batch holds either `batch_size` pairs, or, with `batch_tokens`, as
    many pairs as fit the token budget, as OpenNMT and fairseq batch: a
    bucket padded to length L gets `batch_tokens // L` pairs a batch, so
    `batch * max(S, T) <= batch_tokens` for every batch, padding included.

    For a fixed `seed` (and global seed, `tf.random.set_seed`) the sequence
    of batches is the same from run to run, epoch by epoch. To rebuild the
    batches of any one epoch in another process (to resume training exactly),
    use `make_dataset_by_epoch`.

    Args:
        corpus: a `ParallelCorpus` (see `keras_tf.text.corpora`).
        tokenizers: a `Seq2SeqTokenizers`.
        batch_size: int, pairs per batch. Give it or `batch_tokens`.
        batch_tokens: int, the most token positions (padded pairs times the
            longer padded side) per batch; at least the longest sequence,
            `max(max_source_length, max_target_length)`.
        max_source_length: int >= 2, the longest `encoder_tokens`.
        max_target_length: int >= 2, the longest `decoder_tokens`/labels.
        overlong: `"truncate"` (default) or `"filter"`; see the module
            docstring. The count is logged either way.
        bucketing: bool, batch pairs of similar length together. Defaults to
            `True`.
        bucket_boundaries: sorted ints, the buckets' upper bounds on
            `max(len(encoder_tokens), len(decoder_tokens))`. Defaults to
            `None`: `default_bucket_boundaries(max(max_source_length,
            max_target_length))`.
        pad_to_bucket_boundary: bool. `True` (default) pads each batch to its
            bucket's boundary (capped at the maximum lengths; without
            bucketing, to the maximum lengths), so XLA compiles one program
            per bucket. `False` pads to the longest sequence of the batch.
        fill_short_batches: bool. `True` (default), with
            `pad_to_bucket_boundary`, fills the short last batch of each
            bucket with all-padding rows up to the bucket's batch size: XLA
            then compiles one train step and one test step per bucket
            instead of two (`benchmarks/fill_short_batches.py`: 0.64 of
            the CPU of `transformer_small`'s first epoch on the demo
            corpus), and a single process's gradients are unchanged, since the masked loss sums and counts
            real tokens only; the reported `loss`, a mean over real
            target tokens (`keras_tf.models.token_loss`), does not
            move either. Pass `False` under a
            `tf.distribute` strategy with more than one replica: a replica
            whose share is all padding adds a zero loss to the replicas'
            mean, so that step's gradient would shrink.
        shuffle: bool, reshuffle the pairs every epoch. Defaults to `True`.
        seed: int, the shuffle seed. Defaults to 0.

    Returns:
        A `tf.data.Dataset` of `({"encoder_tokens": int32 [B, S],
        "decoder_tokens": int32 [B, T]}, labels int32 [B, T])`.

    Example:
        >>> from keras_tf.text import ParallelCorpus, Seq2SeqTokenizers
        >>> corpus = ParallelCorpus(["a cat", "a dog"] * 8, ["un chat", "un chien"] * 8)
        >>> tokenizers = Seq2SeqTokenizers.train(corpus.sources, corpus.targets,
        ...     vocabulary_size=16)
        >>> dataset = make_dataset(corpus, tokenizers, batch_size=4,
        ...     max_source_length=8, max_target_length=8)
        >>> features, labels = next(iter(dataset))
        >>> features["encoder_tokens"].shape
        TensorShape([4, 8])
    """
    batching = _Batching.checked(
        corpus, batch_size, batch_tokens, max_source_length, max_target_length, overlong,
        bucketing, bucket_boundaries, pad_to_bucket_boundary, fill_short_batches,
    )
    tokenized = batching.tokenized(corpus, tokenizers).cache()
    # This pass fills the cache, so the first epoch does not tokenize again.
    batching.count(*_pair_lengths(tokenized))
    dataset = tokenized
    if shuffle:
        dataset = dataset.shuffle(max(len(corpus), 1), seed=seed, reshuffle_each_iteration=True)
    return batching.batched(dataset)


def make_dataset_by_epoch(
    corpus,
    tokenizers,
    *,
    batch_size=None,
    batch_tokens=None,
    max_source_length,
    max_target_length,
    overlong="truncate",
    bucketing=True,
    bucket_boundaries=None,
    pad_to_bucket_boundary=True,
    fill_short_batches=True,
    seed=0,
):
    """`make_dataset`'s batches as a function of the epoch: `epoch -> tf.data.Dataset`.

    Epoch `e` shuffles the pairs with a permutation drawn from `(seed, e)`
    alone (`tf.random.experimental.stateless_shuffle`), so its batches do not
    depend on what the process read before: another process rebuilds them
    exactly. `keras_tf.training.train` uses this to resume a killed run at
    the next unseen batch, in the order an uninterrupted run would have read.

    The corpus is tokenized once, when this function runs, and kept in
    memory as tensors. The arguments are `make_dataset`'s.

    Returns:
        A function of an int64 scalar (a Python int or a tensor, so it can be
        called inside `tf.data.Dataset.flat_map`) returning one epoch's
        batches, as `make_dataset` yields them, with a known cardinality.

    Example:
        >>> from keras_tf.text import ParallelCorpus, Seq2SeqTokenizers
        >>> corpus = ParallelCorpus(["a cat", "a dog"] * 8, ["un chat", "un chien"] * 8)
        >>> tokenizers = Seq2SeqTokenizers.train(corpus.sources, corpus.targets,
        ...     vocabulary_size=16)
        >>> epoch_batches = make_dataset_by_epoch(corpus, tokenizers, batch_size=4,
        ...     max_source_length=8, max_target_length=8)
        >>> int(epoch_batches(3).cardinality())
        4
    """
    batching = _Batching.checked(
        corpus, batch_size, batch_tokens, max_source_length, max_target_length, overlong,
        bucketing, bucket_boundaries, pad_to_bucket_boundary, fill_short_batches,
    )
    count = len(corpus)
    # Every pair at once: (encoder, decoder, labels) ragged [pairs, (tokens)],
    # kept as flat values and row starts; (source_len, target_len, bucket) [pairs].
    columns = next(iter(batching.tokenized(corpus, tokenizers).ragged_batch(max(count, 1))))
    tokens = [(column.flat_values, column.row_splits) for column in columns[:3]]
    lengths = columns[3:]
    batching.count(*(np.asarray(column) for column in lengths))

    def pair(index):
        return (
            *(values[splits[index] : splits[index + 1]] for values, splits in tokens),
            *(column[index] for column in lengths),
        )

    def epoch_batches(epoch):
        order = tf.random.experimental.stateless_shuffle(
            tf.range(count, dtype=tf.int64),
            seed=tf.stack([tf.constant(seed, tf.int64), tf.cast(epoch, tf.int64)]),
        )
        return batching.batched(tf.data.Dataset.from_tensor_slices(order).map(pair))

    return epoch_batches


@dataclasses.dataclass
class _Batching:
    """The checked options of `make_dataset`, and the stages they configure."""

    bucket_batch_sizes: list  # pairs per batch, by bucket
    max_source_length: int
    max_target_length: int
    overlong: str
    bucketing: bool
    bucket_boundaries: list
    pad_to_bucket_boundary: bool
    fill_short_batches: bool
    batches: int = 0

    @classmethod
    def checked(cls, corpus, batch_size, batch_tokens, max_source_length, max_target_length,
                overlong, bucketing, bucket_boundaries, pad_to_bucket_boundary,
                fill_short_batches):
        if not isinstance(corpus, ParallelCorpus):
            raise TypeError(
                "make_dataset expects a ParallelCorpus (read a tf.data.Dataset of pairs "
                f"with keras_tf.text.read_dataset); received {type(corpus).__name__}"
            )
        _check_overlong(overlong)
        _check_max_length("max_source_length", max_source_length)
        _check_max_length("max_target_length", max_target_length)
        max_length = max(max_source_length, max_target_length)
        _check_batching(batch_size, batch_tokens, max_length)
        if bucket_boundaries is None:
            bucket_boundaries = default_bucket_boundaries(max_length)
        bucket_boundaries = list(bucket_boundaries)
        if (
            not bucket_boundaries
            or bucket_boundaries != sorted(set(bucket_boundaries))
            or bucket_boundaries[0] < 1
        ):
            raise ValueError(
                "bucket_boundaries must be strictly increasing positive integers; "
                f"received bucket_boundaries={bucket_boundaries!r}"
            )
        if bucket_boundaries[-1] < max_length:
            # The last bucket holds everything up to the maximum length.
            bucket_boundaries.append(max_length)

        if not bucketing:
            bucket_boundaries = [max_length]
        # The padded length of a bucket is its boundary, capped at the longest
        # sequence: a token budget gives each bucket its own batch size.
        bucket_batch_sizes = [
            batch_size or max(1, batch_tokens // min(bound, max_length))
            for bound in bucket_boundaries
        ]
        return cls(bucket_batch_sizes, max_source_length, max_target_length, overlong,
                   bucketing, bucket_boundaries, pad_to_bucket_boundary,
                   bool(fill_short_batches and pad_to_bucket_boundary))

    def tokenized(self, corpus, tokenizers):
        return _tokenized(
            corpus, tokenizers, self.max_source_length, self.max_target_length,
            self.bucket_boundaries,
        )

    def count(self, source_len, target_len, buckets):
        """Log the over-long pairs; set `batches`, the number of batches per epoch."""
        stats = _count_overlong(
            source_len, target_len, self.max_source_length, self.max_target_length,
            self.overlong,
        )
        (logger.warning if stats.overlong else logger.info)("%s", stats)
        # The number of batches per epoch does not depend on the shuffle: each
        # bucket of n pairs gives ceil(n / its batch size) batches.
        if self.overlong == "filter":
            source_over, target_over = _overlong(
                source_len, target_len, self.max_source_length, self.max_target_length
            )
            buckets = buckets[~(source_over | target_over)]
        counts = np.bincount(buckets, minlength=len(self.bucket_boundaries))
        self.batches = int(
            sum(-(-count // size) for count, size in zip(counts, self.bucket_batch_sizes))
        )

    def batched(self, dataset):
        """Tokenized pairs, in the order to read them, to padded model batches."""
        max_source_length, max_target_length = self.max_source_length, self.max_target_length
        pad_to_bucket_boundary = self.pad_to_bucket_boundary
        if self.overlong == "filter":
            dataset = dataset.filter(
                lambda encoder, decoder, labels, source_len, target_len, bucket: (
                    source_len < max_source_length
                )
                & (target_len < max_target_length)
            )
        # Elements stay flat tuples (encoder, decoder, labels, source_len,
        # target_len, bucket) until batched: one map per batch, not per pair,
        # builds the model's input dict.
        def padded_shapes(source_bound, target_bound):
            if not pad_to_bucket_boundary:
                return None
            # Shapes as int64 vectors, which may be tensors computed per bucket.
            source_shape = tf.reshape(tf.cast(source_bound, tf.int64), [1])
            target_shape = tf.reshape(tf.cast(target_bound, tf.int64), [1])
            return (source_shape, target_shape, target_shape, [], [], [])

        padding_values = (PAD_ID, PAD_ID, PAD_ID, 0, 0, tf.constant(0, tf.int64))
        fill_short_batches = self.fill_short_batches

        def filled(batches, size):
            """`batches` with each short one filled up to `size` rows of padding values."""
            if not fill_short_batches:
                return batches
            return batches.map(lambda *columns: tuple(fill_rows(c, size) for c in columns))

        if not self.bucketing:
            dataset = filled(dataset.padded_batch(
                self.bucket_batch_sizes[0],
                padded_shapes=padded_shapes(max_source_length, max_target_length),
                padding_values=padding_values,
            ), self.bucket_batch_sizes[0])
        else:
            boundaries = tf.constant(self.bucket_boundaries, tf.int32)
            sizes = tf.constant(self.bucket_batch_sizes, tf.int64)

            def batch_bucket(key, window):
                bound = tf.cast(tf.gather(boundaries, key), tf.int64)
                return filled(window.padded_batch(
                    tf.gather(sizes, key),
                    padded_shapes=padded_shapes(
                        tf.minimum(bound, max_source_length), tf.minimum(bound, max_target_length)
                    ),
                    padding_values=padding_values,
                ), tf.gather(sizes, key))

            dataset = dataset.group_by_window(
                lambda *element: element[5],
                batch_bucket,
                window_size_func=lambda key: tf.gather(sizes, key),
            )
        dataset = dataset.map(
            lambda encoder, decoder, labels, source_len, target_len, bucket: (
                {"encoder_tokens": encoder, "decoder_tokens": decoder},
                labels,
            )
        )

        # A known cardinality lets model.fit show progress and check the count.
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(self.batches))
        options = tf.data.Options()
        options.deterministic = True
        return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def _check_batching(batch_size, batch_tokens, max_length):
    if (batch_size is None) == (batch_tokens is None):
        raise ValueError(
            "Give one of batch_size (pairs) and batch_tokens (a token budget); received "
            f"batch_size={batch_size!r}, batch_tokens={batch_tokens!r}"
        )
    for name, value, low in (("batch_size", batch_size, 1), ("batch_tokens", batch_tokens, max_length)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < low
        ):
            reason = "a positive integer" if low == 1 else (
                f"an integer >= the longest sequence ({low} tokens), so every pair fits"
            )
            raise ValueError(f"{name} must be {reason}; received {name}={value!r}")


def fill_rows(tensor, rows):
    """Pad `[batch, ...]` with rows of `PAD_ID` (0) to `[rows, ...]`, `rows` >= batch.

    A row of padding alone changes no gradient: the masked loss sums and
    counts real tokens only, and a fully masked attention row stays finite.
    """
    missing = tf.cast(rows, tf.int32) - tf.shape(tensor)[0]
    return tf.pad(tensor, [[0, missing]] + [[0, 0]] * (tensor.shape.rank - 1),
                  constant_values=PAD_ID)


def padding_fraction(dataset):
    """The fraction of `encoder_tokens` and `decoder_tokens` positions that are padding.

    Args:
        dataset: a dataset as `make_dataset` returns (iterated once).

    Returns:
        A float in [0, 1].
    """
    padding = total = 0
    for features, _ in dataset:
        for name in ("encoder_tokens", "decoder_tokens"):
            tokens = features[name]
            padding += int(tf.reduce_sum(tf.cast(tokens == PAD_ID, tf.int64)))
            total += int(tf.size(tokens, out_type=tf.int64))
    return padding / total if total else 0.0
