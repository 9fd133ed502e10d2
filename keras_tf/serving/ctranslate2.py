"""Convert a float32 `Seq2SeqTransformer` to a CTranslate2 model: the decoding benchmark's peer.

Our own converter, written against CTranslate2's Python spec API
(`ctranslate2.specs.TransformerSpec`), from the model in memory:

    keras_tf                                 CTranslate2 TransformerSpec
    post-norm blocks (norm_first=False)      pre_norm=False: LayerNorm after each residual add
    pre-norm + encoder_norm / decoder_norm   pre_norm=True, the stacks' final layer_norm
    LayerNorm epsilon (config)               config.layer_norm_epsilon, which CTranslate2
                                             reads (written as 0.1 it moved the scores to ours
                                             at 0.1; left unset it scored as 1e-5 does)
    embedding * sqrt(d_model) + sinusoids    scale_embeddings=True + position_encodings, our
                                             table written out (interleaved or concatenated)
    q, k, v Dense kernels [in, out]          self-attention linear[0] = [q; k; v], [3 d, d];
                                             cross-attention linear[0] = q, linear[1] = [k; v]
    attention output Dense                   the last attention linear
    feed-forward inner_dense, output_dense   ffn.linear_0, ffn.linear_1 (+ its layer_norm)
    tied output layer (target embedding)     decoder.projection.weight = the target embedding
    output_bias (LogitsBias)                 decoder.projection.bias

Teacher-forced log-probabilities equal ours within 1e-6 on transformer_tiny
with each of: post-norm, pre-norm, gelu, silu, untied output layer, output
bias, concatenated sinusoids (random weights, biases and norms); 2e-6 on
bench-small (`decode_speed.py --ctranslate2` checks it every run).

Token names. CTranslate2 reads tokens as strings; `token_names` gives id i
the name "t{i}", except our reserved ids, which take CTranslate2's names of
the same roles (`CT2_RESERVED_TOKENS`), so that its decoder starts from our
START_ID and stops at our END_ID. Nothing is added to the source
(add_source_bos = add_source_eos = False), as our model gets it as given.

Usage (the decoding benchmark calls it; `decode_speed.py --ctranslate2`):
    >>> convert(model, "/tmp/ct2_fp32")                         # doctest: +SKIP
    >>> convert(model, "/tmp/ct2_int8", quantization="int8")    # doctest: +SKIP
"""

import os

import numpy as np
from ctranslate2.converters import Converter
from ctranslate2.specs import common_spec, transformer_spec
from keras import ops

from keras_tf.layers.positional_embedding import sinusoidal_encoding
from keras_tf.models.config import END_ID, PAD_ID, START_ID, UNK_ID

# Our reserved ids under CTranslate2's names for the same roles.
CT2_RESERVED_TOKENS = {PAD_ID: "<blank>", UNK_ID: "<unk>", START_ID: "<s>", END_ID: "</s>"}
ACTIVATIONS = {
    "relu": common_spec.Activation.RELU,
    "gelu": common_spec.Activation.GELU,  # erf GELU, as keras.activations.gelu by default
    "silu": common_spec.Activation.SWISH,
}
QUANTIZATIONS = (None, "int8")


def _name(i):
    return CT2_RESERVED_TOKENS.get(i, f"t{i}")


def vocabulary(size):
    """The token names of ids 0 .. size - 1: the reserved ones, then "t4", "t5", ..."""
    return [_name(i) for i in range(size)]


def token_names(ids):
    """Ids `[batch, length]` (numpy) → lists of token names, for a CTranslate2 `Translator`."""
    return [[_name(int(i)) for i in row] for row in np.asarray(ids)]


def token_ids(names):
    """The inverse of `token_names`: lists of token names → int32 ids `[batch, length]`."""
    by_name = {name: i for i, name in CT2_RESERVED_TOKENS.items()}
    return np.array(
        [[by_name[n] if n in by_name else int(n[1:]) for n in row] for row in names], "int32"
    )


def _numpy(variable):
    return np.asarray(ops.convert_to_numpy(variable), dtype=np.float32)


def _linear(spec, *denses):
    """One CTranslate2 linear from Keras Dense layers, fused along the outputs.

    A Keras kernel is [in, out]; CTranslate2's weight is [out, in].
    """
    spec.weight = np.concatenate([_numpy(d.kernel).T for d in denses], axis=0)
    spec.bias = np.concatenate([_numpy(d.bias) for d in denses], axis=0)


def _norm(spec, norm):
    spec.gamma = _numpy(norm.gamma)
    spec.beta = _numpy(norm.beta)


def _attention(spec, attention, norm, self_attention):
    if self_attention:
        _linear(spec.linear[0], attention.query_dense, attention.key_dense, attention.value_dense)
    else:
        _linear(spec.linear[0], attention.query_dense)
        _linear(spec.linear[1], attention.key_dense, attention.value_dense)
    _linear(spec.linear[-1], attention.output_dense)
    _norm(spec.layer_norm, norm)


def _feed_forward(spec, block):
    _linear(spec.linear_0, block.feed_forward.inner_dense)
    _linear(spec.linear_1, block.feed_forward.output_dense)
    _norm(spec.layer_norm, block.feed_forward_norm)


