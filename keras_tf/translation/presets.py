"""The preset directory: its one owner. Every file name, every reader, one writer.

A preset is what `Seq2SeqTranslator.from_preset` reads and
`save_to_preset`, `keras-tf train`, `train --init-from`, `average` and
`import-marian` write:

    model.keras      the backbone (a Seq2SeqTransformer), weights and config included
    config.json      its TransformerConfig, readable without Keras
    tokenizers/      Seq2SeqTokenizers.save (optional: without them the
                     translator takes and returns token ids)
    decoding.json    the DecodingConfig of `generate` (optional: greedy)
    metadata.json    keras_tf version and format

A training run (`keras-tf train --out DIR`) adds its own files beside them:
`options.json` (the training options), `history.csv`, `backup/` (the
trainer's format, `keras_tf.training.trainer`) and `logs/` (TensorBoard);
an adaptation run (`--init-from`) `replay-pairs.tsv` (the pairs the starting
model made of `--replay-source`) and `tuned.keras` (the fine-tuned model,
when `model.keras` holds its merge with the starting one).

Besides keras_tf presets, `load_*` take a name of `keras_tf.models.PRESETS`
(an untrained architecture) and a Hugging Face Marian (OPUS-MT) folder or
`hf://ORG/NAME`, converted by `keras_tf.translation.marian`.

Every file is written under a temporary name and renamed into place
(`keras_tf.atomic_files`), so a kill leaves the old file or the new one.
The text parts need TensorFlow; the backbone loads on any Keras backend.
"""

import dataclasses
import json
import os
import shutil
import zipfile

import keras

from keras_tf.atomic_files import write_atomically, write_json
from keras_tf.preset_checks import (  # noqa: F401  (PresetError: this floor's face)
    MAX_JSON_BYTES,
    PresetError,
    check_fields,
    check_sizes,
    read_json_object,
    regular_file,
)
from keras_tf.decoding.config import DecodingConfig
from keras_tf.models.config import PRESETS, TransformerConfig, get_preset
from keras_tf.models.seq2seq_transformer import Seq2SeqTransformer
from keras_tf.translation.training_options import RUN_FACTS, TrainingOptions
from keras_tf.version import __version__

MODEL_FILE = "model.keras"
CONFIG_FILE = "config.json"
TOKENIZERS_DIR = "tokenizers"
# What Seq2SeqTokenizers.save writes first in its folder (its CONFIG_FILENAME;
# named here too, since keras_tf.text needs TensorFlow).
TOKENIZERS_CONFIG = "tokenizers.json"
DECODING_FILE = "decoding.json"
METADATA_FILE = "metadata.json"
# A training run's files, beside the preset's.
OPTIONS_FILE = "options.json"
HISTORY_FILE = "history.csv"
BACKUP_DIR = "backup"
LOGS_DIR = "logs"
# An adaptation run's files (`keras-tf train --init-from`): the pairs the
# starting model made of --replay-source, and, when model.keras holds a
# merge (--general-valid, --merge-alpha), the fine-tuned model it merged.
REPLAY_PAIRS_FILE = "replay-pairs.tsv"
TUNED_MODEL_FILE = "tuned.keras"

PRESET_FORMAT = "keras_tf.Seq2SeqTranslator"
PRESET_FORMAT_VERSION = 1


@dataclasses.dataclass
class PresetParts:
    """What a preset holds, read but not assembled: `Seq2SeqTranslator.from_preset` assembles it.

    Args:
        backbone: a `Seq2SeqTransformer`.
        preprocessor: a `Seq2SeqPreprocessor`, or None (token ids only).
        decoding: the `DecodingConfig` of the preset, or None (greedy).
        text_unavailable: why the preset's tokenizers could not be read on
            this backend (no TensorFlow), or None.
    """

    backbone: object
    preprocessor: object = None
    decoding: object = None
    text_unavailable: str = None


def unknown_preset(preset):
    """The error for a name that is neither an architecture nor a folder."""
    return ValueError(
        f"Unknown preset {preset!r}: not a directory, and not one of {sorted(PRESETS)}"
    )


def is_marian_preset(preset):
    """Whether `preset` is a Hugging Face Marian model: `hf://...`, or such a directory."""
    # Deferred: the converter reads safetensors and, for text, TensorFlow.
    from keras_tf.translation import marian

    preset = os.fspath(preset)
    return preset.startswith(marian.HF_PREFIX) or (
        not os.path.isfile(os.path.join(preset, MODEL_FILE)) and marian.is_hugging_face_dir(preset)
    )


