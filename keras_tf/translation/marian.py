"""Convert OPUS-MT (Hugging Face `MarianMTModel`) checkpoints: the parts of a `Seq2SeqTranslator`.

A Hugging Face Marian directory holds `config.json` (`model_type: "marian"`),
`model.safetensors` (or `pytorch_model.bin`), `source.spm`, `target.spm`,
`vocab.json` (and `target_vocab.json` when the vocabularies are separate)
and `tokenizer_config.json`. `convert(directory)` reads them with numpy
and safetensors only (no torch, unless the weights come as
`pytorch_model.bin`) into our layers:

    Marian                                  keras_tf
    post-norm blocks, q/k/v/out with bias   TransformerEncoderBlock / DecoderBlock (kernels transposed)
    sinusoids, sines then cosines           positional_layout="concatenated"
    swish (SiLU) feed-forward               activation="silu"
    one embedding for encoder, decoder      copied into source_embedding and target_embedding
      and output layer                        (tie_embeddings=True ties the output to the target one)
    final_logits_bias                       output_bias=True
    max_position_embeddings                 max_source_length, max_target_length

Ids. Marian has `</s>` = 0, `<unk>` = 1, `<pad>` = the last id, and its
decoder starts from `<pad>`; keras_tf reserves PAD 0, UNK 1, START 2, END 3
everywhere (masks, framing, decoding). So the converter permutes the
vocabulary into V + 1 ids (`marian_id_order`):

    our id      Marian row              why
    0 (PAD)     a spare row of zeros    its output bias is -1e9: it takes no probability
                                        mass, so log-softmax over V + 1 equals Marian's over V
    1 (UNK)     <unk>
    2 (START)   <pad>                   Marian's decoder start
    3 (END)     </s>
    4 ...       the other Marian ids, in order

and the tokenizers (`SentencePieceVocabularyTokenizer`) map SentencePiece
pieces to these ids. The encoder and the decoder get copies of the one
matrix: fine-tuning lets them drift apart (the output layer stays tied to
the target copy).
"""

import dataclasses
import os

import numpy as np

from keras_tf.preset_checks import (
    PresetError,
    check_fields,
    check_sizes,
    read_json_object,
    regular_file,
)
from keras_tf.decoding.config import DecodingConfig
from keras_tf.models.config import TransformerConfig
from keras_tf.models.seq2seq_transformer import Seq2SeqTransformer
from keras_tf.special_tokens import END_ID, PAD_ID, RESERVED_TOKENS, START_ID, UNK_ID

CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"
SAFETENSORS_FILE = "model.safetensors"
PYTORCH_FILE = "pytorch_model.bin"
VOCABULARY_FILE = "vocab.json"
TARGET_VOCABULARY_FILE = "target_vocab.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPM_FILES = ("source.spm", "target.spm")
HF_PREFIX = "hf://"

# The sizes of a Marian config.json, each an int held to `SIZE_LIMITS[kind]`
# before anything is allocated.
SIZE_FIELDS = {
    "vocab_size": "vocabulary_size",
    "d_model": "d_model",
    "encoder_ffn_dim": "d_ff",
    "decoder_ffn_dim": "d_ff",
    "encoder_attention_heads": "num_heads",
    "decoder_attention_heads": "num_heads",
    "encoder_layers": "num_layers",
    "decoder_layers": "num_layers",
    "max_position_embeddings": "max_length",
}

# Hugging Face's ACT2FN names -> Keras activation names (the same functions).
ACTIVATIONS = {"swish": "silu", "silu": "silu", "relu": "relu", "gelu": "gelu"}
# The logit of the spare PAD row: exp(-1e9 - max) is exactly 0 in float32.
SPARE_ROW_BIAS = -1e9


def is_hugging_face_dir(path):
    """Whether `path` holds a Hugging Face model's config.json (one with a model_type)."""
    config_path = os.path.join(os.fspath(path), CONFIG_FILE)
    if not os.path.isfile(config_path):
        return False
    try:
        return "model_type" in read_json_object(config_path)
    except (OSError, ValueError):
        return False


