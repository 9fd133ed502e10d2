"""`keras-tf train` from scratch: the default peak follows the tokens of an update."""

import csv
import pathlib

import pytest

from keras_tf.cli.main import main
from keras_tf.models.learning_rates import batch_peak_learning_rate, paper_peak_learning_rate
from keras_tf.translation import presets
from tests.cli.conftest import TRAIN_OPTIONS

# The shared options less the pair-count batches and the fixed warm-up: the
# token budget and the planned schedule are what is tested.
def _without(options, *flags):
    """`options` less each of `flags` and the value after it."""
    kept, skip = [], False
    for word in options:
        if word in flags:
            skip = True
        elif skip:
            skip = False
        else:
            kept.append(word)
    return kept


TOKEN_OPTIONS = _without(TRAIN_OPTIONS, "--batch-size", "--warmup-steps")


def first_epoch_rate(directory):
    with open(pathlib.Path(directory) / "history.csv") as file:
        return float(next(csv.DictReader(file))["learning_rate"])


def run(corpus, out, capsys, *extra):
    assert main(["train", "--train", corpus["train"], "--out", str(out), "--epochs", "2",
                 "--steps", "12", "--keep-best", "loss", *TOKEN_OPTIONS, *extra]) == 0
    return first_epoch_rate(out), capsys.readouterr().err


def test_the_default_peak_grows_with_the_square_root_of_the_batch(corpus, tmp_path, capsys):
    paper_rate, paper_err = run(corpus, tmp_path / "512", capsys, "--batch-tokens", "512")
    assert "(the paper's peak for this d_model;" in paper_err
    # Four times the tokens: twice the peak, the same warm-up, so twice the rate at every step.
    rate, err = run(corpus, tmp_path / "2048", capsys, "--batch-tokens", "2048")
    assert rate == pytest.approx(2 * paper_rate, rel=1e-5)
    d_model = presets.load_backbone(tmp_path / "2048").config.d_model
    assert (f"a peak of {2 * paper_peak_learning_rate(d_model):.2g} (2 times the paper's peak "
            "for this d_model, at 2048 tokens an update;") in err
    # Tokens an update, not a batch: two batches of 1,024 an update are 2,048 tokens.
    _, accumulated_err = run(corpus, tmp_path / "accumulated", capsys, "--batch-tokens", "1024",
                             "--gradient-accumulation-steps", "2")
    assert "at 2048 tokens an update;" in accumulated_err
    # --learning-rate sets the peak whatever the batch.
    given, given_err = run(corpus, tmp_path / "given", capsys, "--batch-tokens", "2048",
                           "--learning-rate", str(batch_peak_learning_rate(d_model, 512)))
    assert given == pytest.approx(paper_rate, rel=1e-5) and "(--learning-rate)" in given_err