def _check_metadata(directory):
    path = os.path.join(directory, METADATA_FILE)
    if os.path.isfile(path):
        metadata = read_json_object(path)
        if metadata.get("format_version") != PRESET_FORMAT_VERSION:
            raise PresetError(
                f"{path}: expected format_version={PRESET_FORMAT_VERSION}; "
                f"received format_version={metadata.get('format_version')!r}"
            )


# The type of each TransformerConfig field, as config.json must hold it.
_CONFIG_TYPES = {
    field.name: field.type if isinstance(field.type, type)
    else {"int": int, "float": float, "bool": bool, "str": str}[field.type]
    for field in dataclasses.fields(TransformerConfig)
}
_REQUIRED = ("source_vocabulary_size", "target_vocabulary_size")


def checked_config(values, where):
    """A `TransformerConfig` from a dict read from `where`: fields, types and sizes checked first.

    Every refusal is one `PresetError` line naming `where` and the field.
    """
    unknown = sorted(set(values) - set(_CONFIG_TYPES))
    if unknown:
        raise PresetError(f"{where}: unknown fields {unknown}")
    check_fields(values, {name: _CONFIG_TYPES[name] for name in _REQUIRED}, where)
    check_fields(values, {name: _CONFIG_TYPES[name] for name in values}, where)
    check_sizes({
        "source_vocabulary_size": ("vocabulary_size", values["source_vocabulary_size"]),
        "target_vocabulary_size": ("vocabulary_size", values["target_vocabulary_size"]),
        "d_model": ("d_model", values.get("d_model")),
        "d_ff": ("d_ff", values.get("d_ff")),
        "num_heads": ("num_heads", values.get("num_heads")),
        "num_encoder_layers": ("num_layers", values.get("num_encoder_layers")),
        "num_decoder_layers": ("num_layers", values.get("num_decoder_layers")),
        "max_source_length": ("max_length", values.get("max_source_length")),
        "max_target_length": ("max_length", values.get("max_target_length")),
    }, where)
    try:
        return TransformerConfig.from_dict(values)
    except ValueError as error:
        raise PresetError(f"{where}: {error}") from None


def _read_config(directory):
    """The checked `TransformerConfig` of `directory/config.json`."""
    path = os.path.join(directory, CONFIG_FILE)
    return checked_config(read_json_object(path), path)


def read_config(directory):
    """The checked `TransformerConfig` of a preset directory, without building the model.

    From `config.json`, or from inside `model.keras` where there is none (the
    first release's directories).
    """
    directory = os.fspath(directory)
    if os.path.isfile(os.path.join(directory, CONFIG_FILE)):
        return _read_config(directory)
    return _archived_config(os.path.join(directory, MODEL_FILE))


def _archived_config(path):
    """The `TransformerConfig` inside a `.keras` archive, checked before Keras builds anything."""
    regular_file(path, 2**40)
    try:
        with zipfile.ZipFile(path) as archive:
            with archive.open("config.json") as file:
                if archive.getinfo("config.json").file_size > MAX_JSON_BYTES:
                    raise PresetError(f"{path}: its config.json is too large")
                saved = json.load(file)
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise PresetError(f"{path}: not a Keras archive ({error})") from None
    values = saved.get("config", {}).get("config") if isinstance(saved, dict) else None
    if not isinstance(values, dict):
        raise PresetError(f"{path}: holds no keras_tf model config")
    return checked_config(values, f"{path} (config.json)")


def _read_backbone(directory):
    """The `Seq2SeqTransformer` of `directory/model.keras`, checked against `config.json`."""
    if not os.path.isfile(os.path.join(directory, MODEL_FILE)):
        raise ValueError(
            f"{directory} is not a keras_tf preset (no {MODEL_FILE}); write one with "
            "Seq2SeqTranslator.save_to_preset(DIR) or `keras-tf train --out DIR`"
        )
    _check_metadata(directory)
    config = _read_config(directory) if os.path.isfile(
        os.path.join(directory, CONFIG_FILE)) else None
    model_path = os.path.join(directory, MODEL_FILE)
    archived = _archived_config(model_path)
    if config is not None and archived != config:
        raise PresetError(
            f"{directory}: {MODEL_FILE} was built with another config than {CONFIG_FILE}"
        )
    try:
        backbone = keras.models.load_model(model_path, compile=False)
    except (OSError, ValueError, TypeError, KeyError) as error:
        # Keras's safe mode refuses what it does not know with a TypeError.
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PresetError(f"Cannot load {model_path}: {first_line}") from None
    if not isinstance(backbone, Seq2SeqTransformer):
        raise PresetError(
            f"{model_path} holds a {type(backbone).__name__}, not a keras_tf Seq2SeqTransformer"
        )
    return backbone