def resolve_marian_path(path):
    """A local directory for `path`: itself, or for `hf://ORG/NAME` a Hugging Face Hub snapshot.

    `hf://` needs `huggingface_hub` (imported only here); it downloads the
    files `load_marian` reads, into the Hub's cache.
    """
    path = os.fspath(path)
    if not path.startswith(HF_PREFIX):
        return path
    repo_id = path[len(HF_PREFIX):]
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise ValueError(
            f"Expected hf://ORGANIZATION/NAME, e.g. hf://Helsinki-NLP/opus-mt-en-de; received {path!r}"
        )
    try:
        from huggingface_hub import snapshot_download
    except ModuleNotFoundError:
        raise ValueError(
            f"{path}: reading from the Hugging Face Hub needs huggingface_hub "
            "(pip install huggingface_hub), or download the model and pass its directory"
        ) from None
    return snapshot_download(
        repo_id,
        allow_patterns=[CONFIG_FILE, GENERATION_CONFIG_FILE, SAFETENSORS_FILE, PYTORCH_FILE,
                        VOCABULARY_FILE, TARGET_VOCABULARY_FILE, TOKENIZER_CONFIG_FILE, *SPM_FILES],
    )


def read_marian_config(directory):
    """The checked `config.json` of a Marian directory, as a dict.

    Raises:
        ValueError: naming the field and its value, for anything our layers
            cannot reproduce exactly.
    """
    path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(path):
        raise PresetError(f"{directory} is not a Hugging Face Marian directory: no {CONFIG_FILE}")
    config = read_json_object(path)
    check_fields(config, {name: int for name in SIZE_FIELDS}, path)
    check_fields(config, {name: int for name in ("pad_token_id", "eos_token_id")}, path)
    for name in ("dropout", "attention_dropout"):
        if name in config:
            check_fields(config, {name: float}, path)
    check_sizes({name: (kind, config[name]) for name, kind in SIZE_FIELDS.items()}, path)
    if config.get("model_type") != "marian":
        raise ValueError(
            f"{path}: expected model_type='marian'; received model_type={config.get('model_type')!r}"
        )
    # (field, the value we need, its default in MarianConfig, why)
    required = (
        ("normalize_before", False, False, "pre-norm Marian checkpoints are not supported"),
        ("share_encoder_decoder_embeddings", True, True,
         "the converter needs one embedding shared by the encoder and the decoder"),
        ("tie_word_embeddings", True, True, "the output layer must be tied to the embedding"),
        ("static_position_embeddings", True, True,
         "only sinusoidal positions are supported, not learned ones"),
        ("scale_embedding", True, False,
         "our embedding always scales by sqrt(d_model), which the tied output layer shares"),
    )
    for field, needed, default, why in required:
        value = config.get(field, default)
        if value != needed:
            raise ValueError(f"{path}: {field}={value!r} is not supported ({why}); expected {needed}")
    activation = config.get("activation_function", "gelu")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"{path}: activation_function={activation!r} is not supported; expected one of "
            f"{sorted(ACTIVATIONS)}"
        )
    for encoder_field, decoder_field in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        if config.get(encoder_field) != config.get(decoder_field):
            raise ValueError(
                f"{path}: the encoder and decoder must agree; received "
                f"{encoder_field}={config.get(encoder_field)!r}, "
                f"{decoder_field}={config.get(decoder_field)!r}"
            )
    decoder_vocabulary = config.get("decoder_vocab_size") or config["vocab_size"]
    if decoder_vocabulary != config["vocab_size"]:
        raise ValueError(
            f"{path}: decoder_vocab_size={decoder_vocabulary} differs from "
            f"vocab_size={config['vocab_size']}; a shared embedding needs one size"
        )
    start = config.get("decoder_start_token_id", config.get("pad_token_id"))
    if start != config.get("pad_token_id"):
        raise ValueError(
            f"{path}: decoder_start_token_id={start!r} must be pad_token_id="
            f"{config.get('pad_token_id')!r}, as in every OPUS-MT model (it becomes our START)"
        )
    return config


