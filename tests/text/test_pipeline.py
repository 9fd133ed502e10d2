import collections
import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_tf.models.config import END_ID, PAD_ID, START_ID
from keras_tf.text import (
    ParallelCorpus,
    Seq2SeqPreprocessor,
    Seq2SeqTokenizers,
    default_bucket_boundaries,
    encode_source,
    fitted_batch_tokens,
    frame_source,
    frame_target,
    make_dataset,
    make_dataset_by_epoch,
    overlong_stats,
    padding_fraction,
)
from keras_tf.text.pipeline import DEFAULT_BATCH_TOKENS
from keras_tf.text.ragged import concat_rows

MAX_SOURCE, MAX_TARGET = 24, 20


@pytest.fixture(scope="module")
def corpus():
    # 600 pairs of 1 to 30 words: short and long sentences to bucket, a few
    # over the maximum lengths, and repeated pairs (a multiset, not a set).
    rng = np.random.default_rng(0)
    english = ["file", "open", "save", "cell", "run", "kernel", "the", "a", "new", "tab"]
    french = ["fichier", "ouvrir", "enregistrer", "cellule", "noyau", "le", "la", "un", "onglet"]
    sources, targets = [], []
    for _ in range(600):
        length = int(rng.integers(1, 31)) if rng.random() < 0.15 else int(rng.integers(1, 10))
        sources.append(" ".join(rng.choice(english, length)))
        targets.append(" ".join(rng.choice(french, max(1, length + int(rng.integers(-1, 2))))))
    return ParallelCorpus(sources, targets)


@pytest.fixture(scope="module")
def tokenizers(corpus):
    return Seq2SeqTokenizers.train(corpus.sources, corpus.targets, vocabulary_size=40)


def build(corpus, tokenizers, **options):
    options = {
        "batch_size": 16,
        "max_source_length": MAX_SOURCE,
        "max_target_length": MAX_TARGET,
        "seed": 1,
        **options,
    }
    return make_dataset(corpus, tokenizers, **options)


def unpad(row):
    return tuple(int(i) for i in row if i != PAD_ID)


def epoch_pairs(dataset):
    """The multiset of (encoder tokens, labels) pairs of one epoch, less the fill rows."""
    pairs = collections.Counter()
    for features, labels in dataset:
        for encoder, label in zip(features["encoder_tokens"].numpy(), labels.numpy()):
            if encoder.any() or label.any():  # a real pair has END on both sides
                pairs[(unpad(encoder), unpad(label))] += 1
    return pairs


def expected_pairs(corpus, tokenizers):
    encoder = frame_source(tokenizers.tokenize_source(corpus.sources), MAX_SOURCE)
    _, labels = frame_target(tokenizers.tokenize_target(corpus.targets), MAX_TARGET)
    return collections.Counter(zip(map(tuple, encoder.to_list()), map(tuple, labels.to_list())))


def as_numpy(dataset):
    return [
        (f["encoder_tokens"].numpy(), f["decoder_tokens"].numpy(), labels.numpy())
        for f, labels in dataset
    ]


def test_framing_rule():
    ids = tf.ragged.constant([[7, 8, 9, 10], [5], []], dtype=tf.int32)
    assert frame_source(ids, 3).to_list() == [[7, 8, END_ID], [5, END_ID], [END_ID]]
    decoder_tokens, labels = frame_target(ids, 3)
    assert decoder_tokens.to_list() == [[START_ID, 7, 8], [START_ID, 5], [START_ID]]
    assert labels.to_list() == [[7, 8, END_ID], [5, END_ID], [END_ID]]
    with pytest.raises(ValueError, match="received max_source_length=1"):
        frame_source(ids, 1)


def test_batches_hold_shifted_labels(corpus, tokenizers):
    dataset = build(corpus, tokenizers)
    features, labels = dataset.element_spec
    assert sorted(features) == ["decoder_tokens", "encoder_tokens"]
    dtypes = {features["encoder_tokens"].dtype, features["decoder_tokens"].dtype, labels.dtype}
    assert dtypes == {tf.int32}
    for encoder, decoder, labels in as_numpy(dataset):
        assert encoder.shape[1] <= MAX_SOURCE and decoder.shape[1] <= MAX_TARGET
        assert decoder.shape == labels.shape
        # Padding sits at the same places in decoder tokens and labels.
        np.testing.assert_array_equal(decoder == PAD_ID, labels == PAD_ID)
        for source_row, decoder_row, label_row in zip(encoder, decoder, labels):
            if not label_row.any():  # a fill row of a bucket's short last batch
                assert not source_row.any() and not decoder_row.any()
                continue
            n = len(unpad(label_row))
            assert decoder_row[0] == START_ID and label_row[n - 1] == END_ID
            np.testing.assert_array_equal(decoder_row[1:n], label_row[: n - 1])
            m = len(unpad(source_row))
            assert source_row[m - 1] == END_ID and not (source_row[m:] != PAD_ID).any()


