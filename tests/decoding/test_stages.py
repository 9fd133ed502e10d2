"""The loops run in stages over a growing cache: content kept, shapes per stage, no step after the end."""

import contextlib

import keras
import numpy as np
import pytest
from keras import ops

from keras_tf.decoding import beam_search, generate, greedy_search, stages, tile_beams
from keras_tf.decoding.generate import compiled_functions, make_step_fn
from keras_tf.decoding.stages import cache_lengths, grow_self_attention_cache
from keras_tf.layers.cache_update import in_place_writes, new_cache, position_axis, write_position
from keras_tf.models import END_ID, Seq2SeqTransformer, get_preset
from tests.decoding.conftest import random_sources

MAX_LENGTH = 40  # stages of 16, 32 and 40 positions, with the first set to 16 below
VOCABULARY = 4 + MAX_LENGTH + 1


@pytest.fixture(autouse=True)
def _short_first_cache_stage(monkeypatch):
    """Stages of 16, 32, ... so that short sequences cross them (64 in use)."""
    monkeypatch.setattr(stages, "FIRST_CACHE_LENGTH", 16)


def reorder_rows(cache, rows):
    """`beam_search`'s reorder for self-attention caches: every leaf gathered along its rows (axis 1)."""
    return keras.tree.map_structure(lambda leaf: ops.take(leaf, rows, axis=1), cache)


def counting_step_fn(seen_lengths, calls=None):
    """Writes 1 at position `index` of the cache, then predicts token 4 + (sum of the cache).

    The sum is the number of steps so far only if every stage kept what
    the earlier ones wrote.
    """

    def step_fn(tokens, cache, index):
        if calls is not None:
            calls.append(1)
        (keys, values) = cache[0]  # new_cache(rows, length, 1, 1): rows on axis 1 in either layout
        seen_lengths.add(keys.shape[position_axis()])
        ones = ops.ones((keys.shape[1], 1, 1))
        keys, values = write_position((keys, values), index, (ones, ones))
        count = ops.cast(ops.sum(keys, axis=(0, 2, 3)), "int32")  # [rows]
        logits = ops.one_hot(4 + count, VOCABULARY) * 10.0
        return logits, [(keys, values)]

    return step_fn


def test_cache_lengths_double_from_the_first_up_to_max_length():
    for first in (16, 64):
        for max_length in (1, 15, 16, 17, 64, 100, 256):
            lengths = cache_lengths(max_length, first)
            assert lengths[-1] == max_length and lengths == sorted(set(lengths))
            assert all(n == first * 2**i for i, n in enumerate(lengths[:-1]))
            assert len(lengths) == 1 or lengths[-2] < max_length <= 2 * lengths[-2]


def test_greedy_and_beam_keep_the_cache_across_stages():
    expected = np.arange(5, 5 + MAX_LENGTH)
    for search, extra in ((greedy_search, {}), (beam_search, {"beam_size": 3})):
        seen = set()
        rows = 2 * extra.get("beam_size", 1)
        cache = [new_cache(rows, cache_lengths(MAX_LENGTH)[0], 1, 1, "float32")]
        if search is beam_search:
            extra["reorder_cache"] = reorder_rows
        tokens, _ = search(counting_step_fn(seen), cache, 2, MAX_LENGTH, end_id=None,
                           grow_cache=grow_self_attention_cache, **extra)
        tokens = ops.convert_to_numpy(tokens)
        best = tokens[:, 0] if tokens.ndim == 3 else tokens
        np.testing.assert_array_equal(best, np.tile(expected, (2, 1)), err_msg=search.__name__)
        assert seen == {16, 32, 40}, (search.__name__, seen)


