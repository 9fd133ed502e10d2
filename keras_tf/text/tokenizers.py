"""Subword tokenizers learned from the training corpus, run as TF-Text ops.

The vocabularies are learned with keras-hub (`compute_sentence_piece_proto`,
`compute_word_piece_vocabulary`) and held by keras-hub's
`SentencePieceTokenizer` and `WordPieceTokenizer`. Tokenizing and
detokenizing run tensorflow-text kernels (`SentencepieceTokenizer`, built
in each traced graph from the keras-hub tokenizer's proto, and keras-hub's
`FastWordpieceTokenizer`), so they work in eager code, in `tf.data` maps and
inside an exported SavedModel (TF Serving ships the TF-Text ops).

Both kinds reserve the ids of `keras_tf.models.config`:
`PAD_ID=0, UNK_ID=1, START_ID=2, END_ID=3`. A character never seen in
training becomes `UNK_ID`, never an error.

What a round trip gives back (`detokenize(tokenize(s))`):

* SentencePiece: `s` after NFKC normalisation (`"…"` becomes `"..."`), with
  runs of whitespace collapsed to one space and no leading or trailing
  space. It is lossless otherwise (hyphens, apostrophes and digits
  included), so it is the default for translation. Every character of the
  training text has a piece, so the training text never meets `[UNK]`.
* SentencePiece with a piece vocabulary (`SentencePieceVocabularyTokenizer`,
  for imported checkpoints such as OPUS-MT): the model's pieces, with ids
  from an explicit vocabulary instead of SentencePiece's own ids. Round
  trips like SentencePiece; `[UNK]` is dropped when detokenizing, as
  `MarianTokenizer.decode(..., skip_special_tokens=True)` drops `<unk>`.
* WordPiece: the same NFKC text split into words on whitespace and
  punctuation, with every CJK character its own word, the words joined by
  one space: `"Grüße, Welt!"` -> `"Grüße , Welt !"`,
  `"quatre-vingt"` -> `"quatre - vingt"`. It cannot give back where the
  spaces were, so it is lossy on most real sentences, and not the default.
"""

import io
import json
import logging
import os
import re
import unicodedata
import warnings

import keras_hub
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from google.protobuf.message import DecodeError
from sentencepiece import sentencepiece_model_pb2

from keras_tf.preset_checks import PresetError, check_fields, confined_file, read_json_object
from keras_tf.special_tokens import END_ID, PAD_ID, RESERVED_TOKENS, START_ID, UNK_ID
from keras_tf.text.ragged import concat_rows

# What `Seq2SeqTokenizers.train` learns; an imported checkpoint may also bring a
# "sentencepiece_vocabulary" (SentencePieceVocabularyTokenizer).
TRAINABLE_KINDS = ("sentencepiece", "wordpiece")
KINDS = TRAINABLE_KINDS + ("sentencepiece_vocabulary",)
SENTENCEPIECE_MODEL_TYPES = ("unigram", "bpe")
CONFIG_FILENAME = "tokenizers.json"
FORMAT_VERSION = 1

logger = logging.getLogger("keras_tf.text")

# The ids SentencePiece must reserve, by the names of its trainer flags.
_SENTENCEPIECE_RESERVED = {"pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": START_ID, "eos_id": END_ID}


