"""Beam search with alive and finished hypotheses and a length penalty (GNMT's or a power).

The bookkeeping follows tensorflow/models' `SequenceBeamSearch` (and
OpenNMT-tf): each step extends the `beam_size` alive hypotheses, keeps the
2·beam_size best extensions so that beam_size of them can stay alive even
when others end, and moves extensions that end into a separate set of
finished hypotheses, ranked by log-probability / penalty(length): GNMT's
((5 + length) / 6)^α, or length^α (`"power"`, Hugging Face's and
Marian's).

Where we deviate, as Hugging Face's beam search (transformers 5.x,
`early_stopping=False`) does:
- an extension that ends joins the finished set only if it ranks among
  the beam_size best extensions of its step (the hypotheses a beam of that
  size holds); tensorflow/models admits all 2·beam_size;
- a batch entry is done once it holds beam_size finished hypotheses and the
  worst of them scores at least as well as the best alive hypothesis would
  if it ended now; from then on it admits no finished hypothesis, so its
  result does not depend on the other entries of the batch. The search
  stops when every entry is done. tensorflow/models compares with the alive
  score penalised at the maximum length instead, which searches on for
  longer hypotheses that the penalty may favour.
Together these make `beam_size=1` exactly greedy search, whatever α. At
the last step every extension counts as ended, so a hypothesis cut at
`max_length` competes with those that ended, under the same score.

The step function and the cache work on `batch_size * beam_size` rows, the
beams of one batch entry next to each other (row `b * beam_size + k`); build
the initial cache and any constants `step_fn` closes over with `tile_beams`.
When beams are selected, `reorder_cache(cache, rows)` puts the cache in the
order of the new hypotheses: by default every leaf is gathered along its
first axis. `generate` passes one that reorders only a table of ancestor
rows, through which the attention reads the keys and values, so the cache
itself is never copied (`MultiHeadAttention.call_with_cache`).
"""

from keras import ops
from keras import tree

from keras_tf.decoding.greedy import check_max_length, exclude_unpickable, take_along_rows
from keras_tf.decoding.stages import staged_while_loop
from keras_tf.layers.cache_update import update_at
from keras_tf.special_tokens import END_ID, PAD_ID, START_ID

# Finite, so that sums and differences of masked scores stay finite.
_NEG_INF = -1e9


def gnmt_length_penalty(length, alpha):
    """((5 + length) / 6)^alpha, from Wu et al. 2016 (GNMT), section 7.

    Args:
        length: number of generated tokens, the end token included.
        alpha: strength; 0 disables the penalty.
    """
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


LENGTH_PENALTY_STYLES = ("gnmt", "power")


def power_length_penalty(length, alpha):
    """length^alpha, Hugging Face's `length_penalty` (and Marian's `--normalize`).

    Args:
        length: number of generated tokens, the end token included (at
            least 1: an empty prefix counts as 1).
        alpha: the exponent; 0 disables the penalty, 1 gives the mean
            log-probability per token.
    """
    return ops.power(ops.maximum(ops.cast(length, "float32"), 1.0), alpha)


def length_penalty_fn(style):
    """The penalty function of a style: `"gnmt"` or `"power"`."""
    if style not in LENGTH_PENALTY_STYLES:
        raise ValueError(
            f"length_penalty_style must be one of {LENGTH_PENALTY_STYLES}; "
            f"received length_penalty_style={style!r}"
        )
    return gnmt_length_penalty if style == "gnmt" else power_length_penalty


def tile_beams(x, beam_size, axis=0):
    """Repeat each batch row `beam_size` times: `[batch, ...]` -> `[batch * beam_size, ...]`.

    `x` may be a tensor or a nested structure of tensors (a per-layer cache);
    `axis` is its batch axis (0 for cross-attention keys and values, 1 for
    self-attention caches).
    """
    return tree.map_structure(lambda t: ops.repeat(t, beam_size, axis=axis), x)


