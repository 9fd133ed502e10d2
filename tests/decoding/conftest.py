import keras_tf  # noqa: F401  (tests/conftest.py keeps TensorFlow's start-up lines off stderr)
import keras
import numpy as np
import pytest

from keras_tf.models import Seq2SeqTransformer, get_preset

# A tiny model whose short sources and targets keep each XLA compile to a
# few seconds. (The cache stages are tested in test_stages.py.)
MAX_LENGTH = 12


def random_model(norm_first, seed):
    """transformer_tiny with random weights; the seed fixes them.

    Untied output weights: with the tied projection a random model mostly
    repeats one token, which would test little.
    """
    keras.utils.set_random_seed(seed)
    return Seq2SeqTransformer(
        get_preset("transformer_tiny", norm_first=norm_first, tie_embeddings=False)
    )


def random_sources(batch_size, length, seed, vocabulary_size=64):
    """Random ids in [4, vocabulary_size), rows padded with 0 to different lengths."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(4, vocabulary_size, size=(batch_size, length)).astype("int32")
    for row, real_length in enumerate(rng.integers(length // 2, length + 1, size=batch_size)):
        tokens[row, real_length:] = 0
    return tokens


def cut_after(tokens, end_id):
    """The expected output when `end_id` ends a sequence: 0 after its first occurrence."""
    tokens = tokens.copy()
    for row in tokens:
        ends = np.flatnonzero(row == end_id)
        if ends.size:
            row[ends[0] + 1 :] = 0
    return tokens


def token_that_ends_some_rows_early(tokens):
    """A token of row 2 that, as the end token, cuts some rows short but not all.

    Searched rather than fixed: which tokens a random model emits depends on
    the backend's random initialisation.
    """
    for token in tokens[2]:
        ended = (cut_after(tokens, int(token)) == 0).any(axis=1)
        if ended.any() and not ended.all():
            return int(token)
    raise AssertionError(f"no token of row 2 ends some rows early but not all: {tokens}")


@pytest.fixture(scope="session")
def post_norm_model():
    """One random post-norm model shared by the tests, and so are its compiled decoders."""
    return random_model(norm_first=False, seed=21)
