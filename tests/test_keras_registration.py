"""`keras_tf.REGISTERING_MODULES` lists every module that registers a class."""

import pathlib

from keras_tf import REGISTERING_MODULES

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "keras_tf"


def test_every_registering_module_is_listed():
    registering = sorted(
        "keras_tf." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for path in PACKAGE.rglob("*.py")
        if "@keras.saving.register_keras_serializable" in path.read_text(encoding="utf-8")
    )
    assert registering == sorted(REGISTERING_MODULES)