@pytest.mark.parametrize(
    "bucketing, pad_to_bucket_boundary",
    [(True, True), (True, False), (False, True), (False, False)],
)
def test_every_pair_appears_once_per_epoch(corpus, tokenizers, bucketing, pad_to_bucket_boundary):
    dataset = build(
        corpus, tokenizers, bucketing=bucketing, pad_to_bucket_boundary=pad_to_bucket_boundary
    )
    expected = expected_pairs(corpus, tokenizers)
    assert sum(expected.values()) == len(corpus) == 600
    assert max(expected.values()) > 1  # the corpus repeats some pairs
    for _ in range(2):
        assert epoch_pairs(dataset) == expected


def test_bucketed_batches_pad_to_their_boundary(corpus, tokenizers):
    boundaries = default_bucket_boundaries(max(MAX_SOURCE, MAX_TARGET))
    assert boundaries == [8, 16, 24]
    widths = collections.Counter()
    for encoder, decoder, _ in as_numpy(build(corpus, tokenizers)):
        boundary = next(b for b in boundaries if b >= min(encoder.shape[1], MAX_SOURCE))
        lengths = np.maximum((encoder != PAD_ID).sum(1), (decoder != PAD_ID).sum(1))
        lengths = lengths[lengths > 0]  # the fill rows of a bucket's last batch
        lower = max([b for b in boundaries if b < boundary], default=0)
        assert encoder.shape == (16, min(boundary, MAX_SOURCE))
        assert decoder.shape[1] == min(boundary, MAX_TARGET)
        assert (lengths > lower).all() and (lengths <= boundary).all()
        widths[encoder.shape[1]] += 1
    assert set(widths) == {8, 16, 24}


def test_short_batches_are_filled_with_padding_rows_that_change_no_gradient(corpus, tokenizers):
    filled = as_numpy(build(corpus, tokenizers, shuffle=False))
    short = as_numpy(build(corpus, tokenizers, shuffle=False, fill_short_batches=False))
    assert len(filled) == len(short)
    # Each bucket's last batch is short (600 pairs in 3 buckets of 16-pair
    # batches), and one shape per bucket is what filling buys.
    assert len({s[0].shape for s in short}) > len({f[0].shape for f in filled}) == 3
    fills = 0
    for f, s in zip(filled, short):
        rows = s[0].shape[0]
        assert f[0].shape[0] == 16 and rows <= 16
        for f_column, s_column in zip(f, s):
            np.testing.assert_array_equal(f_column[:rows], s_column)
            assert not f_column[rows:].any()  # PAD_ID is 0
        fills += 16 - rows
    assert fills > 0

    # The masked loss sums and counts real tokens only: the same loss and
    # gradients with the fill rows as without them.
    model = tiny_model(tokenizers)
    loss_fn = model.loss
    (f_encoder, f_decoder, f_labels), (s_encoder, s_decoder, s_labels) = next(
        (f, s) for f, s in zip(filled, short) if s[0].shape[0] < 16
    )

    def loss_and_gradients(encoder, decoder, labels):
        with tf.GradientTape() as tape:
            logits = model({"encoder_tokens": encoder, "decoder_tokens": decoder})
            loss = loss_fn(labels, logits)
        return loss, tape.gradient(loss, model.trainable_variables)

    f_loss, f_gradients = loss_and_gradients(f_encoder, f_decoder, f_labels)
    s_loss, s_gradients = loss_and_gradients(s_encoder, s_decoder, s_labels)
    np.testing.assert_allclose(f_loss, s_loss, rtol=1e-6)
    for a, b in zip(f_gradients, s_gradients, strict=True):
        # (The embeddings' gradients are IndexedSlices.)
        np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b),
                                   rtol=1e-5, atol=1e-7)


