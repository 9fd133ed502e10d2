"""DecodingConfig: defaults that cannot fail, and values that cannot pass."""

import numpy as np
import pytest

from keras_tf.decoding import DecodingConfig, generate
from keras_tf.models import Seq2SeqTransformer, get_preset
from keras_tf.option_error import OptionError


def small_vocabulary(size=16):
    return get_preset("transformer_tiny", num_encoder_layers=1, num_decoder_layers=1,
                      source_vocabulary_size=size, target_vocabulary_size=size)


def test_the_default_top_k_is_bounded_by_the_vocabulary():
    assert DecodingConfig(method="top_k").resolve(small_vocabulary(16)).top_k == 16
    assert DecodingConfig(method="top_k").resolve(get_preset("transformer_tiny")).top_k == 50
    with pytest.raises(OptionError, match="^top_k=50: must be at most the target vocabulary "
                                          "size, 16$"):
        DecodingConfig(method="top_k", top_k=50).resolve(small_vocabulary(16))


def test_sampling_with_the_default_top_k_on_a_small_vocabulary():
    model = Seq2SeqTransformer(small_vocabulary(16))
    out = generate(model, np.array([[5, 6, 3]]), max_length=4, method="top_k", seed=1)
    assert out.tokens.shape == (1, 4) and np.isfinite(out.scores).all()


@pytest.mark.parametrize("method", ["greedy", "top_k", "top_p"])
def test_a_search_without_beams_resolves_the_unused_penalty_to_the_default_style(method):
    # What an export's metadata and decoding.json record: the default form, not another one.
    resolved = DecodingConfig(method=method, length_penalty=0.6,
                              length_penalty_style="gnmt").resolve(get_preset("transformer_tiny"))
    assert resolved.length_penalty == 0.0
    assert resolved.length_penalty_style == DecodingConfig().length_penalty_style == "power"


@pytest.mark.parametrize("field", ["length_penalty", "top_p", "temperature"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e20])
def test_a_float_that_is_not_finite_and_in_range_is_refused(field, value):
    with pytest.raises(OptionError, match=f"^{field}="):
        DecodingConfig(**{field: value})


@pytest.mark.parametrize("field", ["beam_size", "max_length", "max_source_length", "top_k",
                                   "end_id"])
@pytest.mark.parametrize("value", [-1, 10**20, 2.0, True])
def test_a_whole_number_beyond_int32_or_not_whole_is_refused(field, value):
    with pytest.raises(OptionError, match=f"^{field}="):
        DecodingConfig(**{field: value})
