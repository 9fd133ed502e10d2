"""The translation task: backbone, preprocessor and decoding settings, loadable by name.

The keras-hub task shape (`keras_hub.models.BartSeq2SeqLM` and friends):

    translator = Seq2SeqTranslator.from_preset("transformer_small", tokenizers=tokenizers)
    translator.fit(sources, targets, epochs=10)          # strings, or token ids
    translator.generate(["Save the notebook"])           # strings in, strings out
    translator.save_to_preset("run1")                    # keras-tf translate --model run1
    Seq2SeqTranslator.from_preset("run1")

Strings take one path, through this translator's own preprocessor:

    text -> clean_text -> subword ids -> encoder_tokens       Seq2SeqPreprocessor
         -> cached greedy, beam or sampled decoding            keras_tf.decoding.generate
         -> translation, score                                 Seq2SeqPreprocessor.detokenize

A source with no subword ids (the empty string, only whitespace) gets the
empty translation and score 0. The SavedModel export (`export`) traces the
same steps. `keras_tf.translation.presets` owns the preset directory.

The text steps need TensorFlow (TF-Text ops); the backbone and `generate` on
token ids run on any Keras backend.
"""

import dataclasses
import os
import warnings

import keras
import numpy as np
from keras import ops

from keras_tf.decoding.config import DecodingConfig
from keras_tf.decoding.generate import generate as generate_ids
from keras_tf.models.learning_rates import constant_fine_tuning_learning_rate
from keras_tf.models.losses import MaskedSparseCategoricalCrossentropy, never_emitted_ids
from keras_tf.models.metrics import MaskedTokenAccuracy
from keras_tf.models.schedules import paper_adam
from keras_tf.models.seq2seq_backbone import build_optimizer
from keras_tf.models.config import PRESETS
from keras_tf.option_error import OptionError
from keras_tf.models.seq2seq_transformer import Seq2SeqTransformer
from keras_tf.models.token_loss import TokenMeanLossTracking
from keras_tf.special_tokens import END_ID, PAD_ID, START_ID
from keras_tf.tensorflow_import import require_tensorflow
from keras_tf.translation import presets
from keras_tf.translation.batches import own_translations
from keras_tf.translation.training_options import REPLAY_RATIO, TrainingOptions
from keras_tf.translation.inputs import (
    as_texts,
    holds_strings,
    is_dataset,
    is_empty_list,
    is_pairs_dataset,
    is_strings_dataset,
    is_text,
    misplaced_item,
    text_pairs,
)

# The default fit recipe: Adam at a constant 5e-4 with the paper's betas. It
# learns from the first step on any corpus size (the paper's 4,000-step
# warm-up assumed 25,000-token batches and never peaks in a short run). A
# translator loaded with trained weights is compiled at a constant tenth of
# the paper's peak instead (`constant_fine_tuning_learning_rate`): with no
# warm-up, Adam's first steps at the peak can undo what it knew. A planned
# schedule (`fit(options=...)`, `keras-tf train --init-from`) warms up to
# the paper's peak.
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


@dataclasses.dataclass(frozen=True)
class Translations:
    """What `Seq2SeqTranslator.generate_with_scores` and `n_best` return.

    Args:
        texts: list of `str`, one translation per source (for `n_best`, a
            list of `n` strings per source, best first).
        scores: float32 numpy `[batch]` (`[batch, n]`): the summed
            log-probability of the generated tokens (END included); for beam
            search divided by the length penalty. 0 for an empty source.
        overlong: the indices of the sources longer than
            `max_source_length` allows, ascending; each was translated from
            its first `max_source_length - 1` subword pieces.
    """

    texts: list
    scores: np.ndarray
    overlong: list = dataclasses.field(default_factory=list)


