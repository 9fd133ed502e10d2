"""The decoding settings in one frozen dataclass, checked once against the model.

`generate`, `Seq2SeqTranslator`, the command line and the SavedModel export
all take a `DecodingConfig`; `resolve(model_config)` is the one place where
the settings are validated and the defaults that depend on the model (the
longest output) are filled in.
"""

import dataclasses

from keras_tf.decoding.beam_search import LENGTH_PENALTY_STYLES
from keras_tf.frozen_config import MAX_INT, ConfigMethods, is_finite, is_int
from keras_tf.option_error import OptionError
from keras_tf.special_tokens import END_ID

METHODS = ("greedy", "beam", "top_k", "top_p")
# |length_penalty| at most: GNMT's ((5 + 512) / 6)^alpha overflows float32 from alpha ~ 20
# (len^alpha from ~ 14 at 512 tokens).
MAX_LENGTH_PENALTY = 10
# top_k when none is given, at most the target vocabulary size.
DEFAULT_TOP_K = 50
# Beam search's penalty form unless told; what a search without beams records.
DEFAULT_LENGTH_PENALTY_STYLE = "power"
# The hottest sampling: at temperature 100 the logits of a trained model are flat already.
MAX_TEMPERATURE = 100


@dataclasses.dataclass(frozen=True)
class DecodingConfig(ConfigMethods):
    """How to turn a source into a target: the search and its limits.

    Args:
        method: `"greedy"` (default), `"beam"`, `"top_k"` or `"top_p"`.
        beam_size: hypotheses kept by beam search. Defaults to 4.
        length_penalty: α of beam search's length penalty. Defaults to 1.0.
        length_penalty_style: `"power"` (default), len^α, as Hugging Face's
            `generate`, CTranslate2 and Marian divide by, or `"gnmt"`, GNMT's
            ((5 + len) / 6)^α (len counts the generated tokens, END
            included). len^1, the mean log-probability of a token, scored
            higher than GNMT α 0.6 on a Bible and a demo model
            (docs/benchmarks.md, "Which length penalty should beam search use?").
        max_length: the most target tokens to generate, END included, at
            most the model's `max_target_length`. Defaults to None: that
            maximum.
        max_source_length: the longest encoder input, END included, when
            strings are translated: a source keeps its first
            `max_source_length - 1` subword ids, the training pipeline's
            rule. Defaults to None: the model's `max_source_length`.
        top_k: tokens kept by `"top_k"` sampling, at most the target
            vocabulary size. Defaults to None: 50, or the whole vocabulary
            when it is smaller (Hugging Face's bound).
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
        keras_tf.option_error.OptionError: method='sample': must be one of ('greedy', 'beam', 'top_k', 'top_p')
    """

    method: str = "greedy"
    beam_size: int = 4
    length_penalty: float = 1.0
    length_penalty_style: str = DEFAULT_LENGTH_PENALTY_STYLE
    max_length: int = None
    max_source_length: int = None
    top_k: int = None
    top_p: float = 0.9
    temperature: float = 1.0
    end_id: int = END_ID

    def __post_init__(self):
        # Checks that need no model; `resolve` adds the ones that do. Each
        # names its field: the command line shows it as its flag (OptionError).
        def fail(name, reason):
            raise OptionError([(name, getattr(self, name))], reason)

        def whole(name, least):
            value = getattr(self, name)
            if not (is_int(value) and least <= value <= MAX_INT):
                fail(name, f"must be a whole number in [{least}, {MAX_INT}]")

        if self.method not in METHODS:
            fail("method", f"must be one of {METHODS}")
        whole("beam_size", 1)
        if not (is_finite(self.length_penalty)
                and -MAX_LENGTH_PENALTY <= self.length_penalty <= MAX_LENGTH_PENALTY):
            fail(
                "length_penalty",
                f"must be a number in [-{MAX_LENGTH_PENALTY}, {MAX_LENGTH_PENALTY}] (beyond, "
                "the penalty of a long output overflows float32)",
            )
        if self.length_penalty_style not in LENGTH_PENALTY_STYLES:
            fail("length_penalty_style", f"must be one of {LENGTH_PENALTY_STYLES}")
        if self.max_length is not None:
            whole("max_length", 1)
        if self.max_source_length is not None:
            whole("max_source_length", 2)  # END included
        if self.top_k is not None:
            whole("top_k", 1)
        if not (is_finite(self.top_p) and 0.0 < self.top_p <= 1.0):
            fail("top_p", "must be a number in (0, 1]")
        if not (is_finite(self.temperature) and 0.0 < self.temperature <= MAX_TEMPERATURE):
            fail(
                "temperature",
                f"must be a number in (0, {MAX_TEMPERATURE}] (above, sampling is uniform: noise)",
            )
        if self.end_id is not None:
            whole("end_id", 0)

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
        top_k = min(DEFAULT_TOP_K, c.target_vocabulary_size) if self.top_k is None else self.top_k
        if self.method == "top_k" and top_k > c.target_vocabulary_size:
            raise OptionError(
                [("top_k", top_k)],
                f"must be at most the target vocabulary size, {c.target_vocabulary_size}",
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
            length_penalty_style=(self.length_penalty_style if self.method == "beam"
                                  else DEFAULT_LENGTH_PENALTY_STYLE),
            max_length=max_length,
            max_source_length=max_source_length,
            top_k=top_k if self.method == "top_k" else 1,
            top_p=float(self.top_p) if self.method == "top_p" else 1.0,
            temperature=float(self.temperature) if sampling else 1.0,
            end_id=self.end_id,
        )

    @classmethod
    def for_beam_size(cls, beam_size, **fields):
        """Greedy for `beam_size=1`, beam search otherwise: the command line's `--beam-size`."""
        method = "greedy" if beam_size == 1 else "beam"
        return cls(method=method, beam_size=beam_size, **fields)