def reorder_every_leaf(cache, rows):
    """Every leaf of `cache` gathered along its first axis at `rows`."""
    return tree.map_structure(lambda x: ops.take(x, rows, axis=0), cache)


def check_beam_size(beam_size):
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(
            f"beam_size must be a positive integer; received beam_size={beam_size!r}"
        )


def beam_search(
    step_fn,
    initial_cache,
    batch_size,
    max_length,
    beam_size=4,
    length_penalty=1.0,
    start_id=START_ID,
    end_id=END_ID,
    pad_id=PAD_ID,
    length_penalty_style="power",
    grow_cache=None,
    reorder_cache=None,
    first_cache_length=None,
):
    """Find the beam_size most probable sequences, length-normalised, per batch entry.

    Args:
        step_fn: `(tokens [batch*beam, 1], cache, index) -> (logits [batch*beam, V], cache)`.
        initial_cache: the cache before the first step, leaves `[batch*beam, ...]`.
        batch_size: number of source sequences.
        max_length: number of tokens to generate at most.
        beam_size: hypotheses kept per batch entry. Defaults to 4.
        length_penalty: α of the length penalty. Defaults to 1.0.
        start_id: the token fed at position 0. Defaults to `START_ID`.
        end_id: the token that ends a hypothesis; None disables it.
            Defaults to `END_ID`.
        pad_id: what follows the end token. Defaults to `PAD_ID`.
        length_penalty_style: `"power"` (default), length^α, or `"gnmt"`,
            ((5 + length) / 6)^α.
        grow_cache: `(cache, length) -> cache`: run in stages over a growing
            cache (`stages.py`). Defaults to None, one fixed cache.
        reorder_cache: `(cache, rows) -> cache` where row i of the new order
            continues the hypothesis of row `rows[i]`, int32 `[batch*beam]`.
            Defaults to gathering every leaf along its first axis.
        first_cache_length: the length of `initial_cache` when it grows.
            Defaults to `stages.FIRST_CACHE_LENGTH`.

    Returns:
        `(tokens, scores)`: int32 `[batch, beam, max_length]`, the finished
        hypotheses, best first (end token included, `pad_id` after it), and
        float32 `[batch, beam]`, each hypothesis' summed log-probability
        divided by the penalty of its length.

    Example:
        >>> from keras import ops
        >>> def step_fn(tokens, cache, index):  # END is the likeliest token
        ...     return ops.log(ops.tile([[0.1, 0.1, 0.1, 0.6, 0.1]], (2, 1))), cache
        >>> tokens, scores = beam_search(step_fn, (), 1, 3, beam_size=2)
        >>> ops.convert_to_numpy(tokens[0, 0]).tolist()
        [3, 0, 0]
    """
    check_max_length(max_length)
    check_beam_size(beam_size)
    penalty = length_penalty_fn(length_penalty_style)
    if reorder_cache is None:
        reorder_cache = reorder_every_leaf
    batch, beam = batch_size, beam_size

    # alive_tokens: [batch, beam, max_length]; alive_log_probs: [batch, beam].
    # Only the first beam is live at the start, so the first step extends
    # one hypothesis rather than beam_size copies of it.
    alive_tokens = ops.full((batch, beam, max_length), pad_id, dtype="int32")
    alive_log_probs = ops.tile(
        ops.convert_to_tensor([[0.0] + [_NEG_INF] * (beam - 1)], dtype="float32"),
        (batch, 1),
    )
    last = ops.full((batch * beam, 1), start_id, dtype="int32")
    # finished_*: the same shapes; scores are length-normalised.
    finished_tokens = ops.full((batch, beam, max_length), pad_id, dtype="int32")
    finished_scores = ops.full((batch, beam), _NEG_INF, dtype="float32")
    finished_flags = ops.zeros((batch, beam), dtype="bool")
    # done: [batch], the entries that admit no more finished hypotheses.
    done = ops.zeros((batch,), dtype="bool")
    index = ops.convert_to_tensor(0, dtype="int32")

    def cond(index, alive_tokens, alive_log_probs, last,
             finished_tokens, finished_scores, finished_flags, done, cache):
        return ops.logical_not(ops.all(done))

    def body(index, alive_tokens, alive_log_probs, last,
             finished_tokens, finished_scores, finished_flags, done, cache):
        logits, cache = step_fn(last, cache, index)
        # log_probs: [batch, beam, V]
        log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
        vocabulary_size = log_probs.shape[-1]
        log_probs = ops.reshape(log_probs, (batch, beam, vocabulary_size))
        # Extensions of every alive hypothesis by every token but padding and start:
        # [batch, beam * V].
        extended = ops.reshape(
            alive_log_probs[:, :, None] + exclude_unpickable(log_probs, pad_id, start_id),
            (batch, beam * vocabulary_size),
        )
        # The 2·beam best extensions: [batch, 2 * beam].
        top_log_probs, top_indices = ops.top_k(extended, k=2 * beam, sorted=True)
        top_indices = ops.cast(top_indices, "int32")
        top_parents = top_indices // vocabulary_size
        top_new_tokens = top_indices % vocabulary_size
        top_tokens = take_along_rows(alive_tokens, top_parents)
        top_tokens = update_at(top_tokens, index, top_new_tokens[:, :, None], axis=2)
        if end_id is None:
            ends = ops.zeros_like(top_new_tokens, dtype="bool")
        else:
            ends = ops.equal(top_new_tokens, end_id)
        ends = ops.logical_or(ends, ops.equal(index, max_length - 1))

        # New alive set: the beam best extensions that did not end.
        alive_candidates = ops.where(ends, _NEG_INF, top_log_probs)
        alive_log_probs, alive_positions = ops.top_k(alive_candidates, k=beam, sorted=True)
        alive_tokens = take_along_rows(top_tokens, alive_positions)
        alive_new_tokens = take_along_rows(top_new_tokens, alive_positions)
        last = ops.reshape(alive_new_tokens, (batch * beam, 1))
        # Reorder the cache rows to follow their hypotheses: [batch * beam].
        parents = take_along_rows(top_parents, alive_positions)
        rows = ops.reshape(parents + ops.arange(batch, dtype="int32")[:, None] * beam, (-1,))
        cache = reorder_cache(cache, rows)

        # New finished set: the beam best among the old ones and the
        # extensions that ended within the beam best extensions, unless
        # the entry is done.
        in_beam = ops.arange(2 * beam, dtype="int32")[None, :] < beam
        ends = ops.logical_and(ends, ops.logical_and(in_beam, ops.logical_not(done)[:, None]))
        ended_scores = top_log_probs / penalty(index + 1, length_penalty)
        ended_scores = ops.where(ends, ended_scores, _NEG_INF)
        scores = ops.concatenate([finished_scores, ended_scores], axis=1)
        flags = ops.concatenate([finished_flags, ends], axis=1)
        tokens = ops.concatenate([finished_tokens, top_tokens], axis=1)
        finished_scores, positions = ops.top_k(scores, k=beam, sorted=True)
        finished_flags = take_along_rows(flags, positions)
        finished_tokens = take_along_rows(tokens, positions)

        # Done: beam finished hypotheses, none worse than the best alive one
        # would score if it ended now, at index + 1 tokens.
        best_alive = alive_log_probs[:, 0] / penalty(index + 1, length_penalty)
        worst_finished = ops.min(finished_scores, axis=1)
        done = ops.logical_or(
            done,
            ops.logical_and(ops.all(finished_flags, axis=1), worst_finished >= best_alive),
        )
        return (index + 1, alive_tokens, alive_log_probs, last,
                finished_tokens, finished_scores, finished_flags, done, cache)

    outputs = staged_while_loop(
        cond,
        body,
        (index, alive_tokens, alive_log_probs, last,
         finished_tokens, finished_scores, finished_flags, done, initial_cache),
        max_length,
        grow_cache,
        first_cache_length,
    )
    return outputs[4], outputs[5]
