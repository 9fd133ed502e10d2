"""The translation task: backbone, preprocessor and decoding settings, loadable by name.

The keras-hub task shape (`keras_hub.models.BartSeq2SeqLM` and friends):

    translator = Seq2SeqTranslator.from_preset("transformer_small", tokenizers=tokenizers)
    translator.fit(sources, targets, epochs=10)          # strings, or token ids
    translator.generate(["Save the notebook"])           # strings in, strings out
    translator.save_to_preset("run1")                    # keras-tf translate --model run1
    Seq2SeqTranslator.from_preset("run1")

A preset directory holds (the files `keras-tf train --out DIR` writes too,
so every model directory of the command line is a preset):

    model.keras      the backbone, weights and TransformerConfig included
    config.json      the TransformerConfig, readable without Keras (optional)
    tokenizers/      Seq2SeqTokenizers.save (optional: without it the
                     translator takes and returns token ids)
    decoding.json    the DecodingConfig (optional: greedy)
    metadata.json    keras_tf version and format (optional)

`translator.save("x.keras")` (and so `keras.callbacks.ModelCheckpoint`)
writes one file with the same contents, the tokenizers as its assets, which
`keras.saving.load_model` reads back.

The text steps need TensorFlow (TF-Text ops); the backbone and `generate` on
token ids run on any Keras backend.
"""

import dataclasses
import os
import sys
import tempfile
import warnings

import keras
import numpy as np
from keras import ops

from keras_tf.decoding.config import DecodingConfig
from keras_tf.json_files import read_json, write_json
from keras_tf.models.config import PAD_ID, PRESETS, TransformerConfig, get_preset
from keras_tf.models.seq2seq_backbone import build_optimizer
from keras_tf.models.seq2seq_transformer import Seq2SeqTransformer
from keras_tf.models.token_loss import TokenMeanLossTracking
from keras_tf.tensorflow_import import require_tensorflow
from keras_tf.version import __version__

CONFIG_FILE = "config.json"
MODEL_FILE = "model.keras"
TOKENIZERS_DIR = "tokenizers"
# What Seq2SeqTokenizers.save writes first in its folder (its CONFIG_FILENAME;
# named here too, since keras_tf.text needs TensorFlow).
TOKENIZERS_CONFIG = "tokenizers.json"
DECODING_FILE = "decoding.json"
METADATA_FILE = "metadata.json"
PRESET_FORMAT = "keras_tf.Seq2SeqTranslator"
PRESET_FORMAT_VERSION = 1

# The default fit recipe: Adam at a constant 5e-4 with the paper's betas. It
# learns from the first step on any corpus size (the paper's 4,000-step
# warm-up assumed 25,000-token batches and never peaks in a short run).
DEFAULT_LEARNING_RATE = 5e-4
DEFAULT_BATCH_SIZE = 32


@dataclasses.dataclass
class CrossAttention:
    """What `Seq2SeqTranslator.cross_attention` returns.

    Args:
        weights: float32 `[layers, heads, len(target_tokens), len(source_tokens)]`.
        source_tokens: the pieces of the encoder input (END included).
        target_tokens: the pieces generated (END included, when reached).
        translation: the generated text.
    """

    weights: np.ndarray
    source_tokens: list
    target_tokens: list
    translation: str


def _as_texts(values):
    """`(texts, single)` for text, `(None, False)` for anything else (token ids).

    Text is a string; a non-empty list, tuple or 1-D numpy array of strings;
    or a tf.string tensor of rank 0 or 1. `texts` is a list of `str` or
    `bytes`; `single` says that one string came in, so one goes out.
    """
    tf = sys.modules.get("tensorflow")  # a tf.Tensor means it is imported
    if tf is not None and isinstance(values, tf.Tensor) and values.dtype == tf.string:
        values = values.numpy()  # bytes for a scalar, an object array otherwise
    if isinstance(values, (str, bytes)):
        return [values], True
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "USO":
        values = values.tolist()
    if isinstance(values, (list, tuple)) and values:
        if all(isinstance(v, (str, bytes)) for v in values):
            return list(values), False
    return None, False


def _is_text(values):
    return _as_texts(values)[0] is not None


def _is_empty_list(values):
    return isinstance(values, (list, tuple)) and not values


