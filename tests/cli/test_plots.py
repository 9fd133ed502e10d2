"""The PNGs of `keras-tf plot-encoding`, `keras-tf attention` and the training curve."""

import matplotlib.image
import numpy as np
import pytest

from keras_tf import plots
from keras_tf.cli.main import main


def _pixels(size):
    """(height, width) in pixels of a figure of `size` inches."""
    width, height = size
    return height * plots.DPI, width * plots.DPI


def _read_png(path):
    with open(path, "rb") as file:
        assert file.read(8) == b"\x89PNG\r\n\x1a\n"
    return matplotlib.image.imread(path)


def test_plot_encoding_draws_the_sinusoid_matrix(tmp_path, capsys):
    path = str(tmp_path / "pe.png")
    assert main(["plot-encoding", "--out", path, "--d-model", "64", "--length", "50"]) == 0
    assert capsys.readouterr().out.strip() == path
    image = _read_png(path)
    assert image.shape[:2] == _pixels(plots.POSITIONAL_ENCODING_SIZE)
    # Not a blank canvas: a red-white-blue map has many distinct colours.
    assert len(np.unique(image.reshape(-1, image.shape[-1]), axis=0)) > 50


@pytest.mark.parametrize("layer_head", [[], ["--layer", "1", "--head", "3"]])
def test_attention_draws_a_heatmap(tmp_path, untrained_model_dir, capsys, layer_head):
    path = str(tmp_path / "map.png")
    argv = ["attention", "--model", untrained_model_dir, "--text", "red cat", "--out", path]
    assert main(argv + layer_head) == 0
    assert capsys.readouterr().out.startswith(f"{path}: 'red cat' -> ")
    assert _read_png(path).shape[:2] == _pixels(plots.ATTENTION_SIZE)


def test_cross_attention_rows_are_distributions(untrained_model_dir):
    from keras_tf.cli.attention import select
    from keras_tf.translation import Seq2SeqTranslator

    attention = Seq2SeqTranslator.from_preset(untrained_model_dir).cross_attention("red cat")
    layers, heads, rows, columns = attention.weights.shape
    assert (layers, heads) == (2, 4)
    assert (rows, columns) == (len(attention.target_tokens), len(attention.source_tokens))
    assert attention.source_tokens[-1] == "[END]"
    # Every row of every head sums to 1 over the source, and so does the mean.
    np.testing.assert_allclose(attention.weights.sum(-1), 1.0, atol=1e-5)
    mean, description = select(attention.weights)
    np.testing.assert_allclose(mean.sum(-1), 1.0, atol=1e-5)
    assert description == "mean of 2 layers, mean of 4 heads"
    one, _ = select(attention.weights, layer=1, head=2)
    np.testing.assert_array_equal(one, attention.weights[1, 2])


def test_training_curve(tmp_path):
    history_csv = tmp_path / "history.csv"
    history_csv.write_text(
        "epoch,loss,masked_accuracy,val_loss,val_masked_accuracy\n"
        "0,4.0,0.1,3.9,0.12\n1,3.0,0.3,3.2,0.28\n2,2.5,0.4,2.9,0.35\n"
    )
    history = plots.read_history(history_csv)
    assert history["val_loss"] == [3.9, 3.2, 2.9]
    path = plots.training_curve(history, str(tmp_path / "curve.png"))
    assert _read_png(path).shape[:2] == _pixels(plots.TRAINING_CURVE_SIZE)


def test_the_training_curve_marks_the_kept_epoch():
    # keras-tf train keeps the best validation BLEU when it has a validation
    # set; the dashed line must mark that epoch, not the lowest loss's.
    history = {"loss": [4.0, 3.0, 2.5, 2.0], "val_loss": [3.9, 3.2, 3.3, 3.4],
               "val_bleu": [1.0, 5.0, 7.5, 7.0]}
    assert plots.kept_epoch(history) == (3.0, "best validation BLEU")
    assert plots.kept_epoch(history, keep_best="loss") == (2.0, "lowest validation loss")
    del history["val_bleu"]
    assert plots.kept_epoch(history) == (2.0, "lowest validation loss")
    assert plots.kept_epoch({"loss": [1.0]}) == (None, None)


def test_a_kept_average_is_a_span_and_the_line_its_best_single_epoch(tmp_path):
    assert plots.averaged_span({"epochs": [3, 4, 5], "bleu": 9.0, "kept_bleu": 8.0,
                                "chosen": True}) == (3.0, 5.0, "kept model: the mean of epochs 3-5")
    assert plots.averaged_span({"epochs": [3, 4, 5], "chosen": False}) is None
    assert plots.averaged_span(None) is None
    history = {"loss": [4.0, 3.0, 2.5, 2.0, 1.8], "val_loss": [3.9, 3.2, 3.3, 3.4, 3.5],
               "val_bleu": [1.0, 5.0, 7.5, 7.0, 7.2]}
    plain = _read_png(plots.training_curve(history, str(tmp_path / "plain.png")))
    shaded = _read_png(plots.training_curve(history, str(tmp_path / "shaded.png"),
                                            average={"epochs": [3, 4, 5], "chosen": True}))
    assert plain.shape == shaded.shape and not np.array_equal(plain, shaded)


def test_a_long_attention_title_wraps_within_the_figure(tmp_path):
    source = "These changes will be reverted. Only commit if you are sure you are okay losing these changes."
    title = f"layer 2 of 2, mean of 4 heads\n{source!r} -> {source!r}"
    wrapped = plots.wrap_title(title, plots.TITLE_WIDTH)
    assert wrapped.split() == title.split()  # the same words, only new line breaks
    assert max(map(len, wrapped.splitlines())) <= plots.TITLE_WIDTH
    path = plots.attention_heatmap(np.full((3, 2), 0.5), ["a", "b"], ["x", "y", "z"],
                                   str(tmp_path / "long.png"), title=title)
    assert _read_png(path).shape[:2] == _pixels(plots.ATTENTION_SIZE)
