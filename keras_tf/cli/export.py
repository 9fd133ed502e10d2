"""Export a trained model as a string-in, string-out SavedModel for TF Serving.

    keras-tf export --model run1 --out models/translator/1
    docker run -p 8501:8501 -v "$PWD/models/translator:/models/translator" \
        -e MODEL_NAME=translator tensorflow/serving

--out is BASE/NAME/VERSION, the layout TF Serving polls (serve BASE/NAME);
without a trailing version number the next free version is used. The
signature `serving_default` takes `text` (string [batch]) and returns
`translation` (string [batch]) and `score` (float [batch]); the decoding
(--beam-size) is fixed at export time. --xla compiles the generation with
XLA, for servers started with --xla_cpu_compilation_enabled (or the GPU
flag); see docs/serving.md. An existing VERSION is refused (TF Serving
versions are immutable) unless --overwrite replaces it.
"""

import os
import shutil
import tempfile

from keras_tf.cli.errors import UserError, int_in_range
from keras_tf.cli.model_dir import add_quantize_argument
from keras_tf.cli.outputs import write_folder
from keras_tf.cli.targets import add_overwrite_argument, check_not_a_file


def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="DIR", help="from keras-tf train")
    parser.add_argument(
        "--out", required=True, metavar="BASE/NAME/VERSION", help="where the SavedModel goes"
    )
    parser.add_argument(
        "--beam-size", metavar="N", type=int_in_range(1), default=4,
        help="1 for greedy decoding; default: 4, the paper's",
    )
    add_quantize_argument(parser)
    parser.add_argument(
        "--xla", action="store_true",
        help="compile the generation with XLA (needs TF Serving's XLA flag)",
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

    check_model_dir(args.model)
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
    decoding = decoding_for(args.beam_size, trained.translator.decoding)
    if not replace:
        print(_export(trained.translator, model_base_path, version, decoding, args.xla))
        return 0
    # Exported beside, under a hidden name TF Serving ignores, then swapped in.
    holder = tempfile.mkdtemp(prefix=f".{version}.overwrite-", dir=model_base_path)
    try:
        write_folder(version_dir, lambda path: os.rename(
            _export(trained.translator, holder, version, decoding, args.xla), path))
    finally:
        shutil.rmtree(holder, ignore_errors=True)
    print(version_dir)
    return 0


def _export(translator, model_base_path, version, decoding, xla):
    """`translator.export`; a folder TensorFlow cannot write is a `UserError`."""
    import tensorflow as tf

    try:
        return translator.export(model_base_path, version=version, decoding=decoding, xla=xla)
    except (tf.errors.PermissionDeniedError, tf.errors.FailedPreconditionError) as error:
        raise UserError(f"--out: {error.message}") from None
