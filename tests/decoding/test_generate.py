import numpy as np
import pytest

from keras_tf.decoding import compiled_functions, generate, source_bucket
from keras_tf.training import make_reverse_task
from tests.decoding.conftest import random_sources
from tests.helpers import shared_reverse_model


def test_source_buckets_are_powers_of_two_within_the_model_range():
    assert [source_bucket(n, 64) for n in (1, 16, 17, 33, 64)] == [16, 16, 32, 64, 64]
    assert source_bucket(50, 48) == 48


def test_a_second_call_with_the_same_shapes_does_not_retrace(post_norm_model):
    # Sources of 9 and 13 tokens share the bucket 16, so one compiled function.
    for length in (9, 13, 13):
        generate(post_norm_model, random_sources(2, length, seed=length), max_length=6)
    traces = [
        count for (batch, bucket, settings), count in compiled_functions(post_norm_model).items()
        if batch == 2 and settings.max_length == 6
    ]
    assert traces == [1]


def test_compiled_decoders_live_on_the_model_and_go_with_quantize(post_norm_model):
    from keras_tf.models import Seq2SeqTransformer

    model = Seq2SeqTransformer(post_norm_model.config)  # a model of its own to quantize
    generate(model, random_sources(2, 9, seed=9), max_length=6)
    assert len(model.compiled_decoders) == 1 and compiled_functions(model)
    model.quantize("int8")
    assert model.compiled_decoders == {} and compiled_functions(model) == {}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(max_length=0), "max_length=0: must be a whole number in \\[1, 2147483647\\]"),
        (dict(max_length=65), "beyond the model's positional range: max_target_length=64"),
        (dict(method="beam", beam_size=0), "beam_size=0: must be a whole number"),
        (dict(method="beam", beam_size=10**20), "beam_size=100000000000000000000: must be"),
        (dict(method="beam", beam_size=40), "2 \\* beam_size <= the target vocabulary"),
        (dict(method="nucleus"), "method=.nucleus.: must be one of"),
        (dict(method="top_k", top_k=0), "top_k=0: must be a whole number"),
        (dict(method="top_k", top_k=65), "top_k=65: must be at most the target vocabulary size, 64"),
        (dict(method="top_p", top_p=1.5), "top_p=1.5: must be a number in \\(0, 1\\]"),
        (dict(method="top_p", top_p=float("nan")), "top_p=nan: must be a number"),
        (dict(method="beam", length_penalty=float("nan")), "length_penalty=nan: must be a number"),
        (dict(method="beam", length_penalty=float("inf")), "length_penalty=inf: must be a number"),
        (dict(method="beam", length_penalty=1e20), "length_penalty=1e\\+20: must be a number"),
        (dict(method="top_p", temperature=float("inf")), "temperature=inf: must be a number"),
        (dict(method="top_p", temperature=float("nan")), "temperature=nan: must be a number"),
        (dict(method="top_k", seed=10**20), "seed=100000000000000000000: must be a whole number"),
        (dict(method="top_k", seed=-1), "seed=-1: must be a whole number in \\[0, 4294967295\\]"),
        (dict(encoder_tokens=np.zeros((0, 5), "int32")), "encoder_tokens is empty"),
        (dict(encoder_tokens=np.array([[5, 64]])), "ids in \\[0, 64\\); received ids in \\[5, 64\\]"),
        (dict(encoder_tokens=np.array([[5, -1]])), "ids in \\[0, 64\\)"),
        (dict(encoder_tokens=np.ones((1, 65), "int32")), "more than the model's max_source_length=64"),
        (dict(encoder_tokens=np.array([5, 6])), "rank 2"),
    ],
)
def test_bad_input_gets_a_clear_error(post_norm_model, kwargs, message):
    kwargs = {"encoder_tokens": np.array([[5, 6, 7]]), **kwargs}
    with pytest.raises(ValueError, match=message):
        generate(post_norm_model, **kwargs)


def test_float_ids_are_rejected(post_norm_model):
    with pytest.raises(TypeError, match="integer token ids; received dtype float32"):
        generate(post_norm_model, np.array([[5.0, 6.0]], "float32"))


@pytest.fixture(scope="module")
def reverse_model(tmp_path_factory):
    return shared_reverse_model(tmp_path_factory)


def test_free_running_reverse_task_exact_match(reverse_model):
    inputs, labels = make_reverse_task(200, seed=99)
    # labels: the reversed source, END, then padding: [200, 11].
    max_length = labels.shape[1]
    greedy = generate(reverse_model, inputs["encoder_tokens"], max_length=max_length)
    greedy_exact = (greedy.tokens == labels).all(axis=1).mean()
    beam = generate(
        reverse_model, inputs["encoder_tokens"], max_length=max_length, method="beam", beam_size=4
    )
    beam_exact = (beam.tokens == labels).all(axis=1).mean()
    assert greedy_exact >= 0.95, greedy_exact
    assert beam_exact >= greedy_exact, (beam_exact, greedy_exact)
