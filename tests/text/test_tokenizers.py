import json
import os

import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from keras_tf.models.config import END_ID, PAD_ID, RESERVED_TOKENS, START_ID, UNK_ID
from keras_tf.text import Seq2SeqTokenizers, train_sentencepiece, train_wordpiece
from tests.text.conftest import ENGLISH, MULTILINGUAL, VOCABULARY_SIZE, training_corpus

# The normalised form each kind gives back: SentencePiece is lossless after NFKC
# and whitespace collapsing; WordPiece splits off punctuation and CJK characters.
ROUND_TRIP = {
    "sentencepiece": {
        "Café crème à la française": "Café crème à la française",
        "Grüße aus München, straße!": "Grüße aus München, straße!",
        "我们喜欢机器翻译。": "我们喜欢机器翻译。",
        "I love it 😀🎉": "I love it 😀🎉",
        "مرحبا بالعالم": "مرحبا بالعالم",
        "שלום עולם": "שלום עולם",
        "": "",
        "  open   notebook  ": "open notebook",
        "ﬁle": "file",  # NFKC unfolds the ligature
        "Cafe\u0301": "Café",  # NFKC composes the accent
    },
    "wordpiece": {
        "Café crème à la française": "Café crème à la française",
        "Grüße aus München, straße!": "Grüße aus München , straße !",
        "我们喜欢机器翻译。": "我 们 喜 欢 机 器 翻 译 。",
        "I love it 😀🎉": "I love it 😀🎉",
        "مرحبا بالعالم": "مرحبا بالعالم",
        "שלום עולם": "שלום עולם",
        "": "",
        "  open   notebook  ": "open notebook",
        "ﬁle": "file",
        "Cafe\u0301": "Café",
    },
}
# "✈" and "Z" never occur in training.
UNKNOWN = {
    "sentencepiece": ("le ✈ chat", "le  \u2047  chat"),  # " ⁇ " is SentencePiece's UNK surface
    "wordpiece": ("le ✈ chat", "le [UNK] chat"),
}


def decode(strings):
    return [s.decode("utf-8") for s in strings.numpy().tolist()]


def test_round_trip_returns_normalised_text(tokenizers):
    expected = ROUND_TRIP[tokenizers.kind]
    for side in ("source", "target"):
        ids = getattr(tokenizers, f"tokenize_{side}")(list(expected))
        assert ids.dtype == tf.int32
        assert isinstance(ids, tf.RaggedTensor)
        # No UNK: every character of the sample was in the training corpus.
        assert UNK_ID not in ids.flat_values.numpy()
        texts = getattr(tokenizers, f"detokenize_{side}")(ids)
        assert decode(texts) == list(expected.values())
    # The empty string has no tokens.
    assert tokenizers.tokenize_target([""]).row_lengths().numpy().tolist() == [0]


def test_unknown_characters_become_unk(tokenizers):
    text, expected = UNKNOWN[tokenizers.kind]
    ids = tokenizers.tokenize_target([text, "Zut"])
    assert UNK_ID in ids[0].numpy()
    assert UNK_ID in ids[1].numpy()
    assert decode(tokenizers.detokenize_target(ids))[0] == expected


