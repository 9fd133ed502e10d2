"""Draw the cross-attention of a trained model for one sentence: generated tokens × source tokens.

    keras-tf attention --model run1 --text "Save the notebook" --out map.png
    keras-tf attention --model run1 --text "Save the notebook" --out map.png --layer 1 --head 0

The sentence is translated greedily; then one teacher-forced pass over the
translation gives the encoder-decoder attention weights of every decoder layer
and head (`Seq2SeqTranslator.cross_attention`). Row t shows where the
model looked while generating token t. By default the weights are averaged
over layers and heads; --layer and --head (counted from 0) pick one.
"""

from keras_tf.cli.errors import UserError, int_in_range
from keras_tf.cli.outputs import check_output, write_output


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


def draw(translator, text, path, layer=None, head=None):
    """Draw the cross-attention behind the translation of `text` to `path`; return it."""
    from keras_tf.plots import attention_heatmap

    check_layer_and_head(translator.config, layer, head)
    attention = translator.cross_attention(text)
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
    check_output(args.out, "--out")
    trained = load_model_dir(args.model)
    check_layer_and_head(trained.model.config, args.layer, args.head)
    attention = write_output(
        args.out, lambda path: draw(trained.translator, args.text, path, args.layer, args.head)
    )
    print(f"{args.out}: {args.text!r} -> {attention.translation!r}")
    return 0
