"""Translate strings in process, with the steps the exported SavedModel runs in its graph.

The text path, all TensorFlow or TF-Text ops, shared with `export`:

    text
      -> invalid UTF-8 replaced by U+FFFD        clean_text (tf.strings.unicode_transcode)
      -> subword ids                             Seq2SeqTokenizers (TF-Text ops)
      -> encoder_tokens: the first               keras_tf.text.frame_source,
         max_source_length - 1 ids, then END     the training pipeline's rule
      -> cached greedy or beam search            Translator: keras_tf.decoding.generate
                                                 the export: the same loops in its graph
      -> translation, score                      Seq2SeqTokenizers.detokenize_target

A source with no subword ids (the empty string, only whitespace) gets the
empty translation and score 0.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from keras_tf.decoding import generate, source_bucket
from keras_tf.models import Seq2SeqTransformer
from keras_tf.models.config import PAD_ID, UNK_ID
from keras_tf.text import Seq2SeqTokenizers, frame_source

METHODS = ("greedy", "beam")

REPLACEMENT_CHARACTER = 0xFFFD


@dataclasses.dataclass(frozen=True)
class Translations:
    """What `Translator.translate_with_scores` returns.

    Args:
        texts: list of `str`, one translation per source.
        scores: float32 numpy `[batch]`: the summed log-probability of the
            generated tokens (END included); for beam search divided by the
            GNMT length penalty. 0 for an empty source.
    """

    texts: list
    scores: np.ndarray


# --- The steps shared with the export ---


def clean_text(strings):
    """Replace every invalid UTF-8 sequence by U+FFFD, so no input is fatal.

    Args:
        strings: tf.string `[batch]`, any bytes.

    Returns:
        tf.string `[batch]` of valid UTF-8.

    Example:
        >>> clean_text(tf.constant([b"caf\\xc3\\xa9", b"bad \\xff byte"])).numpy().tolist()
        [b'caf\\xc3\\xa9', b'bad \\xef\\xbf\\xbd byte']
    """
    return tf.strings.unicode_transcode(
        strings,
        input_encoding="UTF-8",
        output_encoding="UTF-8",
        errors="replace",
        replacement_char=REPLACEMENT_CHARACTER,
    )


def text_to_source_ids(tokenizers, strings):
    """Cleaned and tokenized sources: int32 ragged `[batch, (tokens)]`."""
    return tokenizers.tokenize_source(clean_text(strings))


def padded_to_source_ids(source_ids, source_vocabulary_size):
    """Client ids `[batch, length]` padded with 0 -> ragged, ids out of the vocabulary -> UNK."""
    source_ids = tf.cast(source_ids, tf.int32)
    known = (source_ids >= 0) & (source_ids < source_vocabulary_size)
    source_ids = tf.where(known, source_ids, UNK_ID)
    return tf.RaggedTensor.from_tensor(source_ids, padding=PAD_ID)


def frame_encoder_tokens(source_ids, max_source_length):
    """The training pipeline's framing: int32 `[batch, S]`, S <= max_source_length."""
    return frame_source(source_ids, max_source_length).to_tensor(default_value=PAD_ID)


def blank_empty_sources(source_ids, target_ids, scores):
    """An empty source gets no tokens and score 0, whatever the model made of a lone END."""
    # empty: [batch]
    empty = tf.equal(source_ids.row_lengths(), 0)
    target_ids = tf.where(empty[:, None], tf.zeros_like(target_ids), target_ids)
    scores = tf.where(empty, tf.zeros_like(scores), scores)
    return target_ids, scores


def target_text(tokenizers, target_ids, target_vocabulary_size):
    """Generated ids `[batch, T]` to tf.string `[batch]`, up to the first END."""
    # A model with a larger vocabulary than its tokenizer may emit ids the
    # tokenizer cannot read; they read as UNK.
    target_ids = tf.where(target_ids < target_vocabulary_size, target_ids, UNK_ID)
    return tokenizers.detokenize_target(target_ids)


def source_buckets(max_source_length):
    """Every padded source length `keras_tf.decoding.generate` uses, ascending."""
    return sorted({source_bucket(n, max_source_length) for n in range(1, max_source_length + 1)})


# --- In process ---


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}]; received {name}={value!r}")