def transformer_config(marian_config):
    """Our `TransformerConfig` for a checked Marian config (one more id: the spare PAD row)."""
    c = marian_config
    vocabulary_size = c["vocab_size"] + 1
    return TransformerConfig(
        source_vocabulary_size=vocabulary_size,
        target_vocabulary_size=vocabulary_size,
        d_model=c["d_model"],
        num_heads=c["encoder_attention_heads"],
        d_ff=c["encoder_ffn_dim"],
        num_encoder_layers=c["encoder_layers"],
        num_decoder_layers=c["decoder_layers"],
        dropout=float(c.get("dropout", 0.1)),
        attention_dropout=float(c.get("attention_dropout", 0.0)),
        max_source_length=c["max_position_embeddings"],
        max_target_length=c["max_position_embeddings"],
        norm_first=False,
        tie_embeddings=True,
        activation=ACTIVATIONS[c.get("activation_function", "gelu")],
        layer_norm_epsilon=1e-5,  # torch.nn.LayerNorm's default, which Marian uses
        positional_layout="concatenated",
        output_bias=True,
    )


def marian_id_order(marian_config, unk_id):
    """The Marian id of each of our ids; -1 for our PAD, the spare row.

    Example:
        >>> marian_id_order({"vocab_size": 6, "pad_token_id": 5, "eos_token_id": 0}, 1).tolist()
        [-1, 1, 5, 0, 2, 3, 4]
    """
    c = marian_config
    reserved = {PAD_ID: -1, UNK_ID: unk_id, START_ID: c["pad_token_id"], END_ID: c["eos_token_id"]}
    if len(set(reserved.values())) != len(reserved):
        raise ValueError(
            f"Marian's <unk>, <pad> and </s> must be distinct ids; received unk={unk_id}, "
            f"pad_token_id={c['pad_token_id']}, eos_token_id={c['eos_token_id']}"
        )
    rest = [i for i in range(c["vocab_size"]) if i not in reserved.values()]
    return np.array([reserved[i] for i in range(len(RESERVED_TOKENS))] + rest, dtype=np.int64)


def read_vocabularies(directory, marian_config):
    """`(source_vocabulary, target_vocabulary, unk_id)`: Marian id -> piece, from vocab.json.

    The target side reads `target_vocab.json` when tokenizer_config.json says
    `separate_vocabs`; both must give `<unk>` the same id.
    """
    tokenizer_config_path = os.path.join(directory, TOKENIZER_CONFIG_FILE)
    tokenizer_config = (
        read_json_object(tokenizer_config_path) if os.path.isfile(tokenizer_config_path) else {}
    )
    files = [VOCABULARY_FILE, VOCABULARY_FILE]
    if tokenizer_config.get("separate_vocabs", False):
        files[1] = TARGET_VOCABULARY_FILE
    vocabularies, unk_ids = [], []
    for name in files:
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise ValueError(f"{directory}: no {name}; a Marian directory needs its vocabulary")
        pieces = read_json_object(path)
        not_ids = [piece for piece, i in pieces.items() if isinstance(i, bool) or not isinstance(i, int)]
        if not_ids:
            raise PresetError(f"{path}: the id of {not_ids[0]!r} is not an integer")
        unk = tokenizer_config.get("unk_token", "<unk>")
        if unk not in pieces:
            raise ValueError(f"{path}: the unknown token {unk!r} is not in the vocabulary")
        size = marian_config["vocab_size"]
        too_large = sorted(i for i in pieces.values() if not 0 <= i < size)
        if too_large:
            raise ValueError(f"{path}: ids {too_large[:5]} are outside vocab_size={size}")
        by_id = {i: piece for piece, i in pieces.items()}
        # An id without a piece (MarianTokenizer would ask SentencePiece) gets a placeholder.
        vocabularies.append([by_id.get(i, f"<marian-id-{i}>") for i in range(size)])
        unk_ids.append(pieces[unk])
    if unk_ids[0] != unk_ids[1]:
        raise ValueError(
            f"{directory}: vocab.json and target_vocab.json give <unk> different ids: {unk_ids}"
        )
    return vocabularies[0], vocabularies[1], unk_ids[0]


