"""CTranslate2 export: a `Seq2SeqTransformer` as a CTranslate2 model directory, with its tokenizers.

`export_ctranslate2` writes a directory that `ctranslate2.Translator` loads
and `translate` turns into strings with the tokenizers saved beside it;
greedy search gives `Seq2SeqTranslator.generate`'s strings. The converter is
our own, written against CTranslate2's Python spec API
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
bench-small (`benchmarks/decode_speed.py --ctranslate2` checks it every run).

Token names. CTranslate2 reads tokens as strings; `token_names` gives id i
the name "t{i}", except our reserved ids, which take CTranslate2's names of
the same roles (`CT2_RESERVED_TOKENS`), so that its decoder starts from our
START_ID and stops at our END_ID. Nothing is added to the source
(add_source_bos = add_source_eos = False): `translate` frames it as our
preprocessor does (the first max_source_length - 1 pieces, then END).

The directory `export_ctranslate2` writes:

    model.bin, config.json, *_vocabulary.json   CTranslate2's own files
    tokenizers/                                 `Seq2SeqTokenizers.save`
    keras_tf_ctranslate2.json                   the token names and the decoding limits
    README.md                                   how to translate strings with it

CTranslate2 is an optional extra (`pip install "keras-tf[ctranslate2]"`).
"""

import json
import os

import numpy as np
from keras import ops

INSTALL_HINT = 'pip install "keras-tf[ctranslate2]", or pip install "ctranslate2>=4.5"'

try:
    import ctranslate2
    from ctranslate2.converters import Converter
    from ctranslate2.specs import common_spec, transformer_spec
except ImportError:
    raise ModuleNotFoundError(
        f"keras_tf.serving.ctranslate2 needs the ctranslate2 package ({INSTALL_HINT})",
        name="ctranslate2",
    ) from None

from keras_tf.atomic_files import write_atomically, write_json
from keras_tf.layers.positional_embedding import sinusoidal_encoding
from keras_tf.special_tokens import END_ID, PAD_ID, START_ID, UNK_ID
from keras_tf.text.preprocessor import Seq2SeqPreprocessor, as_string_tensor
from keras_tf.text.tokenizers import Seq2SeqTokenizers

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


def _check_quantization(quantization):
    if quantization not in QUANTIZATIONS:
        raise ValueError(
            f"quantization must be one of {QUANTIZATIONS}; received quantization={quantization!r}"
        )


def convert(model, output_dir, quantization=None):
    """Write `model` alone (no tokenizers) as a CTranslate2 model directory, replacing one there.

    The decoding benchmark's peer, which feeds token names itself;
    `export_ctranslate2` writes the directory for users.

    Args:
        model: a float32 `Seq2SeqTransformer`.
        output_dir: the directory to write.
        quantization: None (float32 weights) or "int8" (CTranslate2's int8
            weights, one scale per output row).

    Returns:
        `output_dir`.
    """
    _check_quantization(quantization)
    return Seq2SeqTransformerConverter(model).convert(
        os.fspath(output_dir), quantization=quantization, force=True
    )


# --- The directory for users: model, tokenizers, token names, limits ---

CONFIG_FILENAME = "keras_tf_ctranslate2.json"
TOKENIZERS_DIRNAME = "tokenizers"
README_FILENAME = "README.md"
FORMAT_VERSION = 1
# Never picked, as `keras_tf.decoding.greedy.exclude_unpickable` never picks them.
UNPICKABLE = [[CT2_RESERVED_TOKENS[PAD_ID]], [CT2_RESERVED_TOKENS[START_ID]]]

_README = """\
# A keras_tf translator as a CTranslate2 model

CTranslate2 translates tokens (strings). Here token id i of keras_tf's
tokenizers (saved in `tokenizers/`) is named "t<i>", except the reserved ids:
{reserved}. A source is its subword ids, at most {max_source_pieces}, then
`</s>` (id 3); nothing else is added. Greedy search gives keras_tf's strings:

    from keras_tf.serving.ctranslate2 import translate
    translate("{name}", ["a sentence to translate"])

or by hand, with `ctranslate2.Translator(path).translate_batch(names,
beam_size=1, max_decoding_length={max_length}, suppress_sequences=[["<blank>"], ["<s>"]])`,
then the hypotheses' names back to ids, then the target tokenizer's detokenize.
`keras_tf_ctranslate2.json` records the names and the decoding limits.
"""