def test_bucketing_cuts_padding(corpus, tokenizers):
    def padding(**options):
        return padding_fraction(build(corpus, tokenizers, pad_to_bucket_boundary=False, **options))

    unbucketed = padding(bucketing=False)
    bucketed = padding()  # boundaries 8, 16, 24
    finer = padding(bucket_boundaries=[4, 8, 12, 16, 20, 24])
    # About 0.52, 0.27 and 0.19 on this corpus.
    assert finer < bucketed < 0.6 * unbucketed, (finer, bucketed, unbucketed)


def test_deterministic_for_a_seed(corpus, tokenizers):
    first, second = build(corpus, tokenizers, seed=3), build(corpus, tokenizers, seed=3)
    epochs = [as_numpy(first), as_numpy(first)]
    for epoch in epochs:
        batches = as_numpy(second)
        assert len(batches) == len(epoch)
        for a, b in zip(epoch, batches):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)
    # Each epoch is reshuffled, and another seed gives another order.
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(*epochs))
    other = as_numpy(build(corpus, tokenizers, seed=4))
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(epochs[0], other))


def test_overlong_pairs_are_counted_then_truncated_or_filtered(corpus, tokenizers, caplog):
    source_lengths = tokenizers.tokenize_source(corpus.sources).row_lengths().numpy()
    target_lengths = tokenizers.tokenize_target(corpus.targets).row_lengths().numpy()
    source_over, target_over = source_lengths >= MAX_SOURCE, target_lengths >= MAX_TARGET
    stats = overlong_stats(
        corpus, tokenizers, max_source_length=MAX_SOURCE, max_target_length=MAX_TARGET
    )
    assert stats.pairs == 600
    assert stats.source_overlong == source_over.sum() > 0
    assert stats.target_overlong == target_over.sum() > 0
    assert stats.overlong == (source_over | target_over).sum()

    with caplog.at_level(logging.WARNING, logger="keras_tf.text"):
        truncated = build(corpus, tokenizers)
    assert f"{stats.overlong} of 600 pairs over-long and truncated" in caplog.text
    assert sum(epoch_pairs(truncated).values()) == 600

    with caplog.at_level(logging.WARNING, logger="keras_tf.text"):
        filtered = build(corpus, tokenizers, overlong="filter")
    assert f"{stats.overlong} of 600 pairs over-long and filtered out" in caplog.text
    kept = epoch_pairs(filtered)
    assert sum(kept.values()) == 600 - stats.overlong
    # The filtered pairs are exactly the over-long ones.
    encoder = frame_source(tokenizers.tokenize_source(corpus.sources), MAX_SOURCE).to_list()
    _, labels = frame_target(tokenizers.tokenize_target(corpus.targets), MAX_TARGET)
    short = ~(source_over | target_over)
    assert kept == collections.Counter(
        (tuple(e), tuple(l)) for e, l, keep in zip(encoder, labels.to_list(), short) if keep
    )


def test_encode_source_matches_the_pipeline(corpus, tokenizers):
    encoded = encode_source(tokenizers, corpus.sources[:5], MAX_SOURCE).numpy()
    expected = frame_source(tokenizers.tokenize_source(corpus.sources[:5]), MAX_SOURCE).to_list()
    assert [list(unpad(row)) for row in encoded] == expected
    assert encoded.dtype == np.int32 and encoded.shape[1] == max(map(len, expected))


def test_arguments_are_checked(corpus, tokenizers):
    with pytest.raises(ValueError, match="received overlong='drop'"):
        build(corpus, tokenizers, overlong="drop")
    with pytest.raises(ValueError, match=r"received bucket_boundaries=\[16, 8\]"):
        build(corpus, tokenizers, bucket_boundaries=[16, 8])
    with pytest.raises(ValueError, match="received batch_size=0"):
        build(corpus, tokenizers, batch_size=0)
    with pytest.raises(TypeError, match="read_dataset.*received .*Dataset"):
        build(corpus.to_dataset(), tokenizers)


def tiny_model(tokenizers):
    from keras_tf.models import Seq2SeqTransformer, get_preset
    from keras_tf.training import MaskedSparseCategoricalCrossentropy

    config = get_preset(
        "transformer_tiny",
        source_vocabulary_size=tokenizers.source_vocabulary_size,
        target_vocabulary_size=tokenizers.target_vocabulary_size,
        max_source_length=MAX_SOURCE,
        max_target_length=MAX_TARGET,
        num_encoder_layers=1,
        num_decoder_layers=1,
    )
    model = Seq2SeqTransformer(config)
    model.compile(
        optimizer="adam", loss=MaskedSparseCategoricalCrossentropy(), jit_compile=False
    )
    return model


