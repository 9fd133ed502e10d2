"""Figures: the training curve, a cross-attention heatmap, the positional-encoding matrix.

Drawn with matplotlib's object API (`matplotlib.figure.Figure`, saved through
the Agg canvas): no display, no pyplot state shared between calls. Each
figure has a fixed size in pixels, `<NAME>_SIZE` inches times `DPI`.
matplotlib comes with the `.[demo]` extra.
"""

import csv
import textwrap

import numpy as np
from matplotlib.figure import Figure

DPI = 100
TRAINING_CURVE_SIZE = (10, 4)  # inches: 1000 x 400 pixels
ATTENTION_SIZE = (9, 7)  # 900 x 700
POSITIONAL_ENCODING_SIZE = (9, 5)  # 900 x 500
TITLE_WIDTH = 80  # characters a line of the attention map's title holds at its 900 pixels


def read_history(path):
    """The `history.csv` that training writes, as `{column: [float per epoch]}`.

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "history.csv"
        >>> _ = path.write_text("epoch,loss\\n0,2.5\\n1,1.5\\n")
        >>> read_history(path)
        {'epoch': [0.0, 1.0], 'loss': [2.5, 1.5]}
    """
    with open(path, newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    if not rows:
        raise ValueError(f"{path} holds no finished epoch")
    return {name: [float(row[name]) for row in rows] for name in rows[0]}


def kept_epoch(history, keep_best=None):
    """The 1-based epoch whose model training keeps, and how it was picked; `(None, None)` if none.

    Args:
        history: as for `training_curve`.
        keep_best: `"bleu"` (the highest `val_bleu`) or `"loss"` (the lowest
            `val_loss`). Defaults to None: BLEU where the history has it, as
            `keras-tf train` does with a validation set, otherwise the loss.

    Example:
        >>> kept_epoch({"loss": [3, 2, 1], "val_loss": [2.0, 1.5, 1.6], "val_bleu": [1.0, 2.0, 4.0]})
        (3.0, 'best validation BLEU')
        >>> kept_epoch({"loss": [3, 2, 1], "val_loss": [2.0, 1.5, 1.6]})
        (2.0, 'lowest validation loss')
    """
    epochs = np.asarray(history.get("epoch", range(len(history["loss"]))), dtype=float) + 1
    if keep_best is None:
        keep_best = "bleu" if history.get("val_bleu") else "loss"
    if keep_best == "bleu" and history.get("val_bleu"):
        return float(epochs[int(np.argmax(history["val_bleu"]))]), "best validation BLEU"
    if keep_best == "loss" and history.get("val_loss"):
        return float(epochs[int(np.argmin(history["val_loss"]))]), "lowest validation loss"
    return None, None


def averaged_span(average):
    """`(first epoch, last epoch, label)` of an average the run kept as its model, or None.

    Args:
        average: the `"average"` record of a run's `options.json` (`keras-tf
            train --average-last`: `epochs`, `chosen`, ...), or None.

    Example:
        >>> averaged_span({"epochs": [8, 9, 10], "chosen": True})
        (8.0, 10.0, 'kept model: the mean of epochs 8-10')
        >>> averaged_span({"epochs": [8, 9, 10], "chosen": False}) is None
        True
    """
    if not average or not average.get("chosen"):
        return None
    first, last = float(average["epochs"][0]), float(average["epochs"][-1])
    return first, last, f"kept model: the mean of epochs {first:g}-{last:g}"


def training_curve(history, path, *, title="Training curve", keep_best=None, average=None):
    """Plot loss and masked token accuracy per epoch, training and validation, to a PNG.

    A dashed line marks the epoch whose model training kept (`kept_epoch`);
    where the run kept the mean of its last epochs instead (`average`), a
    shaded span marks those epochs and the line the best single one.

    Args:
        history: `{name: [value per epoch]}`, as `read_history` or Keras's
            `History.history` gives: `loss`, `val_loss`, `masked_accuracy`,
            `val_masked_accuracy`, and `val_bleu` where training scored it;
            an `epoch` list (0-based) is optional.
        path: the PNG to write.
        title: the figure title.
        keep_best: what picked the kept model, `"bleu"` or `"loss"`.
            Defaults to None: BLEU where the history has it, else the loss.
        average: the run's `options.json` `"average"` record, or None.

    Returns:
        `path`.
    """
    count = len(history["loss"])
    epochs = np.asarray(history.get("epoch", range(count)), dtype=float) + 1
    figure = Figure(figsize=TRAINING_CURVE_SIZE, dpi=DPI, layout="constrained")
    loss_axes, accuracy_axes = figure.subplots(1, 2)
    # The epoch whose model `train` keeps as model.keras.
    best, picked_by = kept_epoch(history, keep_best)
    span = averaged_span(average)
    panels = (
        (loss_axes, "loss", "loss (label-smoothed cross-entropy)"),
        (accuracy_axes, "masked_accuracy", "masked token accuracy"),
    )
    for axes, name, label in panels:
        for key, split in ((name, "training"), (f"val_{name}", "validation")):
            if key in history:
                axes.plot(epochs, history[key], marker="o", markersize=3, label=split)
        if span is not None:
            axes.axvspan(span[0] - 0.5, span[1] + 0.5, color="grey", alpha=0.15, label=span[2])
        if best is not None:
            what = "best single epoch" if span is not None else "kept model"
            axes.axvline(best, color="grey", linestyle="--", linewidth=1,
                         label=f"{what}: {picked_by} (epoch {best:g})")
        axes.set_xlabel("epoch")
        axes.set_ylabel(label)
        axes.grid(alpha=0.3)
        axes.legend()
    accuracy_axes.set_ylim(0, 1)
    figure.suptitle(title)
    figure.savefig(path, dpi=DPI)
    return path


def wrap_title(title, width):
    """`title` with each of its lines wrapped at `width` characters.

    Example:
        >>> print(wrap_title("layer 1\\n'Save the notebook before closing' -> 'Enregistrer'", 30))
        layer 1
        'Save the notebook before
        closing' -> 'Enregistrer'
    """
    return "\n".join(
        textwrap.fill(line, width, break_long_words=True) or line for line in title.split("\n")
    )


def attention_heatmap(weights, source_tokens, target_tokens, path, *, title):
    """Plot cross-attention weights as a heatmap, generated tokens × source tokens, to a PNG.

    Args:
        weights: float `[len(target_tokens), len(source_tokens)]`; row t is
            the attention over the source while generating `target_tokens[t]`.
        source_tokens: the source subword pieces, the columns.
        target_tokens: the generated pieces, the rows.
        path: the PNG to write.
        title: the figure title, e.g. which layer and head.

    Returns:
        `path`.
    """
    weights = np.asarray(weights, dtype=float)
    expected = (len(target_tokens), len(source_tokens))
    if weights.shape != expected:
        raise ValueError(
            f"weights must have shape [target tokens, source tokens] = {expected}; "
            f"received {weights.shape}"
        )
    figure = Figure(figsize=ATTENTION_SIZE, dpi=DPI, layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(weights, cmap="viridis", vmin=0.0, aspect="auto", interpolation="nearest")
    # Long sentences get smaller labels, so every token keeps its tick.
    font_size = float(np.clip(360 / max(expected), 5, 11))
    axes.set_xticks(range(len(source_tokens)), source_tokens, rotation=90, fontsize=font_size)
    axes.set_yticks(range(len(target_tokens)), target_tokens, fontsize=font_size)
    axes.set_xlabel("source tokens")
    axes.set_ylabel("generated tokens")
    figure.colorbar(image, ax=axes, label="attention weight")
    # A long sentence's title wraps instead of running past the figure's edges.
    axes.set_title(wrap_title(title, TITLE_WIDTH))
    figure.savefig(path, dpi=DPI)
    return path


def positional_encoding(encoding, path):
    """Plot a positional-encoding matrix `[positions, d_model]` as a heatmap, to a PNG.

    Args:
        encoding: float `[length, d_model]`, e.g.
            `keras_tf.layers.positional_embedding.sinusoidal_encoding(64, 128)`.
        path: the PNG to write.

    Returns:
        `path`.
    """
    encoding = np.asarray(encoding, dtype=float)
    length, d_model = encoding.shape
    figure = Figure(figsize=POSITIONAL_ENCODING_SIZE, dpi=DPI, layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(
        encoding, cmap="RdBu", vmin=-1.0, vmax=1.0, aspect="auto", interpolation="nearest"
    )
    axes.set_xlabel("dimension (even: sin, odd: cos)")
    axes.set_ylabel("position")
    figure.colorbar(image, ax=axes, label="PE(position, dimension)")
    axes.set_title(
        f"Sinusoidal positional encoding, d_model={d_model}, {length} positions\n"
        r"$PE_{(pos,2i)} = \sin(pos/10000^{2i/d_{model}})$,  "
        r"$PE_{(pos,2i+1)} = \cos(pos/10000^{2i/d_{model}})$"
    )
    figure.savefig(path, dpi=DPI)
    return path
