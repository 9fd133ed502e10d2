"""`generate` for `Seq2SeqTransformer`: checks, source-length buckets, one XLA program per shape.

The loops (`greedy.py`, `beam_search.py`, `sampling.py`) are written with
`keras.ops` over a step function; here they are fed the model's `encoder`,
`cross_attention_cache` and `decoder_step` sub-models and compiled with the
backend's XLA entry point (`compile.py`): `tf.function(jit_compile=True)` on
TensorFlow, `jax.jit` on JAX.

One compiled function is kept per model and per (batch size, source bucket,
max_length, method and its settings). Sources are padded to the next power
of two (at least 16, at most `max_source_length`), so varying inputs reuse a
few compiled shapes. Padding the source changes nothing: padded positions
are masked out of every attention.
"""

import collections
import functools
import weakref

import keras
import numpy as np
from keras import ops

from keras_tf.decoding.beam_search import beam_search
from keras_tf.decoding.compile import xla_compile
from keras_tf.decoding.config import DecodingConfig
from keras_tf.decoding.greedy import exclude_unpickable, greedy_search
from keras_tf.decoding.sampling import sample_search
from keras_tf.decoding.stages import cache_lengths, first_cache_length, grow_self_attention_cache
from keras_tf.layers.cache_update import update_at
from keras_tf.layers.dense_call import step_weights_once
from keras_tf.layers.multi_head_attention import fused_step_projections
from keras_tf.frozen_config import MAX_SEED, is_int
from keras_tf.option_error import OptionError
from keras_tf.buckets import source_bucket, source_buckets  # noqa: F401  (re-exported by keras_tf.decoding)
from keras_tf.special_tokens import END_ID, PAD_ID, START_ID

Generation = collections.namedtuple("Generation", ["tokens", "scores"])
Generation.__doc__ = """What `generate` returns (numpy arrays).

tokens: int32 `[batch, max_length]` (or `[batch, beam_size, max_length]` with
    `return_all_beams`): generated ids, start token excluded, end token
    included, padding (0) after it.
scores: float32 `[batch]` (or `[batch, beam_size]`): summed log-probabilities;
    for beam search divided by the length penalty.
"""


def make_step_fn(model, encoder_tokens, cross_attention_cache):
    """The step function of `model` for a fixed source batch.

    Args:
        model: a `Seq2SeqTransformer`.
        encoder_tokens: int32 `[batch, S]`, for the source padding mask.
        cross_attention_cache: `model.cross_attention_cache(memory)`.

    Returns:
        `step_fn(tokens [batch, 1], self_attention_cache, index) ->
        (logits [batch, V], self_attention_cache)`.
    """

    def step_fn(tokens, cache, index):
        logits, cache = model.decoder_step(
            {
                "decoder_tokens": tokens,
                "encoder_tokens": encoder_tokens,
                "cross_attention_cache": cross_attention_cache,
                "self_attention_cache": cache,
                "cache_index": index,
            }
        )
        return logits[:, -1, :], cache

    return step_fn


def make_beam_step_fn(model, encoder_tokens, cross_attention_cache):
    """`make_step_fn` for beam search over `(self_attention_cache, cache_rows)`.

    `cache_rows` int32 `[rows, max_length]` says which cache row holds each
    position of each hypothesis: the step writes its keys and values into
    its own row, marks position `index` as its own, and reads the earlier
    positions from its ancestors' rows. `reorder_cache_rows` is the
    matching `reorder_cache` of `beam_search`: it reorders only that table.
    `encoder_tokens` and `cross_attention_cache` hold one row per source, not
    per hypothesis: the beams of a source, next to each other, share them.
    """

    def step_fn(tokens, cache, index):
        self_attention_cache, cache_rows = cache
        rows = ops.shape(cache_rows)[0]
        own = ops.arange(rows, dtype="int32")[:, None]
        cache_rows = update_at(cache_rows, index, own, axis=1)
        logits, self_attention_cache = model.beam_decoder_step(
            {
                "decoder_tokens": tokens,
                "encoder_tokens": encoder_tokens,
                "cross_attention_cache": cross_attention_cache,
                "self_attention_cache": self_attention_cache,
                "cache_index": index,
                "cache_rows": cache_rows,
            }
        )
        return logits[:, -1, :], (self_attention_cache, cache_rows)

    return step_fn


