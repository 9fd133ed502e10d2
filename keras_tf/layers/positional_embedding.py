"""Token embedding plus the paper's sinusoidal positional encoding (section 3.5)."""

import math

import keras
import numpy as np
from keras import ops

from keras_tf.layers.dense_call import cast_weight, transposed_table
from keras_tf.layers.validation import check_token_ids, clone_initializer


LAYOUTS = ("interleaved", "concatenated")


def sinusoidal_encoding(max_length, d_model, layout="interleaved"):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same).

    `"interleaved"` puts sin and cos on even and odd dimensions, as in the
    paper. `"concatenated"` puts all the sines first and all the cosines
    after them (Marian, and so OPUS-MT; flax's WMT example; the TF
    tutorial): a permutation of the same features, which a trained model
    cannot tell apart from its own weights, so a checkpoint needs the layout
    it was trained with.

    Args:
        max_length: rows (positions 0 .. max_length - 1).
        d_model: features.
        layout: `"interleaved"` (default) or `"concatenated"`.

    Returns:
        A float32 numpy array `[max_length, d_model]`.

    Example:
        >>> [round(float(v), 3) for v in sinusoidal_encoding(2, 4, "concatenated")[1]]
        [0.841, 0.01, 0.54, 1.0]
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}; received layout={layout!r}")
    positions = np.arange(max_length, dtype=np.float64)[:, None]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)[None, :]
    # angles: [max_length, ceil(d_model / 2)]
    angles = positions / np.power(10000.0, two_i / d_model)
    sines, cosines = np.sin(angles), np.cos(angles[:, : d_model // 2])
    if layout == "concatenated":
        return np.concatenate([sines, cosines], axis=1).astype("float32")
    encoding = np.zeros((max_length, d_model), dtype=np.float64)
    encoding[:, 0::2] = sines
    encoding[:, 1::2] = cosines
    return encoding.astype("float32")


@keras.saving.register_keras_serializable(package="keras_tf")
class PositionalEmbedding(keras.layers.Layer):
    """Embeds token ids, scales by √d_model and adds the sinusoidal encoding.

    Padding id 0 produces a Keras mask. `start_index` shifts the positions,
    so a single decoding step at position t receives PE(t). The embedding
    matrix can also be applied in reverse (`reverse=True`) to turn decoder
    states into logits, which ties the pre-softmax linear layer to the
    embedding as in section 3.4.

    Args:
        vocabulary_size: number of token ids.
        d_model: embedding width.
        max_length: longest sequence the encoding table covers.
        mask_zero: whether id 0 is padding and produces a mask. Defaults to True.
        embeddings_initializer: initializer of the embedding matrix.
            Defaults to normal with stddev d_model^-0.5, so that the scaled
            embedding has unit variance.
        layout: the sinusoids' layout, `"interleaved"` (default, the paper)
            or `"concatenated"`; see `sinusoidal_encoding`.

    Example:
        >>> import numpy as np
        >>> layer = PositionalEmbedding(vocabulary_size=10, d_model=4, max_length=8)
        >>> tuple(layer(np.array([[3, 4, 0]])).shape)
        (1, 3, 4)

    References:
        Vaswani et al., 2017, sections 3.4 and 3.5.
    """

    def __init__(
        self,
        vocabulary_size,
        d_model,
        max_length,
        mask_zero=True,
        embeddings_initializer=None,
        layout="interleaved",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.d_model = d_model
        self.max_length = max_length
        self.mask_zero = mask_zero
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(
                stddev=d_model**-0.5
            )
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size,
            d_model,
            embeddings_initializer=clone_initializer(self.embeddings_initializer),
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.supports_masking = mask_zero
        # Not a weight: recomputed from (max_length, d_model, layout), never saved.
        self.layout = layout
        self._encoding = sinusoidal_encoding(max_length, d_model, layout)

    def build(self, tokens_shape=None):
        self.token_embedding.build(tokens_shape)
        self.built = True

    @property
    def embeddings(self):
        return self.token_embedding.embeddings

    def call(self, tokens, start_index=0, reverse=False):
        """Embed `tokens` `[batch, length]`, or with `reverse=True` map states to logits.

        Args:
            tokens: int ids `[batch, length]` (or, with `reverse`, states
                `[batch, length, d_model]`).
            start_index: absolute position of the first token.
            reverse: multiply by the transposed embedding matrix instead.
        """
        if reverse:
            # logits: [batch, length, vocabulary_size], computed in float32.
            table = self.token_embedding.embeddings
            kernel = transposed_table(table)  # in a decoding step of the export
            if kernel is None:
                kernel = ops.transpose(cast_weight(table, "float32"))
            logits = ops.matmul(ops.cast(tokens, "float32"), kernel)
            if self.token_embedding.quantization_mode == "int8":
                # After `quantize("int8")` the matrix holds int8 rows, each
                # stored as round(row * scale): undo the scale per vocabulary id.
                logits = logits / ops.cast(self.token_embedding.embeddings_scale, "float32")
            elif self.token_embedding.quantization_mode is not None:
                raise NotImplementedError(
                    "the tied output projection reads float or int8 embeddings; received "
                    f"quantization_mode={self.token_embedding.quantization_mode!r}"
                )
            return logits
        check_token_ids(self, tokens, self.max_length, start_index)
        embedded = self.token_embedding(tokens)
        embedded = embedded * ops.cast(math.sqrt(self.d_model), embedded.dtype)
        length = ops.shape(tokens)[1]
        # encoding rows [start_index, start_index + length): [length, d_model]
        encoding = ops.slice(
            ops.convert_to_tensor(self._encoding),
            (ops.cast(start_index, "int32"), 0),
            (length, self.d_model),
        )
        return embedded + ops.cast(encoding, embedded.dtype)[None]

    def compute_mask(self, tokens, mask=None, start_index=0, reverse=False):
        # Keras passes only (inputs, mask) here: a float input means `reverse`.
        dtype = keras.backend.standardize_dtype(tokens.dtype)
        if reverse or not self.mask_zero or "int" not in dtype:
            return None
        return ops.not_equal(tokens, 0)

    def compute_output_shape(self, tokens_shape, start_index=0, reverse=False):
        if reverse:
            return tuple(tokens_shape[:-1]) + (self.vocabulary_size,)
        return tuple(tokens_shape) + (self.d_model,)

    def compute_output_spec(self, tokens, start_index=0, reverse=False):
        if reverse:
            return keras.KerasTensor(
                tuple(tokens.shape[:-1]) + (self.vocabulary_size,), dtype="float32"
            )
        check_token_ids(self, tokens, self.max_length, start_index)
        return keras.KerasTensor(
            tuple(tokens.shape) + (self.d_model,), dtype=self.compute_dtype
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "d_model": self.d_model,
                "max_length": self.max_length,
                "mask_zero": self.mask_zero,
                "layout": self.layout,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
