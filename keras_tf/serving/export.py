"""A string-in, string-out SavedModel for TF Serving that gives `Seq2SeqTranslator.generate`'s strings.

`export` writes `<model_base_path>/<version>/`, the layout TF Serving polls,
holding a SavedModel with two signatures:

* `serving_default`: `text` (tf.string `[batch]`) -> `translation`
  (tf.string `[batch]`) and `score` (float32 `[batch]`);
* `translate_tokens`: `source_ids` (int32 `[batch, length]`, padded with 0)
  -> `target_ids` (int32 `[batch, max_length]`) and `score`, for clients
  that tokenize themselves with the tokenizers saved in `assets/`.

Both run the steps of `Seq2SeqTranslator.generate` on strings in the graph
(the `Seq2SeqPreprocessor`'s text steps and `keras_tf.decoding.decode_ids`),
with only TensorFlow and TF-Text ops; sources are padded to the source
buckets of `keras_tf.buckets`, so the shapes match the in-process ones.

TF Serving runs XLA only with its experimental `--xla_cpu_compilation_enabled`
or `--xla_gpu_compilation_enabled` flag; without it every XLA compilation
fails. So the default export holds no XLA op at all, and `xla=True` marks
just the generation function `jit_compile`, for servers started with a flag.

By default the export also holds TF Serving's warm-up requests
(`assets.extra/tf_serving_warmup_requests`, `keras_tf.serving.warmup`): a
few sentences of the shortest source buckets, which the server replays at
load so that the first client does not pay for the runtime's first run.
"""

import collections
import contextlib
import dataclasses
import functools
import json
import os
import re
import tempfile
import uuid

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from keras_tf.atomic_files import user_named
from keras_tf.buckets import source_buckets
from keras_tf.decoding import DecodingConfig, decode_ids
from keras_tf.layers.cache_update import in_place_writes
from keras_tf.serving.warmup import warmup_texts, write_warmup_requests
from keras_tf.text.preprocessor import Seq2SeqPreprocessor, blank_empty_sources, pad_to_bucket
from keras_tf.version import __version__

# The searches a SavedModel can hold: sampling would need a seed per request.
METHODS = ("greedy", "beam")

# What clients see (docs/serving.md lists the same names, dtypes and shapes).
TEXT_SIGNATURE = "serving_default"
TOKENS_SIGNATURE = "translate_tokens"
TEXT_INPUT = "text"
TRANSLATION_OUTPUT = "translation"
SOURCE_IDS_INPUT = "source_ids"
TARGET_IDS_OUTPUT = "target_ids"
SCORE_OUTPUT = "score"
# True for a source longer than max_source_length allows: it was translated
# from its first max_source_length - 1 subword pieces.
OVERLONG_OUTPUT = "overlong"

# Written to assets/ beside the tokenizers' files.
CONFIG_FILENAME = "keras_tf_serving.json"
FORMAT_VERSION = 1


# --- The generation function, the one part XLA may compile ---


def _generate_ids(model, decoding, xla, encoder_tokens):
    """`keras_tf.decoding.decode_ids`, the best hypothesis only: `(ids [batch, T], scores [batch])`.

    Without XLA the caches are written in place (`in_place_writes`): the
    graph executor would otherwise copy each whole cache at every step.
    (Reading each variable once before the loops costs more than it saves
    there: the values become loop variables, four executor nodes each per
    step against one read.)
    """
    with contextlib.nullcontext() if xla else in_place_writes():
        tokens, scores = decode_ids(model, encoder_tokens, decoding)
    if decoding.method == "beam":
        # tokens: [batch, beam, max_length], best first; scores: [batch, beam]
        return tokens[:, 0], scores[:, 0]
    return tokens, scores


def _graph_def(export_dir):
    """The `GraphDef` (its function library included) of a SavedModel's one MetaGraph."""
    saved_model = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(export_dir, "saved_model.pb"), "rb") as file:
        saved_model.ParseFromString(file.read())
    return saved_model.meta_graphs[0].graph_def


def saved_model_op_counts(export_dir, label=None):
    """How many nodes of each op type a SavedModel's graph and its functions hold: a Counter.

    `label(node_def)`, when given, names what is counted instead of the op
    type (for example a `Transpose` with its dtype). A node that calls a
    library function by its name is not counted.

    Example:
        >>> saved_model_op_counts(path)["InplaceUpdate"]  # doctest: +SKIP
        8
    """
    graph_def = _graph_def(export_dir)
    functions = {function.signature.name for function in graph_def.library.function}
    nodes = [*graph_def.node, *(n for f in graph_def.library.function for n in f.node_def)]
    return collections.Counter(
        label(node) if label else node.op for node in nodes if node.op not in functions
    )


