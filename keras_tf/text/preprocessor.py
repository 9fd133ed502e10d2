"""The preprocessor: tokenizers plus framing, from strings to model inputs and back.

One object holds every text step a translator runs, in TensorFlow and
TF-Text ops only, so the same code serves `tf.data` maps, in-process
translation and the exported SavedModel:

    text
      -> invalid UTF-8 replaced by U+FFFD        clean_text
      -> subword ids                             Seq2SeqTokenizers (TF-Text ops)
      -> encoder_tokens: the first               frame_source, the training
         max_source_length - 1 ids, then END     pipeline's rule
      (decoding: keras_tf.decoding)
      -> translation                             detokenize, up to the first END
"""

import functools
import warnings

import tensorflow as tf

from keras_tf.buckets import source_buckets
from keras_tf.special_tokens import PAD_ID, UNK_ID
from keras_tf.text.pipeline import fill_rows, frame_source, frame_target
from keras_tf.text.tokenizers import Seq2SeqTokenizers

REPLACEMENT_CHARACTER = 0xFFFD


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


def as_string_tensor(texts):
    """A list of `str`/`bytes` as tf.string `[batch]`; a clear error for anything else."""
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


def check_vocabularies_fit(tokenizers, model_config):
    """Raise `ValueError` if a tokenizer has more ids than the model's embedding holds."""
    for side in ("source", "target"):
        size = getattr(tokenizers, f"{side}_vocabulary_size")
        limit = getattr(model_config, f"{side}_vocabulary_size")
        if size > limit:
            raise ValueError(
                f"The {side} tokenizer has {size} ids but the model's "
                f"{side}_vocabulary_size is {limit}; build the model with the "
                "tokenizers' vocabulary sizes"
            )


