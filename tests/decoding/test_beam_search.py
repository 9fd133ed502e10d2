import numpy as np
import pytest
from keras import ops

from keras_tf.decoding import beam_search, generate, gnmt_length_penalty
from keras_tf.models import END_ID, START_ID
from tests.decoding.conftest import MAX_LENGTH, random_sources, token_that_ends_some_rows_early

A, B = 4, 5
# Next-token probabilities given the last token; columns are ids 0..5
# (pad, unk, start, END, A, B). Greedy takes A and then A forever; the most
# probable sequence is B END (0.4 * 0.9 = 0.36).
NEXT = {
    START_ID: [0.0, 0.0, 0.0, 0.1, 0.5, 0.4],
    A: [0.0, 0.0, 0.0, 0.3, 0.4, 0.3],
    B: [0.0, 0.0, 0.0, 0.9, 0.05, 0.05],
}


def table_step_fn(tokens, cache, index):
    table = np.full((6, 6), 1e-9, dtype="float32")
    for token, probs in NEXT.items():
        table[token] = np.maximum(probs, 1e-9)
    return ops.take(ops.log(table), tokens[:, 0], axis=0), cache


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_finds_the_sequence_greedy_misses(alpha):
    tokens, scores = beam_search(
        table_step_fn, (), batch_size=1, max_length=6, beam_size=2, length_penalty=alpha,
        length_penalty_style="gnmt",
    )
    # B END, then A B END (0.5 * 0.3 * 0.9 = 0.135), both padded after END.
    np.testing.assert_array_equal(
        ops.convert_to_numpy(tokens)[0], [[B, END_ID, 0, 0, 0, 0], [A, B, END_ID, 0, 0, 0]]
    )
    expected = [np.log(0.36) / ((5 + 2) / 6) ** alpha, np.log(0.135) / ((5 + 3) / 6) ** alpha]
    np.testing.assert_allclose(ops.convert_to_numpy(scores)[0], expected, rtol=1e-5)


def test_beam_search_with_one_beam_is_greedy_on_the_table():
    tokens, _ = beam_search(table_step_fn, (), batch_size=1, max_length=4, beam_size=1)
    np.testing.assert_array_equal(ops.convert_to_numpy(tokens), [[[A, A, A, A]]])


def test_gnmt_length_penalty_values():
    np.testing.assert_allclose(
        ops.convert_to_numpy(gnmt_length_penalty(np.array([1, 7, 25]), 0.6)),
        [1.0, 2.0**0.6, 5.0**0.6],
        rtol=1e-6,
    )


def _end_id_for(model, sources):
    """A token the model's greedy output reaches early in some rows only."""
    tokens = generate(model, sources, max_length=MAX_LENGTH, end_id=None).tokens
    return token_that_ends_some_rows_early(tokens)


# Batch 16: issue 50 asks for the equalities at a batch of at least 16 too.
BATCH_SIZES = pytest.mark.parametrize("batch_size", [4, 16], ids=["batch4", "batch16"])


@BATCH_SIZES
def test_one_beam_equals_greedy_with_the_length_penalty(post_norm_model, batch_size):
    sources = random_sources(batch_size, 11, seed=5)
    end_id = _end_id_for(post_norm_model, sources)
    greedy = generate(post_norm_model, sources, max_length=MAX_LENGTH, end_id=end_id)
    gnmt = generate(
        post_norm_model, sources, max_length=MAX_LENGTH, method="beam", beam_size=1,
        length_penalty=0.6, length_penalty_style="gnmt", end_id=end_id,
    )
    # The default: the mean log-probability of a token, len^1.
    default = generate(post_norm_model, sources, max_length=MAX_LENGTH, method="beam",
                       beam_size=1, end_id=end_id)
    np.testing.assert_array_equal(gnmt.tokens, greedy.tokens)
    np.testing.assert_array_equal(default.tokens, greedy.tokens)
    lengths = np.where(greedy.tokens == end_id, np.arange(MAX_LENGTH), MAX_LENGTH - 1).min(1) + 1
    np.testing.assert_allclose(
        gnmt.scores * ((5.0 + lengths) / 6.0) ** 0.6, greedy.scores, rtol=1e-5
    )
    np.testing.assert_allclose(default.scores * lengths, greedy.scores, rtol=1e-5)


@BATCH_SIZES
@pytest.mark.parametrize("style", ["gnmt", "default"])
def test_beam_scores_equal_teacher_forced_log_probs_over_the_penalty(post_norm_model, batch_size,
                                                                     style):
    # GNMT α 0.6, or the default len^1: a hypothesis scores its mean token log-probability.
    penalty = {"gnmt": lambda length: ((5.0 + length) / 6.0) ** 0.6,
               "default": lambda length: float(length)}[style]
    settings = {"length_penalty": 0.6, "length_penalty_style": "gnmt"} if style == "gnmt" else {}
    sources = random_sources(batch_size, 11, seed=5)
    end_id = _end_id_for(post_norm_model, sources)
    out = generate(
        post_norm_model, sources, max_length=MAX_LENGTH, method="beam", beam_size=4,
        return_all_beams=True, end_id=end_id, **settings,
    )
    assert out.tokens.shape == (batch_size, 4, MAX_LENGTH) and out.scores.shape == (batch_size, 4)
    assert (np.diff(out.scores, axis=1) <= 0).all(), "n-best must be sorted, best first"
    if style == "gnmt":  # (len^1 favours the long: on this random model none ends early)
        assert (out.tokens == end_id).any(), "some hypotheses must end early"

    # Teacher-forced: the full model on START + each hypothesis.
    hypotheses = out.tokens.reshape(batch_size * 4, MAX_LENGTH)
    decoder_tokens = np.concatenate(
        [np.full((batch_size * 4, 1), START_ID, "int32"), hypotheses[:, :-1]], axis=1
    )
    logits = post_norm_model(
        {"encoder_tokens": np.repeat(sources, 4, axis=0), "decoder_tokens": decoder_tokens}
    )
    log_probs = ops.convert_to_numpy(ops.log_softmax(logits, axis=-1))
    token_log_probs = np.take_along_axis(log_probs, hypotheses[:, :, None], axis=-1)[..., 0]
    for row, hypothesis in enumerate(hypotheses):
        ends = np.flatnonzero(hypothesis == end_id)
        length = ends[0] + 1 if ends.size else MAX_LENGTH
        assert (hypothesis[length:] == 0).all(), "padding after END"
        expected = token_log_probs[row, :length].sum() / penalty(length)
        np.testing.assert_allclose(out.scores.reshape(-1)[row], expected, rtol=1e-4, atol=1e-4)