def read_tokenizers(folder, max_source_length, max_target_length):
    """`(preprocessor, text_unavailable)` from the tokenizers `Seq2SeqTokenizers.save` wrote.

    `(None, None)` when `folder` holds none. Without TensorFlow the model
    still loads and takes token ids; `text_unavailable` says why text cannot.
    """
    if not os.path.isfile(os.path.join(folder, TOKENIZERS_CONFIG)):
        return None, None
    try:
        # Deferred, both: TensorFlow (TF-Text), which a JAX user may not have.
        from keras_tf.text.preprocessor import Seq2SeqPreprocessor
        from keras_tf.text.tokenizers import Seq2SeqTokenizers
    except ModuleNotFoundError as error:
        if error.name != "tensorflow":
            raise
        return None, f"{folder}: {error}"
    tokenizers = Seq2SeqTokenizers.load(folder)
    return Seq2SeqPreprocessor(tokenizers, max_source_length, max_target_length), None


def read_decoding(directory):
    """The `DecodingConfig` of a preset directory's `decoding.json`, or None."""
    path = os.path.join(directory, DECODING_FILE)
    if not os.path.lexists(path):
        return None
    try:
        return DecodingConfig.from_dict(read_json_object(path))
    except (TypeError, ValueError) as error:
        if isinstance(error, PresetError):
            raise
        raise PresetError(f"{path}: {error}") from None


def _check_folder(preset):
    if not os.path.isdir(preset):
        raise unknown_preset(preset)


def load_parts(preset, *, tokenizers=None, load_weights=True, dtype=None, **config_overrides):
    """The parts of a preset (name, directory or Marian model): a `PresetParts`.

    Args:
        preset: a name in `keras_tf.models.PRESETS` (an untrained
            architecture), a keras_tf preset directory, or a Hugging Face
            Marian directory or `hf://ORG/NAME`.
        tokenizers: for a name, the `Seq2SeqTokenizers` whose vocabulary
            sizes the model takes. Defaults to None: token ids only.
        load_weights: for a directory, keep the trained weights; False
            gives the same architecture with fresh weights.
        dtype: a dtype policy for a name, e.g. "mixed_bfloat16".
        **config_overrides: `TransformerConfig` fields for a name.
    """
    preset = os.fspath(preset)
    if preset in PRESETS:
        preprocessor = None
        if tokenizers is not None:
            config_overrides = {
                "source_vocabulary_size": tokenizers.source_vocabulary_size,
                "target_vocabulary_size": tokenizers.target_vocabulary_size,
                **config_overrides,
            }
        config = get_preset(preset, **config_overrides)
        if tokenizers is not None:
            from keras_tf.text.preprocessor import Seq2SeqPreprocessor  # TensorFlow: deferred

            preprocessor = Seq2SeqPreprocessor(
                tokenizers, config.max_source_length, config.max_target_length
            )
        return PresetParts(Seq2SeqTransformer(config, dtype=dtype), preprocessor)
    is_marian = is_marian_preset(preset)
    if not is_marian:
        _check_folder(preset)
    if config_overrides or tokenizers is not None or dtype is not None:
        given = sorted(config_overrides) + ["tokenizers"] * (tokenizers is not None)
        given += ["dtype"] * (dtype is not None)
        raise ValueError(
            f"A preset directory fixes its model and tokenizers; received {given} for {preset}"
        )
    if is_marian:
        # Deferred: the converter's tokenizers need TensorFlow, a keras_tf preset's backbone does not.
        from keras_tf.translation import marian

        converted = marian.convert(preset)
        backbone = converted.backbone if load_weights else Seq2SeqTransformer(converted.config)
        return PresetParts(backbone, converted.preprocessor, converted.decoding)
    backbone = _read_backbone(preset)
    config = backbone.config
    if not load_weights:
        backbone = Seq2SeqTransformer(config)
    preprocessor, text_unavailable = read_tokenizers(
        os.path.join(preset, TOKENIZERS_DIR), config.max_source_length, config.max_target_length
    )
    return PresetParts(backbone, preprocessor, read_decoding(preset), text_unavailable)