def saved_model_ops(export_dir):
    """The op types of a SavedModel's graph and of every function in its library.

    Example:
        >>> sorted(saved_model_ops(path))[:3]  # doctest: +SKIP
        ['AddV2', 'All', 'ArgMax']
    """
    return set(saved_model_op_counts(export_dir))


def loop_body_ops(export_dir, label=None):
    """The ops of each decoding loop's body in a SavedModel, by type: `{body name: Counter}`.

    `label(node_def)`, when given, names what is counted instead of the op
    type (for example the op type and the dtype a `ReadVariableOp` reads).

    A `While` node names its body function; the ops of functions the body
    calls are counted in, so each Counter is what one iteration of that
    loop holds before Grappler (constants it folds included). The default
    export of greedy search has one loop per cache stage
    (`keras_tf.decoding.stages`), each iteration two steps, and a loop of
    one step per iteration where a stage's steps are odd in number.

    Example:
        >>> sum(loop_body_ops(path).popitem()[1].values())  # doctest: +SKIP
        589
    """
    library = {f.signature.name: f for f in _graph_def(export_dir).library.function}

    def count(name):
        ops = collections.Counter()
        for node in library[name].node_def:
            called = node.op if node.op in library else None
            if node.op in ("StatefulPartitionedCall", "PartitionedCall"):
                called = node.attr["f"].func.name
            if called:
                ops += count(called)
            else:
                ops[label(node) if label else node.op] += 1
        return ops

    bodies = sorted({node.attr["body"].func.name for function in library.values()
                     for node in function.node_def if node.op in ("While", "StatelessWhile")})
    return {body: count(body) for body in bodies}


@dataclasses.dataclass(frozen=True)
class _Exported:
    """What the export holds: the model, the text steps framed to the settings, the settings."""

    model: object
    preprocessor: object
    decoding: object
    source_buckets: tuple


def _exported(model, tokenizers, decoding, fields):
    """The model and tokenizers with the export's settings, checked."""
    decoding = DecodingConfig() if decoding is None else decoding
    settings = decoding.replace(**fields).resolve(model.config)
    if settings.method not in METHODS:
        raise ValueError(
            f"method must be one of {METHODS} to export; received method={settings.method!r}"
        )
    preprocessor = Seq2SeqPreprocessor(
        tokenizers, settings.max_source_length, settings.max_length
    )
    preprocessor.check_fits(model.config)
    return _Exported(
        model, preprocessor, settings, tuple(source_buckets(model.config.max_source_length))
    )


class _TranslatorModule(tf.Module):
    """What `export` saves: the signatures, the variables and the tokenizers they read, the assets.

    The model's variables and the tokenizers are attributes, so
    `tf.saved_model.save` tracks them explicitly rather than finding them
    through captures (keras-hub #1629, #2015: "untracked resource").

    The variables tracked are the `tf.Variable`s that Keras's variables wrap
    (`variable.value`), the ones the functions read. A Keras variable saves
    itself as a new `tf.Variable` beside the one it wraps, and the
    SavedModel's restore op then fills the new one: `tf.saved_model.load`
    finds the values through the object graph, but TF Serving and
    `saved_model_cli` load through a session, run the restore op, and read
    the wrapped variable, never written ("Could not find variable",
    keras-team/keras#19274, #20096). `tests/serving/serving_process.py`
    loads the export that way.
    """

    def __init__(self, exported, xla, asset_paths):
        super().__init__(name="keras_tf_translator")
        t = exported
        preprocessor = t.preprocessor
        self.model_variables = [variable.value for variable in t.model.variables]
        self.tokenizers = preprocessor.tokenizers
        self.assets = [tf.saved_model.Asset(path) for path in asset_paths]
        buckets = tf.constant(t.source_buckets, tf.int32)

        # The only function XLA may compile: no string ops in it.
        generate_ids = tf.function(
            functools.partial(_generate_ids, t.model, t.decoding, xla),
            input_signature=[tf.TensorSpec([None, None], tf.int32, name="encoder_tokens")],
            jit_compile=xla,
            autograph=False,
        )

        def translate_ids(source_ids):
            encoder_tokens = pad_to_bucket(preprocessor.encoder_tokens(source_ids), buckets)
            target_ids, scores = generate_ids(encoder_tokens)
            target_ids, scores = blank_empty_sources(source_ids, target_ids, scores)
            return target_ids, scores, preprocessor.overlong(source_ids)

        @tf.function(
            input_signature=[tf.TensorSpec([None], tf.string, name=TEXT_INPUT)], autograph=False
        )
        def translate_text(text):
            target_ids, scores, overlong = translate_ids(preprocessor.source_ids(text))
            translation = preprocessor.detokenize(target_ids)
            return {TRANSLATION_OUTPUT: translation, SCORE_OUTPUT: scores, OVERLONG_OUTPUT: overlong}

        @tf.function(
            input_signature=[tf.TensorSpec([None, None], tf.int32, name=SOURCE_IDS_INPUT)],
            autograph=False,
        )
        def translate_tokens(source_ids):
            target_ids, scores, overlong = translate_ids(preprocessor.ids_to_source_ids(source_ids))
            return {TARGET_IDS_OUTPUT: target_ids, SCORE_OUTPUT: scores, OVERLONG_OUTPUT: overlong}

        self.translate_text = translate_text
        self.translate_tokens = translate_tokens

    def signatures(self):
        # The functions themselves, not concrete functions traced beforehand:
        # tf.saved_model.save traces again in its save context, which would
        # write every function twice.
        return {TEXT_SIGNATURE: self.translate_text, TOKENS_SIGNATURE: self.translate_tokens}


