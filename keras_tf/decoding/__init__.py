"""Autoregressive decoding: model-agnostic loops over a step function, and `generate`."""

# keras_tf.models first (a floor below): its translator imports
# keras_tf.decoding.config, which needs beam_search, which needs
# keras_tf.models.config. In this order each finds what it imports complete,
# whichever keras_tf package a program imports first.
import keras_tf.models  # noqa: F401

from keras_tf.decoding.beam_search import (
    beam_search,
    gnmt_length_penalty,
    power_length_penalty,
    tile_beams,
)
from keras_tf.decoding.config import DecodingConfig
from keras_tf.decoding.generate import (
    Generation,
    compiled_functions,
    decode_ids,
    forget_compiled_functions,
    generate,
    greedy_search_uncached,
    make_step_fn,
    source_bucket,
    source_buckets,
)
from keras_tf.decoding.greedy import decode_token_by_token, greedy_search
from keras_tf.decoding.sampling import nucleus_mask, sample_search

__all__ = [
    "DecodingConfig",
    "Generation",
    "beam_search",
    "compiled_functions",
    "decode_ids",
    "decode_token_by_token",
    "forget_compiled_functions",
    "generate",
    "gnmt_length_penalty",
    "power_length_penalty",
    "greedy_search",
    "greedy_search_uncached",
    "make_step_fn",
    "nucleus_mask",
    "sample_search",
    "source_bucket",
    "source_buckets",
    "tile_beams",
]