def _as_strings(texts):
    if isinstance(texts, (str, bytes)):
        raise TypeError(
            f"Expected a list of strings; received a single {type(texts).__name__}. "
            "Wrap it in a list: translate([text])."
        )
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, (str, bytes)):
            raise TypeError(
                f"Expected str or bytes sources; received {type(text).__name__} {text!r} "
                f"at index {index}"
            )
    return tf.constant(texts, dtype=tf.string, shape=[len(texts)])


class Translator:
    """Translate strings in process, exactly as the exported SavedModel does.

    The same steps as the export's `serving_default` signature (see the
    module docstring), with generation by `keras_tf.decoding.generate`
    (cached and compiled with XLA). `export` takes the same arguments and
    records them in the SavedModel.

    Args:
        model: a `Seq2SeqTransformer`.
        tokenizers: its `Seq2SeqTokenizers`; their vocabularies must fit the
            model's.
        method: `"greedy"` (default) or `"beam"`.
        beam_size: hypotheses kept by beam search. Defaults to 4.
        length_penalty: α of beam search's GNMT length penalty. Defaults to 0.6.
        max_length: the most target tokens to generate (END included), at
            most the model's `max_target_length`. Defaults to `None`: that
            maximum.
        max_source_length: the longest encoder input, in tokens, END
            included: a source is cut to its first `max_source_length - 1`
            subword ids, the training pipeline's rule. At most the model's
            `max_source_length`. Defaults to `None`: that maximum.

    Example:
        >>> from keras_tf.models import Seq2SeqTransformer, get_preset
        >>> from keras_tf.text import Seq2SeqTokenizers
        >>> tokenizers = Seq2SeqTokenizers.train(
        ...     ["the cat sat on the mat"] * 20, ["le chat"] * 20, vocabulary_size=16)
        >>> model = Seq2SeqTransformer(get_preset(
        ...     "transformer_tiny", source_vocabulary_size=16, target_vocabulary_size=16))
        >>> translator = Translator(model, tokenizers, max_length=8)
        >>> len(translator.translate(["the cat", ""]))
        2
    """

    def __init__(
        self,
        model,
        tokenizers,
        *,
        method="greedy",
        beam_size=4,
        length_penalty=0.6,
        max_length=None,
        max_source_length=None,
    ):
        if not isinstance(model, Seq2SeqTransformer):
            raise TypeError(
                f"Expected a keras_tf.models.Seq2SeqTransformer; received {type(model).__name__}"
            )
        if not isinstance(tokenizers, Seq2SeqTokenizers):
            raise TypeError(
                f"Expected a keras_tf.text.Seq2SeqTokenizers; received {type(tokenizers).__name__}"
            )
        c = model.config
        for side in ("source", "target"):
            size = getattr(tokenizers, f"{side}_vocabulary_size")
            limit = getattr(c, f"{side}_vocabulary_size")
            if size > limit:
                raise ValueError(
                    f"The {side} tokenizer has {size} ids but the model's "
                    f"{side}_vocabulary_size is {limit}; build the model with the "
                    "tokenizers' vocabulary sizes"
                )
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; received method={method!r}")
        if method == "beam":
            _check_int("beam_size", beam_size, 1, c.target_vocabulary_size // 2)
            if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)):
                raise ValueError(
                    f"length_penalty must be a number; received length_penalty={length_penalty!r}"
                )
        max_length = c.max_target_length if max_length is None else max_length
        _check_int("max_length", max_length, 1, c.max_target_length)
        max_source_length = c.max_source_length if max_source_length is None else max_source_length
        _check_int("max_source_length", max_source_length, 2, c.max_source_length)

        self.model = model
        self.tokenizers = tokenizers
        self.method = method
        self.beam_size = beam_size if method == "beam" else 1
        self.length_penalty = float(length_penalty) if method == "beam" else 0.0
        self.max_length = max_length
        self.max_source_length = max_source_length
        # `generate` pads sources up to these lengths; the export does the same.
        self.source_buckets = source_buckets(c.max_source_length)

    def get_config(self):
        """The decoding settings, as the export records them."""
        return {
            "method": self.method,
            "beam_size": self.beam_size,
            "length_penalty": self.length_penalty,
            "max_length": self.max_length,
            "max_source_length": self.max_source_length,
            "source_buckets": list(self.source_buckets),
        }

    def translate(self, texts):
        """Translate a list of sentences.

        Args:
            texts: list of `str` (or UTF-8 `bytes`; invalid sequences become
                U+FFFD).

        Returns:
            list of `str`.
        """
        return self.translate_with_scores(texts).texts

    def translate_with_scores(self, texts):
        """Translate a list of sentences; also return the scores. Returns `Translations`."""
        source_ids = text_to_source_ids(self.tokenizers, _as_strings(texts))
        target_ids, scores = self._translate_ids(source_ids)
        strings = target_text(self.tokenizers, target_ids, self.tokenizers.target_vocabulary_size)
        return Translations([s.decode("utf-8") for s in strings.numpy()], scores.numpy())

    def translate_n_best(self, texts, n):
        """The `n` best translations of each sentence by beam search, best first.

        Args:
            texts: list of `str` (or UTF-8 `bytes`).
            n: int in [1, beam_size]; needs `method="beam"`.

        Returns:
            `Translations` whose `texts` is a list (one per sentence) of `n`
            strings and `scores` float32 `[batch, n]`, the beam scores
            (summed log-probabilities over the GNMT length penalty), best
            first. The first of each is what `translate` returns.
        """
        if self.method != "beam":
            raise ValueError(f"n-best lists come from beam search; this Translator's method "
                             f"is {self.method!r}")
        _check_int("n", n, 1, self.beam_size)
        source_ids = text_to_source_ids(self.tokenizers, _as_strings(texts))
        encoder_tokens = frame_encoder_tokens(source_ids, self.max_source_length)
        batch = int(encoder_tokens.shape[0])
        if batch == 0:
            return Translations([], np.zeros([0, n], np.float32))
        out = generate(
            self.model,
            encoder_tokens.numpy(),
            max_length=self.max_length,
            method="beam",
            beam_size=self.beam_size,
            length_penalty=self.length_penalty,
            return_all_beams=True,
        )
        # tokens: [batch, beam, max_length] -> [batch * n, max_length]
        tokens = tf.constant(out.tokens[:, :n].reshape(batch * n, -1), tf.int32)
        scores = tf.constant(out.scores[:, :n].reshape(batch * n), tf.float32)
        # Each source n times, to blank the n hypotheses of an empty source.
        repeated = tf.ragged.constant(
            [row for row in source_ids.to_list() for _ in range(n)], dtype=tf.int32,
            ragged_rank=1,
        )
        tokens, scores = blank_empty_sources(repeated, tokens, scores)
        strings = target_text(self.tokenizers, tokens, self.tokenizers.target_vocabulary_size)
        strings = [s.decode("utf-8") for s in strings.numpy()]
        return Translations(
            [strings[i * n : (i + 1) * n] for i in range(batch)],
            scores.numpy().reshape(batch, n),
        )

    def translate_tokens(self, source_ids):
        """What the `translate_tokens` signature returns for the same ids.

        Args:
            source_ids: int `[batch, length]` subword ids without END, padded with 0.

        Returns:
            `(target_ids int32 [batch, max_length], scores float32 [batch])`, numpy.
        """
        source_ids = np.asarray(source_ids)
        if source_ids.ndim != 2 or not np.issubdtype(source_ids.dtype, np.integer):
            raise ValueError(
                "source_ids must be integer ids of shape [batch, length]; received "
                f"dtype {source_ids.dtype}, shape {source_ids.shape}"
            )
        source_ids = padded_to_source_ids(source_ids, self.model.config.source_vocabulary_size)
        target_ids, scores = self._translate_ids(source_ids)
        return target_ids.numpy(), scores.numpy()

    def _translate_ids(self, source_ids):
        encoder_tokens = frame_encoder_tokens(source_ids, self.max_source_length)
        if encoder_tokens.shape[0] == 0:
            return tf.zeros([0, self.max_length], tf.int32), tf.zeros([0], tf.float32)
        out = generate(
            self.model,
            encoder_tokens.numpy(),
            max_length=self.max_length,
            method=self.method,
            beam_size=self.beam_size,
            length_penalty=self.length_penalty,
        )
        return blank_empty_sources(
            source_ids, tf.constant(out.tokens, tf.int32), tf.constant(out.scores, tf.float32)
        )