def _check_vocabulary_size(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= len(RESERVED_TOKENS):
        raise ValueError(
            f"{name} must be an integer greater than the {len(RESERVED_TOKENS)} "
            f"reserved tokens; received {name}={value!r}"
        )


def _text_list(texts):
    texts = list(texts)
    if not texts:
        raise ValueError("Cannot learn a vocabulary from no text; received 0 sentences")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(
                f"Training texts must be str; received {type(text).__name__} "
                f"{text!r} at index {index}"
            )
    return texts


# The rule of `auto_vocabulary_size`: a third of the distinct words, clipped.
AUTO_VOCABULARY_WORDS_PER_PIECE = 3
AUTO_VOCABULARY_MIN = 256
AUTO_VOCABULARY_MAX = 8000


def auto_vocabulary_size(texts):
    """A vocabulary size that fits the corpus: a third of its distinct words, in [256, 8000].

    The largest vocabulary a small corpus supports is about its distinct
    characters plus the pieces worth merging; a third of the distinct
    whitespace-separated words is well within it (2,194 for the ~3,000 pairs
    of the demo corpus, 8,000 for the 31,000 Bible verses). The size is at
    least the distinct characters plus the reserved tokens, so every
    character gets a piece. `train_sentencepiece(texts, None)` treats it as
    a soft limit, so a corpus too small to fill it gives fewer pieces, never
    an error.

    Args:
        texts: iterable of `str`.

    Returns:
        An int.

    Example:
        >>> auto_vocabulary_size(["the cat sat", "the dog ran"])
        256
    """
    words, characters = set(), set()
    for text in texts:
        words.update(text.split())
        characters.update(text)
    size = len(words) // AUTO_VOCABULARY_WORDS_PER_PIECE
    size = min(max(size, AUTO_VOCABULARY_MIN), AUTO_VOCABULARY_MAX)
    return max(size, len(characters) + len(RESERVED_TOKENS) + 1)


def train_sentencepiece(
    texts, vocabulary_size=None, *, model_type="unigram", lowercase=False, split_digits=True
):
    """Learn a SentencePiece model and wrap it in a keras-hub tokenizer.

    The proto reserves `pad_id=0, unk_id=1, bos_id=2, eos_id=3` and uses
    SentencePiece's `nmt_nfkc` normalisation (`nmt_nfkc_cf` if `lowercase`),
    as keras-hub's `compute_sentence_piece_proto` does, plus two trainer
    settings keras-hub does not expose: every character of `texts` gets a
    piece (`character_coverage=1.0`, so the training text round-trips
    without `[UNK]`), and `split_digits`.

    Args:
        texts: iterable of `str`, the training sentences.
        vocabulary_size: int, the number of pieces, reserved ids included; a
            size the corpus cannot fill raises a `ValueError` that quotes
            SentencePiece's limit. Defaults to `None`:
            `auto_vocabulary_size(texts)`, as a soft limit (a corpus too
            small for it gives fewer pieces).
        model_type: `"unigram"` (default) or `"bpe"`.
        lowercase: bool, case-fold the text first. Defaults to `False`.
        split_digits: bool, make every digit its own piece, as the
            SentencePiece settings of T5, PaLM and LLaMA do: "1999" becomes
            "1 9 9 9", so a model learns numbers digit by digit from a
            10-digit vocabulary instead of memorising each number it saw.
            Defaults to `True`.

    Returns:
        A `keras_hub.tokenizers.SentencePieceTokenizer`.

    Example:
        >>> tokenizer = train_sentencepiece(["the cat sat", "the dog ran"] * 20, 16)
        >>> tokenizer.vocabulary_size()
        16
        >>> tokenizer = train_sentencepiece(["page 12 of 340", "page 7 of 8"] * 20)
        >>> [tokenizer.id_to_token(int(i)) for i in tokenizer.tokenize("2014")][1:]
        ['2', '0', '1', '4']
    """
    import sentencepiece

    if model_type not in SENTENCEPIECE_MODEL_TYPES:
        raise ValueError(
            f"model_type must be one of {SENTENCEPIECE_MODEL_TYPES}; received "
            f"model_type={model_type!r}"
        )
    texts = _text_list(texts)
    automatic = vocabulary_size is None
    if automatic:
        vocabulary_size = auto_vocabulary_size(texts)
    _check_vocabulary_size("vocabulary_size", vocabulary_size)
    writer = io.BytesIO()
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_writer=writer,
            vocab_size=vocabulary_size,
            hard_vocab_limit=not automatic,
            model_type=model_type,
            normalization_rule_name="nmt_nfkc_cf" if lowercase else "nmt_nfkc",
            character_coverage=1.0,
            split_digits=split_digits,
            minloglevel=2,  # no log lines on stderr
            **{name: value for name, value in _SENTENCEPIECE_RESERVED.items()},
        )
    except RuntimeError as error:
        # SentencePiece's message ends with the limit, e.g. "Vocabulary size too
        # high (120). Please set it to a value <= 94."
        reason = re.sub(r"^.*\]\s*", "", str(error).strip())
        raise ValueError(
            f"SentencePiece cannot learn {model_type} pieces of "
            f"vocabulary_size={vocabulary_size} from {len(texts)} sentences: {reason}"
        ) from None
    tokenizer = keras_hub.tokenizers.SentencePieceTokenizer(proto=writer.getvalue())
    logger.info(
        "SentencePiece %s vocabulary of %d pieces from %d sentences (%s)",
        model_type, tokenizer.vocabulary_size(), len(texts),
        f"automatic size, at most {vocabulary_size}" if automatic
        else f"vocabulary_size={vocabulary_size}",
    )
    return tokenizer


