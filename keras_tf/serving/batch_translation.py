"""Translating many sentences with a `Translator`, a batch at a time, shortest first."""

import contextlib
import sys


def translate_in_batches(translator, texts, batch_size, progress=False):
    """Translate `texts`, `batch_size` at a time, shortest first; return them in input order.

    Sorting by length puts sentences of one source bucket in a batch, so a
    batch pads less and stops decoding sooner. `keras-tf evaluate` and the
    validation BLEU of training (`keras_tf.training.bleu`) both decode
    through here, so they give the same translations.

    Args:
        translator: a `keras_tf.serving.Translator`.
        texts: list of `str`.
        batch_size: sentences per call.
        progress: show a `keras.utils.Progbar` over the batches on stderr.

    Returns:
        list of `str`, one line each.
    """
    import keras

    order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    translations = [""] * len(texts)
    # Progbar writes to sys.stdout; stdout is kept for the results.
    with contextlib.redirect_stdout(sys.stderr):
        bar = keras.utils.Progbar(len(batches), unit_name="batch") if progress else None
        for done, batch in enumerate(batches, start=1):
            outputs = translator.translate([texts[index] for index in batch])
            for index, text in zip(batch, outputs):
                translations[index] = " ".join(text.splitlines())
            if bar is not None:
                bar.update(done)
    return translations
