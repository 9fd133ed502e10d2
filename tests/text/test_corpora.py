import logging

import pytest
import tensorflow as tf

from keras_tf.text import (
    CorpusError,
    ParallelCorpus,
    read_aligned,
    read_dataset,
    read_tsv,
    with_replay,
)

GOOD = [("Hello", "Bonjour"), ("Save the notebook", "Enregistrer le notebook")]

# (line 2 of a three-line TSV file, the reason it is malformed)
MALFORMED_TSV_LINES = [
    (b"no tab here", "missing_tab"),
    (b"", "missing_tab"),
    (b"one\ttwo\tthree", "extra_tab"),
    (b"   \tVide", "empty_source"),
    (b"Empty\t ", "empty_target"),
    (b"caf\xe9\tcaf\xc3\xa9", "invalid_utf8"),  # Latin-1 byte, not UTF-8
]


def tsv_bytes(pairs):
    return b"".join(f"{s}\t{t}\n".encode("utf-8") for s, t in pairs)


def test_read_tsv_reads_every_pair(tmp_path):
    path = tmp_path / "train.tsv"
    # A byte-order mark, a CRLF ending, padding spaces, a U+2028 inside a line.
    path.write_bytes(
        b"\xef\xbb\xbfHello\tBonjour\r\n"
        + b"  Save the notebook \tEnregistrer le notebook\n"
        + "a\u2028b\tc\n".encode("utf-8")
    )
    corpus = read_tsv(path)
    assert list(corpus) == GOOD + [("a\u2028b", "c")]
    assert (corpus.stats.lines, corpus.stats.pairs, corpus.stats.total_skipped) == (3, 3, 0)


@pytest.mark.parametrize("line, reason", MALFORMED_TSV_LINES)
def test_malformed_tsv_line_raises_naming_file_and_line(tmp_path, line, reason):
    path = tmp_path / "bad.tsv"
    path.write_bytes(tsv_bytes(GOOD[:1]) + line + b"\n" + tsv_bytes(GOOD[1:]))
    with pytest.raises(CorpusError, match=rf"bad\.tsv, line 2: .*\({reason}\)") as error:
        read_tsv(path)
    assert (error.value.line, error.value.reason) == (2, reason)


@pytest.mark.parametrize("line, reason", MALFORMED_TSV_LINES)
def test_malformed_tsv_line_is_skipped_and_counted(tmp_path, line, reason, caplog):
    path = tmp_path / "bad.tsv"
    path.write_bytes(tsv_bytes(GOOD[:1]) + line + b"\n" + tsv_bytes(GOOD[1:]))
    with caplog.at_level(logging.WARNING, logger="keras_tf.text"):
        corpus = read_tsv(path, on_error="skip")
    assert list(corpus) == GOOD
    assert dict(corpus.stats.skipped) == {reason: 1}
    assert (corpus.stats.lines, corpus.stats.pairs) == (3, 2)
    assert f"1 skipped ({reason}=1)" in caplog.text


def test_skip_counts_every_reason_in_one_file(tmp_path):
    lines = [line for line, _ in MALFORMED_TSV_LINES]
    path = tmp_path / "bad.tsv"
    path.write_bytes(tsv_bytes(GOOD) + b"\n".join(lines) + b"\n" + tsv_bytes(GOOD))
    corpus = read_tsv(path, on_error="skip")
    assert list(corpus) == GOOD + GOOD
    assert dict(corpus.stats.skipped) == {
        "missing_tab": 2,
        "extra_tab": 1,
        "empty_source": 1,
        "empty_target": 1,
        "invalid_utf8": 1,
    }
    # Nothing is lost: every line was either kept or counted.
    assert corpus.stats.lines == corpus.stats.pairs + corpus.stats.total_skipped == 10


def test_read_aligned(tmp_path):
    (tmp_path / "train.en").write_text("Hello\nSave the notebook\n", encoding="utf-8")
    (tmp_path / "train.fr").write_text("Bonjour\r\nEnregistrer le notebook\r\n", encoding="utf-8")
    corpus = read_aligned(tmp_path / "train.en", tmp_path / "train.fr")
    assert list(corpus) == GOOD


