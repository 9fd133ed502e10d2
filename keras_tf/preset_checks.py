"""Reading a downloaded model folder safely: checked JSON, confined file names, sane sizes.

A preset (or an OPUS-MT folder) may come from anywhere. Its JSON files are
read with a size bound and checked field by field before use; every file
name it mentions must be a bare name of a regular file inside its folder,
so `../x`, an absolute path, a symlink out of the folder, `/dev/zero` or a
FIFO is refused at once; and architecture sizes are held to bounds no real
model reaches, before anything is allocated. Every refusal is a
`PresetError`, one line that names the file and the field.
"""

import json
import os
import stat

# A JSON config of a model folder is a few KB; a vocabulary a few MB.
MAX_JSON_BYTES = 64 * 2**20
# SentencePiece models, WordPiece vocabularies: tens of MB at most.
MAX_TOKENIZER_BYTES = 512 * 2**20

# Bounds no trained translation model reaches, far above the largest (an
# NLLB-sized d_model of 2,048, 256,000 ids, 48 layers); they stop a crafted
# config before it asks for terabytes.
SIZE_LIMITS = {
    "vocabulary_size": 2**22,
    "d_model": 2**15,
    "d_ff": 2**17,
    "num_heads": 2**10,
    "num_layers": 2**8,
    "max_length": 2**16,
}


class PresetError(ValueError):
    """A model folder that cannot be read as one: the message names the file and the field."""


def read_json_object(path, max_bytes=MAX_JSON_BYTES):
    """The JSON object (a dict) in `path`: a `PresetError` for anything else.

    Example:
        >>> import pathlib, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "config.json")
        >>> _ = pathlib.Path(path).write_text("[1, 2]")
        >>> read_json_object(path)
        Traceback (most recent call last):
        ...
        keras_tf.preset_checks.PresetError: .../config.json: expected a JSON object; received a list
    """
    regular_file(path, max_bytes)
    try:
        with open(path, encoding="utf-8") as file:
            values = json.load(file)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise PresetError(f"{path}: not JSON ({error})") from None
    if not isinstance(values, dict):
        raise PresetError(f"{path}: expected a JSON object; received a {type(values).__name__}")
    return values


def regular_file(path, max_bytes):
    """Raise `PresetError` unless `path` is a regular file of at most `max_bytes`."""
    try:
        status = os.stat(path)
    except OSError as error:
        raise PresetError(f"{path}: {error.strerror}") from None
    if not stat.S_ISREG(status.st_mode):
        raise PresetError(f"{path}: not a regular file")
    if status.st_size > max_bytes:
        raise PresetError(f"{path}: {status.st_size} bytes, more than the {max_bytes} allowed")
    return path


def confined_file(folder, name, field, where, max_bytes=MAX_TOKENIZER_BYTES):
    """The path of file `name` in `folder`, refused unless it is a bare name of a regular file there.

    Args:
        folder: the folder the name is relative to.
        name: the file name read from a config.
        field: the config field that holds it, for the message.
        where: the config file, for the message.

    Example:
        >>> confined_file("/tmp", "../etc/passwd", "files.shared", "tokenizers.json")
        Traceback (most recent call last):
        ...
        keras_tf.preset_checks.PresetError: tokenizers.json: files.shared='../etc/passwd' must be a file name in /tmp, without a folder
    """
    if (not isinstance(name, str) or not name or name in (".", "..")
            or os.path.basename(name) != name or os.sep in name or "\0" in name):
        raise PresetError(
            f"{where}: {field}={name!r} must be a file name in {folder}, without a folder"
        )
    path = os.path.join(folder, name)
    real_folder = os.path.realpath(folder)
    if os.path.dirname(os.path.realpath(path)) != real_folder:
        raise PresetError(f"{where}: {field}={name!r} leads out of {folder}")
    try:
        return regular_file(path, max_bytes)
    except PresetError as error:
        raise PresetError(f"{where}: {field}={name!r}: {error}") from None


def check_fields(values, fields, where):
    """Raise `PresetError` unless each of `fields` is present with a value of its type.

    Args:
        values: the dict read from `where`.
        fields: `{name: type or tuple of types}`; a float field takes an int
            too; a bool is not an int.
        where: the file, for the message.

    Example:
        >>> check_fields({"d_model": "32"}, {"d_model": int}, "config.json")
        Traceback (most recent call last):
        ...
        keras_tf.preset_checks.PresetError: config.json: d_model must be an int; received '32'
    """
    for name, types in fields.items():
        types = types if isinstance(types, tuple) else (types,)
        if name not in values:
            raise PresetError(f"{where}: no {name} field")
        value = values[name]
        allowed = types + ((int,) if float in types else ())
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in types):
            names = " or ".join(t.__name__ for t in types)
            raise PresetError(f"{where}: {name} must be a{'n' if names[0] in 'aeiou' else ''} "
                              f"{names}; received {value!r}")


def check_sizes(sizes, where):
    """Raise `PresetError` if a size is over `SIZE_LIMITS`: `sizes` maps a field to `(kind, value)`.

    Example:
        >>> check_sizes({"d_model": ("d_model", 10**9)}, "config.json")
        Traceback (most recent call last):
        ...
        keras_tf.preset_checks.PresetError: config.json: d_model=1000000000 is beyond the 32768 that any real model stays under
    """
    for field, (kind, value) in sizes.items():
        if isinstance(value, int) and not isinstance(value, bool) and value > SIZE_LIMITS[kind]:
            raise PresetError(
                f"{where}: {field}={value} is beyond the {SIZE_LIMITS[kind]} that any real "
                "model stays under"
            )
