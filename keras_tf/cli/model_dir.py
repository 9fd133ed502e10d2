"""The model directory of the command line: a preset directory with tokenizers.

`keras-tf train` writes one (`keras_tf.training.preset_dir.train_preset_dir`);
the other commands read it with `load_model_dir`, which is
`Seq2SeqTranslator.from_preset` with the checks and errors of a command line.
"""

import dataclasses
import os

from keras_tf.cli.errors import UserError
from keras_tf.atomic_files import read_json
from keras_tf.translation.presets import (
    HISTORY_FILE,
    MODEL_FILE,
    OPTIONS_FILE,
    TOKENIZERS_CONFIG,
    TOKENIZERS_DIR,
)

__all__ = [
    "HISTORY_FILE",
    "ModelDir",
    "add_quantize_argument",
    "check_model_dir",
    "check_preset",
    "load_model_dir",
]


@dataclasses.dataclass
class ModelDir:
    """A trained model read back from its directory.

    Args:
        path: the directory.
        model: the best `Seq2SeqTransformer` (`model.keras`), the translator's backbone.
        tokenizers: its `Seq2SeqTokenizers`.
        options: the `options.json` dict it was trained with.
        translator: the `Seq2SeqTranslator` of the directory, read with
            `Seq2SeqTranslator.from_preset`.
    """

    path: str
    model: object
    tokenizers: object
    options: dict
    translator: object = None


def check_preset(name):
    """Raise `UserError` unless `name` is a preset of `keras_tf.models.PRESETS`."""
    from keras_tf.models import get_preset

    try:
        get_preset(name)
    except ValueError as error:
        raise UserError(f"--preset: {error}") from None


def check_model_dir(path, option="--model"):
    """Raise `UserError` unless `path` holds a trained model and its tokenizers."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"{option}: not a directory: {path}")
    if not os.path.isdir(path):
        raise UserError(f"{option}: no such directory: {path}")
    for name in (MODEL_FILE, os.path.join(TOKENIZERS_DIR, TOKENIZERS_CONFIG)):
        if not os.path.isfile(os.path.join(path, name)):
            _check_not_marian(path, option)
            raise UserError(
                f"{option}: {path} is not a keras-tf model directory (no {name}); "
                "`keras-tf train --out DIR` writes one"
            )


def _check_not_marian(path, option):
    """Raise `UserError` naming `keras-tf import-marian` if `path` is an OPUS-MT model folder."""
    from keras_tf.translation.presets import is_marian_preset

    if is_marian_preset(path):
        raise UserError(
            f"{option}: {path} is an OPUS-MT (Hugging Face Marian) model, not a keras-tf model "
            f"directory; convert it first: keras-tf import-marian --model {path} --out DIR"
        )


def add_quantize_argument(parser):
    """`--quantize int8`, for the commands that decode a model directory."""
    from keras_tf.models.seq2seq_transformer import QUANTIZATION_MODES

    parser.add_argument(
        "--quantize", choices=QUANTIZATION_MODES,
        help="store the Dense kernels and embeddings in int8 before decoding "
        "(Seq2SeqTransformer.quantize); default: float32 as trained",
    )


def load_model_dir(path, quantize=None):
    """Read the translator of a model directory (a preset directory) and its options.

    Args:
        path: the directory.
        quantize: None, or a mode of `Seq2SeqTransformer.quantize` ("int8")
            applied to the model once loaded.
    """
    check_model_dir(path)
    from keras_tf.translation import Seq2SeqTranslator

    try:
        translator = Seq2SeqTranslator.from_preset(path)
    except (OSError, ValueError) as error:
        raise UserError(f"--model: {error}") from None
    if quantize is not None:
        translator.quantize(quantize)
    options_path = os.path.join(path, OPTIONS_FILE)
    options = read_json(options_path) if os.path.exists(options_path) else {}
    return ModelDir(
        path, translator.backbone, translator.preprocessor.tokenizers, options, translator
    )
