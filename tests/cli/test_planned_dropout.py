"""`keras-tf train` from scratch: a long run gets the paper's dropout, a resumed run keeps its own."""

import json

import pytest

from keras_tf.cli.main import main
from keras_tf.models import config as model_config
from keras_tf.models.config import LONG_RUN_DROPOUT, get_preset, planned_dropout
from keras_tf.training import preset_dir
from keras_tf.translation import presets
from tests.cli.conftest import TRAIN_OPTIONS

TRAIN_PAIRS = 192  # the `corpus` fixture's


def test_planned_dropout_switches_at_the_threshold():
    small = get_preset("transformer_small")
    assert small.dropout == 0
    assert planned_dropout(small, model_config.LONG_RUN_PAIRS - 1) == 0
    assert planned_dropout(small, model_config.LONG_RUN_PAIRS) == LONG_RUN_DROPOUT
    # A preset with its own dropout keeps it, long run or not.
    base = get_preset("transformer_base")
    assert planned_dropout(base, 10 * model_config.LONG_RUN_PAIRS) == base.dropout


@pytest.fixture
def two_epochs_are_long(monkeypatch):
    """A long run is two epochs of the fixture's corpus (192 x 2 pairs read)."""
    monkeypatch.setattr(model_config, "LONG_RUN_PAIRS", 2 * TRAIN_PAIRS)
    monkeypatch.setattr(preset_dir, "LONG_RUN_PAIRS", 2 * TRAIN_PAIRS)


def run(corpus, out, capsys, epochs, *extra):
    assert main(["train", "--train", corpus["train"], "--out", str(out), "--epochs", str(epochs),
                 "--steps", "3", "--keep-best", "loss", *TRAIN_OPTIONS, *extra]) == 0
    with open(out / "options.json") as file:
        recorded = json.load(file)["planned_dropout"]
    return presets.load_backbone(out).config.dropout, recorded, capsys.readouterr().err


def test_a_long_run_trains_with_the_papers_dropout(corpus, tmp_path, capsys, two_epochs_are_long):
    dropout, recorded, err = run(corpus, tmp_path / "long", capsys, 2)
    assert dropout == recorded == LONG_RUN_DROPOUT
    assert (f"Dropout {LONG_RUN_DROPOUT:g} (the preset's 0 below {2 * TRAIN_PAIRS:,} pairs read; "
            f"this run reads {2 * TRAIN_PAIRS:,}; --dropout sets it)") in err
    # --dropout wins, whatever the run's length.
    dropout, recorded, err = run(corpus, tmp_path / "given", capsys, 2, "--dropout", "0")
    assert dropout == recorded == 0 and "Dropout" not in err


def test_a_short_run_and_its_resume_keep_the_presets_dropout(corpus, tmp_path, capsys,
                                                             two_epochs_are_long):
    out = tmp_path / "short"
    dropout, recorded, err = run(corpus, out, capsys, 1)
    assert dropout == recorded == 0 and "Dropout" not in err
    # Resumed to two epochs, a long run's length: the run goes on as it began
    # (dropout 0; a Dropout layer with a rate holds a random state the backup lacks).
    dropout, recorded, err = run(corpus, out, capsys, 2)
    assert dropout == recorded == 0 and "Dropout" not in err
    with open(out / "history.csv") as file:
        assert len(file.read().splitlines()) == 3  # the header and two epochs
    # A run begun before options.json recorded its dropout goes on with the preset's.
    with open(out / "options.json") as file:
        values = json.load(file)
    del values["planned_dropout"]
    with open(out / "options.json", "w") as file:
        json.dump(values, file)
    dropout, recorded, err = run(corpus, out, capsys, 3)
    assert dropout == recorded == 0 and "Dropout" not in err