def _strings_dataset(values):
    """Whether `values` is a `tf.data.Dataset` of single strings, batched or not."""
    tf = sys.modules.get("tensorflow")  # a tf.data.Dataset means it is imported
    if tf is None or not isinstance(values, tf.data.Dataset):
        return False
    spec = values.element_spec
    return isinstance(spec, tf.TensorSpec) and spec.dtype == tf.string and spec.shape.rank in (0, 1)


def _text_pairs(sources, targets, names):
    """Two lists of strings of one length, or a ValueError that says which argument is wrong.

    `names` are the two arguments' names in the caller, e.g. `("x", "y")`.
    """
    lists = []
    for name, values in zip(names, (sources, targets)):
        texts, _ = _as_texts(values)
        if texts is None and not _is_empty_list(values):
            raise ValueError(
                f"{name} must be strings to pair with the strings of {' and '.join(names)}; "
                f"received {'None' if values is None else type(values).__name__}"
            )
        lists.append(texts or [])
    if len(lists[0]) != len(lists[1]):
        raise ValueError(
            f"{' and '.join(names)} must hold one target per source; received "
            f"{len(lists[0])} sources and {len(lists[1])} targets"
        )
    return lists


def _load_preprocessor(folder, max_source_length, max_target_length):
    """`(preprocessor, text_unavailable)` from tokenizers `Seq2SeqTokenizers.save` wrote.

    `(None, None)` when `folder` holds none. Without TensorFlow the model
    still loads and takes token ids; `text_unavailable` says why text cannot.
    """
    if not os.path.isfile(os.path.join(folder, TOKENIZERS_CONFIG)):
        return None, None
    try:
        from keras_tf.text import Seq2SeqTokenizers
        from keras_tf.text.preprocessor import Seq2SeqPreprocessor
    except ModuleNotFoundError as error:
        if error.name != "tensorflow":
            raise
        return None, f"{folder}: {error}"
    tokenizers = Seq2SeqTokenizers.load(folder)
    return Seq2SeqPreprocessor(tokenizers, max_source_length, max_target_length), None


def is_marian_preset(preset):
    """Whether `preset` is a Hugging Face Marian model: `hf://...`, or such a directory."""
    from keras_tf.models import marian

    return preset.startswith(marian.HF_PREFIX) or (
        not os.path.isfile(os.path.join(preset, MODEL_FILE)) and marian.is_hugging_face_dir(preset)
    )


def _unknown_preset(preset):
    return ValueError(
        f"Unknown preset {preset!r}: not a directory, and not one of {sorted(PRESETS)}"
    )


def preprocessor_from_preset(preset):
    """The `Seq2SeqPreprocessor` of a preset directory or a Marian model, without its weights.

    What `Seq2SeqPreprocessor.from_preset` and `Seq2SeqTokenizers.from_preset`
    give: the tokenizers `save_to_preset` (or `keras-tf train`) wrote, framed
    to the lengths of the preset's `config.json`. Needs TensorFlow.
    """
    preset = os.fspath(preset)
    if preset in PRESETS:
        raise ValueError(
            f"{preset!r} is an untrained architecture and has no tokenizers; learn them with "
            "keras_tf.text.Seq2SeqTokenizers.train, or pass a preset directory"
        )
    if is_marian_preset(preset):
        from keras_tf.models import marian

        return marian.load_marian_preprocessor(preset)
    if not os.path.isdir(preset):
        raise _unknown_preset(preset)
    folder = os.path.join(preset, TOKENIZERS_DIR)
    config_path = os.path.join(preset, CONFIG_FILE)
    missing = [path for path in (os.path.join(folder, TOKENIZERS_CONFIG), config_path)
               if not os.path.isfile(path)]
    if missing:
        raise ValueError(
            f"{preset} is not a preset directory with tokenizers: no {' and no '.join(missing)}; "
            "write one with Seq2SeqTranslator.save_to_preset(DIR) or `keras-tf train --out DIR`"
        )
    config = TransformerConfig.from_dict(read_json(config_path))
    preprocessor, text_unavailable = _load_preprocessor(
        folder, config.max_source_length, config.max_target_length
    )
    if preprocessor is None:
        raise ModuleNotFoundError(text_unavailable)
    return preprocessor


def _translate_batches(translator, batches):
    """Translate each batch of strings; warn once with the count of sources cut to fit."""
    texts, overlong = [], 0
    for batch in batches:
        translations = translator.translate_with_scores(batch)
        texts += translations.texts
        overlong += len(translations.overlong)
    message = translator.overlong_message(overlong, len(texts))
    if message:
        warnings.warn(message, UserWarning, stacklevel=3)
    return texts


