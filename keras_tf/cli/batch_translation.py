"""Translating many sentences with a `keras_tf.serving.Translator`, a batch at a time."""

from keras_tf.serving.batch_translation import translate_in_batches  # noqa: F401


def make_translator(model, tokenizers, beam_size):
    """A `Translator`: greedy for `beam_size=1`, beam search otherwise."""
    from keras_tf.decoding import DecodingConfig
    from keras_tf.serving import Translator

    return Translator(model, tokenizers, decoding=DecodingConfig.for_beam_size(beam_size))
