"""Corpora that ship with keras_tf's optional extras.

`load_jupyterlab_fr` reads ~3,000 English->French UI strings from the
JupyterLab French language pack (`pip install -e ".[demo]"`).
"""

from keras_tf.datasets.jupyterlab_fr import CatalogStats, JupyterLabFr, load_jupyterlab_fr

__all__ = ["CatalogStats", "JupyterLabFr", "load_jupyterlab_fr"]