def load_backbone(preset, *, load_weights=True, dtype=None, **config_overrides):
    """The `Seq2SeqTransformer` of a preset, as keras-hub's `Backbone.from_preset`.

    Example:
        >>> model = load_backbone("transformer_tiny", num_encoder_layers=1)
        >>> model.config.num_encoder_layers, model.config.d_model
        (1, 32)
    """
    preset = os.fspath(preset)
    if preset not in PRESETS and not is_marian_preset(preset):
        _check_folder(preset)
        backbone = _read_backbone(preset)  # the tokenizers stay unread
        if config_overrides or dtype is not None:
            raise ValueError(
                f"A preset directory fixes its model; received "
                f"{sorted(config_overrides) + ['dtype'] * (dtype is not None)} for {preset}"
            )
        return backbone if load_weights else Seq2SeqTransformer(backbone.config)
    return load_parts(
        preset, load_weights=load_weights, dtype=dtype, **config_overrides
    ).backbone


def load_preprocessor(preset):
    """The `Seq2SeqPreprocessor` of a preset directory or an OPUS-MT model, without its weights.

    Its tokenizers, framed to the lengths of the preset's `config.json`.
    Needs TensorFlow.
    """
    preset = os.fspath(preset)
    if preset in PRESETS:
        raise ValueError(
            f"{preset!r} is an untrained architecture and has no tokenizers; learn them with "
            "keras_tf.text.Seq2SeqTokenizers.train, or pass a preset directory"
        )
    if is_marian_preset(preset):
        # Deferred: the converter's tokenizers need TensorFlow (TF-Text).
        from keras_tf.translation import marian

        return marian.convert_preprocessor(preset)
    _check_folder(preset)
    folder = os.path.join(preset, TOKENIZERS_DIR)
    config_path = os.path.join(preset, CONFIG_FILE)
    missing = [path for path in (os.path.join(folder, TOKENIZERS_CONFIG), config_path)
               if not os.path.isfile(path)]
    if missing:
        raise ValueError(
            f"{preset} is not a preset directory with tokenizers: no {' and no '.join(missing)}; "
            "write one with Seq2SeqTranslator.save_to_preset(DIR) or `keras-tf train --out DIR`"
        )
    config = _read_config(preset)
    preprocessor, text_unavailable = read_tokenizers(
        folder, config.max_source_length, config.max_target_length
    )
    if preprocessor is None:
        raise ModuleNotFoundError(text_unavailable)
    return preprocessor


def load_tokenizers(preset):
    """The `Seq2SeqTokenizers` of a preset directory or an OPUS-MT model (`load_preprocessor`'s)."""
    return load_preprocessor(preset).tokenizers


def load_decoding(preset):
    """The `DecodingConfig` a preset decodes with: its `decoding.json`, or greedy."""
    preset = os.fspath(preset)
    if preset in PRESETS:
        return DecodingConfig()
    return load_parts(preset).decoding or DecodingConfig()


# --- writing ---


def write_backbone(directory, backbone):
    """Write `config.json` and `model.keras` of `backbone` into `directory`, each atomically."""
    write_json(os.path.join(directory, CONFIG_FILE), backbone.config.to_dict())
    write_atomically(os.path.join(directory, MODEL_FILE), backbone.save)


def write_tokenizers(directory, tokenizers):
    """Write `tokenizers/` into `directory`, replacing any there, atomically."""
    write_atomically(os.path.join(directory, TOKENIZERS_DIR), tokenizers.save)


def write_decoding(directory, decoding):
    """Write `decoding.json` into `directory`, atomically."""
    write_json(os.path.join(directory, DECODING_FILE), decoding.to_dict())


def write_metadata(directory, lora=None, merged=None):
    """Write `metadata.json`: the format, the versions that wrote it, any merged LoRA or weights.

    Args:
        lora: `backbone.lora` of a model trained with LoRA factors (their
            rank and layers), which `model.keras` holds merged into its kernels.
        merged: how `model.keras` was merged from two models' weights
            (`keras_tf.training.merging`: the base, the tuned run, α and any
            scores), a dict. Defaults to None: it was not.
    """
    metadata = {
        "format": PRESET_FORMAT,
        "format_version": PRESET_FORMAT_VERSION,
        "keras_tf_version": __version__,
        "keras_version": keras.__version__,
        "backend": keras.backend.backend(),
    }
    if lora is not None:
        metadata["lora_merged"] = lora
    if merged is not None:
        metadata["weights_merged"] = merged
    write_json(os.path.join(directory, METADATA_FILE), metadata)


