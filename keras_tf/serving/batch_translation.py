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
        progress: report progress on stderr: a `keras.utils.Progbar` when
            stderr is a terminal; otherwise (a log file) one plain line at
            the end, since the bar's cursor moves and colours would fill
            the file with escape codes.

    Returns:
        list of `str`, one line each.
    """
    import keras

    order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    translations = [""] * len(texts)
    on_terminal = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    # Progbar writes to sys.stdout; stdout is kept for the results.
    with contextlib.redirect_stdout(sys.stderr):
        bar = keras.utils.Progbar(len(batches), unit_name="batch") if progress and on_terminal else None
        for done, batch in enumerate(batches, start=1):
            outputs = translator.translate([texts[index] for index in batch])
            for index, text in zip(batch, outputs):
                translations[index] = " ".join(text.splitlines())
            if bar is not None:
                bar.update(done)
    if progress and bar is None:
        print(f"Translated {len(texts)} sentences in {len(batches)} batches", file=sys.stderr)
    return translations


def n_best_in_batches(translator, texts, batch_size, n):
    """The `n` best translations of each of `texts` with their scores, in input order.

    Args:
        translator: a beam-search `keras_tf.serving.Translator`.
        texts: list of `str`.
        batch_size: sentences per call.
        n: hypotheses per sentence, at most the translator's beam size.

    Returns:
        list (one per text) of `n` `(translation, score)` pairs, best first.
    """
    order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
    results = [None] * len(texts)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        out = translator.translate_n_best([texts[index] for index in batch], n)
        for index, hypotheses, scores in zip(batch, out.texts, out.scores):
            results[index] = [
                (" ".join(text.splitlines()), float(score))
                for text, score in zip(hypotheses, scores)
            ]
    return results


def format_n_best(results, start=0):
    """Moses-style n-best lines: `index ||| translation ||| score`, index from `start`.

    Example:
        >>> format_n_best([[("le chat", -1.25), ("un chat", -2.5)]])
        ['0 ||| le chat ||| -1.2500', '0 ||| un chat ||| -2.5000']
    """
    return [
        f"{index} ||| {text} ||| {score:.4f}"
        for index, hypotheses in enumerate(results, start)
        for text, score in hypotheses
    ]
