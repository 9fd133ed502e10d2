"""Export a trained model for TF Serving (a string-in, string-out SavedModel) or for CTranslate2.

    keras-tf export --model run1 --out models/translator/1
    docker run -p 8501:8501 -v "$PWD/models/translator:/models/translator" \
        -e MODEL_NAME=translator tensorflow/serving
    keras-tf export --model run1 --format ctranslate2 --quantize int8 --out translator_ct2

--out is BASE/NAME/VERSION, the layout TF Serving polls (serve BASE/NAME);
without a trailing version number the next free version is used. The
signature `serving_default` takes `text` (string [batch]) and returns
`translation` (string [batch]) and `score` (float [batch]); the decoding
(--beam-size, --max-length, --length-penalty) is fixed at export time.
--xla compiles the generation with XLA, for servers started with
--xla_cpu_compilation_enabled (or the GPU flag); see docs/serving.md. The
export holds TF Serving's warm-up requests (--no-warmup: none). An existing
VERSION is refused (TF Serving versions are immutable) unless --overwrite
replaces it.

--format ctranslate2 writes a CTranslate2 model directory (--out DIR) with
the tokenizers (needs the ctranslate2 package); --quantize int8 then gives
CTranslate2's int8 weights.
"""

import importlib.util
import os
import shutil
import tempfile

from keras_tf.atomic_files import user_named
from keras_tf.cli.errors import UserError, int_in_range
from keras_tf.cli.model_dir import add_quantize_argument
from keras_tf.cli.outputs import write_folder
from keras_tf.cli.targets import add_overwrite_argument, check_not_a_file


FORMATS = ("savedmodel", "ctranslate2")
CTRANSLATE2_HINT = 'pip install "keras-tf[ctranslate2]"'


def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="DIR", help="from keras-tf train")
    parser.add_argument(
        "--out", required=True, metavar="BASE/NAME/VERSION",
        help="where the SavedModel goes; with --format ctranslate2, a new directory",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="savedmodel",
        help="savedmodel (TF Serving) or ctranslate2; default: savedmodel",
    )
    parser.add_argument(
        "--beam-size", metavar="N", type=int_in_range(1), default=4,
        help="1 for greedy decoding; default: 4, the paper's",
    )
    parser.add_argument(
        "--max-length", metavar="N", type=int_in_range(1), default=None,
        help="the most target tokens per translation, END included; default: the preset's "
        "(decoding.json), else the model's max_target_length",
    )
    parser.add_argument(
        "--length-penalty", metavar="A", type=float, default=None,
        help="beam search's length penalty alpha, in [-10, 10], in the preset's style (GNMT or "
        "len^alpha); default: the preset's (decoding.json), else 0.6",
    )
    add_quantize_argument(parser)
    parser.add_argument(
        "--xla", action="store_true",
        help="compile the generation with XLA (needs TF Serving's XLA flag)",
    )
    parser.add_argument(
        "--no-warmup", dest="warmup", action="store_false",
        help="write no TF Serving warm-up requests (assets.extra/tf_serving_warmup_requests)",
    )
    add_overwrite_argument(parser, "the new export (an existing VERSION)")


def split_version(out):
    """`(model_base_path, version)` of `BASE/NAME/VERSION`; version None without a number.

    Example:
        >>> split_version("models/translator/3"), split_version("models/translator")
        (('models/translator', 3), ('models/translator', None))
    """
    out = os.path.normpath(out)
    head, tail = os.path.split(out)
    if tail.isdigit():
        if int(tail) < 1:
            raise UserError(f"--out: the version must be a positive integer; received {tail}")
        return head or ".", int(tail)
    return out, None


def run(args):
    from keras_tf.cli.batch_translation import decoding_for
    from keras_tf.cli.model_dir import check_model_dir, load_model_dir

    # The checks that need no model first: the decoding flags are DecodingConfig's to check.
    decoding_for(args.beam_size, max_length=args.max_length, length_penalty=args.length_penalty)
    check_model_dir(args.model)
    if args.format == "ctranslate2":
        return run_ctranslate2(args)
    check_not_a_file(args.out)
    model_base_path, version = split_version(args.out)
    version_dir = os.path.join(model_base_path, str(version))
    replace = version is not None and os.path.exists(version_dir)
    if replace and not args.overwrite:
        raise UserError(
            f"--out: {args.out} exists, and TF Serving versions are immutable; pass a new "
            "version number, or --overwrite to replace it (its files are deleted)"
        )
    trained = load_model_dir(args.model, quantize=args.quantize)
    check_max_length(args, trained.translator)
    decoding = decoding_for(
        args.beam_size, trained.translator.decoding,
        max_length=args.max_length, length_penalty=args.length_penalty,
    )
    if not replace:
        print(_export(trained.translator, model_base_path, version, decoding, args))
        return 0
    # Exported beside, under a hidden name TF Serving ignores, then swapped in.
    try:
        holder = tempfile.mkdtemp(prefix=f".{version}.overwrite-", dir=model_base_path)
    except OSError as error:
        raise UserError(f"--out: cannot write in {model_base_path}: {error.strerror}") from None
    try:
        write_folder(version_dir, lambda path: os.rename(
            _export(trained.translator, holder, version, decoding, args, named=model_base_path),
            path))
    finally:
        shutil.rmtree(holder, ignore_errors=True)
    print(version_dir)
    return 0


def _export(translator, model_base_path, version, decoding, args, named=None):
    """`translator.export`; a folder TensorFlow cannot write is a `UserError`.

    `named`: the folder the user gave, named in the message instead of
    `model_base_path` when that is a staging folder beside it.
    """
    import tensorflow as tf

    try:
        return translator.export(model_base_path, version=version, decoding=decoding,
                                 xla=args.xla, warmup=args.warmup)
    except (tf.errors.PermissionDeniedError, tf.errors.FailedPreconditionError) as error:
        message = error.message if named is None else error.message.replace(
            model_base_path, named)
        raise UserError(f"--out: {message}") from None
    except OSError as error:
        if named is not None:
            error = user_named(error, model_base_path, named)
        raise UserError(f"--out: {error}") from None


def check_max_length(args, translator):
    longest = translator.config.max_target_length
    if args.max_length is not None and args.max_length > longest:
        raise UserError(
            f"--max-length: {args.max_length} is beyond the model's max_target_length={longest}"
        )


def run_ctranslate2(args):
    """The CTranslate2 directory: the float32 model, converted (and quantized) by CTranslate2."""
    from keras_tf.cli.batch_translation import decoding_for
    from keras_tf.cli.model_dir import load_model_dir

    if importlib.util.find_spec("ctranslate2") is None:
        raise UserError(f"--format ctranslate2 needs the ctranslate2 package ({CTRANSLATE2_HINT})")
    if args.xla:
        raise UserError("--xla applies to the SavedModel; CTranslate2 has no XLA")
    if os.path.isdir(args.out) and os.listdir(args.out) or os.path.isfile(args.out):
        raise UserError(f"--out: {args.out} exists; pass a new directory")
    trained = load_model_dir(args.model)
    check_max_length(args, trained.translator)
    translator = trained.translator
    decoding = decoding_for(
        args.beam_size, translator.decoding,
        max_length=args.max_length, length_penalty=args.length_penalty,
    )
    print(translator.export_ctranslate2(args.out, quantization=args.quantize, decoding=decoding))
    return 0
