"""The decoding settings in one frozen dataclass, checked once against the model.

`generate`, `Seq2SeqTranslator`, the command line and the SavedModel export
all take a `DecodingConfig`; `resolve(model_config)` is the one place where
the settings are validated and the defaults that depend on the model (the
longest output) are filled in.
"""

import dataclasses

from keras_tf.decoding.beam_search import LENGTH_PENALTY_STYLES
from keras_tf.frozen_config import ConfigMethods, is_int, is_number
from keras_tf.special_tokens import END_ID

METHODS = ("greedy", "beam", "top_k", "top_p")


@dataclasses.dataclass(frozen=True)
class DecodingConfig(ConfigMethods):
    """How to turn a source into a target: the search and its limits.

    Args:
        method: `"greedy"` (default), `"beam"`, `"top_k"` or `"top_p"`.
        beam_size: hypotheses kept by beam search. Defaults to 4.
        length_penalty: α of beam search's length penalty. Defaults to 0.6.
        length_penalty_style: `"gnmt"` (default), GNMT's ((5 + len) / 6)^α,
            or `"power"`, len^α, as Hugging Face's `generate` and Marian
            divide by (len counts the generated tokens, END included).
        max_length: the most target tokens to generate, END included, at
            most the model's `max_target_length`. Defaults to None: that
            maximum.
        max_source_length: the longest encoder input, END included, when
            strings are translated: a source keeps its first
            `max_source_length - 1` subword ids, the training pipeline's
            rule. Defaults to None: the model's `max_source_length`.
        top_k: tokens kept by `"top_k"` sampling. Defaults to 50.
        top_p: probability mass kept by `"top_p"` sampling. Defaults to 0.9.
        temperature: divides the logits before sampling. Defaults to 1.
        end_id: the token that ends a sequence; None generates exactly
            `max_length` tokens. Defaults to `END_ID`.

    Example:
        >>> from keras_tf.models import get_preset
        >>> decoding = DecodingConfig(method="beam", beam_size=2)
        >>> decoding.resolve(get_preset("transformer_tiny")).max_length
        64
        >>> DecodingConfig(method="sample")
        Traceback (most recent call last):
        ...
        ValueError: DecodingConfig.method must be one of ('greedy', 'beam', 'top_k', 'top_p'); received method='sample'
    """

    method: str = "greedy"
    beam_size: int = 4
    length_penalty: float = 0.6
    length_penalty_style: str = "gnmt"
    max_length: int = None
    max_source_length: int = None
    top_k: int = 50
    top_p: float = 0.9
    temperature: float = 1.0
    end_id: int = END_ID

    def __post_init__(self):
        # Checks that need no model; `resolve` adds the ones that do.
        if self.method not in METHODS:
            raise ValueError(
                f"DecodingConfig.method must be one of {METHODS}; received method={self.method!r}"
            )
        if not is_int(self.beam_size) or self.beam_size < 1:
            raise ValueError(
                "DecodingConfig.beam_size must be a positive integer; "
                f"received beam_size={self.beam_size!r}"
            )
        if not is_number(self.length_penalty):
            raise ValueError(
                "DecodingConfig.length_penalty must be a number; "
                f"received length_penalty={self.length_penalty!r}"
            )
        if self.length_penalty_style not in LENGTH_PENALTY_STYLES:
            raise ValueError(
                f"DecodingConfig.length_penalty_style must be one of {LENGTH_PENALTY_STYLES}; "
                f"received length_penalty_style={self.length_penalty_style!r}"
            )
        if self.max_length is not None and (not is_int(self.max_length) or self.max_length < 1):
            raise ValueError(
                "DecodingConfig.max_length must be a positive integer (the number of tokens "
                f"to generate) or None; received max_length={self.max_length!r}"
            )
        if self.max_source_length is not None and (
            not is_int(self.max_source_length) or self.max_source_length < 2
        ):
            raise ValueError(
                "DecodingConfig.max_source_length must be an integer >= 2 (END included) "
                f"or None; received max_source_length={self.max_source_length!r}"
            )
        if not is_int(self.top_k) or self.top_k < 1:
            raise ValueError(
                f"DecodingConfig.top_k must be a positive integer; received top_k={self.top_k!r}"
            )
        if not is_number(self.top_p) or not 0.0 < self.top_p <= 1.0:
            raise ValueError(
                f"DecodingConfig.top_p must be in (0, 1]; received top_p={self.top_p!r}"
            )
        if not is_number(self.temperature) or not self.temperature > 0.0:
            raise ValueError(
                "DecodingConfig.temperature must be positive; "
                f"received temperature={self.temperature!r}"
            )
        if self.end_id is not None and (not is_int(self.end_id) or self.end_id < 0):
            raise ValueError(
                "DecodingConfig.end_id must be a token id or None; "
                f"received end_id={self.end_id!r}"
            )

    def resolve(self, model_config):
        """These settings checked against a model, with its limits filled in.

        Fields that the method does not read are set to fixed values, so two
        configs that decode alike compare equal (and share a compiled program).

        Args:
            model_config: the model's `TransformerConfig`.

        Returns:
            A `DecodingConfig` with `max_length` and `max_source_length` set.
        """
        c = model_config
        max_length = c.max_target_length if self.max_length is None else self.max_length
        if max_length > c.max_target_length:
            raise ValueError(
                f"max_length={max_length} is beyond the model's positional range: "
                f"max_target_length={c.max_target_length}"
            )
        max_source_length = (
            c.max_source_length if self.max_source_length is None else self.max_source_length
        )
        if max_source_length > c.max_source_length:
            raise ValueError(
                f"max_source_length={max_source_length} is beyond the model's positional "
                f"range: max_source_length={c.max_source_length}"
            )
        if self.method == "beam" and 2 * self.beam_size > c.target_vocabulary_size:
            raise ValueError(
                f"beam_size={self.beam_size} needs 2 * beam_size <= the target vocabulary "
                f"size {c.target_vocabulary_size}"
            )
        if self.method == "top_k" and self.top_k > c.target_vocabulary_size:
            raise ValueError(
                f"top_k must be an integer in [1, {c.target_vocabulary_size}]; "
                f"received top_k={self.top_k!r}"
            )
        if self.end_id is not None and self.end_id >= c.target_vocabulary_size:
            raise ValueError(
                f"end_id={self.end_id} is outside the target vocabulary of "
                f"{c.target_vocabulary_size} ids"
            )
        sampling = self.method in ("top_k", "top_p")
        return DecodingConfig(
            method=self.method,
            beam_size=self.beam_size if self.method == "beam" else 1,
            length_penalty=float(self.length_penalty) if self.method == "beam" else 0.0,
            length_penalty_style=self.length_penalty_style if self.method == "beam" else "gnmt",
            max_length=max_length,
            max_source_length=max_source_length,
            top_k=self.top_k if self.method == "top_k" else 1,
            top_p=float(self.top_p) if self.method == "top_p" else 1.0,
            temperature=float(self.temperature) if sampling else 1.0,
            end_id=self.end_id,
        )

    @classmethod
    def for_beam_size(cls, beam_size, **fields):
        """Greedy for `beam_size=1`, beam search otherwise: the command line's `--beam-size`."""
        method = "greedy" if beam_size == 1 else "beam"
        return cls(method=method, beam_size=beam_size, **fields)
