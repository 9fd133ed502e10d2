"""The tokenizer defaults on real corpora: an automatic vocabulary size, lossless round trips."""

import unicodedata

import pytest

from keras_tf.datasets import load_bible, load_jupyterlab_fr
from keras_tf.text import (
    Seq2SeqTokenizers,
    auto_vocabulary_size,
    train_sentencepiece,
    train_wordpiece,
)


@pytest.fixture(scope="module")
def bible():
    return load_bible("fr")


@pytest.mark.parametrize("lines", [10, 100, 10_000])
def test_automatic_vocabulary_size_never_fails(bible, lines):
    sources, targets = bible.train.sources[:lines], bible.train.targets[:lines]
    tokenizers = Seq2SeqTokenizers.train(sources, targets)
    size = tokenizers.source_vocabulary_size
    # A soft limit: never more than the rule asks, and every character has a piece.
    assert size <= auto_vocabulary_size(sources + targets)
    characters = set("".join(sources + targets))
    ids = tokenizers.tokenize_target(targets).flat_values.numpy()
    assert 1 not in set(ids.tolist())  # no [UNK] on the training text
    assert size >= len(characters) + 4
    if lines == 10_000:
        assert size == auto_vocabulary_size(sources + targets) == 8000


def test_a_size_the_corpus_cannot_fill_names_the_limit(bible):
    with pytest.raises(ValueError, match=r"vocabulary_size=8000 from 10 sentences.*<= \d+"):
        train_sentencepiece(bible.train.targets[:10], 8000)


def _round_trip(tokenizers, texts):
    ids = tokenizers.tokenize_target(texts)
    return [text.decode("utf-8") for text in tokenizers.detokenize_target(ids).numpy()]


def _normalised(text):
    return " ".join(unicodedata.normalize("NFKC", text).split())


def test_sentencepiece_round_trips_every_bible_target(bible):
    targets = [t for corpus in bible.splits().values() for t in corpus.targets]
    tokenizers = Seq2SeqTokenizers(train_sentencepiece(targets))
    back = _round_trip(tokenizers, targets)
    # The Bible needs no NFKC change: the round trip is the identity, hyphens
    # ("soixante-dix") and apostrophes ("l'Éternel") included.
    assert back == targets
    assert any("-" in t for t in targets) and any("'" in t for t in targets)


def test_sentencepiece_round_trips_every_demo_target():
    demo = load_jupyterlab_fr()
    targets = [t for corpus in demo.splits().values() for t in corpus.targets]
    tokenizers = Seq2SeqTokenizers.train(demo.train.sources, targets)
    back = _round_trip(tokenizers, targets)
    assert back == [_normalised(t) for t in targets]
    # NFKC is the only change: "…" becomes "...".
    changed = [t for t, b in zip(targets, back) if t != b]
    assert changed and all("…" in t or "\u00a0" in t or "\u202f" in t for t in changed)


def test_wordpiece_is_lossy_where_sentencepiece_is_not(bible):
    targets = bible.test.targets
    targets = targets[:200]
    wordpiece = Seq2SeqTokenizers(train_wordpiece(targets))
    back = _round_trip(wordpiece, targets)
    lossy = sum(b != t for t, b in zip(targets, back))
    # Spaces around every punctuation mark: most verses change.
    assert lossy > len(targets) // 2
    assert any(" - " in b and "-" in t and " - " not in t for t, b in zip(targets, back))