def reorder_cache_rows(cache, rows):
    """`beam_search`'s `reorder_cache` for `make_beam_step_fn`: new hypothesis i inherits row rows[i]'s ancestry."""
    self_attention_cache, cache_rows = cache
    return self_attention_cache, ops.take(cache_rows, rows, axis=0)


def grow_beam_cache(cache, length):
    """`grow_self_attention_cache` for `(self_attention_cache, cache_rows)`."""
    self_attention_cache, cache_rows = cache
    extra = length - cache_rows.shape[1]
    # Positions not written yet: masked, so any row will do.
    return (grow_self_attention_cache(self_attention_cache, length),
            ops.pad(cache_rows, [(0, 0), (0, extra)]))


def decode_ids(model, encoder_tokens, decoding, seed_generator=None):
    """The decode driver: the encoder once, cross-attention keys and values once, then the loop.

    `generate` compiles it for a known batch size; the SavedModel export
    traces it with the batch size known only at run time. Both pass settings
    already checked by `DecodingConfig.resolve`.

    Args:
        model: a `Seq2SeqTransformer`.
        encoder_tokens: int32 `[batch, S]`, padded with 0.
        decoding: a resolved `DecodingConfig`.
        seed_generator: a `keras.random.SeedGenerator`, for sampling only.

    Returns:
        `(tokens, scores)`: int32 `[batch, max_length]` and float32 `[batch]`;
        for beam search `[batch, beam_size, max_length]` and `[batch,
        beam_size]`, best first.
    """
    # In the export without XLA, once here, outside the loops: the int8
    # weights a step reads cast to float, the float biases repeated over the
    # step's rows (`step_weights_once`), and the q, k and v kernels of each
    # decoder self-attention concatenated for one matmul per step.
    step_layers = [*model.decoder_blocks, model.target_embedding, model.output_projection]
    step_layers = [layer for layer in step_layers if layer is not None]
    rows = _step_rows(ops.shape(encoder_tokens)[0], decoding)
    tied = [model.target_embedding.embeddings] if model.output_projection is None else []
    with step_weights_once(step_layers, rows, output_tables=tied), fused_step_projections(
        [block.self_attention for block in model.decoder_blocks]
    ):
        return _decode_ids(model, encoder_tokens, decoding, seed_generator)


def _step_rows(batch_size, decoding):
    """The rows a decoding step runs: one per source, or one per beam."""
    return batch_size * decoding.beam_size if decoding.method == "beam" else batch_size


def _decode_ids(model, encoder_tokens, decoding, seed_generator):
    s = decoding
    batch_size = ops.shape(encoder_tokens)[0]
    # memory: [batch, S, d_model]; the padding mask comes from encoder_tokens
    # in every step.
    memory = model.encoder(encoder_tokens)
    # cross: one (keys, values) pair, each [batch, heads, S, head_dim], per decoder block
    cross = model.cross_attention_cache(memory)
    # The self-attention cache starts at the first of `cache_lengths` and
    # grows between the loop's stages (`stages.py`); shorter first at large batches.
    rows = _step_rows(batch_size, s)
    first = first_cache_length(rows)
    first_length = cache_lengths(s.max_length, first)[0]
    loop_kwargs = dict(start_id=START_ID, end_id=s.end_id, pad_id=PAD_ID,
                       first_cache_length=first)
    if s.method == "beam":
        # The beams of a source share its cross-attention keys and values
        # (`MultiHeadAttention.step_with_key_value`): not tiled.
        step_fn = make_beam_step_fn(model, encoder_tokens, cross)
        cache = (
            model.init_self_attention_cache(rows, first_length),
            ops.zeros((rows, first_length), dtype="int32"),
        )
        return beam_search(
            step_fn,
            cache,
            batch_size,
            s.max_length,
            beam_size=s.beam_size,
            length_penalty=s.length_penalty,
            length_penalty_style=s.length_penalty_style,
            grow_cache=grow_beam_cache,
            reorder_cache=reorder_cache_rows,
            **loop_kwargs,
        )
    step_fn = make_step_fn(model, encoder_tokens, cross)
    cache = model.init_self_attention_cache(batch_size, first_length)
    if s.method == "greedy":
        return greedy_search(step_fn, cache, batch_size, s.max_length,
                             grow_cache=grow_self_attention_cache, **loop_kwargs)
    return sample_search(
        step_fn,
        cache,
        batch_size,
        s.max_length,
        seed_generator,
        top_k=s.top_k if s.method == "top_k" else None,
        top_p=s.top_p if s.method == "top_p" else None,
        temperature=s.temperature,
        grow_cache=grow_self_attention_cache,
        **loop_kwargs,
    )