def train_wordpiece(texts, vocabulary_size=None, *, lowercase=False):
    """Learn a WordPiece vocabulary with keras-hub and wrap it in a tokenizer.

    The text is NFKC-normalised first, as SentencePiece does, and the
    reserved tokens `[PAD] [UNK] [START] [END]` open the vocabulary, so their
    ids are 0-3.

    Args:
        texts: iterable of `str`, the training sentences.
        vocabulary_size: int, the largest vocabulary, reserved tokens
            included. A small corpus may give fewer tokens. Defaults to
            `None`: `auto_vocabulary_size(texts)`.
        lowercase: bool, case-fold the text first. Defaults to `False`.

    Returns:
        A `keras_hub.tokenizers.WordPieceTokenizer`.

    Example:
        >>> tokenizer = train_wordpiece(["the cat sat", "the dog ran"] * 20, 40)
        >>> tokenizer.get_vocabulary()[:4]
        ['[PAD]', '[UNK]', '[START]', '[END]']
    """
    texts = [unicodedata.normalize("NFKC", text) for text in _text_list(texts)]
    if vocabulary_size is None:
        vocabulary_size = auto_vocabulary_size(texts)
    _check_vocabulary_size("vocabulary_size", vocabulary_size)
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(texts, tf.string)).batch(1024)
    vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
        dataset,
        vocabulary_size,
        lowercase=lowercase,
        reserved_tokens=list(RESERVED_TOKENS),
    )
    return keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=vocabulary, lowercase=lowercase, oov_token=RESERVED_TOKENS[UNK_ID]
    )


# SentencePiece's word-boundary mark, U+2581.
WORD_BOUNDARY = "\u2581"
# A leading language tag such as ">>deu<<" (MarianTokenizer.remove_language_code):
# kept as one piece, the rest of the text goes to SentencePiece.
_LANGUAGE_TAG = r"(?s)^(>>.*?<<)(.*)$"
# tf.strings.to_hash_bucket_fast with this many buckets is a 62-bit fingerprint.
_FINGERPRINT_BUCKETS = 2**62


class SentencePieceVocabularyTokenizer:
    """A SentencePiece model whose pieces take their ids from an explicit vocabulary.

    Imported checkpoints number their pieces their own way: OPUS-MT's
    `vocab.json` is one vocabulary for two SentencePiece models (source and
    target), in an order of its own. This tokenizer splits text with the
    SentencePiece model into pieces and looks each piece up in `vocabulary`
    (a piece not in it reads as `[UNK]`); detokenizing joins the pieces of
    the ids and turns the word-boundary marks back into spaces. A leading
    language tag (`">>deu<< text"`) stays one piece, as MarianTokenizer
    keeps it. Everything runs as TensorFlow and TF-Text ops on graph
    constants, so an exported SavedModel runs it.

    Args:
        proto: bytes, a serialized SentencePiece model.
        vocabulary: list of str, the piece of each id; ids 0-3 are
            `RESERVED_TOKENS`.

    Example:
        >>> base = train_sentencepiece(["the cat sat", "the dog ran"] * 20, 16)
        >>> pieces = [base.id_to_token(i) for i in range(4, 16)]
        >>> tokenizer = SentencePieceVocabularyTokenizer(
        ...     base.proto, list(RESERVED_TOKENS) + pieces[::-1])
        >>> tokenizer.vocabulary_size()
        16
    """

    def __init__(self, proto, vocabulary):
        if not isinstance(proto, bytes):
            raise TypeError(f"proto must be bytes; received {type(proto).__name__}")
        vocabulary = list(vocabulary)
        head = tuple(vocabulary[: len(RESERVED_TOKENS)])
        if head != RESERVED_TOKENS:
            raise ValueError(
                f"The vocabulary must start with {RESERVED_TOKENS}; received {head}"
            )
        if len(set(vocabulary)) != len(vocabulary):
            repeated = sorted({p for p in vocabulary if vocabulary.count(p) > 1})[:5]
            raise ValueError(f"The vocabulary repeats pieces, e.g. {repeated}")
        self.proto = proto
        self.vocabulary = vocabulary
        # The ids of the pieces past the reserved ones, ordered by fingerprint.
        fingerprints = tf.strings.to_hash_bucket_fast(
            vocabulary[len(RESERVED_TOKENS):], _FINGERPRINT_BUCKETS
        ).numpy()
        order = np.argsort(fingerprints, kind="stable")
        self._sorted_fingerprints = fingerprints[order]
        if len(np.unique(self._sorted_fingerprints)) != len(order):
            raise ValueError("Two pieces of the vocabulary share a 64-bit fingerprint")
        self._sorted_ids = (order + len(RESERVED_TOKENS)).astype(np.int32)

    def vocabulary_size(self):
        return len(self.vocabulary)

    def _lookup(self, pieces):
        """Pieces (tf.string, any shape) -> ids; a piece not in the vocabulary -> `UNK_ID`.

        A search in the sorted 64-bit fingerprints of the vocabulary, then a
        string comparison: graph constants and stateless ops only, so no
        lookup-table resource has to be tracked by an export or survive
        `tf.random.set_seed`.
        """
        fingerprints = tf.strings.to_hash_bucket_fast(pieces, _FINGERPRINT_BUCKETS)
        flat = tf.reshape(fingerprints, [-1])
        position = tf.searchsorted(tf.constant(self._sorted_fingerprints), flat)
        position = tf.minimum(position, len(self._sorted_fingerprints) - 1)
        ids = tf.gather(tf.constant(self._sorted_ids), position)
        found = tf.equal(tf.gather(tf.constant(self.vocabulary), ids), tf.reshape(pieces, [-1]))
        return tf.reshape(tf.where(found, ids, UNK_ID), tf.shape(pieces))

    def tokenize(self, strings):
        """tf.string `[batch]` -> int32 ragged `[batch, (pieces)]`."""
        # tagged: [batch]; a leading ">>xx<<" becomes its own piece.
        tagged = tf.strings.regex_full_match(strings, _LANGUAGE_TAG)
        tag = tf.where(tagged, tf.strings.regex_replace(strings, _LANGUAGE_TAG, r"\1"), "")
        rest = tf.where(tagged, tf.strings.regex_replace(strings, _LANGUAGE_TAG, r"\2"), strings)
        pieces = tf_text.SentencepieceTokenizer(model=self.proto, out_type=tf.string).tokenize(rest)
        tags = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(tag, tagged), tf.cast(tagged, tf.int64)
        )
        pieces = concat_rows(tags, pieces)
        return tf.ragged.map_flat_values(self._lookup, pieces)

    def detokenize(self, ids):
        """int32 ragged `[batch, (ids)]` (reserved ids removed) -> tf.string `[batch]`."""
        pieces = tf.gather(tf.constant(self.vocabulary, tf.string), ids)
        text = tf.strings.reduce_join(pieces, axis=-1)
        # MarianTokenizer.convert_tokens_to_string: boundary marks to spaces, then strip.
        return tf.strings.strip(tf.strings.regex_replace(text, WORD_BOUNDARY, " "))


