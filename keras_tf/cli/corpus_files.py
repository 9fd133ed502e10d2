"""Reading the TSV files named on the command line."""

import os

from keras_tf.cli.errors import UserError, readable_file


def read_tsv_option(path, option, skip_bad_lines=False):
    """Read the TSV corpus given to `option`; a missing file or malformed line is a `UserError`.

    Args:
        path: the file named on the command line.
        option: the option that named it, e.g. `"--train"`.
        skip_bad_lines: skip malformed lines and report their count, rather
            than stop at the first.

    Returns:
        A `keras_tf.text.ParallelCorpus`.
    """
    from keras_tf.text import CorpusError, read_tsv

    readable_file(path, option)
    if os.path.getsize(path) == 0:
        raise UserError(f"{option}: {path} is empty")
    try:
        corpus = read_tsv(path, on_error="skip" if skip_bad_lines else "raise")
    except CorpusError as error:
        # The library's hint names its Python argument; name the flag instead.
        message = str(error).replace("pass on_error='skip'", "pass --skip-bad-lines")
        raise UserError(f"{option}: {message}") from None
    if not len(corpus):
        raise UserError(f"{option}: {path} holds no sentence pairs (see the count above)")
    return corpus