def test_no_step_runs_after_every_sequence_ended():
    calls = []
    end_at_step_3 = counting_step_fn(set(), calls)

    def step_fn(tokens, cache, index):
        logits, cache = end_at_step_3(tokens, cache, index)
        return ops.where(ops.equal(index, 3), ops.one_hot(ops.full((2,), END_ID), VOCABULARY),
                         logits), cache

    cache = [new_cache(2, 16, 1, 1, "float32")]
    tokens, _ = greedy_search(step_fn, cache, 2, MAX_LENGTH, grow_cache=grow_self_attention_cache)
    np.testing.assert_array_equal(ops.convert_to_numpy(tokens)[0, :5], [5, 6, 7, END_ID, 0])
    if keras.backend.backend() == "tensorflow":  # eager: one call per step that ran
        assert len(calls) == 4, len(calls)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the export's program")
@pytest.mark.parametrize("end_index", [2, 3, None])
def test_two_steps_per_iteration_without_xla_change_no_result(end_index):
    """The export's greedy loop runs two steps per iteration; a step after the end only pads.

    39 steps: stages of 16, 16 and 7 steps, the last with one step left
    over for a loop of one step per iteration.
    """
    max_length = 39
    results, calls = [], []
    for context in (contextlib.nullcontext(), in_place_writes()):
        with context:
            calls.append([])
            counting = counting_step_fn(set(), calls[-1])

            def step_fn(tokens, cache, index):
                logits, cache = counting(tokens, cache, index)
                if end_index is None:
                    return logits, cache
                end = ops.one_hot(ops.full((2,), END_ID), VOCABULARY)
                return ops.where(ops.equal(index, end_index), end, logits), cache

            cache = [new_cache(2, 16, 1, 1, "float32")]
            tokens, scores = greedy_search(step_fn, cache, 2, max_length,
                                           grow_cache=grow_self_attention_cache)
            results.append((ops.convert_to_numpy(tokens), ops.convert_to_numpy(scores)))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    steps = max_length if end_index is None else end_index + 1
    assert len(calls[0]) == steps
    # Two steps per iteration: one more after an odd number of steps, which
    # pads; never more than max_length.
    assert len(calls[1]) == min(steps + steps % 2, max_length), (len(calls[1]), steps)


def test_generate_traces_once_and_equals_one_fixed_cache_reordered_by_gather():
    """The staged greedy and beam programs against the loops over one 40-position cache.

    The reference beam search gathers every cache leaf into the new order at
    each step (`reorder_every_leaf`), as before the ancestor table.
    """
    sources = random_sources(3, 10, seed=4)
    keras.utils.set_random_seed(5)
    model = Seq2SeqTransformer(get_preset("transformer_tiny", tie_embeddings=False))
    encoder_tokens = ops.convert_to_tensor(np.pad(sources, ((0, 0), (0, 6))))
    cross = model.cross_attention_cache(model.encoder(encoder_tokens))

    got = generate(model, sources, max_length=MAX_LENGTH, end_id=None)
    fixed = greedy_search(make_step_fn(model, encoder_tokens, cross),
                          model.init_self_attention_cache(3, MAX_LENGTH), 3, MAX_LENGTH,
                          end_id=None)
    np.testing.assert_array_equal(got.tokens, ops.convert_to_numpy(fixed[0]))
    np.testing.assert_allclose(got.scores, ops.convert_to_numpy(fixed[1]), atol=1e-4)

    beam = generate(model, sources, max_length=MAX_LENGTH, method="beam", beam_size=3,
                    end_id=None, return_all_beams=True)
    fixed_tokens, fixed_scores = beam_search(
        make_step_fn(model, tile_beams(encoder_tokens, 3), tile_beams(cross, 3)),
        model.init_self_attention_cache(9, MAX_LENGTH), 3, MAX_LENGTH, beam_size=3, end_id=None,
        reorder_cache=reorder_rows,
    )
    np.testing.assert_array_equal(beam.tokens, ops.convert_to_numpy(fixed_tokens))
    np.testing.assert_allclose(beam.scores, ops.convert_to_numpy(fixed_scores), atol=1e-4)
    assert sorted(compiled_functions(model).values()) == [1, 1]  # one trace each
