"""The encoder-decoder stack without its output head: `Seq2SeqBackbone`."""

import json
import os
import warnings

import keras
from keras import ops

from keras_tf.layers import (
    Dropout,
    PositionalEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from keras_tf.models.config import PAD_ID, TransformerConfig
from keras_tf.models.token_loss import TokenMeanLossTracking


@keras.saving.register_keras_serializable(package="keras_tf")
class Seq2SeqBackbone(TokenMeanLossTracking, keras.Model):
    """The encoder-decoder stack of "Attention Is All You Need", without the output head.

    A functional model, as keras-hub's backbones are: `{"encoder_tokens",
    "decoder_tokens"}` (int32, padding id 0) → the decoder's final states
    `[batch, T, d_model]`. `Seq2SeqTransformer` is this backbone with the
    paper's final linear layer over the vocabulary; a task with another head
    (a classifier, a scorer) subclasses it the same way, overriding `_head`.

    Padding masks are built once from the ids and passed to every block: no
    implicit Keras mask flows through the model.

    Args:
        config: a `TransformerConfig`, or the dict from `config.to_dict()`.
        dtype: optional dtype policy for all layers, e.g. "mixed_bfloat16".

    Example:
        >>> import numpy as np
        >>> from keras_tf.models import Seq2SeqBackbone, get_preset
        >>> backbone = Seq2SeqBackbone(get_preset("transformer_tiny"))
        >>> batch = {"encoder_tokens": np.array([[5, 6, 7, 0]]),
        ...          "decoder_tokens": np.array([[2, 7, 6]])}
        >>> tuple(backbone(batch).shape)
        (1, 3, 32)
    """

    def __init__(self, config, dtype=None, **kwargs):
        if isinstance(config, dict):
            config = TransformerConfig.from_dict(config)
        if not isinstance(config, TransformerConfig):
            raise TypeError(
                f"{type(self).__name__} expects a TransformerConfig (see "
                f"keras_tf.models.get_preset); received {type(config).__name__}"
            )
        self.config = config
        self._build_layers(config, dtype)

        # === Functional model ===
        encoder_tokens = keras.Input((None,), dtype="int32", name="encoder_tokens")
        decoder_tokens = keras.Input((None,), dtype="int32", name="decoder_tokens")
        states = self._decode(decoder_tokens, encoder_tokens, self._encode(encoder_tokens))
        super().__init__(
            inputs={"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens},
            outputs=self._head(states),
            dtype=dtype,
            **kwargs,
        )
        # Sub-models for decoding and inspection, built on first use. Kept out
        # of Keras tracking: they own no weights beyond this model's layers.
        object.__setattr__(self, "_submodels", {})
        # Compiled decoders of keras_tf.decoding, by (batch, source bucket,
        # settings); cleared whenever the variables they read are replaced.
        object.__setattr__(self, "compiled_decoders", {})

    def _build_layers(self, config, dtype):
        """The layers, in the order of the paper's figure 1."""
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
        self.source_embedding = PositionalEmbedding(
            c.source_vocabulary_size, c.d_model, c.max_source_length,
            mask_zero=False, layout=c.positional_layout, dtype=dtype, name="source_embedding",
        )
        self.source_dropout = Dropout(c.dropout, dtype=dtype, name="source_dropout")
        self.encoder_blocks = [
            TransformerEncoderBlock(**block_kwargs, name=f"encoder_block_{i}")
            for i in range(c.num_encoder_layers)
        ]
        self.target_embedding = PositionalEmbedding(
            c.target_vocabulary_size, c.d_model, c.max_target_length,
            mask_zero=False, layout=c.positional_layout, dtype=dtype, name="target_embedding",
        )
        self.target_dropout = Dropout(c.dropout, dtype=dtype, name="target_dropout")
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

    def _head(self, states):
        """What the model outputs from the decoder's final states: here, the states."""
        return states

    def call(self, inputs, training=None, mask=None):
        # The functional graph would silently cast float ids to int32.
        _check_inputs(inputs, self.config, type(self).__name__)
        return super().call(inputs, training=training, mask=mask)

    def fit(self, *args, **kwargs):
        """`keras.Model.fit`, with the optimizer built first (see `build_optimizer`)."""
        build_optimizer(self)
        return super().fit(*args, **kwargs)

    # --- LoRA fine-tuning ---

    def enable_lora(self, rank, target_layer_names=("query", "value"), *, target_names=None):
        """Freeze every weight, then train rank-`rank` LoRA factors of the attention projections.

        As keras-hub's `Backbone.enable_lora`: each `keras.layers.Dense`
        named in `target_layer_names` (by default the query and value
        projections of every self- and cross-attention) gets the factors A
        `[d_in, rank]` and B `[rank, d_out]` of `keras.layers.Dense.enable_lora`;
        its kernel reads W + (alpha / rank) A B. B starts at zero, so the
        model computes what it did until it trains. Call it before `compile`.
        Every save (`.keras`, `save_to_preset`, the SavedModel export)
        writes the merged kernels: the file is the fine-tuned model, and
        it loads without LoRA. `save_lora_weights` writes the factors alone.
        Its optimizer state is the factors' alone: load a compiled one with
        `keras.saving.load_model(path, compile=False)`.

        Args:
            rank: the factors' rank, a positive integer, at most the
                smaller side of every adapted kernel (d_model).
            target_layer_names: names of the Dense layers to adapt (a
                list, or one name as a string); the others in a block are
                "key" and "attention_output" (attention), and "inner_dense"
                and "output_dense" (feed-forward).
            target_names: the first release's name of `target_layer_names`;
                deprecated.

        Example:
            >>> from keras_tf.models import Seq2SeqBackbone, get_preset
            >>> backbone = Seq2SeqBackbone(get_preset("transformer_tiny"))
            >>> backbone.enable_lora(4)
            >>> len(backbone.trainable_weights)  # A and B of q and v in 2 + 2 + 2 attentions
            24
        """
        if target_names is not None:
            warnings.warn(
                "enable_lora(target_names=...) is deprecated; use target_layer_names, as "
                "keras-hub does (docs/migration.md)",
                DeprecationWarning,
                stacklevel=2,
            )
            target_layer_names = target_names
        targets = self._lora_targets(rank, target_layer_names)
        for layer in self._flatten_layers(include_self=False):
            layer.trainable = False
        for layer in targets:
            layer.trainable = True
            layer.enable_lora(rank)  # freezes the kernel
            if layer.bias is not None:
                layer.bias.trainable = False  # A and B alone train
        # Decoders compiled before read the kernels without the factors.
        self.compiled_decoders.clear()

    def _lora_targets(self, rank, target_layer_names):
        """The Dense layers `enable_lora(rank, target_layer_names)` adapts, or a one-line error.

        Checks everything first: a refused call changes nothing.
        """
        if isinstance(target_layer_names, str):
            target_layer_names = (target_layer_names,)  # one name, not its letters
        try:
            target_layer_names = tuple(target_layer_names)
        except TypeError:
            target_layer_names = None
        if not target_layer_names or not all(isinstance(n, str) for n in target_layer_names):
            raise ValueError(
                "target_layer_names must be a non-empty list of layer names (or one name); "
                f"received {target_layer_names!r}"
            )
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise ValueError(f"rank must be a positive integer; received rank={rank!r}")
        if getattr(self, "weight_quantization", None) is not None:
            raise ValueError(
                "enable_lora trains the model; a quantized model only decodes. Enable LoRA "
                "on the float model, then quantize the fine-tuned one"
            )
        dense = self._dense_layers()
        if any(layer.lora_enabled for layer in dense):
            raise ValueError("LoRA is already enabled on this model")
        names = sorted({layer.name for layer in dense})
        targets = [layer for layer in dense if layer.name in target_layer_names]
        missing = sorted(set(target_layer_names) - {layer.name for layer in targets})
        if missing or not targets:
            raise ValueError(
                f"No Dense layer named {missing or list(target_layer_names)}; this model's "
                f"are {names}"
            )
        smallest = min(min(layer.kernel.shape) for layer in targets)
        if rank > smallest:
            raise ValueError(
                f"rank must be at most {smallest}, the smaller side of the adapted kernels; "
                f"received rank={rank}"
            )
        return targets

    def _dense_layers(self):
        return [layer for layer in self._flatten_layers(include_self=False)
                if isinstance(layer, keras.layers.Dense)]

    @property
    def lora(self):
        """`{"rank", "target_layer_names"}` of the LoRA factors, or None without LoRA."""
        adapted = [layer for layer in self._dense_layers() if layer.lora_enabled]
        if not adapted:
            return None
        return {
            "rank": int(adapted[0].lora_rank),
            "target_layer_names": sorted({layer.name for layer in adapted}),
        }

    def _lora_variables(self):
        """The LoRA factors by path, in layer order."""
        return {
            variable.path: variable
            for layer in self._dense_layers() if layer.lora_enabled
            for variable in (layer.lora_kernel_a, layer.lora_kernel_b)
        }

    def save_lora_weights(self, filepath, overwrite=False):
        """Write the LoRA factors alone (A and B of each adapted layer), as keras-hub's.

        A few hundred KB where the model is tens of MB: ship adapters of
        one base model for several domains, and `load_lora_weights` the one
        you need. The file is HDF5 (`.lora.h5`), with the format, the rank
        and the adapted layers' names as attributes. It is written under a
        temporary name and renamed into place: a reader sees the old file
        or the new one.

        Args:
            filepath: the file to write, ending in `.lora.h5`.
            overwrite: replace an existing file. Defaults to False: an
                existing file is refused (Keras's `save_weights` has the same
                argument, defaulting to True with a prompt; a library cannot
                prompt, so ours refuses).

        Example:
            >>> import tempfile
            >>> from keras_tf.models import Seq2SeqBackbone, get_preset
            >>> backbone = Seq2SeqBackbone(get_preset("transformer_tiny"))
            >>> backbone.enable_lora(2)
            >>> backbone.save_lora_weights(tempfile.mkdtemp() + "/domain.lora.h5")
        """
        import h5py

        from keras_tf.atomic_files import write_atomically

        lora = self.lora
        if lora is None:
            raise ValueError("This model has no LoRA factors; call enable_lora(rank) first")
        filepath = os.fspath(filepath)
        if not filepath.endswith(".lora.h5"):
            raise ValueError(f"The file name must end in .lora.h5; received {filepath!r}")
        if os.path.exists(filepath) and not overwrite:
            raise FileExistsError(
                f"{filepath} exists; pass overwrite=True to replace it"
            )

        def write(path):
            with h5py.File(path, "w") as file:
                file.attrs["format"] = LORA_FORMAT
                file.attrs["rank"] = lora["rank"]
                file.attrs["target_layer_names"] = json.dumps(lora["target_layer_names"])
                for name, variable in self._lora_variables().items():
                    file.create_dataset(name, data=keras.ops.convert_to_numpy(variable))

        write_atomically(filepath, write)

    def load_lora_weights(self, filepath):
        """Read factors `save_lora_weights` wrote; enable LoRA of their rank first if needed.

        The base weights are this model's: load the factors into the model
        they were trained on (or one with the same weights) to get its outputs.
        The file is read and compared with this model first (format, rank,
        adapted layers, every factor's name and shape): a file that does not
        fit is one `ValueError` naming it and what differs, and the model is
        left as it was.
        """
        filepath = os.fspath(filepath)
        rank, targets, values = _read_lora_file(filepath)
        if self.lora is not None and self.lora != {
                "rank": rank, "target_layer_names": sorted(targets)}:
            raise ValueError(
                f"{filepath} holds LoRA factors of rank {rank} for {sorted(targets)}; this "
                f"model's are {self.lora}"
            )
        try:
            layers = self._lora_targets(rank, targets) if self.lora is None else [
                layer for layer in self._dense_layers() if layer.lora_enabled]
        except ValueError as error:
            raise ValueError(f"{filepath}: {error}") from None
        expected = {}
        for layer in layers:
            d_in, d_out = layer.kernel.shape
            expected[f"{layer.path}/lora_kernel_a"] = (d_in, rank)
            expected[f"{layer.path}/lora_kernel_b"] = (rank, d_out)
        found = {name: tuple(value.shape) for name, value in values.items()}
        if found != expected:
            raise ValueError(
                f"{filepath} does not fit this model: {_lora_difference(found, expected)}"
            )
        if self.lora is None:
            self.enable_lora(rank, targets)
        for name, variable in self._lora_variables().items():
            variable.assign(values[name])

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

    def _decoder_output(self, x):
        """The decoder stack's final states (the last LayerNorm of a pre-norm stack)."""
        return x if self.decoder_norm is None else self.decoder_norm(x)

    def _decode(self, decoder_tokens, encoder_tokens, memory):
        """The training graph: decoder_tokens → final states, every block called directly."""
        memory_padding_mask = ops.not_equal(encoder_tokens, PAD_ID)
        padding_mask = ops.not_equal(decoder_tokens, PAD_ID)
        x = self.target_dropout(self.target_embedding(decoder_tokens))
        for block in self.decoder_blocks:
            x = block(
                x, memory, padding_mask=padding_mask, memory_padding_mask=memory_padding_mask
            )
        return self._decoder_output(x)

    def _decode_with_cache(
        self, decoder_tokens, encoder_tokens, cross_attention_cache, self_attention_cache,
        cache_index, cache_rows=None,
    ):
        """One decoding step: `(final states, updated self-attention caches)`.

        `cache_rows` (beam search): see `MultiHeadAttention.call_with_cache`.
        """
        memory_padding_mask = ops.not_equal(encoder_tokens, PAD_ID)
        x = self.target_embedding(decoder_tokens, start_index=cache_index)
        x = self.target_dropout(x)
        caches = []
        for block, cache, cross in zip(
            self.decoder_blocks, self_attention_cache, cross_attention_cache
        ):
            x, cache = _BlockCall(block, "call_with_cache")(
                x, cache, cache_index, cross, memory_padding_mask=memory_padding_mask,
                cache_rows=cache_rows,
            )
            caches.append(cache)
        return self._decoder_output(x), caches

    def _decode_with_attention_scores(self, decoder_tokens, encoder_tokens, memory):
        """`_decode` that also gives the cross-attention weights `[batch, layers, heads, T, S]`."""
        memory_padding_mask = ops.not_equal(encoder_tokens, PAD_ID)
        padding_mask = ops.not_equal(decoder_tokens, PAD_ID)
        x = self.target_dropout(self.target_embedding(decoder_tokens))
        weights = []
        for block in self.decoder_blocks:
            x, block_weights = _BlockCall(block, "call_with_attention_scores")(
                x, memory, padding_mask=padding_mask, memory_padding_mask=memory_padding_mask
            )
            weights.append(block_weights)
        return self._decoder_output(x), ops.stack(weights, axis=1)

    # --- sub-models for decoding, built from the same layers ---

    # The properties below that build a sub-model on first read. Keras's
    # `.keras` saving and loading read every name `dir(model)` lists, which
    # built all of them on every save and load, for weights the file holds
    # under `layers/` already (bench-small: save 2.18 s -> 0.27 s, load
    # 2.68 s -> 0.86 s of CPU, benchmarks/save_load.py), so `dir` leaves them out.
    _SUBMODEL_PROPERTIES = ("encoder", "cross_attention_cache")

    def __dir__(self):
        return [name for name in super().__dir__() if name not in self._SUBMODEL_PROPERTIES]

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

        Output: a list with one `(keys, values)` pair per decoder block, each
        `[batch, heads, S, head_dim]`, computed once per source batch.
        """
        if "cross_attention_cache" not in self._submodels:
            memory = keras.Input((None, self.config.d_model), name="memory")
            cache = [
                _BlockCall(block, "compute_cross_attention_cache")(memory)
                for block in self.decoder_blocks
            ]
            # Keras hands a one-element list of outputs back as the element
            # alone; nested once, the output is this list for any depth.
            self._submodels["cross_attention_cache"] = keras.Model(
                memory, [cache], name="cross_attention_cache"
            )
        return self._submodels["cross_attention_cache"]

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


# The `format` attribute of a `save_lora_weights` file (files written before it have none).
LORA_FORMAT = "keras_tf.lora/1"


def _read_lora_file(filepath):
    """`(rank, target_layer_names, {name: array})` of a `save_lora_weights` file, or one line."""
    import h5py

    try:
        file = h5py.File(filepath, "r")
    except FileNotFoundError:
        raise FileNotFoundError(f"No such LoRA file: {filepath}") from None
    except OSError:
        raise ValueError(
            f"{filepath} is not an HDF5 file; save_lora_weights writes one"
        ) from None
    with file:
        attributes = dict(file.attrs)
        fmt = attributes.get("format", LORA_FORMAT)
        if isinstance(fmt, bytes):
            fmt = fmt.decode("utf-8", "replace")
        missing = [name for name in ("rank", "target_layer_names") if name not in attributes]
        if fmt != LORA_FORMAT or missing:
            what = (f"format {fmt!r}" if fmt != LORA_FORMAT
                    else f"no {' or '.join(missing)} attribute")
            raise ValueError(
                f"{filepath} is not a LoRA file of save_lora_weights ({what}); a Keras "
                ".weights.h5 file loads with load_weights"
            )
        rank = attributes["rank"]
        try:
            whole = int(rank) == rank and int(rank) >= 1
        except (TypeError, ValueError):
            whole = False
        if not whole:
            raise ValueError(
                f"{filepath}: attribute rank must be a positive integer; received {rank!r}"
            )
        rank = int(rank)
        try:
            targets = json.loads(attributes["target_layer_names"])
        except (TypeError, ValueError):
            targets = None
        if not (isinstance(targets, list) and targets and all(isinstance(t, str) for t in targets)):
            raise ValueError(
                f"{filepath}: attribute target_layer_names must be a JSON list of layer names; "
                f"received {attributes['target_layer_names']!r}"
            )
        values = {}
        file.visititems(
            lambda name, item: values.__setitem__(name, item[()])
            if isinstance(item, h5py.Dataset) else None
        )
    return rank, targets, values


def _lora_difference(found, expected):
    """What differs between the factors of a file and a model's, `{name: shape}` each, briefly."""
    extra = sorted(set(found) - set(expected))
    absent = sorted(set(expected) - set(found))
    shapes = sorted(name for name in set(found) & set(expected) if found[name] != expected[name])
    parts = []
    if extra:
        parts.append(f"{len(extra)} factors the model lacks (e.g. {extra[0]})")
    if absent:
        parts.append(f"{len(absent)} of the model's factors missing (e.g. {absent[0]})")
    if shapes:
        name = shapes[0]
        parts.append(f"{len(shapes)} factors of another shape (e.g. {name}: {list(found[name])} "
                     f"in the file, {list(expected[name])} in the model; another architecture?)")
    return "; ".join(parts)


def build_optimizer(model):
    """Creates the optimizer's variables of a compiled, built `model` now.

    On TensorFlow, Keras otherwise creates them inside the first traced
    train step, and a `tf.function` that creates variables is traced twice:
    the first batch of a small model's `fit` took twice as long. Other
    backends build the optimizer before tracing already.
    """
    optimizer = getattr(model, "optimizer", None)
    if (
        keras.backend.backend() == "tensorflow"
        and optimizer is not None
        and not optimizer.built
        and model.built
        and model.trainable_variables
    ):
        with model.distribute_strategy.scope():
            optimizer.build(model.trainable_variables)


def _check_inputs(inputs, config, name):
    expected = ("encoder_tokens", "decoder_tokens")
    if not isinstance(inputs, dict) or set(inputs) != set(expected):
        keys = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(f"{name} expects a dict with keys {list(expected)}; received {keys}")
    limits = {
        "encoder_tokens": config.max_source_length,
        "decoder_tokens": config.max_target_length,
    }
    for key in expected:
        tokens = inputs[key]
        dtype = keras.backend.standardize_dtype(tokens.dtype)
        if "int" not in dtype:
            raise TypeError(
                f"{name} expects integer token ids in '{key}'; received "
                f"dtype {dtype}. Cast the ids with ops.cast(tokens, 'int32')."
            )
        if len(tokens.shape) != 2:
            raise ValueError(
                f"{name} expects '{key}' of rank 2 [batch, length]; "
                f"received shape {tuple(tokens.shape)}"
            )
        length = tokens.shape[1]
        if length is not None and length > limits[key]:
            raise ValueError(
                f"{name}: '{key}' has length {length}, longer than "
                f"max_length={limits[key]}. Truncate the input or build the model "
                "with a larger max length."
            )


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