def export_ctranslate2(model, tokenizers, output_dir, *, decoding, quantization=None):
    """Write a CTranslate2 model directory holding `model`, its tokenizers and how to use them.

    The directory is written beside its final name and renamed into place;
    an existing non-empty directory is refused.

    Args:
        model: a float32 `Seq2SeqTransformer`.
        tokenizers: its `Seq2SeqTokenizers`, saved into `tokenizers/`.
        output_dir: the directory to create.
        decoding: the resolved `DecodingConfig` whose limits `translate` uses
            (`max_length`, `max_source_length`; beam size and length penalty
            as defaults).
        quantization: None (float32 weights, default) or "int8"
            (CTranslate2's int8 weights, one scale per output row).

    Returns:
        `output_dir`.

    Example:
        >>> translator.export_ctranslate2("/tmp/translator_ct2")  # doctest: +SKIP
        >>> translate("/tmp/translator_ct2", ["open the file"])    # doctest: +SKIP
        ['ouvrir le fichier']
    """
    _check_quantization(quantization)
    output_dir = os.fspath(output_dir)
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        raise FileExistsError(f"{output_dir} exists and is not empty; pass a new directory")
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise FileExistsError(f"{output_dir} exists and is not a directory")
    converter = Seq2SeqTransformerConverter(model)
    c = model.config
    config = {
        "format_version": FORMAT_VERSION,
        "quantization": quantization,
        "token_names": {
            "rule": "token id i is named t<i>, except the reserved ids",
            "reserved": {str(i): name for i, name in sorted(CT2_RESERVED_TOKENS.items())},
        },
        "source": "the first max_source_length - 1 subword ids, then </s>; nothing else added",
        "tokenizers": TOKENIZERS_DIRNAME,
        "beam_size": decoding.beam_size,
        "length_penalty": decoding.length_penalty,
        "length_penalty_style": decoding.length_penalty_style,
        "max_length": decoding.max_length,
        "max_source_length": decoding.max_source_length,
        "model": c.to_dict(),
    }
    readme = _README.format(
        reserved=", ".join(f"{i} `{n}`" for i, n in sorted(CT2_RESERVED_TOKENS.items())),
        max_source_pieces=decoding.max_source_length - 1,
        max_length=decoding.max_length,
        name=output_dir,
    )

    def write(folder):
        converter.convert(folder, quantization=quantization, force=True)
        tokenizers.save(os.path.join(folder, TOKENIZERS_DIRNAME))
        write_json(os.path.join(folder, CONFIG_FILENAME), config)
        with open(os.path.join(folder, README_FILENAME), "w", encoding="utf-8") as file:
            file.write(readme)

    parent = os.path.dirname(os.path.abspath(output_dir))
    os.makedirs(parent, exist_ok=True)
    if os.path.isdir(output_dir):
        os.rmdir(output_dir)  # empty, checked above
    write_atomically(output_dir, write)
    return output_dir


def read_ctranslate2_config(ct2_dir):
    """The settings `export_ctranslate2` recorded in `keras_tf_ctranslate2.json`, as a dict."""
    path = os.path.join(os.fspath(ct2_dir), CONFIG_FILENAME)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"No {CONFIG_FILENAME} in {ct2_dir}; is it a keras_tf CTranslate2 export?"
        )
    with open(path, encoding="utf-8") as file:
        return json.load(file)


class CTranslate2Translator:
    """Strings in, strings out through a CTranslate2 model that `export_ctranslate2` wrote.

    Args:
        ct2_dir: the exported directory.
        device: CTranslate2's device, "cpu" (default) or "cuda".
        compute_type: CTranslate2's compute type. Defaults to "default":
            the type the model was saved with.
        **kwargs: more `ctranslate2.Translator` arguments (`inter_threads`,
            `intra_threads`, ...).

    Example:
        >>> ct2 = CTranslate2Translator("/tmp/translator_ct2")  # doctest: +SKIP
        >>> ct2.translate(["open the file"], beam_size=1)       # doctest: +SKIP
        ['ouvrir le fichier']
    """

    def __init__(self, ct2_dir, device="cpu", compute_type="default", **kwargs):
        self.config = read_ctranslate2_config(ct2_dir)
        self.tokenizers = Seq2SeqTokenizers.load(
            os.path.join(os.fspath(ct2_dir), self.config["tokenizers"])
        )
        self.preprocessor = Seq2SeqPreprocessor(
            self.tokenizers, self.config["max_source_length"], self.config["max_length"]
        )
        self.translator = ctranslate2.Translator(
            os.fspath(ct2_dir), device=device, compute_type=compute_type, **kwargs
        )

    def translate(self, texts, beam_size=None, max_length=None, **kwargs):
        """Translate `texts` (a list of str); greedy with `beam_size=1`.

        Args:
            texts: the sources.
            beam_size: Defaults to None: the exported setting.
            max_length: the most target tokens, END included. Defaults to
                None: the exported setting.
            **kwargs: more `translate_batch` arguments.

        Returns:
            A list of str; an empty source gives "".
        """
        beam_size = self.config["beam_size"] if beam_size is None else beam_size
        max_length = self.config["max_length"] if max_length is None else max_length
        strings = as_string_tensor(texts)
        source_ids = self.preprocessor.source_ids(strings)
        tokens = self.preprocessor.encoder_tokens(source_ids).numpy()
        names = [[_name(int(i)) for i in row if i != PAD_ID] for row in tokens]
        kwargs.setdefault("length_penalty", self.config["length_penalty"] if beam_size > 1 else 1)
        results = self.translator.translate_batch(
            names,
            beam_size=beam_size,
            max_decoding_length=max_length,
            suppress_sequences=UNPICKABLE,
            **kwargs,
        ) if names else []
        hypotheses = [result.hypotheses[0] for result in results]
        width = max([len(h) for h in hypotheses] + [1])
        ids = np.full((len(hypotheses), width), PAD_ID, np.int32)
        for row, hypothesis in enumerate(hypotheses):
            ids[row, : len(hypothesis)] = token_ids([hypothesis])[0]
        empty = source_ids.row_lengths().numpy() == 0
        ids[empty] = PAD_ID
        return [t.decode("utf-8") for t in self.preprocessor.detokenize(ids).numpy().tolist()]


def translate(ct2_dir, texts, **kwargs):
    """`CTranslate2Translator(ct2_dir).translate(texts, **kwargs)`: strings from a CTranslate2 export.

    Example:
        >>> translate("/tmp/translator_ct2", ["open the file"])  # doctest: +SKIP
        ['ouvrir le fichier']
    """
    return CTranslate2Translator(ct2_dir).translate(texts, **kwargs)