def overlong_message(count, total, max_source_length, what="sources"):
    """One line that says `count` of `total` `what` were cut to fit, or None for 0.

    Example:
        >>> overlong_message(2, 10, 64)
        '2 of 10 sources are longer than max_source_length=64 (END included) allows and were translated from their first 63 subword pieces'
    """
    if not count:
        return None
    return (
        f"{count} of {total} {what} are longer than max_source_length={max_source_length} "
        f"(END included) allows and were translated from their first "
        f"{max_source_length - 1} subword pieces"
    )


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
            preprocessor.check_fits(backbone.config)
        super().__init__(**kwargs)
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.decoding = decoding
        # No weights of its own, and the backbone (a functional model) is
        # built: so is the translator, for `quantize` and `summary` before a call.
        self.built = True

    @property
    def config(self):
        """The backbone's `TransformerConfig`."""
        return self.backbone.config

    @property
    def default_learning_rate(self):
        """What `compile()` trains at: 5e-4, or the fine-tuning rate for trained weights."""
        if getattr(self, "pretrained", False):
            return constant_fine_tuning_learning_rate(self.config.d_model)
        return DEFAULT_LEARNING_RATE

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
        config = dict(config)
        backbone = keras.saving.deserialize_keras_object(config.pop("backbone"))
        preprocessor = config.pop("preprocessor")
        decoding = DecodingConfig.from_dict(config.pop("decoding"))
        translator = cls(backbone, None, decoding, **config)
        translator._preprocessor_lengths = preprocessor  # for load_assets
        return translator

    def save_assets(self, dir_path):
        if self.preprocessor is not None:
            self.preprocessor.tokenizers.save(os.path.join(dir_path, presets.TOKENIZERS_DIR))

    def load_assets(self, dir_path):
        lengths = getattr(self, "_preprocessor_lengths", None)
        if lengths is None:
            return
        self.preprocessor, self._text_unavailable = presets.read_tokenizers(
            os.path.join(dir_path, presets.TOKENIZERS_DIR),
            lengths["max_source_length"],
            lengths["max_target_length"],
        )
        if self.preprocessor is None and self._text_unavailable is None:
            raise ValueError(
                f"The saved translator had tokenizers but {dir_path} holds none "
                f"({presets.TOKENIZERS_DIR}/{presets.TOKENIZERS_CONFIG})"
            )
        if self.preprocessor is not None:
            self.preprocessor.check_fits(self.config)

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
            optimizer: Defaults to `"auto"`: Adam(5e-4, β2 0.98, ε 1e-9);
                for a translator loaded with trained weights (`from_preset`
                of a directory or an OPUS-MT model), Adam at a constant
                tenth of the paper's peak for its d_model (7e-5 at 512):
                with no warm-up, the peak itself can undo what it knows.
            loss: Defaults to `"auto"`: `MaskedSparseCategoricalCrossentropy`
                with label smoothing 0.1, none of it on the ids the model
                never emits (`never_emitted_ids`).
            metrics: Defaults to `"auto"`: `[MaskedTokenAccuracy()]`.
            jit_compile: Defaults to True (Keras's "auto" resolves to False
                on CPU-only TensorFlow).
        """
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(
                self.default_learning_rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9
            )
        if loss == "auto":
            loss = MaskedSparseCategoricalCrossentropy(
                label_smoothing=0.1, excluded_ids=never_emitted_ids(self.backbone)
            )
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
        pairs = is_text(x) or is_text(y)  # both must be, as text_pairs checks
        dataset_of_text = not pairs and y is None and is_pairs_dataset(x)
        if not (pairs or dataset_of_text):
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
        if pairs:
            sources, targets = text_pairs(x, y, ("x", "y"))
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
            seed=None, options=None, **kwargs):
        """`keras.Model.fit` that also takes text, and the recipe of `keras-tf train`.

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
            options: a `TrainingOptions`: train as `keras-tf train` does with
                the same options. `fit` compiles anew with Adam on the
                planned schedule (`TrainingOptions.learning_rate_schedule`:
                warm-up and decay over `epochs` times the batches an epoch,
                to the fine-tuning peak for trained weights),
                `gradient_accumulation_steps` and `label_smoothing`, and
                takes `epochs`, `steps` (as `steps_per_epoch`), `batch_size`
                and `seed` from it, so those are not passed beside it. The
                fields that build the model and its tokenizers (`preset`,
                `dropout`, `tokenizer`, `vocabulary_size`, `max_length`,
                `tokenizer_model`, `init_from`, `lora_*`,
                `mixed_precision`) and those of the run's files
                (`keep_best`, `early_stopping`, `keep_checkpoints`,
                `max_minutes`) are
                `keras_tf.training.train_preset_dir`'s: `fit` trains this
                translator as it is. Defaults to None: `compile`'s recipe.
            **kwargs: passed to `keras.Model.fit` (`epochs`, `callbacks`, ...).
                For lists of pairs, `steps_per_epoch` and
                `validation_steps` default to one pass over them: `fit`
                reads them through one dataset iterator for the whole run.

        Returns:
            The `History`.
        """
        if options is not None:
            batch_size, seed = self._loop_of(options, batch_size, seed, kwargs)
            if options.replay_source is not None:
                x, y = self.with_own_replay(x, y, options)
        elif not self.compiled:
            self.compile()
        x, y, batch_size, batches = self._as_dataset(x, y, batch_size, shuffle, seed, repeat=True)
        if batches is not None:
            kwargs.setdefault("steps_per_epoch", batches)
        if options is not None:
            steps = kwargs.get("steps_per_epoch") or _batches_an_epoch(x, y, batch_size)
            schedule = options.learning_rate_schedule(
                self.config.d_model, steps, fine_tuning=getattr(self, "pretrained", False)
            )
            self.compile(
                optimizer=paper_adam(
                    schedule, gradient_accumulation_steps=options.gradient_accumulation_steps
                ),
                loss=MaskedSparseCategoricalCrossentropy(
                    label_smoothing=options.label_smoothing,
                    excluded_ids=never_emitted_ids(self.backbone),
                ),
            )
        build_optimizer(self)
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

    def with_own_replay(self, sources, targets, options):
        """`(sources, targets)` with this translator's translations of `options.replay_source` mixed in.

        The lines of `options.replay_source` (plain text of the domain to
        keep) are translated first (`keras_tf.translation.batches.own_translations`),
        then `options.replay_ratio` of those pairs per given pair are drawn
        from `options.seed` and appended (`keras_tf.text.with_replay`), as
        `keras-tf train --replay-source` does. `fit(..., options=...)` calls it.

        Args:
            sources: source strings.
            targets: target strings, one per source.
            options: a `TrainingOptions` with `replay_source`.
        """
        if not (is_text(sources) and is_text(targets)):
            raise OptionError(
                [("replay_source", options.replay_source)],
                "fit replays with text pairs: pass x and y as lists of strings",
            )
        # TensorFlow (keras_tf.text), which a JAX user of ids need not import: deferred.
        from keras_tf.text.corpora import ParallelCorpus, with_replay

        sources, targets = text_pairs(sources, targets, ("x", "y"))
        made = own_translations(self, options.replay_source)
        ratio = REPLAY_RATIO if options.replay_ratio is None else options.replay_ratio
        mixed = with_replay(ParallelCorpus(list(sources), list(targets)), ParallelCorpus(*made),
                            ratio, options.seed)
        return mixed.sources, mixed.targets

    @staticmethod
    def _loop_of(options, batch_size, seed, kwargs):
        """`(batch_size, seed)` of `options`, and its epochs and steps put in `kwargs`."""
        if not isinstance(options, TrainingOptions):
            raise TypeError(
                "options must be a keras_tf.translation.TrainingOptions; received "
                f"{type(options).__name__}"
            )
        given = {"batch_size": batch_size, "seed": seed, **{
            name: kwargs[name] for name in ("epochs", "steps_per_epoch") if name in kwargs}}
        given = {name: value for name, value in given.items() if value is not None}
        if given:
            raise ValueError(
                "fit(options=...) takes epochs, steps, batch_size and seed from the options; "
                f"received {', '.join(f'{name}={value!r}' for name, value in given.items())} "
                "too: set them in the options"
            )
        if options.batch_tokens is not None:
            raise OptionError(
                [("batch_tokens", options.batch_tokens)],
                "fit batches text by batch_size; for token budgets pass it a dataset of "
                "keras_tf.text.make_dataset(..., batch_tokens=...)",
            )
        kwargs["epochs"] = options.epochs
        if options.steps is not None:
            kwargs["steps_per_epoch"] = options.steps
        return options.batch_size, options.seed

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
        if holds_strings(x):
            raise ValueError(
                "Seq2SeqTranslator.predict returns teacher-forced logits and takes token ids "
                '({"encoder_tokens", "decoder_tokens"}); for strings, use generate(sources) '
                "to translate or score(sources, targets) for log-probabilities"
            )
        return super().predict(x, *args, **kwargs)

    # --- inference ---

    def resolve_decoding(self, decoding=None, **fields):
        """The settings `generate` decodes with: a resolved `DecodingConfig`.

        `decoding` (this translator's by default) with `fields` replaced,
        checked against the model, its limits filled in. Without a
        `max_source_length` of its own, it takes the preprocessor's.
        """
        decoding = self.decoding if decoding is None else decoding
        if not isinstance(decoding, DecodingConfig):
            raise TypeError(
                "decoding must be a keras_tf.decoding.DecodingConfig; received "
                f"{type(decoding).__name__}"
            )
        decoding = decoding.replace(**fields) if fields else decoding
        if decoding.max_source_length is None and self.preprocessor is not None:
            decoding = decoding.replace(max_source_length=min(
                self.preprocessor.max_source_length, self.config.max_source_length
            ))
        return decoding.resolve(self.config)

    def generate(self, inputs, decoding=None, seed=None, **fields):
        """Translate strings, or generate target ids from source ids.

        Every decoding method works on both: greedy, beam search, top-k and
        top-p sampling.

        Args:
            inputs: text (needs a preprocessor): a string, or a list, 1-D
                numpy array or tf.string tensor of strings, or a `tf.data`
                of strings, batched or not (unbatched: 32 a batch); or int
                source ids `[batch, S]` padded with 0, END included.
            decoding: a `DecodingConfig`. Defaults to None: this translator's.
            seed: int seed of sampling: the same seed gives the same output.
                Defaults to None: a fresh one.
            **fields: `DecodingConfig` fields that replace those of
                `decoding`, e.g. `method="beam", beam_size=4`.

        Returns:
            A string for a string, a list of strings for the other text
            inputs, or int32 numpy ids `[batch, max_length]` (END included, 0
            after it) for ids.
        """
        settings = self.resolve_decoding(decoding, **fields)
        texts, single = as_texts(inputs)
        misplaced = misplaced_item(inputs, "inputs")
        if misplaced:
            raise TypeError(misplaced)
        if texts is not None or is_empty_list(inputs):
            translations = self._warned(self._translate(texts or [], settings, seed), settings)
            return translations.texts[0] if single else translations.texts
        if is_strings_dataset(inputs):
            if inputs.element_spec.shape.rank == 0:
                inputs = inputs.batch(DEFAULT_BATCH_SIZE)
            translated, overlong = [], 0
            for batch in inputs:
                out = self._translate(batch.numpy().tolist(), settings, seed)
                translated += out.texts
                overlong += len(out.overlong)
            self._warn_overlong(overlong, len(translated), settings)
            return translated
        if is_dataset(inputs):
            raise TypeError(
                "generate takes a tf.data of strings (batched or not); received one of "
                f"{inputs.element_spec}. Pass token ids as an int array [batch, S]"
            )
        return generate_ids(self.backbone, inputs, decoding=settings, seed=seed).tokens

    def generate_with_scores(self, texts, decoding=None, seed=None, **fields):
        """`generate` for a list (array, tensor) of strings that also returns the scores.

        Returns:
            `Translations(texts, scores, overlong)`: scores are the summed
            log-probabilities (for beam search over the length penalty);
            `overlong` lists the sources cut to fit, which `generate` warns of.
        """
        settings = self.resolve_decoding(decoding, **fields)
        return self._translate(self._text_list(texts), settings, seed)

    def n_best(self, texts, n, decoding=None, **fields):
        """The `n` best translations of each sentence by beam search, best first.

        Args:
            texts: a list of strings.
            n: int in [1, beam_size].
            decoding, **fields: as for `generate`; the method must be "beam".

        Returns:
            `Translations` whose `texts` holds a list of `n` strings per
            sentence and `scores` float32 `[batch, n]` (summed
            log-probabilities over the length penalty), best first. The
            first of each is what `generate` returns.
        """
        settings = self.resolve_decoding(decoding, **fields)
        if settings.method != "beam":
            raise ValueError(
                f"n-best lists come from beam search; the method is {settings.method!r}"
            )
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= settings.beam_size:
            raise ValueError(
                f"n must be an integer in [1, {settings.beam_size}]; received n={n!r}"
            )
        return self._translate(self._text_list(texts), settings, None, n)

    def overlong_sources(self, texts, decoding=None, **fields):
        """The indices of `texts` longer than `max_source_length` allows, ascending.

        Each of them is translated from its first `max_source_length - 1`
        subword pieces (then END), as the export does: callers report them.
        """
        texts = self._text_list(texts)
        if not texts:
            return []
        tf = require_tensorflow("Seq2SeqTranslator.overlong_sources")
        preprocessor = self._text_preprocessor()
        source_ids = preprocessor.source_ids(tf.constant(texts, tf.string, shape=[len(texts)]))
        limit = self.resolve_decoding(decoding, **fields).max_source_length
        return np.flatnonzero(preprocessor.overlong(source_ids, limit).numpy()).tolist()

    def _text_list(self, texts):
        misplaced = misplaced_item(texts, "texts")
        if misplaced:
            raise TypeError(misplaced)
        found, single = as_texts(texts)
        if single or (found is None and not is_empty_list(texts)):
            raise TypeError(
                "Expected a list of strings; received "
                f"{type(texts).__name__}. Wrap a single string in a list: [text]"
            )
        return found or []

    def _translate(self, texts, settings, seed, n=None):
        """Preprocess, decode, postprocess: a batch of strings -> `Translations`."""
        preprocessor = self._text_preprocessor()
        tf = require_tensorflow("Seq2SeqTranslator.generate on text")
        source_ids = preprocessor.source_ids(tf.constant(texts, tf.string, shape=[len(texts)]))
        limit = settings.max_source_length
        overlong = np.flatnonzero(preprocessor.overlong(source_ids, limit).numpy()).tolist()
        width = 1 if n is None else n
        if not texts:
            scores = np.zeros([0] if n is None else [0, n], "float32")
            return Translations([], scores, [])
        encoder_tokens = preprocessor.generation_tokens(source_ids, limit)
        out = generate_ids(
            self.backbone, encoder_tokens.numpy(), decoding=settings, seed=seed,
            return_all_beams=n is not None,
        )
        tokens, scores = out.tokens, out.scores
        if n is not None:  # [batch, beam, T] -> [batch * n, T]
            tokens = tokens[:, :n].reshape(len(texts) * n, -1)
            scores = scores[:, :n].reshape(len(texts) * n)
        # An empty source gets no tokens and score 0, whatever the model made of a lone END.
        empty = np.repeat(source_ids.row_lengths().numpy() == 0, width)
        tokens = np.where(empty[:, None], PAD_ID, tokens)
        scores = np.where(empty, 0.0, scores).astype("float32")
        strings = [s.decode("utf-8") for s in preprocessor.detokenize(tf.constant(tokens)).numpy()]
        if n is None:
            return Translations(strings, scores, overlong)
        return Translations(
            [strings[i * n : (i + 1) * n] for i in range(len(texts))],
            scores.reshape(len(texts), n),
            overlong,
        )

    def _warn_overlong(self, count, total, settings):
        message = overlong_message(count, total, settings.max_source_length)
        if message:
            warnings.warn(message, UserWarning, stacklevel=4)

    def _warned(self, translations, settings):
        self._warn_overlong(len(translations.overlong), len(translations.texts), settings)
        return translations

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
        for name, values in (("sources", sources), ("targets", targets)):
            misplaced = misplaced_item(values, name)
            if misplaced:
                raise TypeError(misplaced)
        if is_text(sources) or is_text(targets) or is_empty_list(sources):
            sources, targets = text_pairs(sources, targets, ("sources", "targets"))
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

    def export(self, model_base_path, *, version=None, decoding=None, xla=False, warmup=True,
               **fields):
        """Write a string-in, string-out SavedModel for TF Serving: `keras_tf.serving.export`.

        The export traces the steps of `generate` with this translator's
        tokenizers and `decoding` (greedy or beam search). `warmup=True`
        (default) writes TF Serving's warm-up requests into
        `assets.extra/`; `warmup=False` skips them.

        Returns:
            The export folder, `<model_base_path>/<version>`.
        """
        self._text_preprocessor()
        # Deferred: the SavedModel export needs TensorFlow, a JAX user may not have it.
        from keras_tf.serving.export import export

        return export(
            self.backbone,
            self.preprocessor.tokenizers,
            model_base_path,
            version=version,
            decoding=self.resolve_decoding(decoding, **fields),
            xla=xla,
            warmup=warmup,
        )

    def export_ctranslate2(self, path, quantization=None, *, decoding=None, **fields):
        """Write a CTranslate2 model directory: `keras_tf.serving.ctranslate2.export_ctranslate2`.

        The directory holds the model, this translator's tokenizers and the
        decoding limits; `keras_tf.serving.ctranslate2.translate(path, texts,
        beam_size=1)` gives `generate`'s greedy strings. Needs the
        `ctranslate2` package (`pip install "keras-tf[ctranslate2]"`).

        Args:
            path: the directory to create (an existing one must be empty).
            quantization: None (float32 weights, default) or "int8".
            decoding: a `DecodingConfig` whose limits (`max_length`,
                `max_source_length`) and beam settings the directory records.
                Defaults to None: this translator's.
            **fields: `DecodingConfig` fields that replace those of `decoding`.

        Returns:
            `path`.
        """
        preprocessor = self._text_preprocessor()
        # Deferred: ctranslate2 is an optional extra, and the export reads the
        # tokenizers with TensorFlow, which a JAX user may not have.
        from keras_tf.serving.ctranslate2 import export_ctranslate2

        return export_ctranslate2(
            self.backbone,
            preprocessor.tokenizers,
            path,
            decoding=self.resolve_decoding(decoding, **fields),
            quantization=quantization,
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

    # --- presets (keras_tf.translation.presets reads and writes them) ---

    @classmethod
    def from_preset(cls, preset, *, tokenizers=None, decoding=None, load_weights=True,
                    dtype=None, **config_overrides):
        """A translator from a preset name or a preset directory.

        Args:
            preset: a name in `keras_tf.models.PRESETS` (an untrained
                architecture), a directory written by `save_to_preset` or
                `keras-tf train --out`, or a Hugging Face Marian (OPUS-MT)
                directory or `hf://ORG/NAME`, converted by
                `keras_tf.translation.marian` (docs/pretrained.md).
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
        parts = presets.load_parts(
            preset, tokenizers=tokenizers, load_weights=load_weights, dtype=dtype,
            **config_overrides,
        )
        translator = cls(parts.backbone, parts.preprocessor, decoding or parts.decoding)
        translator._text_unavailable = parts.text_unavailable
        # Trained weights (a directory or an OPUS-MT model): fit fine-tunes them.
        translator.pretrained = load_weights and os.fspath(preset) not in PRESETS
        return translator

    def save_to_preset(self, directory):
        """Write this translator to `directory`, which `from_preset` reads back.

        Every file is written under a temporary name and renamed into place.
        """
        presets.save_preset(
            directory,
            self.backbone,
            self.preprocessor.tokenizers if self.preprocessor is not None else None,
            self.decoding,
        )


def _batches_an_epoch(x, y, batch_size):
    """The batches of one pass over `fit`'s input, or None for a dataset of unknown length."""
    if is_dataset(x):
        known = int(x.cardinality())
        return known if known > 0 else None
    rows = len(y) if y is not None else len(keras.tree.flatten(x)[0])
    return -(-rows // (batch_size or DEFAULT_BATCH_SIZE))
