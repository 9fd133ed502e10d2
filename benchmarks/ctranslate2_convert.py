"""The decoding benchmark's CTranslate2 peer: the library's converter, and decoding to an exact length.

The converter lives in `keras_tf.serving.ctranslate2` (`keras-tf export
--format ctranslate2`); this module adds what only the benchmark needs:
`translate`, which makes CTranslate2 generate exactly as many tokens as our
timed run.

    >>> convert(model, "/tmp/ct2_fp32")                         # doctest: +SKIP
    >>> convert(model, "/tmp/ct2_int8", quantization="int8")    # doctest: +SKIP
"""

from keras_tf.serving.ctranslate2 import (  # noqa: F401  (decode_speed.py imports them from here)
    CT2_RESERVED_TOKENS,
    UNPICKABLE,
    convert,
    token_ids,
    token_names,
    vocabulary,
)


def translate(translator, source_names, length, beam_size=1):
    """Exactly `length` new tokens per source from a CTranslate2 `Translator`: int32 ids `[batch, length]`.

    CTranslate2's decoding lengths count the generated tokens, neither the
    start token nor the end token (which min_decoding_length keeps from being
    picked); the lengths are checked. Beam search returns its best hypothesis.

    Args:
        translator: a `ctranslate2.Translator` of a converted model.
        source_names: `token_names(source_ids)`.
        length: the number of new tokens.
        beam_size: 1 for greedy search.
    """
    results = translator.translate_batch(
        source_names,
        beam_size=beam_size,
        min_decoding_length=length,
        max_decoding_length=length,
        suppress_sequences=UNPICKABLE,
    )
    hypotheses = [result.hypotheses[0] for result in results]
    lengths = sorted({len(tokens) for tokens in hypotheses})
    if lengths != [length]:
        raise AssertionError(f"CTranslate2 returned {lengths} tokens; expected exactly {length}")
    return token_ids(hypotheses)