def read_weights(directory):
    """The checkpoint's tensors as numpy float32 arrays: safetensors, else pytorch_model.bin."""
    safetensors_path = os.path.join(directory, SAFETENSORS_FILE)
    if os.path.isfile(safetensors_path):
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        regular_file(safetensors_path, 2**40)
        try:
            tensors = load_file(safetensors_path)
        except SafetensorError as error:
            raise PresetError(f"{safetensors_path}: not a safetensors file ({error})") from None
    elif os.path.isfile(os.path.join(directory, PYTORCH_FILE)):
        try:
            import torch
        except ModuleNotFoundError:
            raise ValueError(
                f"{directory} holds {PYTORCH_FILE} and no {SAFETENSORS_FILE}; reading it needs "
                "torch (pip install torch), or convert it to safetensors"
            ) from None
        state = torch.load(
            os.path.join(directory, PYTORCH_FILE), map_location="cpu", weights_only=True
        )
        tensors = {name: value.float().numpy() for name, value in state.items()}
    else:
        raise ValueError(f"{directory}: no {SAFETENSORS_FILE} or {PYTORCH_FILE}")
    return {name: np.asarray(value, dtype=np.float32) for name, value in tensors.items()}


def check_against_weights(directory, marian_config):
    """Raise `PresetError` unless the safetensors header holds the sizes config.json claims.

    Reads the header alone: a config that claims more than its file holds is
    refused before a layer of that size is built.
    """
    path = os.path.join(directory, SAFETENSORS_FILE)
    if not os.path.isfile(path):
        return  # pytorch_model.bin: torch reads it whole anyway
    from safetensors import SafetensorError, safe_open

    c = marian_config
    expected = {
        "model.shared.weight": (c["vocab_size"], c["d_model"]),
        "model.encoder.layers.0.fc1.weight": (c["encoder_ffn_dim"], c["d_model"]),
        "model.decoder.layers.0.fc1.weight": (c["decoder_ffn_dim"], c["d_model"]),
        f"model.encoder.layers.{c['encoder_layers'] - 1}.fc1.weight": (c["encoder_ffn_dim"], c["d_model"]),
        f"model.decoder.layers.{c['decoder_layers'] - 1}.fc1.weight": (c["decoder_ffn_dim"], c["d_model"]),
    }
    try:
        with safe_open(regular_file(path, 2**40), framework="numpy") as weights:
            names = set(weights.keys())
            for name, shape in expected.items():
                if name not in names:
                    raise PresetError(
                        f"{path}: no tensor {name}, which {CONFIG_FILE}'s sizes call for"
                    )
                found = tuple(weights.get_slice(name).get_shape())
                if found != shape:
                    raise PresetError(
                        f"{path}: {name} has shape {list(found)}; {CONFIG_FILE} calls for "
                        f"{list(shape)}"
                    )
    except SafetensorError as error:
        raise PresetError(f"{path}: not a safetensors file ({error})") from None


def _embedding(tensors):
    for name in ("model.shared.weight", "model.encoder.embed_tokens.weight",
                 "model.decoder.embed_tokens.weight", "lm_head.weight"):
        if name in tensors:
            return tensors[name]
    raise ValueError("The checkpoint holds no embedding (model.shared.weight)")


class _Tensors:
    """The checkpoint's tensors by name; a missing one is a `ValueError` that names it."""

    def __init__(self, tensors):
        self.tensors = tensors

    def __getitem__(self, name):
        if name not in self.tensors:
            raise ValueError(f"The checkpoint lacks the tensor {name!r}")
        return self.tensors[name]

    def __contains__(self, name):
        return name in self.tensors


