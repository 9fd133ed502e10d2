"""Checkpoint averaging: the mean of the weights of the last epochs' checkpoints.

Averaging the parameters of the last few checkpoints is what the paper did
for its results (section 6.1: "the last 5 checkpoints, written at 10-minute
intervals") and what OpenNMT, fairseq and Marian offer; it is worth about
one BLEU point. `keras_tf.training.train(keep_checkpoints=N)` keeps the
weights of the last N epochs in `out_dir/backup/`; `average_checkpoints`
loads them into a model and sets each floating-point variable to their mean.
"""

import os
import re

import numpy as np

_CHECKPOINT = re.compile(r"^epoch-(\d+)\.weights\.h5$")


def epoch_checkpoints(backup_dir):
    """`[(epoch, path)]` of the epoch checkpoints in `backup_dir`, oldest first.

    Example:
        >>> import tempfile
        >>> epoch_checkpoints(tempfile.mkdtemp())
        []
    """
    found = []
    for name in os.listdir(backup_dir):
        match = _CHECKPOINT.match(name)
        if match:
            found.append((int(match.group(1)), os.path.join(backup_dir, name)))
    return sorted(found)


def average_checkpoints(model, paths):
    """Set `model`'s weights to the mean of the checkpoints' weights; return the model.

    Args:
        model: a built model of the architecture the checkpoints were saved
            from (e.g. loaded from the run's `model.keras`).
        paths: weights files written by `model.save_weights`. Floating-point
            variables get the mean; the others (counters, random seeds)
            those of the last file.

    Returns:
        `model`, its weights replaced.
    """
    paths = list(paths)
    if not paths:
        raise ValueError("average_checkpoints needs at least one weights file; received none")
    total = None
    for path in paths:
        model.load_weights(path)
        values = [np.asarray(variable.numpy(), np.float64) for variable in model.weights]
        total = values if total is None else [a + b for a, b in zip(total, values)]
    for variable, summed in zip(model.weights, total):
        if np.issubdtype(np.dtype(variable.dtype), np.floating):
            variable.assign((summed / len(paths)).astype(variable.dtype))
    return model
