"""A generated sequence-to-sequence task: reverse the source sequence.

Used by the quick-start example, the tests and the benchmarks: it needs no
download, and a correct Transformer learns it in a minute on a CPU.
"""

import numpy as np

from keras_tf.special_tokens import END_ID, PAD_ID, START_ID

FIRST_WORD_ID = 4  # ids 0-3 are reserved (pad, unknown, start, end)


def make_reverse_task(
    num_examples, vocabulary_size=64, min_length=4, max_length=10, seed=0
):
    """Random token sequences and their reversals, in the model's input format.

    Args:
        num_examples: number of pairs.
        vocabulary_size: ids are drawn from [4, vocabulary_size).
        min_length, max_length: source lengths, inclusive.
        seed: numpy seed; the same seed gives the same data.

    Returns:
        `(inputs, labels)`: `inputs` is a dict with int32 `encoder_tokens`
        `[n, max_length]` and `decoder_tokens` `[n, max_length + 1]`
        (START + reversed source); `labels` is `[n, max_length + 1]`
        (reversed source + END). Padding is 0.

    Example:
        >>> inputs, labels = make_reverse_task(2, min_length=3, max_length=3)
        >>> inputs["encoder_tokens"].shape, labels.shape
        ((2, 3), (2, 4))
    """
    if not FIRST_WORD_ID < vocabulary_size:
        raise ValueError(
            f"vocabulary_size must exceed {FIRST_WORD_ID}; received {vocabulary_size}"
        )
    if not 1 <= min_length <= max_length:
        raise ValueError(
            "need 1 <= min_length <= max_length; received "
            f"min_length={min_length}, max_length={max_length}"
        )
    rng = np.random.default_rng(seed)
    encoder_tokens = np.full((num_examples, max_length), PAD_ID, dtype="int32")
    decoder_tokens = np.full((num_examples, max_length + 1), PAD_ID, dtype="int32")
    labels = np.full((num_examples, max_length + 1), PAD_ID, dtype="int32")
    lengths = rng.integers(min_length, max_length + 1, size=num_examples)
    for row, length in enumerate(lengths):
        source = rng.integers(FIRST_WORD_ID, vocabulary_size, size=length)
        target = source[::-1]
        encoder_tokens[row, :length] = source
        decoder_tokens[row, 0] = START_ID
        decoder_tokens[row, 1 : length + 1] = target
        labels[row, :length] = target
        labels[row, length] = END_ID
    return {"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens}, labels
