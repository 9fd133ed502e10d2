"""Translating many sentences with a `Seq2SeqTranslator`, a batch at a time, shortest first."""

import contextlib
import sys

import keras

from keras_tf.option_error import OptionError

# Sentences a translator translates a call when it makes its own replay pairs.
REPLAY_BATCH_SIZE = 64


def _batches(texts, batch_size, pad_remainder):
    """Indices of `texts`, shortest first, `batch_size` at a time; each with the texts to send.

    A short last batch repeats its longest text up to `batch_size` when
    `pad_remainder` is true (by default, when a full batch comes before it):
    XLA compiles one decoding program per (batch size, source bucket), and
    the remainder would otherwise add one of its own. A repeated row decodes
    as the row it copies, so the batch stops when it would have; the copies'
    outputs are dropped.
    """
    order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    if pad_remainder is None:
        pad_remainder = len(batches) > 1
    for batch in batches:
        sent = [texts[index] for index in batch]
        if pad_remainder:
            sent += sent[-1:] * (batch_size - len(sent))
        yield batch, sent


def translate_in_batches(translator, texts, batch_size, decoding=None, progress=False,
                         pad_remainder=None, seed=None):
    """Translate `texts`, `batch_size` at a time, shortest first; return them in input order.

    Sorting by length puts sentences of one source bucket in a batch, so a
    batch pads less and stops decoding sooner. `keras-tf evaluate` and the
    validation BLEU of training (`keras_tf.training.bleu`) both decode
    through here, so they give the same translations.

    Args:
        translator: a `Seq2SeqTranslator` with a preprocessor.
        texts: list of `str`.
        batch_size: sentences per call.
        decoding: a `DecodingConfig`. Defaults to None: the translator's.
        progress: report progress on stderr: a `keras.utils.Progbar` when
            stderr is a terminal; otherwise (a log file) one plain line at
            the end, since the bar's cursor moves and colours would fill
            the file with escape codes.
        pad_remainder: send a short last batch as `batch_size` rows, its
            longest text repeated, so that it reuses the full batches'
            compiled program. Defaults to `None`: when there is more than
            one batch.
        seed: for sampling, the seed of the first batch; batch i samples
            with `seed + i`, so a run repeats. Defaults to None: fresh seeds.

    Returns:
        list of `str`, one line each.
    """
    batches = list(_batches(texts, batch_size, pad_remainder))
    translations = [""] * len(texts)
    on_terminal = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    # Progbar writes to sys.stdout; stdout is kept for the results.
    with contextlib.redirect_stdout(sys.stderr):
        bar = keras.utils.Progbar(len(batches), unit_name="batch") if progress and on_terminal else None
        for done, (batch, sent) in enumerate(batches, start=1):
            outputs = translator.generate_with_scores(
                sent, decoding, seed=None if seed is None else seed + done
            )
            for index, text in zip(batch, outputs.texts):
                translations[index] = " ".join(text.splitlines())
            if bar is not None:
                bar.update(done)
    if progress and bar is None:
        sentences = f"{len(texts)} sentence{'s' if len(texts) != 1 else ''}"
        batch_count = f"{len(batches)} batch{'es' if len(batches) != 1 else ''}"
        print(f"Translated {sentences} in {batch_count}", file=sys.stderr)
    return translations


def n_best_in_batches(translator, texts, batch_size, n, decoding=None, pad_remainder=None):
    """The `n` best translations of each of `texts` with their scores, in input order.

    Args:
        translator: a `Seq2SeqTranslator` with a preprocessor.
        texts: list of `str`.
        batch_size: sentences per call.
        n: hypotheses per sentence, at most the beam size.
        decoding: a beam-search `DecodingConfig`. Defaults to None: the translator's.
        pad_remainder: as for `translate_in_batches`.

    Returns:
        list (one per text) of `n` `(translation, score)` pairs, best first.
    """
    results = [None] * len(texts)
    for batch, sent in _batches(texts, batch_size, pad_remainder):
        out = translator.n_best(sent, n, decoding)
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


def read_sentences(path, name):
    """The non-empty lines of the UTF-8 text file `path`, stripped; one `OptionError` line otherwise.

    Args:
        path: the file.
        name: the option that named it, for the message (e.g. "replay_source").
    """
    try:
        with open(path, encoding="utf-8") as file:
            lines = [line.strip() for line in file]
    except OSError as error:
        raise OptionError([(name, path)], error.strerror or str(error)) from None
    except UnicodeDecodeError as error:
        raise OptionError([(name, path)], f"not UTF-8 text ({error.reason})") from None
    lines = [line for line in lines if line]
    if not lines:
        raise OptionError([(name, path)], "holds no sentence")
    return lines


def own_translations(translator, path, name="replay_source"):
    """`(sources, translations)`: the lines of `path` and `translator`'s translations of them.

    What `--replay-source` replays: the pairs a trained model makes of plain
    text of the domain it should keep (Resta & Bacciu 2024, arXiv
    2403.13130). Decoded with the translator's own settings,
    `REPLAY_BATCH_SIZE` sentences at a time.
    """
    sources = read_sentences(path, name)
    return sources, translate_in_batches(translator, sources, REPLAY_BATCH_SIZE)