class _Compiled:
    """One XLA-compiled decoding function and the number of times it was traced."""

    def __init__(self, model, settings):
        self.traces = 0
        # Sampling reads its random stream from here; `generate` sets the
        # state from the seed before each call.
        self.seed_generator = None
        if settings.method in ("top_k", "top_p"):
            self.seed_generator = keras.random.SeedGenerator(0)

        # A weak reference: this entry lives in a dict keyed weakly by the model.
        self.model_ref = weakref.ref(model)
        self.settings = settings
        # A partial, not a closure: tf.function keys its retracing warning on
        # the function's code, which all closures would share.
        self.function = xla_compile(functools.partial(self._trace), self._variables)

    def _variables(self):
        seed_state = [self.seed_generator.state] if self.seed_generator else []
        return list(self.model_ref().variables) + seed_state

    def _trace(self, encoder_tokens):
        self.traces += 1
        return decode_ids(self.model_ref(), encoder_tokens, self.settings, self.seed_generator)


def _compiled_decoders(model):
    """The model's own dict of compiled decoders, `{(batch, source bucket, settings): _Compiled}`.

    It lives on the model (`Seq2SeqBackbone.compiled_decoders`), so it goes
    with the model, and the model clears it when its variables change
    (`quantize`, `enable_lora`): a program traced before reads the old ones.
    """
    return model.compiled_decoders


def compiled_functions(model):
    """The compiled decoders of `model`: `{(batch, source_bucket, settings): traces}`."""
    return {key: entry.traces for key, entry in _compiled_decoders(model).items()}


def forget_compiled_functions(model):
    """Drop the compiled decoders of `model`, so the next `generate` traces again."""
    _compiled_decoders(model).clear()


def _check_encoder_tokens(model, encoder_tokens):
    c = model.config
    tokens = np.asarray(keras.ops.convert_to_numpy(encoder_tokens))
    if not np.issubdtype(tokens.dtype, np.integer):
        raise TypeError(
            f"encoder_tokens must be integer token ids; received dtype {tokens.dtype}"
        )
    if tokens.ndim != 2:
        raise ValueError(
            f"encoder_tokens must have rank 2 [batch, source_length]; received shape "
            f"{tokens.shape}"
        )
    if tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise ValueError(
            f"encoder_tokens is empty; received shape {tokens.shape}, expected at "
            "least one sequence of at least one token"
        )
    if tokens.shape[1] > c.max_source_length:
        raise ValueError(
            f"encoder_tokens has {tokens.shape[1]} tokens per sequence, more than the "
            f"model's max_source_length={c.max_source_length}"
        )
    low, high = int(tokens.min()), int(tokens.max())
    if low < 0 or high >= c.source_vocabulary_size:
        raise ValueError(
            f"encoder_tokens must be ids in [0, {c.source_vocabulary_size}); received "
            f"ids in [{low}, {high}]"
        )
    return tokens.astype("int32")


