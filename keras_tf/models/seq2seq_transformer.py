"""The encoder-decoder Transformer with its output head: `Seq2SeqTransformer`."""

import gc

import keras
from keras import ops

from keras_tf.layers.cache_update import cache_shape, new_cache, position_axis
from keras_tf.layers.dense_call import dense_call
from keras_tf.models.seq2seq_backbone import Seq2SeqBackbone

# What `Seq2SeqTransformer.quantize` accepts: the `--quantize` choices of the CLI.
QUANTIZATION_MODES = ("int8",)


def _quantizable(layer):
    """The layers that hold the weight matrices: every Dense and Embedding."""
    return isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense, keras.layers.Embedding))


@keras.saving.register_keras_serializable(package="keras_tf")
class Seq2SeqTransformer(Seq2SeqBackbone):
    """The encoder-decoder Transformer of "Attention Is All You Need": the backbone and its head.

    A functional model: `{"encoder_tokens", "decoder_tokens"}` (int32,
    padding id 0) → logits over the target vocabulary (float32, softmax not
    applied). It is a `Seq2SeqBackbone` whose output goes through the
    paper's final linear layer: the target embedding used in reverse
    (section 3.4), or its own `Dense` when `tie_embeddings=False`. The
    decoding sub-models `encoder`, `cross_attention_cache` and
    `decoder_step` are functional models built from the *same layer
    objects*, so there is one forward pass, whether training or decoding.

    Args:
        config: a `TransformerConfig`, or the dict from `config.to_dict()`.
        dtype: optional dtype policy for all layers, e.g. "mixed_bfloat16".

    Example:
        >>> import numpy as np
        >>> from keras_tf.models import Seq2SeqTransformer, get_preset
        >>> model = Seq2SeqTransformer(get_preset("transformer_tiny"))
        >>> batch = {"encoder_tokens": np.array([[5, 6, 7, 0]]),
        ...          "decoder_tokens": np.array([[2, 7, 6]])}
        >>> tuple(model(batch).shape)
        (1, 3, 64)
    """

    @classmethod
    def from_preset(cls, preset, *, load_weights=True, dtype=None, **config_overrides):
        """Deprecated: `keras_tf.translation.presets.load_backbone(preset, ...)`."""
        import warnings

        # The one upward import of this floor, for one release: listed in
        # tests/test_layering.py's allow-list, marked for removal.
        from keras_tf.translation.presets import load_backbone

        warnings.warn(
            "Seq2SeqTransformer.from_preset is deprecated; use "
            "keras_tf.translation.presets.load_backbone (docs/migration.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        return load_backbone(
            preset, load_weights=load_weights, dtype=dtype, **config_overrides
        )

    def _build_layers(self, config, dtype):
        super()._build_layers(config, dtype)
        self.output_projection = None
        if not config.tie_embeddings:
            self.output_projection = keras.layers.Dense(
                config.target_vocabulary_size, dtype=dtype, name="output_projection"
            )
        self.output_bias = None
        if config.output_bias:
            self.output_bias = LogitsBias(config.target_vocabulary_size, name="output_bias")

    def _head(self, states):
        """The final linear layer over the vocabulary (softmax is applied by the
        loss or the decoding loop). logits: [batch, target_length, vocabulary], float32."""
        if self.output_projection is None:
            logits = self.target_embedding(states, reverse=True)
        else:
            logits = ops.cast(dense_call(self.output_projection, states), "float32")
        if self.output_bias is not None:
            logits = self.output_bias(logits)
        return logits

    # --- int8 weights ---

    @property
    def weight_quantization(self):
        """`"int8"` after `quantize("int8")`, else None."""
        return self.target_embedding.token_embedding.quantization_mode

    def quantize(self, mode=None, config=None, **kwargs):
        """Store every Dense kernel and embedding matrix in int8, in place, for decoding.

        Keras's int8 scheme (`keras.Model.quantize`): each kernel column and
        each embedding row is scaled by 127 / its largest absolute value and
        rounded; a Dense also quantizes its input per token, multiplies in
        int8 and rescales. Biases, LayerNorm and the logits bias stay
        float32. The tied output projection reads the int8 target embedding
        and divides the logits by its row scales. Training the quantized
        model is not supported; decoding (cached greedy and beam, XLA) and
        `keras_tf.serving.export` are.

        Args:
            mode: `"int8"`, the only mode (`QUANTIZATION_MODES`).
            config: optional `keras.quantizers.Int8QuantizationConfig`, e.g.
                `activation_quantizer=None` for weight-only int8.

        Example:
            >>> from keras_tf.models import Seq2SeqTransformer, get_preset
            >>> model = Seq2SeqTransformer(get_preset("transformer_tiny"))
            >>> model.quantize("int8")
            >>> str(model.target_embedding.embeddings.dtype)
            'int8'
        """
        if mode not in QUANTIZATION_MODES:
            raise ValueError(
                f"Seq2SeqTransformer.quantize supports mode in {QUANTIZATION_MODES}; "
                f"received mode={mode!r}"
            )
        if self.weight_quantization is not None:
            raise ValueError(
                f"This model is already quantized: weight_quantization={self.weight_quantization!r}"
            )
        # Keras runs gc.collect() each time a layer drops its float kernel,
        # walking every object of the process (0.2 s a layer in a test run:
        # 7 s for transformer_tiny). Frozen, the objects that existed before
        # are skipped; one collection after frees what the float kernels held.
        gc.freeze()
        try:
            super().quantize(mode, config=config, filters=_quantizable, **kwargs)
        finally:
            gc.unfreeze()
            gc.collect()
        # Imported here: keras_tf.decoding imports this package.
        # Decoders compiled before read the float32 variables, now gone.
        self.compiled_decoders.clear()

    def save(self, filepath, *args, **kwargs):
        """`keras.Model.save`, refused after `quantize`: the file would not load back.

        The blocks build their Dense and Embedding layers from the model's
        float dtype policy, so int8 variables have nowhere to go on loading.
        Save the float32 model and quantize after loading, or export the
        quantized one (`keras_tf.serving.export`).
        """
        if self.weight_quantization is not None:
            raise ValueError(
                f"A model quantized to {self.weight_quantization} cannot be saved as .keras "
                "(it would not load back); save the float32 model and call "
                "quantize() after loading it"
            )
        return super().save(filepath, *args, **kwargs)

    # --- decoding sub-models, built from the same layers ---

    def _cache_inputs(self, name):
        c = self.config
        # One (keys, values) pair per decoder block. One tensor of all
        # blocks, or keys and values stacked, would be sliced (copied) at
        # every step. The self-attention cache's layout is the current one
        # (`cache_update.cache_shape`); cross-attention keys and values are
        # [batch, heads, source_length, head_dim].
        if name == "self_attention_cache":
            shape = cache_shape(None, None, c.num_heads, c.head_dim)
        else:
            shape = (None, c.num_heads, None, c.head_dim)
        return [
            tuple(
                keras.Input(batch_shape=shape, dtype=self.compute_dtype,
                            name=f"{name}_{i}_{part}")
                for part in ("keys", "values")
            )
            for i in range(c.num_decoder_layers)
        ]

    _SUBMODEL_PROPERTIES = Seq2SeqBackbone._SUBMODEL_PROPERTIES + (
        "decoder_step", "beam_decoder_step", "attention_probe",
    )

    @property
    def decoder_step(self):
        """Functional model for one cached decoding step.

        Inputs (a dict):
            decoder_tokens: int32 `[batch, T]`, the new tokens (T = 1 when decoding).
            encoder_tokens: int32 `[batch, S]`, for the source padding mask.
            cross_attention_cache: from `cross_attention_cache`.
            self_attention_cache: a list with one cache per decoder block
                (`init_self_attention_cache`).
            cache_index: int32 scalar, position of the first new token.

        Outputs: logits `[batch, T, vocabulary]` and the updated self-attention
        cache (the same list structure).
        """
        return self._decoder_step_model(with_cache_rows=False)

    @property
    def beam_decoder_step(self):
        """`decoder_step` with one more input, `cache_rows`: int32 `[batch, max_length]`.

        Row b reads position t of every self-attention cache from row
        `cache_rows[b, t]`, so beam search follows each hypothesis'
        ancestors instead of copying the caches into their order at every
        step (`MultiHeadAttention.call_with_cache`).
        """
        return self._decoder_step_model(with_cache_rows=True)

    def _decoder_step_model(self, with_cache_rows):
        name = "beam_decoder_step" if with_cache_rows else "decoder_step"
        # One model per cache layout (`cache_update`): the export without XLA
        # traces its own, over position-major caches.
        name += "" if position_axis() == 2 else "_position_major"
        if name not in self._submodels:
            inputs = {
                "decoder_tokens": keras.Input((None,), dtype="int32", name="decoder_tokens"),
                "encoder_tokens": keras.Input((None,), dtype="int32", name="encoder_tokens"),
                "cross_attention_cache": self._cache_inputs("cross_attention_cache"),
                "self_attention_cache": self._cache_inputs("self_attention_cache"),
                "cache_index": keras.Input(batch_shape=(), dtype="int32", name="cache_index"),
            }
            if with_cache_rows:
                inputs["cache_rows"] = keras.Input((None,), dtype="int32", name="cache_rows")
            states, cache = self._decode_with_cache(
                inputs["decoder_tokens"],
                inputs["encoder_tokens"],
                inputs["cross_attention_cache"],
                inputs["self_attention_cache"],
                inputs["cache_index"],
                cache_rows=inputs.get("cache_rows"),
            )
            logits = _StepHead(self)(states)
            self._submodels[name] = keras.Model(inputs, [logits, cache], name=name)
        return self._submodels[name]

    @property
    def attention_probe(self):
        """Functional model: the training inputs → (logits, cross-attention weights).

        Weights: `[batch, num_decoder_layers, heads, T, S]`, for attention maps.
        """
        if "attention_probe" not in self._submodels:
            encoder_tokens = keras.Input((None,), dtype="int32", name="encoder_tokens")
            decoder_tokens = keras.Input((None,), dtype="int32", name="decoder_tokens")
            states, weights = self._decode_with_attention_scores(
                decoder_tokens, encoder_tokens, self._encode(encoder_tokens)
            )
            logits = self._head(states)
            self._submodels["attention_probe"] = keras.Model(
                {"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens},
                [logits, weights],
                name="attention_probe",
            )
        return self._submodels["attention_probe"]

    def init_self_attention_cache(self, batch_size, max_length):
        """Empty caches for `decoder_step`, one per block (`keras_tf.layers.cache_update.new_cache`).

        Pairs `(keys, values)` of zeros, head-first `[heads, batch,
        max_length, head_dim]`; inside `in_place_writes()` (the export
        without XLA) position-major `[max_length, batch, heads, head_dim]`
        buffers that the loop may write in place.
        """
        c = self.config
        return [
            new_cache(batch_size, max_length, c.num_heads, c.head_dim, self.compute_dtype)
            for _ in range(c.num_decoder_layers)
        ]


class _StepHead(keras.layers.Layer):
    """The model's `_head` on `[batch, 1, d_model]` states, as a `[batch, d_model]` matrix.

    One decoding step's projection over the vocabulary is then a plain
    matrix product; on `[batch, 1, d_model]` Keras's TensorFlow backend
    would run it as a `tensordot` of ten graph ops. Owns no weights.
    """

    def __init__(self, model):
        super().__init__(name="step_head", dtype=model.dtype_policy)
        # The head's own layers are tracked; the model itself is not (it
        # holds this layer's sub-model).
        self.head_layers = [layer for layer in (
            model.target_embedding, model.output_projection, model.output_bias
        ) if layer is not None]
        self._head = model._head
        self._vocabulary_size = model.config.target_vocabulary_size

    def call(self, states):
        if states.shape[1] != 1:
            return self._head(states)
        logits = self._head(ops.reshape(states, (-1, states.shape[-1])))
        return ops.expand_dims(logits, 1)

    def compute_output_spec(self, states):
        return keras.KerasTensor(tuple(states.shape[:-1]) + (self._vocabulary_size,), "float32")


@keras.saving.register_keras_serializable(package="keras_tf")
class LogitsBias(keras.layers.Layer):
    """Adds a trained bias vector to float32 logits: BART's and Marian's `final_logits_bias`.

    The variable is float32 whatever the dtype policy, as the logits are.

    Args:
        vocabulary_size: the logits' last dimension.

    Example:
        >>> import numpy as np
        >>> tuple(LogitsBias(5)(np.zeros((1, 2, 5), "float32")).shape)
        (1, 2, 5)
    """

    def __init__(self, vocabulary_size, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size

    def build(self, logits_shape=None):
        self.bias = self.add_weight(
            shape=(self.vocabulary_size,), initializer="zeros", dtype="float32", name="bias"
        )
        self.built = True

    def call(self, logits):
        # logits: [batch, length, vocabulary], float32
        return ops.cast(logits, "float32") + self.bias

    def compute_output_spec(self, logits):
        return keras.KerasTensor(logits.shape, dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update({"vocabulary_size": self.vocabulary_size})
        return config