@pytest.mark.parametrize("longer", ["en", "fr"])
def test_aligned_files_of_different_lengths(tmp_path, longer):
    (tmp_path / "train.en").write_text("a\nb\nc\nd\n" if longer == "en" else "a\nb\n", "utf-8")
    (tmp_path / "train.fr").write_text("a\nb\nc\nd\n" if longer == "fr" else "a\nb\n", "utf-8")
    with pytest.raises(CorpusError, match=rf"train\.{longer}, line 3: .*only 2 lines") as error:
        read_aligned(tmp_path / "train.en", tmp_path / "train.fr")
    assert error.value.reason == "unaligned"
    corpus = read_aligned(tmp_path / "train.en", tmp_path / "train.fr", on_error="skip")
    assert list(corpus) == [("a", "a"), ("b", "b")]
    assert dict(corpus.stats.skipped) == {"unaligned": 2}


def test_aligned_errors_name_the_file_at_fault(tmp_path):
    (tmp_path / "train.en").write_bytes(b"Hello\nCoffee\n\nBye\n")
    (tmp_path / "train.fr").write_bytes(b"Bonjour\ncaf\xe9\nRien\nSalut\n")
    with pytest.raises(CorpusError, match=r"train\.fr, line 2: invalid UTF-8 .*b'caf\\xe9'"):
        read_aligned(tmp_path / "train.en", tmp_path / "train.fr")
    corpus = read_aligned(tmp_path / "train.en", tmp_path / "train.fr", on_error="skip")
    assert list(corpus) == [("Hello", "Bonjour"), ("Bye", "Salut")]
    assert dict(corpus.stats.skipped) == {"invalid_utf8": 1, "empty_source": 1}


def test_read_dataset():
    dataset = tf.data.Dataset.from_tensor_slices(
        ([s for s, _ in GOOD] + ["", b"caf\xe9"], [t for _, t in GOOD] + ["Rien", "café"])
    )
    with pytest.raises(CorpusError, match=r"pairs, element 3: the source side is empty"):
        read_dataset(dataset, name="pairs")
    corpus = read_dataset(dataset, on_error="skip")
    assert list(corpus) == GOOD
    assert dict(corpus.stats.skipped) == {"empty_source": 1, "invalid_utf8": 1}


def test_read_dataset_rejects_other_structures():
    with pytest.raises(ValueError, match="received element_spec=TensorSpec"):
        read_dataset(tf.data.Dataset.from_tensor_slices(["only one side"]))
    infinite = tf.data.Dataset.from_tensor_slices((["a"], ["b"])).repeat()
    with pytest.raises(ValueError, match="infinite cardinality"):
        read_dataset(infinite)


def test_on_error_is_checked(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes(tsv_bytes(GOOD))
    with pytest.raises(ValueError, match="received on_error='ignore'"):
        read_tsv(path, on_error="ignore")


def test_write_tsv_round_trip(tmp_path):
    corpus = ParallelCorpus(["Grüße", "我们"], ["Salutations", "nous"])
    corpus.write_tsv(tmp_path / "out.tsv")
    assert list(read_tsv(tmp_path / "out.tsv")) == list(corpus)
    assert [tuple(p) for p in corpus.to_dataset().as_numpy_iterator()] == [
        (s.encode(), t.encode()) for s, t in corpus
    ]
    with pytest.raises(ValueError, match=r"pair 1 .* received 'a\\tb'"):
        ParallelCorpus(["a\tb"], ["c"]).write_tsv(tmp_path / "bad.tsv")
    with pytest.raises(ValueError, match="received 2 sources and 1 targets"):
        ParallelCorpus(["a", "b"], ["c"])


def test_with_replay_mixes_in_whole_pairs_of_the_old_corpus_the_same_every_time():
    new = ParallelCorpus([f"new {i}" for i in range(10)], [f"NEW {i}" for i in range(10)])
    old = ParallelCorpus([f"old {i}" for i in range(100)], [f"OLD {i}" for i in range(100)])
    mixed = with_replay(new, old, ratio=2, seed=3)
    # The new pairs first, then 20 distinct old ones, each still with its own translation.
    assert list(mixed)[:10] == list(new)
    replayed = list(mixed)[10:]
    assert len(replayed) == 20 and len(set(replayed)) == 20
    assert all(target == source.upper() for source, target in replayed)
    assert list(with_replay(new, old, ratio=2, seed=3)) == list(mixed)
    assert list(with_replay(new, old, ratio=2, seed=4)) != list(mixed)
    assert str(mixed.stats).startswith("in-memory + 20 pairs of in-memory: 30 lines read")
    # A ratio asking for more than the old corpus holds takes all of it, once.
    assert sorted(list(with_replay(new, old, ratio=50))[10:]) == sorted(old)
    with pytest.raises(ValueError, match="received ratio=0"):
        with_replay(new, old, ratio=0)
