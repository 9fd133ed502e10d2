"""The decoding settings of the commands that translate: `--beam-size` over the preset's."""


def decoding_for(beam_size, preset_decoding=None, *, max_length=None, length_penalty=None):
    """`DecodingConfig.for_beam_size(beam_size)`, with the length penalty and max_length of `preset_decoding`.

    The length penalty (α and style) and the longest output come from
    `preset_decoding`, the model directory's `decoding.json`, when given: an
    imported OPUS-MT model keeps Hugging Face's len^α and max_length.
    `max_length` and `length_penalty` (α), when not None, replace the
    preset's (`keras-tf export --max-length --length-penalty`).
    """
    from keras_tf.decoding import DecodingConfig

    fields = {}
    if preset_decoding is not None:
        fields = dict(
            length_penalty=preset_decoding.length_penalty,
            length_penalty_style=preset_decoding.length_penalty_style,
            max_length=preset_decoding.max_length,
        )
    if max_length is not None:
        fields["max_length"] = max_length
    if length_penalty is not None:
        fields["length_penalty"] = length_penalty
    return DecodingConfig.for_beam_size(beam_size, **fields)
