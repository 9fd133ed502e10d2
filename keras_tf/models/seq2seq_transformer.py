"""The encoder-decoder Transformer as a functional Keras model."""

import keras
from keras import ops

from keras_tf.layers import (
    PositionalEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from keras_tf.models.config import PAD_ID, TransformerConfig


@keras.saving.register_keras_serializable(package="keras_tf")
class Seq2SeqTransformer(keras.Model):
    """The encoder-decoder Transformer of "Attention Is All You Need".

    A functional model: `{"encoder_tokens", "decoder_tokens"}` (int32,
    padding id 0) → logits over the target vocabulary (float32, softmax not
    applied). The decoding sub-models `encoder`, `cross_attention_cache` and
    `decoder_step` are functional models built from the *same layer objects*,
    so there is one forward pass, whether training or decoding.

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

    def __init__(self, config, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = TransformerConfig.from_dict(config)
        if not isinstance(config, TransformerConfig):
            raise TypeError(
                "Seq2SeqTransformer expects a TransformerConfig (see "
                f"keras_tf.models.get_preset); received {type(config).__name__}"
            )
        c = config
        block_kwargs = dict(
            d_model=c.d_model,
            num_heads=c.num_heads,
            d_ff=c.d_ff,
            dropout=c.dropout,
            attention_dropout=c.attention_dropout,
            activation=c.activation,
            norm_first=c.norm_first,
            layer_norm_epsilon=c.layer_norm_epsilon,
            dtype=dtype,
        )

        # === Layers, in the order of the paper's figure 1 ===
        self.config = c
        # Padding masks are built once from the ids (`_encode`, `_decode`) and
        # passed to every block: no implicit Keras mask flows through the model.
        self.source_embedding = PositionalEmbedding(
            c.source_vocabulary_size, c.d_model, c.max_source_length,
            mask_zero=False, layout=c.positional_layout, dtype=dtype, name="source_embedding",
        )
        self.source_dropout = keras.layers.Dropout(c.dropout, dtype=dtype, name="source_dropout")
        self.encoder_blocks = [
            TransformerEncoderBlock(**block_kwargs, name=f"encoder_block_{i}")
            for i in range(c.num_encoder_layers)
        ]
        self.target_embedding = PositionalEmbedding(
            c.target_vocabulary_size, c.d_model, c.max_target_length,
            mask_zero=False, layout=c.positional_layout, dtype=dtype, name="target_embedding",
        )
        self.target_dropout = keras.layers.Dropout(c.dropout, dtype=dtype, name="target_dropout")
        self.decoder_blocks = [
            TransformerDecoderBlock(**block_kwargs, name=f"decoder_block_{i}")
            for i in range(c.num_decoder_layers)
        ]
        # Pre-norm stacks end with a LayerNorm; post-norm blocks already do.
        self.encoder_norm = self.decoder_norm = None
        if c.norm_first:
            self.encoder_norm = keras.layers.LayerNormalization(
                epsilon=c.layer_norm_epsilon, dtype=dtype, name="encoder_norm"
            )
            self.decoder_norm = keras.layers.LayerNormalization(
                epsilon=c.layer_norm_epsilon, dtype=dtype, name="decoder_norm"
            )
        self.output_projection = None
        if not c.tie_embeddings:
            self.output_projection = keras.layers.Dense(
                c.target_vocabulary_size, dtype=dtype, name="output_projection"
            )
        self.output_bias = None
        if c.output_bias:
            self.output_bias = LogitsBias(c.target_vocabulary_size, name="output_bias")

        # === Functional model ===
        encoder_tokens = keras.Input((None,), dtype="int32", name="encoder_tokens")
        decoder_tokens = keras.Input((None,), dtype="int32", name="decoder_tokens")
        memory = self._encode(encoder_tokens)
        logits = self._decode(decoder_tokens, encoder_tokens, memory)
        super().__init__(
            inputs={"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens},
            outputs=logits,
            dtype=dtype,
            **kwargs,
        )
        # Decoding sub-models, built on first use. Kept out of Keras tracking:
        # they own no weights beyond this model's layers.
        object.__setattr__(self, "_submodels", {})

    def call(self, inputs, training=None, mask=None):
        # The functional graph would silently cast float ids to int32.
        _check_inputs(inputs, self.config)
        return super().call(inputs, training=training, mask=mask)

    # --- the forward pass, written once ---

    def _encode(self, encoder_tokens):
        # x: [batch, source_length, d_model]
        padding_mask = ops.not_equal(encoder_tokens, PAD_ID)
        x = self.source_embedding(encoder_tokens)
        x = self.source_dropout(x)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=padding_mask)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x

    def _decode(self, decoder_tokens, encoder_tokens, memory):
        """The training graph: decoder_tokens → logits, every block called directly."""
        memory_padding_mask = ops.not_equal(encoder_tokens, PAD_ID)
        padding_mask = ops.not_equal(decoder_tokens, PAD_ID)
        x = self.target_dropout(self.target_embedding(decoder_tokens))
        for block in self.decoder_blocks:
            x = block(
                x, memory, padding_mask=padding_mask, memory_padding_mask=memory_padding_mask
            )
        return self._logits(x)

    def _decode_with_cache(
        self, decoder_tokens, encoder_tokens, cross_attention_cache, self_attention_cache,
        cache_index,
    ):
        """One decoding step: `(logits, updated self-attention caches)`."""
        memory_padding_mask = ops.not_equal(encoder_tokens, PAD_ID)
        x = self.target_embedding(decoder_tokens, start_index=cache_index)
        x = self.target_dropout(x)
        caches = []
        for block, cache, cross in zip(
            self.decoder_blocks, self_attention_cache, cross_attention_cache
        ):
            x, cache = _BlockCall(block, "call_with_cache")(
                x, cache, cache_index, cross, memory_padding_mask=memory_padding_mask
            )
            caches.append(cache)
        return self._logits(x), caches

    def _decode_with_attention_scores(self, decoder_tokens, encoder_tokens, memory):
        """The training graph's forward pass that also gives `[batch, layers, heads, T, S]` weights."""
        memory_padding_mask = ops.not_equal(encoder_tokens, PAD_ID)
        padding_mask = ops.not_equal(decoder_tokens, PAD_ID)
        x = self.target_dropout(self.target_embedding(decoder_tokens))
        weights = []
        for block in self.decoder_blocks:
            x, block_weights = _BlockCall(block, "call_with_attention_scores")(
                x, memory, padding_mask=padding_mask, memory_padding_mask=memory_padding_mask
            )
            weights.append(block_weights)
        return self._logits(x), ops.stack(weights, axis=1)

    def _logits(self, x):
        """The final linear layer over the vocabulary (softmax is applied by the
        loss or the decoding loop). logits: [batch, target_length, vocabulary], float32."""
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        if self.output_projection is None:
            logits = self.target_embedding(x, reverse=True)
        else:
            logits = ops.cast(self.output_projection(x), "float32")
        if self.output_bias is not None:
            logits = self.output_bias(logits)
        return logits

    # --- decoding sub-models, built from the same layers ---

    def _cache_inputs(self, name):
        c = self.config
        # One tensor per decoder block, [batch, 2 (keys, values), length,
        # heads, head_dim]: a stacked tensor would be sliced and re-stacked
        # (two copies of the whole cache) at every step.
        return [
            keras.Input(
                (2, None, c.num_heads, c.head_dim),
                dtype=self.compute_dtype,
                name=f"{name}_{i}",
            )
            for i in range(c.num_decoder_layers)
        ]

    @property
    def encoder(self):
        """Functional model: encoder_tokens `[batch, S]` → memory `[batch, S, d_model]`."""
        if "encoder" not in self._submodels:
            tokens = keras.Input((None,), dtype="int32", name="encoder_tokens")
            self._submodels["encoder"] = keras.Model(
                tokens, self._encode(tokens), name="encoder"
            )
        return self._submodels["encoder"]

    @property
    def cross_attention_cache(self):
        """Functional model: memory → keys and values of every decoder block's cross-attention.

        Output: a list with one `[batch, 2, S, heads, head_dim]` tensor per
        decoder block, computed once per source batch.
        """
        if "cross_attention_cache" not in self._submodels:
            memory = keras.Input((None, self.config.d_model), name="memory")
            cache = [
                _BlockCall(block, "compute_cross_attention_cache")(memory)
                for block in self.decoder_blocks
            ]
            self._submodels["cross_attention_cache"] = keras.Model(
                memory, cache, name="cross_attention_cache"
            )
        return self._submodels["cross_attention_cache"]

    @property
    def decoder_step(self):
        """Functional model for one cached decoding step.

        Inputs (a dict):
            decoder_tokens: int32 `[batch, T]`, the new tokens (T = 1 when decoding).
            encoder_tokens: int32 `[batch, S]`, for the source padding mask.
            cross_attention_cache: from `cross_attention_cache`.
            self_attention_cache: a list with one `[batch, 2, max_length,
                heads, head_dim]` tensor per decoder block.
            cache_index: int32 scalar, position of the first new token.

        Outputs: logits `[batch, T, vocabulary]` and the updated self-attention
        cache (the same list structure).
        """
        if "decoder_step" not in self._submodels:
            inputs = {
                "decoder_tokens": keras.Input((None,), dtype="int32", name="decoder_tokens"),
                "encoder_tokens": keras.Input((None,), dtype="int32", name="encoder_tokens"),
                "cross_attention_cache": self._cache_inputs("cross_attention_cache"),
                "self_attention_cache": self._cache_inputs("self_attention_cache"),
                "cache_index": keras.Input(batch_shape=(), dtype="int32", name="cache_index"),
            }
            logits, cache = self._decode_with_cache(
                inputs["decoder_tokens"],
                inputs["encoder_tokens"],
                inputs["cross_attention_cache"],
                inputs["self_attention_cache"],
                inputs["cache_index"],
            )
            self._submodels["decoder_step"] = keras.Model(
                inputs, [logits, cache], name="decoder_step"
            )
        return self._submodels["decoder_step"]

    @property
    def attention_probe(self):
        """Functional model: the training inputs → (logits, cross-attention weights).

        Weights: `[batch, num_decoder_layers, heads, T, S]`, for attention maps.
        """
        if "attention_probe" not in self._submodels:
            encoder_tokens = keras.Input((None,), dtype="int32", name="encoder_tokens")
            decoder_tokens = keras.Input((None,), dtype="int32", name="decoder_tokens")
            logits, weights = self._decode_with_attention_scores(
                decoder_tokens, encoder_tokens, self._encode(encoder_tokens)
            )
            self._submodels["attention_probe"] = keras.Model(
                {"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens},
                [logits, weights],
                name="attention_probe",
            )
        return self._submodels["attention_probe"]

    def init_self_attention_cache(self, batch_size, max_length):
        """Zeros for `decoder_step`: one `[batch, 2, max_length, heads, head_dim]` per block."""
        c = self.config
        return [
            ops.zeros(
                (batch_size, 2, max_length, c.num_heads, c.head_dim),
                dtype=self.compute_dtype,
            )
            for _ in range(c.num_decoder_layers)
        ]

    def generate(
        self,
        encoder_tokens,
        max_length=None,
        method="greedy",
        beam_size=4,
        length_penalty=0.6,
        **kwargs,
    ):
        """Generate target ids: KV-cached greedy, beam or sampled decoding, compiled with XLA.

        Delegates to `keras_tf.decoding.generate`, which documents the other
        arguments (`top_k`, `top_p`, `temperature`, `seed`,
        `return_all_beams`, `end_id`).

        Returns:
            `Generation(tokens, scores)`, numpy: tokens `[batch, max_length]`
            (end token included, 0 after it) and their scores.

        Example:
            >>> import numpy as np
            >>> from keras_tf.models import Seq2SeqTransformer, get_preset
            >>> model = Seq2SeqTransformer(get_preset("transformer_tiny"))
            >>> model.generate(np.array([[5, 6, 7]]), max_length=4).tokens.shape
            (1, 4)
        """
        # Imported here: keras_tf.decoding imports this package.
        from keras_tf.decoding import generate

        return generate(
            self, encoder_tokens, max_length=max_length, method=method,
            beam_size=beam_size, length_penalty=length_penalty, **kwargs,
        )

    def get_config(self):
        return {
            "config": self.config.to_dict(),
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "dtype" in config and isinstance(config["dtype"], dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)




def _check_inputs(inputs, config):
    expected = ("encoder_tokens", "decoder_tokens")
    if not isinstance(inputs, dict) or set(inputs) != set(expected):
        keys = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(
            f"Seq2SeqTransformer expects a dict with keys {list(expected)}; received {keys}"
        )
    limits = {
        "encoder_tokens": config.max_source_length,
        "decoder_tokens": config.max_target_length,
    }
    for key in expected:
        tokens = inputs[key]
        dtype = keras.backend.standardize_dtype(tokens.dtype)
        if "int" not in dtype:
            raise TypeError(
                f"Seq2SeqTransformer expects integer token ids in '{key}'; received "
                f"dtype {dtype}. Cast the ids with ops.cast(tokens, 'int32')."
            )
        if len(tokens.shape) != 2:
            raise ValueError(
                f"Seq2SeqTransformer expects '{key}' of rank 2 [batch, length]; "
                f"received shape {tuple(tokens.shape)}"
            )
        length = tokens.shape[1]
        if length is not None and length > limits[key]:
            raise ValueError(
                f"Seq2SeqTransformer: '{key}' has length {length}, longer than "
                f"max_length={limits[key]}. Truncate the input or build the model "
                "with a larger max length."
            )


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


class _BlockCall(keras.layers.Layer):
    """Calls one method of a block as a single, uniquely named graph node.

    The decoding sub-models call a block's `call_with_cache` or
    `call_with_attention_scores`, which Keras's functional API does not see
    as a layer call; and node names must be unique across blocks (each has
    its own "key", "value", ... projections). This wrapper owns no weights:
    it tracks the block and runs the block's own method.
    """

    def __init__(self, block, method):
        super().__init__(name=f"{block.name}_{method}", dtype=block.dtype_policy)
        self.block = block
        self.method = method

    def call(self, *args, **kwargs):
        return getattr(self.block, self.method)(*args, **kwargs)