class _CountBatches(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1


def test_model_fit_consumes_the_dataset(corpus, tokenizers):
    dataset = build(corpus, tokenizers, batch_size=64)
    batches = len(as_numpy(dataset))
    model = tiny_model(tokenizers)
    counter = _CountBatches()
    history = model.fit(dataset, epochs=2, verbose=0, shuffle=False, callbacks=[counter])
    assert counter.batches == 2 * batches
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[1] < losses[0]


def test_mirrored_strategy(corpus, tokenizers):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert strategy.num_replicas_in_sync == 1
    expected = as_numpy(build(corpus, tokenizers, batch_size=64))
    distributed = strategy.experimental_distribute_dataset(build(corpus, tokenizers, batch_size=64))
    batches = 0
    for (features, labels), (encoder, decoder, label) in zip(distributed, expected):
        (local_encoder,) = strategy.experimental_local_results(features["encoder_tokens"])
        (local_labels,) = strategy.experimental_local_results(labels)
        np.testing.assert_array_equal(local_encoder.numpy(), encoder)
        np.testing.assert_array_equal(local_labels.numpy(), label)
        batches += 1
    assert batches == len(expected)
    with strategy.scope():
        model = tiny_model(tokenizers)
    dataset = build(corpus, tokenizers, batch_size=64)
    history = model.fit(dataset, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.parametrize("options", [{}, {"bucketing": False}, {"overlong": "filter"}])
def test_cardinality_is_the_number_of_batches(corpus, tokenizers, options):
    dataset = build(corpus, tokenizers, **options)
    assert int(dataset.cardinality()) == len(as_numpy(dataset)) > 0


@pytest.mark.parametrize("overlong", ["truncate", "filter"])
def test_epochs_by_number_hold_every_pair_and_depend_on_seed_and_epoch_alone(
    corpus, tokenizers, overlong
):
    options = dict(batch_size=16, max_source_length=MAX_SOURCE, max_target_length=MAX_TARGET,
                   overlong=overlong)
    by_epoch = make_dataset_by_epoch(corpus, tokenizers, seed=1, **options)
    reference = make_dataset(corpus, tokenizers, seed=1, **options)
    # The same pairs, as make_dataset frames, buckets and pads them.
    assert epoch_pairs(by_epoch(0)) == epoch_pairs(reference)
    assert int(by_epoch(0).cardinality()) == int(reference.cardinality())
    first, second = as_numpy(by_epoch(0)), as_numpy(by_epoch(1))
    assert len(first) == len(second) == int(reference.cardinality())
    assert any(a[0].shape != b[0].shape or (a[0] != b[0]).any() for a, b in zip(first, second))
    # Rebuilt in a fresh function (another process would do the same), or
    # reached through flat_map with a tensor epoch: the same batches.
    again = make_dataset_by_epoch(corpus, tokenizers, seed=1, **options)
    flat = as_numpy(tf.data.Dataset.range(1, 2).flat_map(again))
    for a, b in zip(flat, second, strict=True):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    other_seed = as_numpy(make_dataset_by_epoch(corpus, tokenizers, seed=2, **options)(1))
    assert any(a[0].shape != b[0].shape or (a[0] != b[0]).any() for a, b in zip(other_seed, second))


@pytest.mark.parametrize(
    "bucketing, pad_to_bucket_boundary, budget",
    [(True, True, 96), (True, False, 96), (False, True, 100), (True, True, 24)],
)
def test_token_batches_keep_their_budget_and_every_pair(
    corpus, tokenizers, bucketing, pad_to_bucket_boundary, budget
):
    dataset = build(
        corpus, tokenizers, batch_size=None, batch_tokens=budget, bucketing=bucketing,
        pad_to_bucket_boundary=pad_to_bucket_boundary,
    )
    batches = as_numpy(dataset)
    assert len(batches) == int(dataset.cardinality())
    for encoder, decoder, _ in batches:
        rows = encoder.shape[0]
        assert rows * max(encoder.shape[1], decoder.shape[1]) <= budget
    if bucketing and pad_to_bucket_boundary:
        # Short buckets hold more pairs: 96 // 8 = 12 pairs of 8 tokens, 96 // 24 = 4 of 24.
        sizes = collections.defaultdict(int)
        for encoder, _, _ in batches:
            sizes[encoder.shape[1]] = max(sizes[encoder.shape[1]], encoder.shape[0])
        assert budget != 96 or dict(sizes) == {8: 12, 16: 6, 24: 4}
    assert epoch_pairs(dataset) == expected_pairs(corpus, tokenizers)


def test_fitted_budget_is_the_epochs_padded_tokens_over_the_batches_asked_for(corpus, tokenizers):
    def fitted(batches):
        return fitted_batch_tokens(corpus, tokenizers, max_length=MAX_SOURCE, batches=batches)

    budget = fitted(20)
    dataset = build(corpus, tokenizers, batch_size=None, batch_tokens=budget,
                    max_target_length=MAX_SOURCE, pad_to_bucket_boundary=True)
    batches = as_numpy(dataset)
    # The padded tokens of the corpus's pairs (fill rows are not pairs).
    padded = sum(encoder.any(1).sum() * encoder.shape[1] for encoder, _, _ in batches)
    assert budget == padded // 20 and MAX_SOURCE < budget < DEFAULT_BATCH_TOKENS
    assert len(batches) >= 20  # each bucket's batches round up
    assert fitted(1) == DEFAULT_BATCH_TOKENS == 2048  # a large corpus for its batches: the cap
    assert fitted(10**6) == MAX_SOURCE  # never below one pair of the longest length


def test_translator_batches_take_one_bucket_for_both_sides(corpus, tokenizers):
    # Seq2SeqTranslator.fit on strings pads each batch with `bucketed`.
    preprocessor = Seq2SeqPreprocessor(tokenizers, MAX_SOURCE, MAX_TARGET)
    # Batches of pairs in order of length: short batches and long ones.
    order = np.argsort([len(f"{s} {t}".split()) for s, t in zip(corpus.sources, corpus.targets)])
    sources, targets = [corpus.sources[i] for i in order], [corpus.targets[i] for i in order]
    shapes = set()
    for begin in range(0, len(corpus), 32):
        pairs = (tf.constant(sources[begin:begin + 32]), tf.constant(targets[begin:begin + 32]))
        raw_inputs, raw_labels = preprocessor(*pairs)
        inputs, labels = preprocessor.bucketed(raw_inputs, raw_labels)
        longer = max(raw_inputs["encoder_tokens"].shape[1], raw_inputs["decoder_tokens"].shape[1])
        bucket = 16 if longer <= 16 else 24  # source_buckets(24)
        shape = (inputs["encoder_tokens"].shape[1], inputs["decoder_tokens"].shape[1])
        assert shape == (min(bucket, MAX_SOURCE), min(bucket, MAX_TARGET)), (longer, shape)
        assert labels.shape == inputs["decoder_tokens"].shape
        for key, raw in (*raw_inputs.items(), ("labels", raw_labels)):
            padded = (labels if key == "labels" else inputs[key]).numpy()
            np.testing.assert_array_equal(padded[:, :raw.shape[1]], raw.numpy())
            assert not padded[:, raw.shape[1]:].any()
        shapes.add(shape)
    assert shapes == {(16, 16), (24, 20)}


def test_token_budget_is_checked(corpus, tokenizers):
    with pytest.raises(ValueError, match=r"batch_tokens must be an integer >= the longest "
                                         r"sequence \(24 tokens\).*received batch_tokens=20"):
        build(corpus, tokenizers, batch_size=None, batch_tokens=20)
    with pytest.raises(ValueError, match="received batch_size=16, batch_tokens=64"):
        build(corpus, tokenizers, batch_tokens=64)


@pytest.mark.parametrize("dtype", [tf.int32, tf.string])
def test_concat_rows_equals_tf_concat(dtype):
    rng = np.random.default_rng(0)
    for rows in (0, 1, 5, 17):
        parts = []
        for _ in range(2):
            lengths = rng.integers(0, 4, size=rows)  # empty rows included
            values = rng.integers(0, 100, size=int(lengths.sum()))
            values = values.astype(str) if dtype == tf.string else values.astype(np.int32)
            parts.append(tf.RaggedTensor.from_row_lengths(tf.constant(values, dtype), lengths))
        expected = tf.concat(parts, axis=1)
        got = concat_rows(*parts)
        assert got.to_list() == expected.to_list()
        assert got.dtype == dtype and got.nrows() == rows