def generate(
    model,
    encoder_tokens,
    max_length=None,
    method="greedy",
    beam_size=4,
    length_penalty=1.0,
    length_penalty_style="power",
    top_k=None,
    top_p=0.9,
    temperature=1.0,
    seed=None,
    return_all_beams=False,
    end_id=END_ID,
    decoding=None,
):
    """Generate target token ids for a batch of sources, cached and compiled with XLA.

    Args:
        model: a `Seq2SeqTransformer`.
        encoder_tokens: int `[batch, source_length]` source ids, padded with 0.
        max_length: number of tokens to generate at most, at most the
            model's `max_target_length`. Defaults to `max_target_length`.
        method: "greedy", "beam", "top_k" or "top_p". Defaults to "greedy".
        beam_size: hypotheses kept by beam search. Defaults to 4.
        length_penalty: α of beam search's length penalty. Defaults to 1.0.
        length_penalty_style: `"power"`, len^α (default; Hugging Face's and
            CTranslate2's), or `"gnmt"`, ((5 + len) / 6)^α.
        top_k: tokens kept by "top_k" sampling. Defaults to None: 50, or
            the target vocabulary size when it is smaller.
        top_p: probability mass kept by "top_p" sampling. Defaults to 0.9.
        temperature: divides the logits before sampling. Defaults to 1.
        seed: int seed of sampling, in [0, 2**32 - 1]; the same seed gives
            the same tokens. Defaults to None (a fresh seed from numpy's
            global generator).
        return_all_beams: return all beam_size hypotheses of beam search,
            best first. Defaults to False (the best one).
        end_id: the token that ends a sequence; None generates exactly
            `max_length` tokens. Defaults to `END_ID`.
        decoding: a `DecodingConfig`; when given, it replaces all the
            settings above but `seed` and `return_all_beams`.

    Returns:
        A `Generation(tokens, scores)` of numpy arrays.

    Example:
        >>> import numpy as np
        >>> from keras_tf.models import Seq2SeqTransformer, get_preset
        >>> model = Seq2SeqTransformer(get_preset("transformer_tiny"))
        >>> out = generate(model, np.array([[5, 6, 7, 3]]), max_length=8)
        >>> out.tokens.shape, out.scores.shape
        ((1, 8), (1,))
    """
    if decoding is None:
        decoding = DecodingConfig(
            method=method, beam_size=beam_size, length_penalty=length_penalty,
            length_penalty_style=length_penalty_style, max_length=max_length, top_k=top_k, top_p=top_p, temperature=temperature,
            end_id=end_id,
        )
    if not isinstance(decoding, DecodingConfig):
        raise TypeError(
            f"decoding must be a keras_tf.decoding.DecodingConfig; received "
            f"{type(decoding).__name__}"
        )
    if seed is not None and not (is_int(seed) and 0 <= seed <= MAX_SEED):
        raise OptionError([("seed", seed)], f"must be a whole number in [0, {MAX_SEED}]")
    c = model.config
    settings = decoding.resolve(c)
    tokens = _check_encoder_tokens(model, encoder_tokens)
    batch_size, source_length = tokens.shape
    bucket = source_bucket(source_length, c.max_source_length)
    tokens = np.pad(tokens, ((0, 0), (0, bucket - source_length)), constant_values=PAD_ID)

    key = (batch_size, bucket, settings)
    compiled = _compiled_decoders(model)
    if key not in compiled:
        compiled[key] = _Compiled(model, settings)
    entry = compiled[key]
    if settings.method in ("top_k", "top_p"):
        if seed is None:
            seed = int(np.random.randint(0, 2**31 - 1))
        entry.seed_generator.state.assign(
            np.array([seed, 0], dtype=entry.seed_generator.state.dtype)
        )
    out_tokens, scores = entry.function(ops.convert_to_tensor(tokens, dtype="int32"))
    out_tokens = np.asarray(ops.convert_to_numpy(out_tokens))
    scores = np.asarray(ops.convert_to_numpy(scores))
    if settings.method == "beam" and not return_all_beams:
        out_tokens, scores = out_tokens[:, 0], scores[:, 0]
    return Generation(out_tokens, scores)


def greedy_search_uncached(model, encoder_tokens, max_length, end_id=END_ID):
    """Greedy decoding the tutorials' way: the full model on the whole prefix at every step.

    The reference that cached decoding must equal, and the baseline of
    `benchmarks/decode_speed.py`. Runs eagerly, without source buckets; the
    work of step t grows with t, so a sequence costs O(length²) decoder
    positions (and O(length³) attention scores).

    Returns:
        A `Generation(tokens, scores)` of numpy arrays, as `generate(...,
        method="greedy")` returns.
    """
    encoder_tokens = ops.convert_to_tensor(np.asarray(encoder_tokens), dtype="int32")
    batch_size = encoder_tokens.shape[0]
    prefix = np.full((batch_size, 1), START_ID, dtype="int32")
    finished = np.zeros((batch_size,), dtype=bool)
    scores = np.zeros((batch_size,), dtype="float32")
    for _ in range(max_length):
        logits = model(
            {"encoder_tokens": encoder_tokens, "decoder_tokens": ops.convert_to_tensor(prefix)}
        )
        logits = logits[:, -1, :]
        picked = ops.convert_to_numpy(ops.argmax(exclude_unpickable(logits), axis=-1))
        log_probs = ops.convert_to_numpy(ops.log_softmax(logits, axis=-1))
        picked = np.where(finished, PAD_ID, picked).astype("int32")
        scores += np.where(finished, 0.0, log_probs[np.arange(batch_size), picked])
        prefix = np.concatenate([prefix, picked[:, None]], axis=1)
        if end_id is not None:
            finished |= picked == end_id
            if finished.all():
                break
    tokens = np.full((batch_size, max_length), PAD_ID, dtype="int32")
    tokens[:, : prefix.shape[1] - 1] = prefix[:, 1:]
    return Generation(tokens, scores)