# How many decoding settings' string translators a Seq2SeqTranslator keeps
# built (each holds its traced preprocessing graphs).
TRANSLATORS_KEPT = 8


@keras.saving.register_keras_serializable(package="keras_tf")
class Seq2SeqTranslator(TokenMeanLossTracking, keras.Model):
    """A translator: the backbone, its preprocessor and its decoding settings.

    `fit` and `evaluate` take string pairs (or token ids), `generate` takes
    strings and returns strings (or ids and returns ids), `score` gives the
    teacher-forced log-probability of given translations. Load one with
    `from_preset` and write one with `save_to_preset`.

    Args:
        backbone: a `Seq2SeqTransformer`: the `Seq2SeqBackbone` with its
            output layer, so it returns logits over the target vocabulary.
        preprocessor: a `keras_tf.text.Seq2SeqPreprocessor`, or None to work
            on token ids only (as on a backend without TensorFlow).
        decoding: the default `keras_tf.decoding.DecodingConfig` of
            `generate`. Defaults to None: greedy.

    Example:
        >>> import numpy as np
        >>> translator = Seq2SeqTranslator.from_preset("transformer_tiny")
        >>> translator.generate(np.array([[5, 6, 7, 3]]), max_length=4).shape
        (1, 4)
    """

    def __init__(self, backbone, preprocessor=None, decoding=None, **kwargs):
        if not isinstance(backbone, Seq2SeqTransformer):
            raise TypeError(
                "Seq2SeqTranslator expects a keras_tf.models.Seq2SeqTransformer backbone; "
                f"received {type(backbone).__name__}"
            )
        decoding = DecodingConfig() if decoding is None else decoding
        if not isinstance(decoding, DecodingConfig):
            raise TypeError(
                "decoding must be a keras_tf.decoding.DecodingConfig; received "
                f"{type(decoding).__name__}"
            )
        decoding.resolve(backbone.config)  # fails now, not at the first generate
        if preprocessor is not None:
            from keras_tf.text.preprocessor import check_vocabularies_fit

            check_vocabularies_fit(preprocessor.tokenizers, backbone.config)
        super().__init__(**kwargs)
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.decoding = decoding
        # The string Translators of `generate`, by (preprocessor, decoding):
        # built anew at each call, their graphs would trace again every time.
        self._translators = {}
        # No weights of its own, and the backbone (a functional model) is
        # built: so is the translator, for `quantize` and `summary` before a call.
        self.built = True

    @property
    def config(self):
        """The backbone's `TransformerConfig`."""
        return self.backbone.config

    def _text_preprocessor(self):
        """The preprocessor, or a ValueError that says why this translator takes ids only."""
        if self.preprocessor is not None:
            return self.preprocessor
        if getattr(self, "_text_unavailable", None):
            raise ValueError(
                f"This translator reads and writes token ids only: {self._text_unavailable}"
            )
        raise ValueError(
            "This translator has no preprocessor, so it cannot read text; pass token "
            "ids, or build it with tokenizers (Seq2SeqTranslator.from_preset(..., "
            "tokenizers=...))"
        )

    # --- Keras serialization: `translator.save("t.keras")`, ModelCheckpoint ---

    def get_config(self):
        """The backbone, the decoding settings and the preprocessor's lengths.

        The tokenizers are assets: `save` writes them into the `.keras` file
        (`save_assets`) and `keras.saving.load_model` reads them back
        (`load_assets`). `from_config` alone gives a translator of token ids.
        """
        preprocessor = None
        if self.preprocessor is not None:
            preprocessor = {
                "max_source_length": self.preprocessor.max_source_length,
                "max_target_length": self.preprocessor.max_target_length,
            }
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "preprocessor": preprocessor,
            "decoding": self.decoding.to_dict(),
        }

    @classmethod
    def from_config(cls, config):
        import keras_tf.training  # noqa: F401  (registers the loss of a compiled file)

        config = dict(config)
        backbone = keras.saving.deserialize_keras_object(config.pop("backbone"))
        preprocessor = config.pop("preprocessor")
        decoding = DecodingConfig.from_dict(config.pop("decoding"))
        translator = cls(backbone, None, decoding, **config)
        translator._preprocessor_lengths = preprocessor  # for load_assets
        return translator

    def save_assets(self, dir_path):
        if self.preprocessor is not None:
            self.preprocessor.tokenizers.save(os.path.join(dir_path, TOKENIZERS_DIR))

    def load_assets(self, dir_path):
        lengths = getattr(self, "_preprocessor_lengths", None)
        if lengths is None:
            return
        self.preprocessor, self._text_unavailable = _load_preprocessor(
            os.path.join(dir_path, TOKENIZERS_DIR),
            lengths["max_source_length"],
            lengths["max_target_length"],
        )
        if self.preprocessor is None and self._text_unavailable is None:
            raise ValueError(
                f"The saved translator had tokenizers but {dir_path} holds none "
                f"({TOKENIZERS_DIR}/{TOKENIZERS_CONFIG})"
            )
        if self.preprocessor is not None:
            from keras_tf.text.preprocessor import check_vocabularies_fit

            check_vocabularies_fit(self.preprocessor.tokenizers, self.config)

    def call(self, inputs, training=None):
        # logits: [batch, target_length, target_vocabulary], float32
        return self.backbone(inputs, training=training)

    # --- training ---

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        metrics="auto",
        jit_compile=True,
        **kwargs,
    ):
        """`keras.Model.compile` with the translation defaults.

        Args:
            optimizer: Defaults to `"auto"`: Adam(5e-4, β2 0.98, ε 1e-9).
            loss: Defaults to `"auto"`: `MaskedSparseCategoricalCrossentropy`
                with label smoothing 0.1.
            metrics: Defaults to `"auto"`: `[MaskedTokenAccuracy()]`.
            jit_compile: Defaults to True (Keras's "auto" resolves to False
                on CPU-only TensorFlow).
        """
        from keras_tf.training.losses import MaskedSparseCategoricalCrossentropy
        from keras_tf.training.metrics import MaskedTokenAccuracy

        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(
                DEFAULT_LEARNING_RATE, beta_1=0.9, beta_2=0.98, epsilon=1e-9
            )
        if loss == "auto":
            loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
        if metrics == "auto":
            metrics = [MaskedTokenAccuracy()]
        super().compile(
            optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=jit_compile, **kwargs
        )

    def compile_from_config(self, config):
        """Compile a loaded `.keras` file as it was compiled, Adam's state included.

        Keras skips this for a model whose `compile` is its own; this one
        passes Keras's arguments through, so it does what Keras's does.
        """
        self.compile(**keras.saving.deserialize_keras_object(config))
        self.optimizer.build(self.trainable_variables)

    def _as_dataset(self, x, y, batch_size, shuffle, seed, repeat=False):
        """String pairs -> `(a tf.data of preprocessed batches, None, None, batches)`.

        Anything else comes back unchanged, with `batches` None. With
        `repeat`, a list of string pairs becomes an endless dataset of
        `batches` batches a pass (the last one short), reshuffled each pass,
        for `fit` to read with `steps_per_epoch=batches`. Keras then keeps one
        iterator for the whole run instead of one an epoch: each new iterator
        instantiates the tokenizing map function again, about half the CPU of
        `transformer_tiny`'s short epochs (`benchmarks/fit_on_strings.py`).
        """
        text_pairs = _is_text(x) or _is_text(y)  # both must be, as _text_pairs checks
        dataset_of_text = False
        if not text_pairs and x is not None and y is None:
            # A tf.data.Dataset means TensorFlow is imported already; without
            # it, x cannot be one.
            tf = sys.modules.get("tensorflow")
            if tf is not None and isinstance(x, tf.data.Dataset):
                spec = x.element_spec
                dataset_of_text = (
                    isinstance(spec, tuple)
                    and len(spec) == 2
                    and all(getattr(s, "dtype", None) == tf.string for s in spec)
                )
        if not (text_pairs or dataset_of_text):
            return x, y, batch_size, None
        self._text_preprocessor()
        tf = require_tensorflow("Seq2SeqTranslator on text (fit, evaluate)")

        batch_size = batch_size or DEFAULT_BATCH_SIZE
        # The short last batch of a pass filled up to `batch_size` with rows
        # of padding: one XLA program fewer per bucket, the same gradients.
        # Not under a strategy with several replicas, where a replica whose
        # share is all padding would add a zero loss to their mean.
        # (Keras's TensorFlow trainer keeps the strategy the model was built under.)
        strategy = getattr(self, "distribute_strategy", None) or tf.distribute.get_strategy()
        rows = batch_size if strategy.num_replicas_in_sync == 1 else None
        if text_pairs:
            sources, targets = _text_pairs(x, y, ("x", "y"))
            dataset = tf.data.Dataset.from_tensor_slices((sources, targets))
            if shuffle:
                dataset = dataset.shuffle(
                    len(sources), seed=seed, reshuffle_each_iteration=True
                )
            dataset = dataset.batch(batch_size)
            batches = -(-len(sources) // batch_size)
            if repeat:
                dataset = dataset.repeat()
        else:
            dataset = x
            batches = None
            if len(dataset.element_spec[0].shape) == 0:  # unbatched pairs
                dataset = dataset.batch(batch_size)
            else:  # the user's batches, of a size of their own
                rows = None
        # Padded to the decoding buckets: a few shapes, so a few XLA programs.
        dataset = dataset.map(
            lambda sources, targets: self.preprocessor.bucketed(
                *self.preprocessor(sources, targets), rows=rows
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        return dataset.prefetch(tf.data.AUTOTUNE), None, None, batches

    def fit(self, x=None, y=None, batch_size=None, validation_data=None, shuffle=True,
            seed=None, **kwargs):
        """`keras.Model.fit` that also takes text.

        Args:
            x: source strings (with target strings as `y`), a `tf.data`
                of `(source, target)` string pairs (batched or not), or what
                `keras.Model.fit` takes: `{"encoder_tokens",
                "decoder_tokens"}` ids with labels.
            y: target strings, or labels.
            batch_size: pairs per batch for text. Defaults to 32.
            validation_data: the same forms as `(x, y)`, or a `tf.data`.
            shuffle: shuffle text pairs each epoch. Defaults to True.
            seed: the seed of that shuffle. Defaults to None.
            **kwargs: passed to `keras.Model.fit` (`epochs`, `callbacks`, ...).
                For lists of pairs, `steps_per_epoch` and
                `validation_steps` default to one pass over them: `fit`
                reads them through one dataset iterator for the whole run.

        Returns:
            The `History`.
        """
        if not self.compiled:
            self.compile()
        build_optimizer(self)
        x, y, batch_size, batches = self._as_dataset(x, y, batch_size, shuffle, seed, repeat=True)
        if batches is not None:
            kwargs.setdefault("steps_per_epoch", batches)
        if isinstance(validation_data, tuple) and len(validation_data) == 2:
            valid_x, valid_y, _, batches = self._as_dataset(
                *validation_data, batch_size, False, None, repeat=True
            )
            validation_data = valid_x if valid_y is None else (valid_x, valid_y)
            if batches is not None:
                kwargs.setdefault("validation_steps", batches)
        elif validation_data is not None:
            validation_data, _, _, _ = self._as_dataset(
                validation_data, None, batch_size, False, None
            )
        if y is None and batch_size is None:
            # A tf.data input: Keras warns about shuffle=True, which the
            # dataset has already applied (text pairs) or owns.
            shuffle = False
        return super().fit(
            x, y, batch_size=batch_size, validation_data=validation_data, shuffle=shuffle, **kwargs
        )

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """`keras.Model.evaluate` that also takes text, batched as `fit` batches it.

        Args:
            x: source strings (with target strings as `y`), a `tf.data` of
                `(source, target)` string pairs (batched or not), or what
                `keras.Model.evaluate` takes.
            y: target strings, or labels.
            batch_size: pairs per batch for text. Defaults to 32.
            **kwargs: passed to `keras.Model.evaluate` (`return_dict`, ...).

        Returns:
            What `keras.Model.evaluate` returns: the loss and the metrics of
            `compile` (`fit`'s defaults when not compiled yet).
        """
        if not self.compiled:
            self.compile()
        x, y, batch_size, _ = self._as_dataset(x, y, batch_size, False, None)
        return super().evaluate(x, y, batch_size=batch_size, **kwargs)

    def predict(self, x, *args, **kwargs):
        """`keras.Model.predict`: teacher-forced logits of token ids.

        Text has no decoder input to force, so strings (a list, or a
        `tf.data` of them) are refused with a pointer to `generate` (translations) and `score` (log-probabilities).
        """
        tf = sys.modules.get("tensorflow")  # a tf.data.Dataset means it is imported
        strings_dataset = (
            tf is not None
            and isinstance(x, tf.data.Dataset)
            and any(spec.dtype == tf.string for spec in tf.nest.flatten(x.element_spec))
        )
        if _is_text(x) or strings_dataset:
            raise ValueError(
                "Seq2SeqTranslator.predict returns teacher-forced logits and takes token ids "
                '({"encoder_tokens", "decoder_tokens"}); for strings, use generate(sources) '
                "to translate or score(sources, targets) for log-probabilities"
            )
        return super().predict(x, *args, **kwargs)

    # --- inference ---

    def _decoding(self, decoding, fields):
        decoding = self.decoding if decoding is None else decoding
        return decoding.replace(**fields) if fields else decoding

    def generate(self, inputs, decoding=None, **fields):
        """Translate strings, or generate target ids from source ids.

        Args:
            inputs: text (needs a preprocessor): a string, or a list, 1-D
                numpy array or tf.string tensor of strings, or a `tf.data`
                of strings, batched or not (unbatched: 32 a batch); or int
                source ids `[batch, S]` padded with 0, END included.
            decoding: a `DecodingConfig`. Defaults to None: this translator's.
            **fields: `DecodingConfig` fields that replace those of
                `decoding`, e.g. `method="beam", beam_size=4`.

        Returns:
            A string for a string, a list of strings for the other text
            inputs, or int32 numpy ids `[batch, max_length]` (END included, 0
            after it) for ids.
        """
        decoding = self._decoding(decoding, fields)
        texts, single = _as_texts(inputs)
        if texts is not None or _is_empty_list(inputs):
            translations = _translate_batches(self._translator(decoding), [texts or []])
            return translations[0] if single else translations
        if _strings_dataset(inputs):
            if inputs.element_spec.shape.rank == 0:
                inputs = inputs.batch(DEFAULT_BATCH_SIZE)
            batches = (batch.numpy() for batch in inputs)
            return _translate_batches(self._translator(decoding), batches)
        tf = sys.modules.get("tensorflow")
        if tf is not None and isinstance(inputs, tf.data.Dataset):
            raise TypeError(
                "generate takes a tf.data of strings (batched or not); received one of "
                f"{inputs.element_spec}. Pass token ids as an int array [batch, S]"
            )
        from keras_tf.decoding.generate import generate

        return generate(self.backbone, inputs, decoding=decoding).tokens

    def generate_with_scores(self, inputs, decoding=None, **fields):
        """`generate` for a list (array, tensor) of strings that also returns the scores.

        Returns:
            `keras_tf.serving.Translations(texts, scores)`: scores are the
            summed log-probabilities (for beam search over the length penalty).
        """
        texts, single = _as_texts(inputs)  # a single string gets the Translator's error
        translator = self._translator(self._decoding(decoding, fields))
        translations = translator.translate_with_scores(inputs if texts is None or single else texts)
        message = translator.overlong_message(len(translations.overlong), len(translations.texts))
        if message:
            warnings.warn(message, UserWarning, stacklevel=2)
        return translations

    def _translator(self, decoding):
        """The string `Translator` of `decoding`, built at its first use and then kept.

        It holds the traced preprocessing graphs, so a loop of `generate`
        calls traces them once. The last `TRANSLATORS_KEPT` settings are kept.
        """
        preprocessor = self._text_preprocessor()
        key = (preprocessor, decoding)
        translator = self._translators.pop(key, None)
        if translator is None:
            from keras_tf.serving.translator import Translator

            translator = Translator(self.backbone, preprocessor.tokenizers, decoding=decoding)
            while len(self._translators) >= TRANSLATORS_KEPT:
                del self._translators[next(iter(self._translators))]
        self._translators[key] = translator  # the most recent last
        return translator

    def score(self, sources, targets):
        """The teacher-forced log-probability of each target given its source.

        Args:
            sources, targets: lists of strings of one length (needs a
                preprocessor); or
                `{"encoder_tokens", "decoder_tokens"}` ids and labels `[batch,
                T]` (0 where there is no token), as the training data holds.

        Returns:
            float32 numpy `[batch]`: the sum over the target's tokens (END
            included) of log softmax(logits)[token].
        """
        if _is_text(sources) or _is_text(targets) or _is_empty_list(sources):
            sources, targets = _text_pairs(sources, targets, ("sources", "targets"))
            if not sources:
                return np.zeros([0], "float32")
            self._text_preprocessor()
            tf = require_tensorflow("Seq2SeqTranslator.score on text")

            inputs, labels = self.preprocessor(
                tf.constant(list(sources), tf.string), tf.constant(list(targets), tf.string)
            )
        else:
            inputs, labels = sources, targets
        logits = self.backbone(inputs, training=False)
        # log_probs: [batch, T, vocabulary]
        log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
        labels = ops.cast(ops.convert_to_tensor(labels), "int32")
        picked = ops.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
        mask = ops.cast(ops.not_equal(labels, PAD_ID), "float32")
        return np.asarray(ops.convert_to_numpy(ops.sum(picked * mask, axis=-1)))

    def cross_attention(self, text):
        """Translate `text` greedily; return the cross-attention behind each generated token.

        A teacher-forced pass over the translation (`backbone.attention_probe`)
        gives the encoder-decoder attention weights of every decoder layer and
        head: row t shows where the model looked while generating token t.

        Returns:
            A `CrossAttention`.
        """
        tf = require_tensorflow("Seq2SeqTranslator.cross_attention")

        from keras_tf.models.config import END_ID, START_ID

        preprocessor = self._text_preprocessor()
        # encoder_tokens: [1, S]; generated: [max_length], 0 after END.
        encoder_tokens = preprocessor.encoder_tokens(preprocessor.source_ids(tf.constant([text])))
        encoder_tokens = encoder_tokens.numpy()
        generated = self.generate(encoder_tokens, method="greedy")[0]
        ends = np.flatnonzero(generated == END_ID)
        generated = generated[: ends[0] + 1] if len(ends) else generated
        # Teacher forcing on the model's own output: input t is token t - 1.
        decoder_tokens = np.concatenate([[START_ID], generated[:-1]]).astype("int32")[None]
        _, weights = self.backbone.attention_probe(
            {"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens}
        )
        tokenizers = preprocessor.tokenizers
        # weights: [1, layers, heads, T, S]
        return CrossAttention(
            weights=np.asarray(ops.convert_to_numpy(weights), dtype="float32")[0],
            source_tokens=tokenizers.pieces(encoder_tokens[0], side="source"),
            target_tokens=tokenizers.pieces(generated, side="target"),
            translation=preprocessor.detokenize(tf.constant(generated[None])).numpy()[0].decode(),
        )

    def export(self, model_base_path, *, version=None, decoding=None, xla=False, **fields):
        """Write a string-in, string-out SavedModel for TF Serving: `keras_tf.serving.export`.

        Returns:
            The export folder, `<model_base_path>/<version>`.
        """
        self._text_preprocessor()
        from keras_tf.serving.export import export

        return export(
            self.backbone,
            self.preprocessor.tokenizers,
            model_base_path,
            version=version,
            decoding=self._decoding(decoding, fields),
            xla=xla,
        )

    def quantize(self, mode=None, config=None, **kwargs):
        """Store the backbone's weights in int8 for decoding: `Seq2SeqTransformer.quantize`.

        Example:
            >>> translator = Seq2SeqTranslator.from_preset("transformer_tiny")
            >>> translator.quantize("int8")
            >>> translator.backbone.weight_quantization
            'int8'
        """
        self.backbone.quantize(mode, config=config, **kwargs)

    # --- presets ---

    @classmethod
    def from_preset(cls, preset, *, tokenizers=None, decoding=None, load_weights=True,
                    dtype=None, **config_overrides):
        """A translator from a preset name or a preset directory.

        Args:
            preset: a name in `keras_tf.models.PRESETS` (an untrained
                architecture), a directory written by `save_to_preset` or
                `keras-tf train --out`, or a Hugging Face Marian (OPUS-MT)
                directory or `hf://ORG/NAME`, converted by
                `keras_tf.models.marian.load_marian` (docs/pretrained.md).
            tokenizers: for a named preset, the `Seq2SeqTokenizers` whose
                vocabulary sizes the model takes. Defaults to None: token ids only.
            decoding: a `DecodingConfig` replacing the preset's.
            load_weights: for a directory, keep the trained weights; False
                gives the same architecture with fresh weights. Defaults to True.
            dtype: a dtype policy for a named preset, e.g. "mixed_bfloat16".
            **config_overrides: `TransformerConfig` fields for a named preset.

        Returns:
            A `Seq2SeqTranslator`.
        """
        preset = os.fspath(preset)
        if preset in PRESETS:
            return cls._from_preset_name(preset, tokenizers, decoding, dtype, config_overrides)
        is_marian = is_marian_preset(preset)
        if not is_marian and not os.path.isdir(preset):
            raise _unknown_preset(preset)
        if config_overrides or tokenizers is not None or dtype is not None:
            given = sorted(config_overrides) + ["tokenizers"] * (tokenizers is not None)
            given += ["dtype"] * (dtype is not None)
            raise ValueError(
                f"A preset directory fixes its model and tokenizers; received {given} for "
                f"{preset}"
            )
        if is_marian:
            from keras_tf.models import marian

            imported = marian.load_marian(preset)
            backbone = imported.backbone if load_weights else Seq2SeqTransformer(imported.config)
            return cls(backbone, imported.preprocessor, decoding or imported.decoding)
        return cls._from_preset_dir(preset, decoding, load_weights)

    @classmethod
    def _from_preset_name(cls, name, tokenizers, decoding, dtype, overrides):
        preprocessor = None
        if tokenizers is not None:
            from keras_tf.text.preprocessor import Seq2SeqPreprocessor

            overrides = {
                "source_vocabulary_size": tokenizers.source_vocabulary_size,
                "target_vocabulary_size": tokenizers.target_vocabulary_size,
                **overrides,
            }
        config = get_preset(name, **overrides)
        if tokenizers is not None:
            preprocessor = Seq2SeqPreprocessor(
                tokenizers, config.max_source_length, config.max_target_length
            )
        return cls(Seq2SeqTransformer(config, dtype=dtype), preprocessor, decoding)

    @classmethod
    def _from_preset_dir(cls, directory, decoding, load_weights):
        if not os.path.isfile(os.path.join(directory, MODEL_FILE)):
            raise ValueError(
                f"{directory} is not a keras_tf preset (no {MODEL_FILE}); write one with "
                "Seq2SeqTranslator.save_to_preset(DIR) or `keras-tf train --out DIR`"
            )
        metadata_path = os.path.join(directory, METADATA_FILE)
        if os.path.isfile(metadata_path):
            metadata = read_json(metadata_path)
            if metadata.get("format_version") != PRESET_FORMAT_VERSION:
                raise ValueError(
                    f"{metadata_path}: expected format_version={PRESET_FORMAT_VERSION}; "
                    f"received format_version={metadata.get('format_version')!r}"
                )
        import keras_tf.training  # noqa: F401  (registers the loss for compiled files)

        try:
            backbone = keras.models.load_model(os.path.join(directory, MODEL_FILE), compile=False)
        except (OSError, ValueError) as error:
            raise ValueError(f"Cannot load {directory}/{MODEL_FILE}: {error}") from None
        if not isinstance(backbone, Seq2SeqTransformer):
            raise ValueError(
                f"{directory}/{MODEL_FILE} holds a {type(backbone).__name__}, not a "
                "keras_tf Seq2SeqTransformer"
            )
        config = backbone.config
        config_path = os.path.join(directory, CONFIG_FILE)
        if os.path.isfile(config_path):
            if TransformerConfig.from_dict(read_json(config_path)) != config:
                raise ValueError(
                    f"{directory}: {MODEL_FILE} was built with another config than {CONFIG_FILE}"
                )
        if not load_weights:
            backbone = Seq2SeqTransformer(config)
        preprocessor, text_unavailable = _load_preprocessor(
            os.path.join(directory, TOKENIZERS_DIR),
            config.max_source_length,
            config.max_target_length,
        )
        if decoding is None and os.path.isfile(os.path.join(directory, DECODING_FILE)):
            decoding = DecodingConfig.from_dict(read_json(os.path.join(directory, DECODING_FILE)))
        translator = cls(backbone, preprocessor, decoding)
        translator._text_unavailable = text_unavailable
        return translator

    def save_to_preset(self, directory):
        """Write this translator to `directory`, which `from_preset` reads back.

        Every file is written under a temporary name and renamed into place.
        """
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        write_json(os.path.join(directory, CONFIG_FILE), self.config.to_dict())
        staging = os.path.join(directory, f".partial-{MODEL_FILE}")
        self.backbone.save(staging)
        os.replace(staging, os.path.join(directory, MODEL_FILE))
        if self.preprocessor is not None:
            staging = tempfile.mkdtemp(prefix=".partial-tokenizers-", dir=directory)
            self.preprocessor.tokenizers.save(staging)
            target = os.path.join(directory, TOKENIZERS_DIR)
            if os.path.isdir(target):
                import shutil

                shutil.rmtree(target)
            os.replace(staging, target)
        write_json(os.path.join(directory, DECODING_FILE), self.decoding.to_dict())
        write_json(
            os.path.join(directory, METADATA_FILE),
            {
                "format": PRESET_FORMAT,
                "format_version": PRESET_FORMAT_VERSION,
                "keras_tf_version": __version__,
                "keras_version": keras.__version__,
                "backend": keras.backend.backend(),
            },
        )