def _kind(tokenizer):
    if isinstance(tokenizer, keras_hub.tokenizers.SentencePieceTokenizer):
        return "sentencepiece"
    if isinstance(tokenizer, keras_hub.tokenizers.WordPieceTokenizer):
        return "wordpiece"
    if isinstance(tokenizer, SentencePieceVocabularyTokenizer):
        return "sentencepiece_vocabulary"
    raise ValueError(
        "Expected a keras_hub.tokenizers.SentencePieceTokenizer or "
        "WordPieceTokenizer, or a keras_tf SentencePieceVocabularyTokenizer; received "
        f"{type(tokenizer).__name__}"
    )


def _sentencepiece_model(tokenizer):
    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(tokenizer.proto)
    return model


def _check_reserved_ids(side, tokenizer):
    """Raise unless the tokenizer gives the reserved tokens ids 0-3."""
    if _kind(tokenizer) == "sentencepiece_vocabulary":
        return  # checked by its constructor
    if _kind(tokenizer) == "sentencepiece":
        spec = _sentencepiece_model(tokenizer).trainer_spec
        found = {name: getattr(spec, name) for name in _SENTENCEPIECE_RESERVED}
        if found != _SENTENCEPIECE_RESERVED:
            raise ValueError(
                f"The {side} SentencePiece model must reserve {_SENTENCEPIECE_RESERVED} "
                f"(keras_tf.models.config); received {found}"
            )
    else:
        head = tuple(tokenizer.get_vocabulary()[: len(RESERVED_TOKENS)])
        if head != RESERVED_TOKENS or tokenizer.oov_token != RESERVED_TOKENS[UNK_ID]:
            raise ValueError(
                f"The {side} WordPiece vocabulary must start with {RESERVED_TOKENS} "
                f"and use oov_token={RESERVED_TOKENS[UNK_ID]!r}; received "
                f"{head} and oov_token={tokenizer.oov_token!r}"
            )


def _sentencepiece_op(tokenizer):
    """A TF-Text SentencePiece tokenizer whose model lives in the traced graph.

    Called while tracing a `tf.function`, so the SentencePiece resource is
    created by a node of that function (the model proto is a constant of the
    graph), not captured from eager mode. keras-hub's eager-built resource is
    owned by a cached eager kernel, which `tf.random.set_seed` (and
    `keras.utils.set_random_seed`) deletes, breaking every later call
    (tensorflow/text#570); a function-owned resource is simply re-created, and
    a SavedModel has no resource to track.
    """
    return tf_text.SentencepieceTokenizer(model=tokenizer.proto, out_type=tf.int32)