def _embedding(embeddings_spec, position_spec, positional_embedding):
    # The spec's sqrt(d_model) scale is on (scale_embeddings defaults to True);
    # our sinusoid table replaces CTranslate2's own, whose layout differs.
    embeddings_spec.weight = _numpy(positional_embedding.embeddings)
    position_spec.encodings = sinusoidal_encoding(
        positional_embedding.max_length, positional_embedding.d_model, positional_embedding.layout
    )


class Seq2SeqTransformerConverter(Converter):
    """A `ctranslate2.converters.Converter` for a float32 `Seq2SeqTransformer` in memory.

    Args:
        model: a built `Seq2SeqTransformer` with float32 weights (not quantized).

    Example:
        >>> from keras_tf.models import Seq2SeqTransformer, get_preset
        >>> model = Seq2SeqTransformer(get_preset("transformer_tiny"))
        >>> Seq2SeqTransformerConverter(model).convert("/tmp/tiny_ct2", force=True)  # doctest: +SKIP
        '/tmp/tiny_ct2'
    """

    def __init__(self, model):
        if model.weight_quantization is not None:
            raise ValueError(
                "Convert the float32 model (CTranslate2 quantizes it itself); received a model "
                f"with weight_quantization={model.weight_quantization!r}"
            )
        if model.compute_dtype != "float32":
            raise ValueError(
                f"Expected a float32 model; received dtype policy {model.dtype_policy.name!r}"
            )
        if model.config.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation={model.config.activation!r} has no CTranslate2 equivalent here; "
                f"expected one of {sorted(ACTIVATIONS)}"
            )
        self.model = model

    def _load(self):
        model, c = self.model, self.model.config
        spec = transformer_spec.TransformerSpec.from_config(
            (c.num_encoder_layers, c.num_decoder_layers),
            c.num_heads,
            pre_norm=c.norm_first,
            activation=ACTIVATIONS[c.activation],
        )
        # Encoder: spec.encoder.embeddings is a list (one per source feature).
        _embedding(
            spec.encoder.embeddings[0], spec.encoder.position_encodings, model.source_embedding
        )
        for layer, block in zip(spec.encoder.layer, model.encoder_blocks):
            _attention(layer.self_attention, block.self_attention, block.self_attention_norm, True)
            _feed_forward(layer.ffn, block)
        # Decoder: its first input is the START embedding (not a zero vector, as in Marian).
        _embedding(spec.decoder.embeddings, spec.decoder.position_encodings, model.target_embedding)
        for layer, block in zip(spec.decoder.layer, model.decoder_blocks):
            _attention(layer.self_attention, block.self_attention, block.self_attention_norm, True)
            _attention(layer.attention, block.cross_attention, block.cross_attention_norm, False)
            _feed_forward(layer.ffn, block)
        if c.norm_first:
            _norm(spec.encoder.layer_norm, model.encoder_norm)
            _norm(spec.decoder.layer_norm, model.decoder_norm)
        # The pre-softmax linear layer: the target embedding itself when tied.
        if model.output_projection is None:
            spec.decoder.projection.weight = spec.decoder.embeddings.weight
        else:
            spec.decoder.projection.weight = _numpy(model.output_projection.kernel).T
            spec.decoder.projection.bias = _numpy(model.output_projection.bias)
        if model.output_bias is not None:
            bias = _numpy(model.output_bias.bias)
            if model.output_projection is not None:
                bias = bias + spec.decoder.projection.bias
            spec.decoder.projection.bias = bias

        spec.register_source_vocabulary(vocabulary(c.source_vocabulary_size))
        spec.register_target_vocabulary(vocabulary(c.target_vocabulary_size))
        spec.config.unk_token = CT2_RESERVED_TOKENS[UNK_ID]
        spec.config.bos_token = spec.config.decoder_start_token = CT2_RESERVED_TOKENS[START_ID]
        spec.config.eos_token = CT2_RESERVED_TOKENS[END_ID]
        spec.config.add_source_bos = spec.config.add_source_eos = False
        spec.config.layer_norm_epsilon = float(c.layer_norm_epsilon)
        return spec


def convert(model, output_dir, quantization=None):
    """Write `model` as a CTranslate2 model directory, replacing one already there.

    Args:
        model: a float32 `Seq2SeqTransformer`.
        output_dir: the directory to write.
        quantization: None (float32 weights) or "int8" (CTranslate2's int8
            weights, one scale per output row).

    Returns:
        `output_dir`.
    """
    if quantization not in QUANTIZATIONS:
        raise ValueError(
            f"quantization must be one of {QUANTIZATIONS}; received quantization={quantization!r}"
        )
    return Seq2SeqTransformerConverter(model).convert(
        os.fspath(output_dir), quantization=quantization, force=True
    )


# Never picked, as `keras_tf.decoding.greedy.exclude_unpickable` never picks them.
UNPICKABLE = [[CT2_RESERVED_TOKENS[PAD_ID]], [CT2_RESERVED_TOKENS[START_ID]]]


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