def read_metadata(directory):
    """The `metadata.json` of a preset directory as a dict, or {} without one."""
    path = os.path.join(directory, METADATA_FILE)
    return read_json_object(path) if os.path.isfile(path) else {}


def write_options(directory, options, **facts):
    """Write `options.json`: a training run's `TrainingOptions`, and `facts` of its data."""
    write_json(os.path.join(directory, OPTIONS_FILE), {**options.to_dict(), **facts})


def read_run_facts(directory):
    """The facts of a run's data that `options.json` records beside its options, as a dict."""
    path = os.path.join(directory, OPTIONS_FILE)
    values = read_json_object(path) if os.path.isfile(path) else {}
    return {name: values[name] for name in RUN_FACTS if name in values}


def read_options(directory):
    """The `TrainingOptions` of the run in `directory`, or None without an `options.json`.

    A file written before an option existed reads that option's default.
    """
    path = os.path.join(directory, OPTIONS_FILE)
    if not os.path.isfile(path):
        return None
    values = read_json_object(path)
    try:
        return TrainingOptions.from_dict(values)
    except ValueError as error:
        raise PresetError(f"{path}: {error}") from None


def write_replay_pairs(directory, sources, targets):
    """Write `replay-pairs.tsv`: one `source<TAB>target` line a pair, atomically.

    A tab or line break inside a sentence is written as a space.
    """
    def clean(text):
        return " ".join(text.replace("\t", " ").splitlines())

    def write(path):
        with open(path, "w", encoding="utf-8", newline="\n") as file:
            for source, target in zip(sources, targets):
                file.write(f"{clean(source)}\t{clean(target)}\n")

    write_atomically(os.path.join(directory, REPLAY_PAIRS_FILE), write)


def read_replay_pairs(directory):
    """`(sources, targets)` of `replay-pairs.tsv` in `directory`, or None without one."""
    path = os.path.join(directory, REPLAY_PAIRS_FILE)
    if not os.path.isfile(path):
        return None
    sources, targets = [], []
    with open(path, encoding="utf-8", newline="\n") as file:
        for number, line in enumerate(file, 1):
            source, tab, target = line.rstrip("\n").partition("\t")
            if not tab:
                raise PresetError(f"{path}:{number}: expected source<TAB>target")
            sources.append(source)
            targets.append(target)
    return sources, targets


def write_tuned_backbone(directory, backbone):
    """Write `tuned.keras`: the fine-tuned model a merge in `model.keras` was made from."""
    write_atomically(os.path.join(directory, TUNED_MODEL_FILE), backbone.save)


def restore_tuned_backbone(directory):
    """Move `tuned.keras` back to `model.keras`, if a merge left one: a resumed run trains it.

    Returns:
        Whether there was one.
    """
    tuned = os.path.join(directory, TUNED_MODEL_FILE)
    if not os.path.isfile(tuned):
        return False
    os.replace(tuned, os.path.join(directory, MODEL_FILE))
    return True


def save_preset(directory, backbone, tokenizers=None, decoding=None):
    """Write a complete preset: backbone, tokenizers (when given), decoding settings, metadata.

    What every writer of a preset calls (`save_to_preset`, `import-marian`,
    `average`; `keras-tf train` writes the same files as it goes).
    """
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    write_backbone(directory, backbone)
    if tokenizers is not None:
        write_tokenizers(directory, tokenizers)
    write_decoding(directory, decoding if decoding is not None else DecodingConfig())
    write_metadata(directory, backbone.lora)


def copy_text_files(source, directory):
    """Copy `tokenizers/` and `decoding.json` from preset `source` into `directory`, byte for byte.

    What a fine-tuned or averaged model keeps of the model it came from: its
    tokenizers and its decoding settings (an imported OPUS-MT model keeps
    Marian's length penalty and limit). A missing `decoding.json` is written
    as the default (greedy), so every preset holds one.
    """
    folder = os.path.join(source, TOKENIZERS_DIR)
    if os.path.isdir(folder):
        write_atomically(
            os.path.join(directory, TOKENIZERS_DIR), lambda path: shutil.copytree(folder, path)
        )
    decoding = os.path.join(source, DECODING_FILE)
    if os.path.isfile(decoding):
        write_atomically(
            os.path.join(directory, DECODING_FILE), lambda path: shutil.copyfile(decoding, path)
        )
    else:
        write_decoding(directory, DecodingConfig())