class Seq2SeqPreprocessor:
    """Tokenizers and framing of a translator: strings to model inputs, ids to strings.

    Every method takes and returns tensors and runs eagerly, in `tf.data`
    maps and in traced functions (the SavedModel export).

    Args:
        tokenizers: a `Seq2SeqTokenizers`.
        max_source_length: the longest encoder input, END included: a source
            keeps its first `max_source_length - 1` subword ids.
        max_target_length: the longest decoder input, START included.

    Example:
        >>> tokenizers = Seq2SeqTokenizers.train(
        ...     ["the cat sat on the mat"] * 20, ["le chat"] * 20, vocabulary_size=16)
        >>> preprocessor = Seq2SeqPreprocessor(tokenizers, 8, 8)
        >>> x, labels = preprocessor(tf.constant(["the cat"]), tf.constant(["le chat"]))
        >>> sorted(x), x["decoder_tokens"][0, 0].numpy().item(), labels[0, -1].numpy().item()
        (['decoder_tokens', 'encoder_tokens'], 2, 3)
    """

    def __init__(self, tokenizers, max_source_length, max_target_length):
        if not isinstance(tokenizers, Seq2SeqTokenizers):
            raise TypeError(
                f"Expected a keras_tf.text.Seq2SeqTokenizers; received {type(tokenizers).__name__}"
            )
        for name, value in (
            ("max_source_length", max_source_length),
            ("max_target_length", max_target_length),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ValueError(f"{name} must be an integer >= 2; received {name}={value!r}")
        self.tokenizers = tokenizers
        self.max_source_length = max_source_length
        self.max_target_length = max_target_length

    @classmethod
    def from_preset(cls, preset):
        """Deprecated: `keras_tf.translation.presets.load_preprocessor(preset)`."""
        # The one upward import of this floor, for one release: listed in
        # tests/test_layering.py's allow-list, marked for removal.
        from keras_tf.translation.presets import load_preprocessor

        warnings.warn(
            "Seq2SeqPreprocessor.from_preset is deprecated; use "
            "keras_tf.translation.presets.load_preprocessor (docs/migration.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        return load_preprocessor(preset)

    def check_fits(self, model_config):
        """Raise `ValueError` if a tokenizer has more ids than the model's embeddings hold."""
        check_vocabularies_fit(self.tokenizers, model_config)

    @property
    def source_vocabulary_size(self):
        return self.tokenizers.source_vocabulary_size

    @property
    def target_vocabulary_size(self):
        return self.tokenizers.target_vocabulary_size

    def source_ids(self, strings):
        """Cleaned and tokenized sources: int32 ragged `[batch, (tokens)]`, no END."""
        return self.tokenizers.tokenize_source(clean_text(strings))

    def ids_to_source_ids(self, ids):
        """Client ids `[batch, length]` padded with 0 -> ragged; ids outside the vocabulary -> UNK."""
        ids = tf.cast(ids, tf.int32)
        known = (ids >= 0) & (ids < self.source_vocabulary_size)
        ids = tf.where(known, ids, UNK_ID)
        return tf.RaggedTensor.from_tensor(ids, padding=PAD_ID)

    def encoder_tokens(self, source_ids, max_source_length=None):
        """The training pipeline's framing: int32 `[batch, S]`, S <= max_source_length."""
        length = max_source_length or self.max_source_length
        return frame_source(source_ids, length).to_tensor(default_value=PAD_ID)

    def overlong(self, source_ids, max_source_length=None):
        """bool `[batch]`: the sources `encoder_tokens` cuts (over max_source_length - 1 ids)."""
        return source_ids.row_lengths() > (max_source_length or self.max_source_length) - 1

    def generation_tokens(self, source_ids, max_source_length=None):
        """`encoder_tokens` as a traced graph, for translating strings.

        Run eagerly, the ragged framing's op dispatch costs ~5 ms a call,
        five times the decoding of a short sentence; the graph is traced once
        per length and kept on this preprocessor.
        """
        length = max_source_length or self.max_source_length
        graphs = self.__dict__.setdefault("_generation_graphs", {})
        if length not in graphs:
            # A partial, not a closure: TensorFlow counts retracing by the
            # function's code, which the closures of every preprocessor share.
            graphs[length] = tf.function(
                functools.partial(self.encoder_tokens, max_source_length=length),
                input_signature=[tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)],
            )
        return graphs[length](source_ids)

    def __call__(self, sources, targets):
        """A training batch from string pairs: `({"encoder_tokens", "decoder_tokens"}, labels)`.

        Args:
            sources, targets: tf.string `[batch]`.

        Returns:
            int32 tensors `[batch, S]`, `[batch, T]` and labels `[batch, T]`,
            padded with 0, as `keras_tf.text.make_dataset` frames them.
        """
        encoder_tokens = self.encoder_tokens(self.source_ids(sources))
        target_ids = self.tokenizers.tokenize_target(clean_text(targets))
        decoder_tokens, labels = frame_target(target_ids, self.max_target_length)
        inputs = {
            "encoder_tokens": encoder_tokens,
            "decoder_tokens": decoder_tokens.to_tensor(default_value=PAD_ID),
        }
        return inputs, labels.to_tensor(default_value=PAD_ID)

    def bucketed(self, inputs, labels, rows=None):
        """A training batch padded to one bucket of decoding, the same on both sides.

        The bucket is the first of `source_buckets` at least as long as the
        batch's longer side (each side capped at its maximum length), as
        `make_dataset` buckets by `max(S, T)`: a batch takes one of a few
        shapes, so `fit` compiles a few XLA programs, not one per pair of
        source and target buckets.

        With `rows`, a short batch is also filled up to `rows` rows with
        rows of padding alone (`fill_rows`), so that the last batch of a
        pass is no shape of its own.
        """
        encoder_tokens, decoder_tokens = inputs["encoder_tokens"], inputs["decoder_tokens"]
        buckets = tf.constant(
            source_buckets(max(self.max_source_length, self.max_target_length)), tf.int32
        )
        longer = tf.maximum(tf.shape(encoder_tokens)[1], tf.shape(decoder_tokens)[1])
        bucket = tf.gather(buckets, tf.searchsorted(buckets, longer[None])[0])
        source = tf.minimum(bucket, self.max_source_length)
        target = tf.minimum(bucket, self.max_target_length)
        inputs = {
            "encoder_tokens": pad_to_length(encoder_tokens, source),
            "decoder_tokens": pad_to_length(decoder_tokens, target),
        }
        labels = pad_to_length(labels, target)
        if rows is not None:
            inputs = {name: fill_rows(tokens, rows) for name, tokens in inputs.items()}
            labels = fill_rows(labels, rows)
        return inputs, labels

    def detokenize(self, target_ids):
        """Generated ids `[batch, T]` to tf.string `[batch]`, up to the first END."""
        # A model with a larger vocabulary than its tokenizer may emit ids the
        # tokenizer cannot read; they read as UNK.
        target_ids = tf.where(target_ids < self.target_vocabulary_size, target_ids, UNK_ID)
        return self.tokenizers.detokenize_target(target_ids)

    def get_config(self):
        return {
            "max_source_length": self.max_source_length,
            "max_target_length": self.max_target_length,
            "tokenizers": self.tokenizers.get_config(),
        }


def pad_to_bucket(tokens, buckets):
    """Pad `[batch, L]` with 0 to `[batch, bucket]`, the first of `buckets` >= L.

    Args:
        tokens: int32 `[batch, L]`, L <= buckets[-1].
        buckets: int32 tensor of ascending lengths, e.g. `source_buckets(64)`.
    """
    length = tf.shape(tokens)[1]
    return pad_to_length(tokens, tf.gather(buckets, tf.searchsorted(buckets, length[None])[0]))


def pad_to_length(tokens, length):
    """Pad `[batch, L]` with 0 to `[batch, length]`, `length` >= L.

    Padding changes no output (padded positions are masked out of every
    attention and the loss); it bounds the number of shapes, so an XLA
    program is compiled for a few lengths, not for every one.
    """
    return tf.pad(tokens, [[0, 0], [0, length - tf.shape(tokens)[1]]], constant_values=PAD_ID)


def blank_empty_sources(source_ids, target_ids, scores):
    """An empty source gets no tokens and score 0, whatever the model made of a lone END."""
    # empty: [batch]
    empty = tf.equal(source_ids.row_lengths(), 0)
    target_ids = tf.where(empty[:, None], tf.zeros_like(target_ids), target_ids)
    scores = tf.where(empty, tf.zeros_like(scores), scores)
    return target_ids, scores
