"""The model's configuration in one frozen dataclass, and the named presets.

Variants are derived with `dataclasses.replace`, as flax's WMT example does:
`get_preset("transformer_base", source_vocabulary_size=32000)`.
"""

import dataclasses

from keras_tf.layers.positional_embedding import LAYOUTS as POSITIONAL_LAYOUTS

from keras_tf.frozen_config import ConfigMethods
from keras_tf.special_tokens import END_ID, PAD_ID, RESERVED_TOKENS, START_ID, UNK_ID  # noqa: F401  (the models face re-exports them)


@dataclasses.dataclass(frozen=True)
class TransformerConfig(ConfigMethods):
    """Hyper-parameters of the encoder-decoder Transformer.

    Args:
        source_vocabulary_size: size of the encoder's token vocabulary.
        target_vocabulary_size: size of the decoder's token vocabulary.
        d_model: width of every sub-layer output (the paper's d_model).
        num_heads: attention heads h; must divide `d_model`.
        d_ff: inner width of the position-wise feed-forward network.
        num_encoder_layers: N for the encoder stack.
        num_decoder_layers: N for the decoder stack.
        dropout: P_drop, applied to each sub-layer output and to the
            embedding sums.
        attention_dropout: dropout on the attention weights (0 in the paper).
        max_source_length: longest encoder input, in tokens.
        max_target_length: longest decoder input, in tokens.
        norm_first: False is the paper's post-norm; True gives pre-norm with
            a final LayerNorm after each stack, for deep stacks.
        tie_embeddings: share the target embedding matrix with the pre-softmax
            linear layer, as in section 3.4 of the paper.
        activation: the feed-forward activation (the paper's ReLU).
        layer_norm_epsilon: LayerNorm epsilon.
        positional_layout: where the sinusoids' sin and cos features go:
            `"interleaved"` (the paper: sin on even, cos on odd dimensions)
            or `"concatenated"` (all sines, then all cosines, as Marian and
            flax's WMT example lay them out).
        output_bias: add a trained bias vector to the float32 logits (BART
            and Marian's `final_logits_bias`), tied output layer or not.
    """

    source_vocabulary_size: int
    target_vocabulary_size: int
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    max_source_length: int = 256
    max_target_length: int = 256
    norm_first: bool = False
    tie_embeddings: bool = True
    activation: str = "relu"
    layer_norm_epsilon: float = 1e-5
    positional_layout: str = "interleaved"
    output_bias: bool = False

    def __post_init__(self):
        for name in (
            "source_vocabulary_size",
            "target_vocabulary_size",
            "d_model",
            "num_heads",
            "d_ff",
            "num_encoder_layers",
            "num_decoder_layers",
            "max_source_length",
            "max_target_length",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(
                    f"TransformerConfig.{name} must be a positive integer; "
                    f"received {name}={value!r}"
                )
        if self.d_model % self.num_heads:
            raise ValueError(
                "num_heads must divide d_model; received "
                f"d_model={self.d_model}, num_heads={self.num_heads}"
            )
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(
                    f"TransformerConfig.{name} must be in [0, 1); received {value!r}"
                )

        if self.positional_layout not in POSITIONAL_LAYOUTS:
            raise ValueError(
                f"TransformerConfig.positional_layout must be one of {POSITIONAL_LAYOUTS}; "
                f"received positional_layout={self.positional_layout!r}"
            )
        if not isinstance(self.output_bias, bool):
            raise ValueError(
                "TransformerConfig.output_bias must be True or False; "
                f"received output_bias={self.output_bias!r}"
            )

    @property
    def head_dim(self):
        """d_k = d_v = d_model / h."""
        return self.d_model // self.num_heads



PRESETS = {
    # For tests: trains in seconds on a CPU.
    "transformer_tiny": TransformerConfig(
        source_vocabulary_size=64,
        target_vocabulary_size=64,
        d_model=32,
        num_heads=4,
        d_ff=64,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dropout=0.0,
        max_source_length=64,
        max_target_length=64,
    ),
    # For the CPU demo and `keras-tf train`: minutes on 2 cores. No dropout:
    # at the epochs a CPU affords it learned faster on the reverse task, the
    # demo corpus (10 epochs of 2,442 pairs) and the Bible (docs/benchmarks.md);
    # a longer run gets the paper's (`planned_dropout`).
    "transformer_small": TransformerConfig(
        source_vocabulary_size=4000,
        target_vocabulary_size=4000,
        d_model=128,
        num_heads=4,
        d_ff=512,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dropout=0.0,
        max_source_length=64,
        max_target_length=64,
    ),
    # Table 3 of "Attention Is All You Need", base model.
    "transformer_base": TransformerConfig(
        source_vocabulary_size=37000,
        target_vocabulary_size=37000,
        d_model=512,
        num_heads=8,
        d_ff=2048,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dropout=0.1,
    ),
    # Table 3, big model.
    "transformer_big": TransformerConfig(
        source_vocabulary_size=37000,
        target_vocabulary_size=37000,
        d_model=1024,
        num_heads=16,
        d_ff=4096,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dropout=0.3,
    ),
}


# A preset without dropout learns faster in a short run and overfits in a
# long one: from scratch, a run that reads at least LONG_RUN_PAIRS training
# pairs (epochs x pairs) trains with the paper's P_drop instead. On the Bible
# (29,867 verses, transformer_small) the validation loss with 0.1 falls
# below that without from the 9th epoch (268,803 pairs), and at 45 minutes
# (16.6 epochs, the last 5 averaged) 0.1 scored 30.13 test BLEU (beam 4)
# against 29.72 with 0 (docs/benchmarks.md); below it, 0 won on the demo
# corpus (10 epochs of 2,442 pairs: 20.59 against 15.68) and on the Bible
# after 3 epochs (14.66 against 13.52).
LONG_RUN_PAIRS = 250_000
LONG_RUN_DROPOUT = 0.1


def planned_dropout(config, pairs_read):
    """The dropout of a from-scratch run that reads `pairs_read` training pairs.

    `config.dropout`, or `LONG_RUN_DROPOUT` where that is 0 and the run
    reads `LONG_RUN_PAIRS` pairs or more.

    Example:
        >>> small = get_preset("transformer_small")
        >>> planned_dropout(small, 10 * 2442), planned_dropout(small, 16 * 29867)
        (0.0, 0.1)
        >>> planned_dropout(get_preset("transformer_big"), 10)
        0.3
    """
    if config.dropout == 0 and pairs_read >= LONG_RUN_PAIRS:
        return LONG_RUN_DROPOUT
    return config.dropout


def get_preset(name, **overrides):
    """Return the named preset, with any fields overridden.

    Example:
        >>> get_preset("transformer_tiny", d_model=64).d_model
        64
    """
    if name not in PRESETS:
        raise ValueError(
            f"Unknown preset {name!r}; expected one of {sorted(PRESETS)}"
        )
    return PRESETS[name].replace(**overrides) if overrides else PRESETS[name]


# What each preset is for, in `list_presets`'s descriptions.
_PRESET_USES = {
    "transformer_tiny": "for tests, trains in seconds on a CPU",
    "transformer_small": "the CPU demo's and keras-tf train's default",
    "transformer_base": "the paper's base model (Table 3)",
    "transformer_big": "the paper's big model (Table 3)",
}


def list_presets():
    """The named presets, `{name: description}`: each is an untrained architecture.

    A preset name gives a model's shape with random weights, to be trained:
    `Seq2SeqTranslator.from_preset("transformer_small", tokenizers=...)`
    then `fit`. Trained weights come from a preset directory (what
    `save_to_preset` or `keras-tf train` writes) or from an OPUS-MT model
    (`from_preset("hf://Helsinki-NLP/opus-mt-en-de")`).

    Example:
        >>> print(list_presets()["transformer_small"])
        untrained architecture: d_model=128, 4 heads, d_ff=512, 2+2 layers, dropout 0.0; the CPU demo's and keras-tf train's default
    """
    return {
        name: (
            f"untrained architecture: d_model={config.d_model}, {config.num_heads} heads, "
            f"d_ff={config.d_ff}, {config.num_encoder_layers}+{config.num_decoder_layers} "
            f"layers, dropout {config.dropout}"
            + (f"; {_PRESET_USES[name]}" if name in _PRESET_USES else "")
        )
        for name, config in PRESETS.items()
    }