def test_reserved_ids_match_the_model_config(tokenizers):
    tokenizer = tokenizers.target_tokenizer
    if tokenizers.kind == "wordpiece":
        assert tuple(tokenizer.get_vocabulary()[:4]) == RESERVED_TOKENS
    else:
        assert [tokenizer.id_to_token(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]
    # Reserved ids never come out of tokenizing plain text (UNK aside).
    ids = tokenizers.tokenize_target(MULTILINGUAL).flat_values.numpy()
    assert not np.isin(ids, [PAD_ID, START_ID, END_ID]).any()
    assert ids.max() < tokenizers.target_vocabulary_size


def test_detokenize_stops_at_end_and_drops_start_and_padding(tokenizers):
    ids = tokenizers.tokenize_target(MULTILINGUAL[:2]).to_tensor()
    batch = ids.shape[0]
    # [START] ids [END] junk [PAD] [PAD], as greedy decoding produces.
    framed = tf.concat(
        [
            tf.fill([batch, 1], START_ID),
            ids,
            tf.fill([batch, 1], END_ID),
            tf.constant([[7, 8], [9, 10]], tf.int32),
            tf.fill([batch, 2], PAD_ID),
        ],
        axis=1,
    )
    expected = [ROUND_TRIP[tokenizers.kind][text] for text in MULTILINGUAL[:2]]
    assert decode(tokenizers.detokenize_target(framed)) == expected
    # int64 and ragged ids are accepted too.
    assert decode(tokenizers.detokenize_target(tf.cast(framed, tf.int64))) == expected
    ragged = tokenizers.tokenize_target(MULTILINGUAL[:2])
    assert decode(tokenizers.detokenize_target(ragged)) == expected
    # A row that is only END or padding detokenizes to "".
    empty = tf.constant([[END_ID, 5], [PAD_ID, PAD_ID]])
    assert decode(tokenizers.detokenize_target(empty)) == ["", ""]


@pytest.mark.parametrize("shared", [True, False])
def test_save_load_gives_identical_ids(tokenizers, shared, tmp_path):
    if not shared:
        corpus = training_corpus()
        tokenizers = Seq2SeqTokenizers.train(
            corpus.sources,
            corpus.targets,
            kind=tokenizers.kind,
            vocabulary_size=VOCABULARY_SIZE[tokenizers.kind] - 20,
            shared=False,
        )
    tokenizers.save(tmp_path)
    config = json.loads((tmp_path / "tokenizers.json").read_text(encoding="utf-8"))
    assert config["shared"] is shared
    expected_files = ["shared"] if shared else ["source", "target"]
    assert sorted(config["files"]) == sorted(expected_files)
    for name in config["files"].values():
        assert (tmp_path / name).is_file()

    loaded = Seq2SeqTokenizers.load(tmp_path)
    assert loaded.get_config() == tokenizers.get_config()
    assert loaded.shared is shared
    texts = MULTILINGUAL + ENGLISH + ["le ✈ chat"]
    for side in ("source", "target"):
        original = getattr(tokenizers, f"tokenize_{side}")(texts)
        reloaded = getattr(loaded, f"tokenize_{side}")(texts)
        assert reloaded.to_list() == original.to_list()
        assert decode(getattr(loaded, f"detokenize_{side}")(reloaded)) == decode(
            getattr(tokenizers, f"detokenize_{side}")(original)
        )


def test_separate_vocabularies_differ():
    corpus = training_corpus()
    tokenizers = Seq2SeqTokenizers.train(
        corpus.sources, ENGLISH * 10, vocabulary_size=60, target_vocabulary_size=25, shared=False
    )
    assert not tokenizers.shared
    assert (tokenizers.source_vocabulary_size, tokenizers.target_vocabulary_size) == (60, 25)
    assert tokenizers.source_tokenizer.proto != tokenizers.target_tokenizer.proto


class _Translator(tf.Module):
    """What a serving export does: a tf.function over the tokenizers."""

    def __init__(self, tokenizers):
        super().__init__()
        self.tokenizers = tokenizers

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(self, strings):
        ids = self.tokenizers.tokenize_target(strings)
        return {"ids": ids.to_tensor(), "text": self.tokenizers.detokenize_target(ids)}


def test_saved_model_export_and_reload(tokenizers, tmp_path):
    texts = tf.constant(MULTILINGUAL + ["le ✈ chat"])
    module = _Translator(tokenizers)
    expected = module.round_trip(texts)
    tf.saved_model.save(module, str(tmp_path))
    assert os.path.exists(tmp_path / "saved_model.pb")
    reloaded = tf.saved_model.load(str(tmp_path))
    result = reloaded.round_trip(texts)
    np.testing.assert_array_equal(result["ids"].numpy(), expected["ids"].numpy())
    assert decode(result["text"]) == decode(expected["text"])


def test_tokenizers_run_inside_tf_data(tokenizers):
    dataset = tf.data.Dataset.from_tensor_slices(MULTILINGUAL).batch(4)
    mapped = [ids.to_list() for ids in dataset.map(tokenizers.tokenize_source)]
    eager = tokenizers.tokenize_source(MULTILINGUAL).to_list()
    assert mapped[0] + mapped[1] == eager


def test_bpe_and_lowercase():
    corpus = training_corpus()
    tokenizers = Seq2SeqTokenizers.train(
        corpus.sources, corpus.targets, vocabulary_size=80, model_type="bpe", lowercase=True
    )
    assert tokenizers.get_config()["lowercase"] is True
    ids = tokenizers.tokenize_source(["Save THE Notebook"])
    assert decode(tokenizers.detokenize_source(ids)) == ["save the notebook"]
    wordpiece = Seq2SeqTokenizers.train(
        corpus.sources, corpus.targets, kind="wordpiece", vocabulary_size=200, lowercase=True
    )
    ids = wordpiece.tokenize_source(["Save THE Notebook"])
    assert decode(wordpiece.detokenize_source(ids)) == ["save the notebook"]


def test_errors_quote_the_received_value():
    corpus = training_corpus()
    with pytest.raises(ValueError, match=r"value <= \d+.*|received vocabulary_size=5000"):
        train_sentencepiece(corpus.sources, 5000)
    with pytest.raises(ValueError, match="vocabulary_size=3"):
        train_wordpiece(corpus.sources, 3)
    with pytest.raises(ValueError, match="kind='bert'"):
        Seq2SeqTokenizers.train(corpus.sources, corpus.targets, kind="bert")
    with pytest.raises(ValueError, match="model_type='bpe'"):
        Seq2SeqTokenizers.train(corpus.sources, corpus.targets, kind="wordpiece", model_type="bpe")
    with pytest.raises(ValueError, match="target_vocabulary_size=30"):
        Seq2SeqTokenizers.train(
            corpus.sources, corpus.targets, vocabulary_size=60, target_vocabulary_size=30
        )
    with pytest.raises(ValueError, match="model_type='word'"):
        train_sentencepiece(corpus.sources, 60, model_type="word")
    with pytest.raises(FileNotFoundError, match="tokenizers.json"):
        Seq2SeqTokenizers.load("/nonexistent/folder")


def test_foreign_reserved_ids_are_rejected():
    # keras-hub's default WordPiece reserved tokens put [UNK] at id 3.
    bert_style = keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]", "a", "b"]
    )
    with pytest.raises(ValueError, match=r"received \('\[PAD\]', '\[CLS\]'"):
        Seq2SeqTokenizers(bert_style)


def test_setting_the_seed_does_not_break_tokenizers(tokenizers):
    # tf.random.set_seed clears the eager kernel cache, which deletes
    # kernel-owned TF-Text resources (tensorflow/text#570).
    dataset = tf.data.Dataset.from_tensor_slices(MULTILINGUAL).batch(8)
    dataset = dataset.map(tokenizers.tokenize_source)
    before = [ids.to_list() for ids in dataset]
    tf.random.set_seed(7)
    assert [ids.to_list() for ids in dataset] == before
    assert tokenizers.tokenize_source(MULTILINGUAL).to_list() == before[0]