def _lowercase(tokenizer):
    if _kind(tokenizer) in ("sentencepiece", "sentencepiece_vocabulary"):
        return _sentencepiece_model(tokenizer).normalizer_spec.name.endswith("_cf")
    return bool(tokenizer.lowercase)


class Seq2SeqTokenizers(tf.Module):
    """The source and target tokenizers of a translation model.

    The methods take and return tensors and run in eager code, in `tf.data`
    maps and in `tf.function`s. It is a `tf.Module` whose methods are
    `tf.function`s that hold everything they need as graph constants (the
    SentencePiece model proto, the WordPiece model buffer), with no resource
    captured from eager mode: a module holding it exports with
    `tf.saved_model.save` as is, and `tf.random.set_seed` cannot break it.

    Args:
        source_tokenizer: a `keras_hub.tokenizers.SentencePieceTokenizer` or
            `WordPieceTokenizer` whose ids 0-3 are `RESERVED_TOKENS`.
        target_tokenizer: the same for the target side, of the same kind.
            Defaults to `None`: share `source_tokenizer`.
        name: the module name. Defaults to `"seq2seq_tokenizers"`.

    Example:
        >>> tokenizers = Seq2SeqTokenizers.train(
        ...     ["the cat sat on the mat"] * 20, ["le chat"] * 20, vocabulary_size=16)
        >>> ids = tokenizers.tokenize_target(["le chat"])
        >>> tokenizers.detokenize_target(ids).numpy()
        array([b'le chat'], dtype=object)
    """

    def __init__(self, source_tokenizer, target_tokenizer=None, name=None):
        super().__init__(name=name or "seq2seq_tokenizers")
        target_tokenizer = source_tokenizer if target_tokenizer is None else target_tokenizer
        kinds = (_kind(source_tokenizer), _kind(target_tokenizer))
        if kinds[0] != kinds[1]:
            raise ValueError(
                "Source and target tokenizers must be of the same kind; received "
                f"source={kinds[0]!r}, target={kinds[1]!r}"
            )
        lowercase = (_lowercase(source_tokenizer), _lowercase(target_tokenizer))
        if lowercase[0] != lowercase[1]:
            raise ValueError(
                "Source and target tokenizers must agree on lowercasing; received "
                f"source lowercase={lowercase[0]}, target lowercase={lowercase[1]}"
            )
        _check_reserved_ids("source", source_tokenizer)
        _check_reserved_ids("target", target_tokenizer)
        self.kind = kinds[0]
        self.lowercase = lowercase[0]
        # Attributes of a tf.Module are tracked: an exporter that holds this
        # object reaches the tf-text resources through these two layers.
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer

    @classmethod
    def from_sentencepiece(cls, source_model, target_model=None):
        """Tokenizers of SentencePiece models you already have: your team's `.model` files.

        A SentencePiece model numbers its pieces its own way (`<unk>` 0,
        `<s>` 1, `</s>` 2 by default, often no padding piece), while keras_tf
        reserves ids 0-3 for PAD, UNK, START and END everywhere. So, as the
        OPUS-MT import does for Marian's vocabularies, the pieces are mapped
        to our ids: 0-3 reserved, then the model's normal and user-defined
        pieces in its order; its unknown piece reads as UNK, and its control
        pieces (`<s>`, `</s>`, `<pad>`) are left out, since framing adds
        START and END. Text is segmented exactly as the model segments it.

        Args:
            source_model: path to (or bytes of) a SentencePiece model.
            target_model: the target side's, or None: one model for both.

        Returns:
            A `Seq2SeqTokenizers` of kind "sentencepiece_vocabulary", which
            saves, loads and exports like any other.

        Example:
            >>> import io, sentencepiece
            >>> model = io.BytesIO()
            >>> sentencepiece.SentencePieceTrainer.train(
            ...     sentence_iterator=iter(["the cat sat on the mat"] * 30), model_writer=model,
            ...     vocab_size=14, minloglevel=2)
            >>> tokenizers = Seq2SeqTokenizers.from_sentencepiece(model.getvalue())
            >>> tokenizers.source_vocabulary_size  # 4 reserved + 14 - <unk>, <s>, </s>
            15
            >>> tokenizers.detokenize_target(tokenizers.tokenize_target(["the mat"])).numpy()
            array([b'the mat'], dtype=object)
        """

        def tokenizer(model):
            if isinstance(model, (str, os.PathLike)):
                with open(model, "rb") as file:
                    model = file.read()
            if not isinstance(model, bytes):
                raise TypeError(
                    f"Expected a SentencePiece model's path or bytes; received {type(model).__name__}"
                )
            proto = sentencepiece_model_pb2.ModelProto()
            try:
                proto.ParseFromString(model)
            except DecodeError:
                raise ValueError("Not a SentencePiece model: its bytes do not parse") from None
            normal = (sentencepiece_model_pb2.ModelProto.SentencePiece.NORMAL,
                      sentencepiece_model_pb2.ModelProto.SentencePiece.USER_DEFINED)
            pieces = [p.piece for p in proto.pieces
                      if p.type in normal and p.piece not in RESERVED_TOKENS]
            if not pieces:
                raise ValueError("The SentencePiece model holds no normal pieces")
            return SentencePieceVocabularyTokenizer(model, list(RESERVED_TOKENS) + pieces)

        if target_model is None:
            return cls(tokenizer(source_model))
        return cls(tokenizer(source_model), tokenizer(target_model))

    @classmethod
    def train(
        cls,
        sources,
        targets,
        *,
        kind="sentencepiece",
        vocabulary_size=None,
        target_vocabulary_size=None,
        shared=True,
        model_type=None,
        lowercase=False,
    ):
        """Learn the tokenizers from a training corpus.

        Args:
            sources: iterable of source sentences (`str`).
            targets: iterable of target sentences (`str`).
            kind: `"sentencepiece"` (default) or `"wordpiece"`.
            vocabulary_size: int, the source (or shared) vocabulary size.
                Defaults to `None`: `auto_vocabulary_size` of the texts it is
                learned from, as a soft limit for SentencePiece.
            target_vocabulary_size: int, the target vocabulary size when
                `shared=False`. Defaults to `None`: `vocabulary_size`.
            shared: bool, learn one vocabulary from both sides. Defaults to
                `True`.
            model_type: SentencePiece's `"unigram"` (the default) or `"bpe"`;
                must stay `None` for WordPiece.
            lowercase: bool, case-fold all text. Defaults to `False`.

        Returns:
            A `Seq2SeqTokenizers`.

        Example:
            >>> tokenizers = Seq2SeqTokenizers.train(
            ...     ["good morning"] * 20, ["bonjour"] * 20, kind="wordpiece",
            ...     vocabulary_size=40, shared=False)
            >>> tokenizers.shared
            False
        """
        if kind not in TRAINABLE_KINDS:
            raise ValueError(f"kind must be one of {TRAINABLE_KINDS}; received kind={kind!r}")
        if kind == "wordpiece" and model_type is not None:
            raise ValueError(
                "model_type applies to SentencePiece only; received "
                f"kind='wordpiece', model_type={model_type!r}"
            )
        if shared and target_vocabulary_size not in (None, vocabulary_size):
            raise ValueError(
                "A shared vocabulary has one size; received "
                f"vocabulary_size={vocabulary_size}, "
                f"target_vocabulary_size={target_vocabulary_size}"
            )
        if not shared and target_vocabulary_size is None:
            target_vocabulary_size = vocabulary_size
        sources, targets = _text_list(sources), _text_list(targets)

        def learn(texts, size):
            if kind == "sentencepiece":
                return train_sentencepiece(
                    texts, size, model_type=model_type or "unigram", lowercase=lowercase
                )
            return train_wordpiece(texts, size, lowercase=lowercase)

        if shared:
            return cls(learn(sources + targets, vocabulary_size))
        return cls(learn(sources, vocabulary_size), learn(targets, target_vocabulary_size))

    @property
    def shared(self):
        """Whether source and target use one vocabulary."""
        return self.source_tokenizer is self.target_tokenizer

    @property
    def source_vocabulary_size(self):
        return int(self.source_tokenizer.vocabulary_size())

    @property
    def target_vocabulary_size(self):
        return int(self.target_tokenizer.vocabulary_size())

    def _tokenize(self, tokenizer, strings):
        # ids: int32 ragged [batch, (tokens)]
        if self.kind == "sentencepiece":
            return _sentencepiece_op(tokenizer).tokenize(strings)
        if self.kind == "sentencepiece_vocabulary":
            return tokenizer.tokenize(strings)
        # SentencePiece normalises with NFKC inside its op; do the same here.
        return tokenizer.tokenize(tf_text.normalize_utf8(strings, "NFKC"))

    def _detokenize(self, tokenizer, ids):
        # Keep the tokens before the first END, less PAD and START.
        # ids, keep: [batch, T]
        before_end = tf.cumsum(tf.cast(tf.equal(ids, END_ID), tf.int32), axis=1) == 0
        keep = before_end & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, START_ID)
        if self.kind == "sentencepiece_vocabulary":
            keep &= tf.not_equal(ids, UNK_ID)
        tokens = tf.ragged.boolean_mask(ids, keep)
        if self.kind == "sentencepiece":
            return _sentencepiece_op(tokenizer).detokenize(tokens)
        if self.kind == "sentencepiece_vocabulary":
            return tokenizer.detokenize(tokens)
        return tokenizer.detokenize(tokens)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize_source(self, strings):
        """Source sentences, tf.string `[batch]`, to int32 ragged `[batch, (tokens)]`."""
        return self._tokenize(self.source_tokenizer, strings)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize_target(self, strings):
        """Target sentences, tf.string `[batch]`, to int32 ragged `[batch, (tokens)]`."""
        return self._tokenize(self.target_tokenizer, strings)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def _detokenize_source(self, ids):
        return self._detokenize(self.source_tokenizer, ids)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def _detokenize_target(self, ids):
        return self._detokenize(self.target_tokenizer, ids)

    def detokenize_target(self, ids):
        """Target ids to sentences, stopping at the first `END_ID`.

        Args:
            ids: int `[batch, T]`, dense (padded with `PAD_ID`) or ragged. A
                leading `START_ID` and every `PAD_ID` are dropped; tokens from
                the first `END_ID` on are ignored.

        Returns:
            tf.string `[batch]`.
        """
        return self._detokenize_target(_dense_int32(ids))

    def detokenize_source(self, ids):
        """Source ids to sentences; the rules of `detokenize_target`."""
        return self._detokenize_source(_dense_int32(ids))

    def pieces(self, ids, side="target"):
        """The subword pieces of `ids`, the reserved ids by their names (`[END]`, ...).

        Args:
            ids: iterable of int ids of one sequence.
            side: `"source"` or `"target"`. Defaults to `"target"`.

        Returns:
            list of `str`.

        Example:
            >>> tokenizers = Seq2SeqTokenizers.train(
            ...     ["the cat sat on the mat"] * 20, ["le chat"] * 20, vocabulary_size=16)
            >>> ids = tokenizers.tokenize_target(["le chat"]).to_list()[0]
            >>> "".join(tokenizers.pieces(ids + [END_ID])).replace("\u2581", " ")
            ' le chat[END]'
        """
        if side not in ("source", "target"):
            raise ValueError(f"side must be 'source' or 'target'; received side={side!r}")
        tokenizer = self.source_tokenizer if side == "source" else self.target_tokenizer
        if self.kind == "sentencepiece":
            # From the proto, not keras-hub's eager resource (tensorflow/text#570).
            vocabulary = [piece.piece for piece in _sentencepiece_model(tokenizer).pieces]
        elif self.kind == "sentencepiece_vocabulary":
            vocabulary = tokenizer.vocabulary
        else:
            vocabulary = list(tokenizer.get_vocabulary())
        return [
            RESERVED_TOKENS[i] if i < len(RESERVED_TOKENS) else vocabulary[i]
            for i in (int(i) for i in ids)
        ]

    def get_config(self):
        """What `save` writes to `tokenizers.json`, less the file names."""
        return {
            "kind": self.kind,
            "shared": self.shared,
            "lowercase": self.lowercase,
            "source_vocabulary_size": self.source_vocabulary_size,
            "target_vocabulary_size": self.target_vocabulary_size,
            "reserved_tokens": list(RESERVED_TOKENS),
        }

    def save(self, directory):
        """Write the vocabularies and `tokenizers.json` into `directory`.

        SentencePiece models go to `<side>.spm`, WordPiece vocabularies to
        `<side>_vocab.txt` (one token a line), a piece vocabulary to
        `<side>_vocabulary.json` beside its `<side>.spm`, where `<side>` is
        `shared`, or `source` and `target`.

        Args:
            directory: a folder, created if missing.

        Example:
            >>> import tempfile
            >>> tokenizers = Seq2SeqTokenizers.train(["a b c"] * 20, ["x y z"] * 20,
            ...     vocabulary_size=12)
            >>> folder = tempfile.mkdtemp()
            >>> tokenizers.save(folder)
            >>> Seq2SeqTokenizers.load(folder).get_config() == tokenizers.get_config()
            True
        """
        os.makedirs(directory, exist_ok=True)
        sides = (
            {"shared": self.source_tokenizer}
            if self.shared
            else {"source": self.source_tokenizer, "target": self.target_tokenizer}
        )
        files, vocabularies = {}, {}
        for side, tokenizer in sides.items():
            if self.kind in ("sentencepiece", "sentencepiece_vocabulary"):
                files[side] = f"{side}.spm"
                with open(os.path.join(directory, files[side]), "wb") as file:
                    file.write(tokenizer.proto)
            if self.kind == "sentencepiece_vocabulary":
                vocabularies[side] = f"{side}_vocabulary.json"
                with open(os.path.join(directory, vocabularies[side]), "w", encoding="utf-8") as file:
                    json.dump(tokenizer.vocabulary, file, ensure_ascii=False, indent=0)
                    file.write("\n")
            elif self.kind == "wordpiece":
                files[side] = f"{side}_vocab.txt"
                with open(
                    os.path.join(directory, files[side]), "w", encoding="utf-8", newline="\n"
                ) as file:
                    file.write("".join(token + "\n" for token in tokenizer.get_vocabulary()))
        config = {"format_version": FORMAT_VERSION, **self.get_config(), "files": files}
        if vocabularies:
            config["vocabularies"] = vocabularies
        with open(os.path.join(directory, CONFIG_FILENAME), "w", encoding="utf-8") as file:
            json.dump(config, file, indent=2, ensure_ascii=False)
            file.write("\n")

    @classmethod
    def from_preset(cls, preset):
        """Deprecated: `keras_tf.translation.presets.load_tokenizers(preset)`."""
        # The one upward import of this floor, for one release: listed in
        # tests/test_layering.py's allow-list, marked for removal.
        from keras_tf.translation.presets import load_tokenizers

        warnings.warn(
            "Seq2SeqTokenizers.from_preset is deprecated; use "
            "keras_tf.translation.presets.load_tokenizers (docs/migration.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        return load_tokenizers(preset)

    @classmethod
    def load(cls, directory):
        """Read tokenizers written by `save`; they give identical ids.

        A folder from elsewhere is read with care: `tokenizers.json` is
        checked field by field, and every file it names must be a bare name
        of a regular file in `directory`, of bounded size. Anything else is a
        `keras_tf.preset_checks.PresetError` that names the file and field.

        Args:
            directory: the folder `save` wrote.

        Returns:
            A `Seq2SeqTokenizers`.
        """
        path = os.path.join(directory, CONFIG_FILENAME)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"No {CONFIG_FILENAME} in {directory!r}; write one with "
                "Seq2SeqTokenizers.save(directory)"
            )
        config = read_json_object(path)
        if config.get("format_version") != FORMAT_VERSION:
            raise PresetError(
                f"{path}: expected format_version={FORMAT_VERSION}; received "
                f"format_version={config.get('format_version')!r}"
            )
        if config.get("kind") not in KINDS:
            raise PresetError(
                f"{path}: kind must be one of {KINDS}; received kind={config.get('kind')!r}"
            )
        check_fields(config, {"shared": bool, "lowercase": bool, "files": dict}, path)
        sides = ("shared",) if config["shared"] else ("source", "target")
        named = {"files": config["files"]}
        if config["kind"] == "sentencepiece_vocabulary":
            check_fields(config, {"vocabularies": dict}, path)
            named["vocabularies"] = config["vocabularies"]
        for field, names in named.items():
            for side in sides:
                if side not in names:
                    raise PresetError(f"{path}: {field} has no {side!r} file")
                confined_file(directory, names[side], f"{field}.{side}", path)

        def read_bytes(name):
            with open(os.path.join(directory, name), "rb") as file:
                return file.read()

        def read(side):
            name = config["files"][side]
            if config["kind"] == "sentencepiece":
                return keras_hub.tokenizers.SentencePieceTokenizer(proto=read_bytes(name))
            if config["kind"] == "sentencepiece_vocabulary":
                vocabulary_path = os.path.join(directory, config["vocabularies"][side])
                with open(vocabulary_path, encoding="utf-8") as file:
                    vocabulary = json.load(file)
                if not isinstance(vocabulary, list) or not all(
                    isinstance(piece, str) for piece in vocabulary
                ):
                    raise PresetError(f"{vocabulary_path}: expected a JSON list of pieces")
                return SentencePieceVocabularyTokenizer(read_bytes(name), vocabulary)
            vocabulary = read_bytes(name).decode("utf-8").split("\n")[:-1]
            return keras_hub.tokenizers.WordPieceTokenizer(
                vocabulary=vocabulary,
                lowercase=config["lowercase"],
                oov_token=RESERVED_TOKENS[UNK_ID],
            )

        try:
            if config["shared"]:
                return cls(read("shared"))
            return cls(read("source"), read("target"))
        except PresetError:
            raise
        except (ValueError, TypeError, UnicodeDecodeError, json.JSONDecodeError,
                tf.errors.OpError, DecodeError) as error:
            # A garbage .spm fails in SentencePiece's parser (DecodeError, OpError).
            message = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise PresetError(
                f"{directory}: cannot read the tokenizers ({type(error).__name__}: {message})"
            ) from None


def _dense_int32(ids):
    """int32 `[batch, T]` from dense or ragged ids, padding with `PAD_ID`."""
    if isinstance(ids, tf.RaggedTensor):
        ids = ids.to_tensor(default_value=PAD_ID)
    return tf.cast(ids, tf.int32)
