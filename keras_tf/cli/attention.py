"""Draw the cross-attention of a trained model for one sentence: generated tokens × source tokens.

    keras-tf attention --model run1 --text "Save the notebook" --out map.png
    keras-tf attention --model run1 --text "Save the notebook" --out map.png --layer 1 --head 0

The sentence is translated greedily; then one teacher-forced pass over the
translation (`Seq2SeqTransformer.attention_probe`) gives the encoder-decoder
attention weights of every decoder layer and head. Row t shows where the
model looked while generating token t. By default the weights are averaged
over layers and heads; --layer and --head (counted from 0) pick one.
"""

import dataclasses

import numpy as np

from keras_tf.cli.errors import UserError, int_in_range, writable_file


def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="DIR", help="from keras-tf train")
    parser.add_argument("--text", required=True, help="the source sentence")
    parser.add_argument("--out", required=True, metavar="FILE", help="the PNG to write")
    parser.add_argument(
        "--layer", metavar="N", type=int_in_range(0), help="decoder layer; default: average"
    )
    parser.add_argument(
        "--head", metavar="N", type=int_in_range(0), help="attention head; default: average"
    )


def vocabulary(tokenizer):
    """Every piece of a keras-hub SentencePiece or WordPiece tokenizer, by id.

    Read from the SentencePiece proto rather than through keras-hub's eager
    resource, which `tf.random.set_seed` can invalidate (tensorflow/text#570).
    """
    proto = getattr(tokenizer, "proto", None)
    if proto is None:
        return list(tokenizer.get_vocabulary())
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(proto)
    return [piece.piece for piece in model.pieces]


def token_names(tokenizer, ids):
    """The subword pieces of `ids`, reserved ids by their names ([END], ...)."""
    from keras_tf.models.config import RESERVED_TOKENS

    pieces = vocabulary(tokenizer)
    return [RESERVED_TOKENS[i] if i < len(RESERVED_TOKENS) else pieces[i] for i in ids]


@dataclasses.dataclass
class CrossAttention:
    """What `cross_attention` returns.

    Args:
        weights: float32 `[layers, heads, len(target_tokens), len(source_tokens)]`.
        source_tokens: the pieces of the encoder input (END included).
        target_tokens: the pieces generated (END included, when reached).
        translation: the generated text.
    """

    weights: np.ndarray
    source_tokens: list
    target_tokens: list
    translation: str


def cross_attention(model, tokenizers, text):
    """Translate `text` greedily; return the cross-attention behind each generated token.

    Returns:
        A `CrossAttention`.
    """
    from keras_tf.models.config import END_ID, START_ID
    from keras_tf.text import encode_source

    c = model.config
    # encoder_tokens: [1, S]; generated: [max_target_length], 0 after END.
    encoder_tokens = encode_source(tokenizers, [text], c.max_source_length).numpy()
    generated = model.generate(encoder_tokens, method="greedy").tokens[0]
    ends = np.flatnonzero(generated == END_ID)
    generated = generated[: ends[0] + 1] if len(ends) else generated
    # Teacher forcing on the model's own output: input t is token t - 1.
    decoder_tokens = np.concatenate([[START_ID], generated[:-1]]).astype("int32")[None]
    _, weights = model.attention_probe(
        {"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens}
    )
    # weights: [1, layers, heads, T, S]
    return CrossAttention(
        weights=np.asarray(weights, dtype="float32")[0],
        source_tokens=token_names(tokenizers.source_tokenizer, encoder_tokens[0]),
        target_tokens=token_names(tokenizers.target_tokenizer, generated),
        translation=tokenizers.detokenize_target(generated[None]).numpy()[0].decode("utf-8"),
    )


def check_layer_and_head(config, layer=None, head=None):
    """Raise `UserError` unless `layer` and `head` exist in a model of `config` (None: average)."""
    for name, value, count in (
        ("--layer", layer, config.num_decoder_layers),
        ("--head", head, config.num_heads),
    ):
        if value is not None and value >= count:
            raise UserError(
                f"{name} {value} is out of range: the model has {count} "
                f"{'decoder layers' if name == '--layer' else 'heads'}, numbered 0 to {count - 1}"
            )


def select(weights, layer=None, head=None):
    """Pick one layer and/or head of `[layers, heads, T, S]` weights, averaging the rest.

    Returns:
        `(weights [T, S], description)` for the figure title.
    """
    layers, heads = weights.shape[:2]
    weights = weights if layer is None else weights[layer : layer + 1]
    weights = weights if head is None else weights[:, head : head + 1]
    where = f"mean of {layers} layers" if layer is None else f"layer {layer}"
    which = f"mean of {heads} heads" if head is None else f"head {head}"
    return weights.mean(axis=(0, 1)), f"{where}, {which}"


def draw(model, tokenizers, text, path, layer=None, head=None):
    """Draw the cross-attention behind the translation of `text` to `path`; return it."""
    from keras_tf.plots import attention_heatmap

    check_layer_and_head(model.config, layer, head)
    attention = cross_attention(model, tokenizers, text)
    weights, description = select(attention.weights, layer, head)
    attention_heatmap(
        weights,
        attention.source_tokens,
        attention.target_tokens,
        path,
        title=f"Cross-attention, {description}\n{text!r} -> {attention.translation!r}",
    )
    return attention


def run(args):
    import keras_tf.plots  # noqa: F401  (needs matplotlib: fail before translating)
    from keras_tf.cli.model_dir import check_model_dir, load_model_dir

    check_model_dir(args.model)
    writable_file(args.out, "--out")
    trained = load_model_dir(args.model)
    check_layer_and_head(trained.model.config, args.layer, args.head)
    attention = draw(trained.model, trained.tokenizers, args.text, args.out, args.layer, args.head)
    print(f"{args.out}: {args.text!r} -> {attention.translation!r}")
    return 0