def _copy_dense(dense, tensors, prefix):
    # torch Linear stores [out, in]; a Keras Dense kernel is [in, out].
    dense.kernel.assign(tensors[f"{prefix}.weight"].T)
    dense.bias.assign(tensors[f"{prefix}.bias"])


def _copy_attention(layer, tensors, prefix):
    # Heads are consecutive slices of the projections' outputs in both, so
    # transposing is all (no reshuffling of heads).
    for ours, theirs in (("query_dense", "q_proj"), ("key_dense", "k_proj"),
                         ("value_dense", "v_proj"), ("output_dense", "out_proj")):
        _copy_dense(getattr(layer, ours), tensors, f"{prefix}.{theirs}")


def _copy_norm(norm, tensors, prefix):
    norm.gamma.assign(tensors[f"{prefix}.weight"])
    norm.beta.assign(tensors[f"{prefix}.bias"])


def _copy_feed_forward(feed_forward, tensors, prefix):
    _copy_dense(feed_forward.inner_dense, tensors, f"{prefix}.fc1")
    _copy_dense(feed_forward.output_dense, tensors, f"{prefix}.fc2")


def copy_weights(model, tensors, order):
    """Copy a Marian checkpoint into a `Seq2SeqTransformer` built from `transformer_config`.

    Args:
        model: the (built) backbone.
        tensors: `read_weights(directory)`.
        order: `marian_id_order(...)`, our id -> Marian id (-1: the spare row).
    """
    tensors = _Tensors(tensors)
    embedding = _embedding(tensors)
    rows = np.where(order[:, None] >= 0, embedding[np.maximum(order, 0)], 0.0)
    model.source_embedding.token_embedding.embeddings.assign(rows)
    model.target_embedding.token_embedding.embeddings.assign(rows)
    bias = tensors["final_logits_bias"].reshape(-1)
    model.output_bias.bias.assign(np.where(order >= 0, bias[np.maximum(order, 0)], SPARE_ROW_BIAS))
    for i, block in enumerate(model.encoder_blocks):
        prefix = f"model.encoder.layers.{i}"
        _copy_attention(block.self_attention, tensors, f"{prefix}.self_attn")
        _copy_norm(block.self_attention_norm, tensors, f"{prefix}.self_attn_layer_norm")
        _copy_feed_forward(block.feed_forward, tensors, prefix)
        _copy_norm(block.feed_forward_norm, tensors, f"{prefix}.final_layer_norm")
    for i, block in enumerate(model.decoder_blocks):
        prefix = f"model.decoder.layers.{i}"
        _copy_attention(block.self_attention, tensors, f"{prefix}.self_attn")
        _copy_norm(block.self_attention_norm, tensors, f"{prefix}.self_attn_layer_norm")
        _copy_attention(block.cross_attention, tensors, f"{prefix}.encoder_attn")
        _copy_norm(block.cross_attention_norm, tensors, f"{prefix}.encoder_attn_layer_norm")
        _copy_feed_forward(block.feed_forward, tensors, prefix)
        _copy_norm(block.feed_forward_norm, tensors, f"{prefix}.final_layer_norm")


def decoding_config(directory, marian_config, model_config):
    """The `DecodingConfig` of the checkpoint's generation settings (Hugging Face's defaults otherwise).

    Beam search of `num_beams` with the power length penalty len^length_penalty;
    HF's max_length counts the decoder start, ours counts generated tokens.
    """
    path = os.path.join(directory, GENERATION_CONFIG_FILE)
    settings = read_json_object(path) if os.path.isfile(path) else marian_config
    where = path if os.path.isfile(path) else os.path.join(directory, CONFIG_FILE)
    for name, types in (("num_beams", int), ("max_length", int), ("length_penalty", float)):
        if settings.get(name) is not None:
            check_fields(settings, {name: types}, where)
    num_beams = settings.get("num_beams") or 1
    max_length = settings.get("max_length") or model_config.max_target_length + 1
    try:
        return DecodingConfig.for_beam_size(
            num_beams,
            length_penalty=float(settings.get("length_penalty", 1.0)),
            length_penalty_style="power",
            max_length=min(max_length - 1, model_config.max_target_length),
        )
    except ValueError as error:
        raise PresetError(f"{where}: {error}") from None