def _versions(model_base_path):
    if not tf.io.gfile.isdir(model_base_path):
        return []
    return [int(name.rstrip("/")) for name in tf.io.gfile.listdir(model_base_path)
            if re.fullmatch(r"\d+/?", name)]


def export(
    model,
    tokenizers,
    model_base_path,
    *,
    version=None,
    decoding=None,
    xla=False,
    warmup=True,
    **fields,
):
    """Write a string-in, string-out SavedModel to `<model_base_path>/<version>/`.

    Point TF Serving's `--model_base_path` (or the docker image's
    `/models/<MODEL_NAME>` mount) at `model_base_path`; it serves the highest
    version. The version is written to a hidden temporary folder first and
    renamed into place, so a polling server never sees half a SavedModel.

    Args:
        model: a trained `Seq2SeqTransformer`.
        tokenizers: its `Seq2SeqTokenizers`, saved into the export's `assets/`.
        model_base_path: the folder of all versions; created if missing.
        version: positive int. Defaults to `None`: one more than the
            highest version there (1 for the first). An existing version is
            never overwritten.
        decoding: the `keras_tf.decoding.DecodingConfig` fixed in the export
            (greedy or beam search). Defaults to None: greedy with the
            model's limits.
        **fields: `DecodingConfig` fields that replace those of `decoding`,
            e.g. `method="beam", beam_size=4`.
        xla: bool. `False` (default): no op needs XLA, as TF Serving runs
            by default. `True`: the generation function is compiled with
            XLA (`jit_compile`); serve it with `--xla_cpu_compilation_enabled`
            or `--xla_gpu_compilation_enabled`.
        warmup: bool. `True` (default): write TF Serving's warm-up requests,
            one `serving_default` request per short source bucket, to
            `assets.extra/tf_serving_warmup_requests`. `False`: none.

    Returns:
        The export folder, `<model_base_path>/<version>`.

    Example:
        >>> import tempfile
        >>> from keras_tf.models import Seq2SeqTransformer, get_preset
        >>> from keras_tf.text import Seq2SeqTokenizers
        >>> tokenizers = Seq2SeqTokenizers.train(
        ...     ["the cat sat on the mat"] * 20, ["le chat"] * 20, vocabulary_size=16)
        >>> model = Seq2SeqTransformer(get_preset(
        ...     "transformer_tiny", source_vocabulary_size=16, target_vocabulary_size=16))
        >>> path = export(model, tokenizers, tempfile.mkdtemp() + "/translator", max_length=8)
        >>> os.path.basename(path)
        '1'
    """
    exported = _exported(model, tokenizers, decoding, fields)
    if not isinstance(xla, bool):
        raise TypeError(f"xla must be True or False; received xla={xla!r}")
    if not isinstance(warmup, bool):
        raise TypeError(f"warmup must be True or False; received warmup={warmup!r}")
    model_base_path = os.fspath(model_base_path)
    existing = _versions(model_base_path)
    if version is None:
        version = max(existing, default=0) + 1
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"version must be a positive integer; received version={version!r}")
    export_dir = os.path.join(model_base_path, str(version))
    if version in existing or tf.io.gfile.exists(export_dir):
        raise FileExistsError(
            f"{export_dir} exists; TF Serving versions are immutable. Pass a new "
            f"version (the highest is {max(existing, default=version)}) or version=None "
            "for the next one."
        )

    config = {
        "format_version": FORMAT_VERSION,
        "keras_tf_version": __version__,
        "tensorflow_version": tf.__version__,
        "version": version,
        "signatures": {
            TEXT_SIGNATURE: {
                "inputs": [TEXT_INPUT],
                "outputs": [TRANSLATION_OUTPUT, SCORE_OUTPUT, OVERLONG_OUTPUT],
            },
            TOKENS_SIGNATURE: {
                "inputs": [SOURCE_IDS_INPUT],
                "outputs": [TARGET_IDS_OUTPUT, SCORE_OUTPUT, OVERLONG_OUTPUT],
            },
        },
        "method": exported.decoding.method,
        "beam_size": exported.decoding.beam_size,
        "length_penalty": exported.decoding.length_penalty,
        "length_penalty_style": exported.decoding.length_penalty_style,
        "max_length": exported.decoding.max_length,
        "max_source_length": exported.decoding.max_source_length,
        "source_buckets": list(exported.source_buckets),
        "xla": xla,
        "warmup": warmup,
        # "int8" after `Seq2SeqTransformer.quantize("int8")`, else None.
        "quantization": model.weight_quantization,
        "model": model.config.to_dict(),
        "tokenizers": tokenizers.get_config(),
    }
    tf.io.gfile.makedirs(model_base_path)
    # Hidden and not a number: TF Serving ignores it until the rename.
    staging_dir = os.path.join(model_base_path, f".tmp-{version}-{uuid.uuid4().hex}")
    with tempfile.TemporaryDirectory() as assets_dir:
        tokenizers.save(assets_dir)
        with open(os.path.join(assets_dir, CONFIG_FILENAME), "w", encoding="utf-8") as file:
            json.dump(config, file, indent=2, ensure_ascii=False, allow_nan=False)
            file.write("\n")
        asset_paths = sorted(os.path.join(assets_dir, name) for name in os.listdir(assets_dir))

        module = _TranslatorModule(exported, xla, asset_paths)
        try:
            # Decoding writes its buffers with `update_at` (a select), so
            # without XLA the graph holds no XLA op; checked below.
            tf.saved_model.save(
                module,
                staging_dir,
                signatures=module.signatures(),
                options=tf.saved_model.SaveOptions(experimental_custom_gradients=False),
            )
            needs_xla = sorted(op for op in saved_model_ops(staging_dir) if op.startswith("Xla"))
            if needs_xla and not xla:
                raise RuntimeError(
                    f"The export without XLA holds ops that only run under XLA: {needs_xla}"
                )
            if warmup:
                texts = warmup_texts(
                    exported.preprocessor,
                    exported.source_buckets,
                    exported.decoding.max_source_length,
                )
                write_warmup_requests(
                    staging_dir, texts, TEXT_SIGNATURE, TEXT_INPUT,
                    model_name=os.path.basename(os.path.normpath(model_base_path)),
                )
            tf.io.gfile.rename(staging_dir, export_dir)
        except (tf.errors.OpError, OSError) as error:
            raise _naming(error, staging_dir, export_dir) from None
        finally:
            if tf.io.gfile.exists(staging_dir):
                tf.io.gfile.rmtree(staging_dir)
    return export_dir


def _naming(error, staging_dir, export_dir):
    """`error` with `export_dir`, the folder asked for, where it named the hidden `staging_dir`."""
    if isinstance(error, OSError):
        return user_named(error, staging_dir, export_dir)
    if staging_dir not in error.message:
        return error
    return type(error)(error.node_def, error.op, error.message.replace(staging_dir, export_dir))


def read_export_config(export_dir):
    """The settings `export` recorded in `<export_dir>/assets/keras_tf_serving.json`, as a dict."""
    path = os.path.join(os.fspath(export_dir), "assets", CONFIG_FILENAME)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"No {CONFIG_FILENAME} in {export_dir}/assets; is it a keras_tf export?"
        )
    with tf.io.gfile.GFile(path, "r") as file:
        return json.load(file)
