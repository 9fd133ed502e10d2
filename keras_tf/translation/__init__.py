"""The translation task: `Seq2SeqTranslator`, its preset directory and the OPUS-MT converter.

The top library floor under training and the command line: the task
composes the model, the text steps, the decoding loops and the export.

    from keras_tf.translation import Seq2SeqTranslator, presets
    translator = Seq2SeqTranslator.from_preset("my_run")    # or hf://Helsinki-NLP/opus-mt-en-de
    translator.generate(["Save the notebook"], method="beam", beam_size=4)
    presets.load_tokenizers("my_run")                         # one part, without the weights
    translator.fit(sources, targets, options=TrainingOptions(epochs=5))  # keras-tf train's recipe
"""

from keras_tf.translation import presets
from keras_tf.translation.presets import (
    load_backbone,
    load_decoding,
    load_preprocessor,
    load_tokenizers,
)
from keras_tf.translation.training_options import TrainingOptions
from keras_tf.translation.translator import (
    CrossAttention,
    Seq2SeqTranslator,
    Translations,
    overlong_message,
)

__all__ = [
    "CrossAttention",
    "Seq2SeqTranslator",
    "TrainingOptions",
    "Translations",
    "load_backbone",
    "load_decoding",
    "load_preprocessor",
    "load_tokenizers",
    "overlong_message",
    "presets",
]