def tokenizers(directory, order, source_vocabulary, target_vocabulary):
    """The `Seq2SeqTokenizers` of a Marian directory, in our ids (needs TensorFlow)."""
    # Deferred, as every TensorFlow import of this module: the backbone
    # converts with numpy alone, for the JAX backend.
    from keras_tf.text.tokenizers import Seq2SeqTokenizers, SentencePieceVocabularyTokenizer

    protos = []
    for name in SPM_FILES:
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise ValueError(f"{directory}: no {name}; a Marian directory needs both SentencePiece models")
        with open(regular_file(path, 2**29), "rb") as file:
            protos.append(file.read())

    def ours(vocabulary):
        return list(RESERVED_TOKENS) + [vocabulary[i] for i in order[len(RESERVED_TOKENS):]]

    from google.protobuf.message import DecodeError

    try:
        return Seq2SeqTokenizers(
            SentencePieceVocabularyTokenizer(protos[0], ours(source_vocabulary)),
            SentencePieceVocabularyTokenizer(protos[1], ours(target_vocabulary)),
        )
    except DecodeError:
        raise PresetError(f"{directory}: {SPM_FILES} are not SentencePiece models") from None


def _read_marian(directory):
    """`(preprocessor, config, id order, Marian config)` of a local Marian directory.

    The weights stay unread.
    """
    # Deferred: TensorFlow (TF-Text), which the numpy weight conversion does not need.
    from keras_tf.text.preprocessor import Seq2SeqPreprocessor

    marian_config = read_marian_config(directory)
    source_vocabulary, target_vocabulary, unk_id = read_vocabularies(directory, marian_config)
    order = marian_id_order(marian_config, unk_id)
    config = transformer_config(marian_config)
    text = tokenizers(directory, order, source_vocabulary, target_vocabulary)
    preprocessor = Seq2SeqPreprocessor(text, config.max_source_length, config.max_target_length)
    return preprocessor, config, order, marian_config


def convert_preprocessor(path):
    """The `Seq2SeqPreprocessor` of a Marian directory or `hf://ORG/NAME`, without its weights."""
    preprocessor, *_ = _read_marian(resolve_marian_path(path))
    return preprocessor


@dataclasses.dataclass
class MarianModel:
    """What `convert` returns: the parts of a translator, which the preset loader assembles.

    Args:
        backbone: the `Seq2SeqTransformer`, Marian's weights copied in.
        config: its `TransformerConfig`.
        preprocessor: the `Seq2SeqPreprocessor` of Marian's SentencePiece
            models and vocabulary, in our ids.
        decoding: the `DecodingConfig` of the checkpoint's generation
            settings (beam size, len^alpha length penalty, max_length).
    """

    backbone: object
    config: object
    preprocessor: object
    decoding: object


def convert(path):
    """The parts of a Hugging Face Marian directory or `hf://ORG/NAME`: a `MarianModel`.

    `Seq2SeqTranslator.from_preset(path)` assembles them; `save_to_preset`
    then writes a keras_tf preset directory (`keras-tf import-marian`).

    Args:
        path: a directory, or `hf://Helsinki-NLP/opus-mt-en-de` (needs huggingface_hub).

    Returns:
        A `MarianModel` whose translator's greedy and beam outputs equal
        Hugging Face's `generate` (see docs/pretrained.md for the exceptions).
    """
    directory = resolve_marian_path(path)
    preprocessor, config, order, marian_config = _read_marian(directory)
    check_against_weights(directory, marian_config)  # before any layer is built
    backbone = Seq2SeqTransformer(config)
    copy_weights(backbone, read_weights(directory), order)
    decoding = decoding_config(directory, marian_config, config)
    return MarianModel(backbone, config, preprocessor, decoding)
