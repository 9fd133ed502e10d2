"""Translate strings in process, with the steps the exported SavedModel runs in its graph.

The text steps are `keras_tf.text.Seq2SeqPreprocessor`'s and the decoding is
`keras_tf.decoding.decode_ids`, the one driver `generate` and the export
share:

    text -> clean_text -> subword ids -> encoder_tokens       Seq2SeqPreprocessor
         -> cached greedy or beam search                       keras_tf.decoding
         -> translation, score                                 Seq2SeqPreprocessor.detokenize

A source with no subword ids (the empty string, only whitespace) gets the
empty translation and score 0.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from keras_tf.decoding import DecodingConfig, generate, source_buckets
from keras_tf.models import Seq2SeqTransformer
from keras_tf.text.preprocessor import (
    Seq2SeqPreprocessor,
    as_string_tensor,
    blank_empty_sources,
    check_vocabularies_fit,
    clean_text,
)

# The searches a SavedModel can hold: sampling would need a seed per request.
METHODS = ("greedy", "beam")


@dataclasses.dataclass(frozen=True)
class Translations:
    """What `Translator.translate_with_scores` returns.

    Args:
        texts: list of `str`, one translation per source.
        scores: float32 numpy `[batch]`: the summed log-probability of the
            generated tokens (END included); for beam search divided by the
            length penalty. 0 for an empty source.
        overlong: the indices of the sources longer than
            `max_source_length` allows, ascending; each was translated from
            its first `max_source_length - 1` subword pieces.
    """

    texts: list
    scores: np.ndarray
    overlong: list = dataclasses.field(default_factory=list)


__all__ = ["METHODS", "Translations", "Translator", "clean_text"]


class Translator:
    """Translate strings in process, exactly as the exported SavedModel does.

    The steps of the export's `serving_default` signature (see the module
    docstring), with generation by `keras_tf.decoding.generate` (cached and
    compiled with XLA). `export` records the same settings in the SavedModel.
    `keras_tf.models.Seq2SeqTranslator.generate` translates through this class.

    Args:
        model: a `Seq2SeqTransformer`.
        tokenizers: its `Seq2SeqTokenizers`; their vocabularies must fit the
            model's.
        decoding: a `keras_tf.decoding.DecodingConfig` with method `"greedy"`
            or `"beam"`. Defaults to None: one built from the keyword
            arguments below.
        method, beam_size, length_penalty, max_length, max_source_length:
            the `DecodingConfig` fields, when `decoding` is not given.

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

    def __init__(self, model, tokenizers, *, decoding=None, **fields):
        if not isinstance(model, Seq2SeqTransformer):
            raise TypeError(
                f"Expected a keras_tf.models.Seq2SeqTransformer; received {type(model).__name__}"
            )
        c = model.config
        decoding = DecodingConfig(**fields) if decoding is None else decoding.replace(**fields)
        if decoding.method not in METHODS:
            raise ValueError(
                f"method must be one of {METHODS} to translate strings and export; "
                f"received method={decoding.method!r}"
            )
        self.decoding = decoding.resolve(c)
        self.preprocessor = Seq2SeqPreprocessor(
            tokenizers, self.decoding.max_source_length, self.decoding.max_length
        )
        check_vocabularies_fit(tokenizers, c)
        self.model = model
        self.tokenizers = tokenizers
        # `generate` pads sources up to these lengths; the export does the same.
        self.source_buckets = source_buckets(c.max_source_length)
        # The ragged framing and blanking as graphs: run eagerly, their op
        # dispatch cost ~5 ms a call, five times the decoding of a short sentence.
        ragged_ids = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)
        self._encoder_tokens = tf.function(
            self.preprocessor.encoder_tokens, input_signature=[ragged_ids]
        )
        self._blank_empty_sources = tf.function(
            blank_empty_sources,
            input_signature=[
                ragged_ids, tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.float32)
            ],
        )

    def get_config(self):
        """The decoding settings, as the export records them."""
        d = self.decoding
        return {
            "method": d.method,
            "beam_size": d.beam_size,
            "length_penalty": d.length_penalty,
            "length_penalty_style": d.length_penalty_style,
            "max_length": d.max_length,
            "max_source_length": d.max_source_length,
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
        source_ids = self.preprocessor.source_ids(as_string_tensor(texts))
        target_ids, scores = self._translate_ids(source_ids)
        strings = self.preprocessor.detokenize(target_ids)
        return Translations(
            [s.decode("utf-8") for s in strings.numpy()], scores.numpy(), self._overlong(source_ids)
        )

    def overlong_sources(self, texts):
        """The indices of `texts` that do not fit `max_source_length`, ascending.

        Each of them is translated from its first `max_source_length - 1`
        subword pieces (then END), as the export does: callers report them.
        The export's `overlong` output is true for the same rows.
        """
        if not len(texts):
            return []
        return self._overlong(self.preprocessor.source_ids(as_string_tensor(texts)))

    def _overlong(self, source_ids):
        return np.flatnonzero(self.preprocessor.overlong(source_ids).numpy()).tolist()

    def overlong_message(self, count, total, what="sources"):
        """One line that says `count` of `total` `what` were cut to fit, or None for 0."""
        if not count:
            return None
        limit = self.decoding.max_source_length
        return (
            f"{count} of {total} {what} are longer than max_source_length={limit} "
            f"(END included) allows and were translated from their first {limit - 1} "
            "subword pieces"
        )

    def translate_n_best(self, texts, n):
        """The `n` best translations of each sentence by beam search, best first.

        Args:
            texts: list of `str` (or UTF-8 `bytes`).
            n: int in [1, beam_size]; needs `method="beam"`.

        Returns:
            `Translations` whose `texts` is a list (one per sentence) of `n`
            strings and `scores` float32 `[batch, n]`, the beam scores
            (summed log-probabilities over the length penalty), best
            first. The first of each is what `translate` returns.
        """
        d = self.decoding
        if d.method != "beam":
            raise ValueError(
                f"n-best lists come from beam search; this Translator's method is {d.method!r}"
            )
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= d.beam_size:
            raise ValueError(f"n must be an integer in [1, {d.beam_size}]; received n={n!r}")
        source_ids = self.preprocessor.source_ids(as_string_tensor(texts))
        encoder_tokens = self._encoder_tokens(source_ids)
        batch = int(encoder_tokens.shape[0])
        if batch == 0:
            return Translations([], np.zeros([0, n], np.float32))
        out = generate(
            self.model, encoder_tokens.numpy(), decoding=d, return_all_beams=True
        )
        # tokens: [batch, beam, max_length] -> [batch * n, max_length]
        tokens = tf.constant(out.tokens[:, :n].reshape(batch * n, -1), tf.int32)
        scores = tf.constant(out.scores[:, :n].reshape(batch * n), tf.float32)
        # Each source n times, to blank the n hypotheses of an empty source.
        repeated = tf.ragged.constant(
            [row for row in source_ids.to_list() for _ in range(n)], dtype=tf.int32,
            ragged_rank=1,
        )
        tokens, scores = self._blank_empty_sources(repeated, tokens, scores)
        strings = [s.decode("utf-8") for s in self.preprocessor.detokenize(tokens).numpy()]
        return Translations(
            [strings[i * n : (i + 1) * n] for i in range(batch)],
            scores.numpy().reshape(batch, n),
            self._overlong(source_ids),
        )

    def translate_tokens(self, source_ids):
        """What the `translate_tokens` signature returns for the same ids (less `overlong`).

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
        target_ids, scores = self._translate_ids(self.preprocessor.ids_to_source_ids(source_ids))
        return target_ids.numpy(), scores.numpy()

    def _translate_ids(self, source_ids):
        encoder_tokens = self._encoder_tokens(source_ids)
        if encoder_tokens.shape[0] == 0:
            return (
                tf.zeros([0, self.decoding.max_length], tf.int32),
                tf.zeros([0], tf.float32),
            )
        out = generate(self.model, encoder_tokens.numpy(), decoding=self.decoding)
        return self._blank_empty_sources(
            source_ids, tf.constant(out.tokens, tf.int32), tf.constant(out.scores, tf.float32)
        )
