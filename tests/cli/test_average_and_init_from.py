"""`keras-tf average` and `keras-tf train --init-from` on model directories."""

import pathlib
import csv
import os

import keras
import numpy as np

from keras_tf.cli.main import main
from keras_tf.decoding import DecodingConfig
from keras_tf.training.averaging import epoch_checkpoints
from keras_tf.translation import Seq2SeqTranslator, presets
from tests.cli.conftest import write_corpus


def test_average_then_fine_tune(trained_run, tmp_path, corpus, capsys):
    run = str(trained_run[0])  # 2 epochs, --keep-checkpoints 2
    assert [e for e, _ in epoch_checkpoints(os.path.join(run, "backup"))] == [1, 2]

    # Averaging: a new model directory whose weights are the mean of epochs 1 and 2.
    averaged = str(tmp_path / "avg")
    assert main(["average", "--model", run, "--last", "2", "--out", averaged]) == 0
    assert capsys.readouterr().out.strip() == f"Averaged epochs 1, 2 of {run} into {averaged}"
    model = keras.models.load_model(os.path.join(averaged, "model.keras"), compile=False)
    each = []
    for _, path in epoch_checkpoints(os.path.join(run, "backup")):
        model.load_weights(path)
        each.append(model.get_weights())
    assert not np.array_equal(each[0][0], each[1][0])  # the epochs differ
    mean = [np.mean(pair, axis=0) for pair in zip(*each)]
    averaged_model = keras.models.load_model(os.path.join(averaged, "model.keras"), compile=False)
    for got, want in zip(averaged_model.get_weights(), mean):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert main(["evaluate", "--model", averaged, "--test", corpus["test"],
                 "--beam-size", "1"]) == 0
    assert capsys.readouterr().out.startswith("BLEU = ")

    # Every writer writes the whole preset: the run and its average, decoding.json included.
    preset_files = {"config.json", "model.keras", "tokenizers", "decoding.json", "metadata.json"}
    assert preset_files <= set(os.listdir(run)) and preset_files <= set(os.listdir(averaged))
    assert presets.load_decoding(run) == DecodingConfig()
    assert (pathlib.Path(os.path.join(averaged, "decoding.json")).read_bytes()
            == pathlib.Path(os.path.join(run, "decoding.json")).read_bytes())
    # A model that decodes its own way (an imported OPUS-MT model, say) keeps it when fine-tuned.
    own_way = DecodingConfig(method="beam", beam_size=3, length_penalty=1.0,
                             length_penalty_style="power", max_length=12)
    presets.write_decoding(averaged, own_way)
    assert Seq2SeqTranslator.from_preset(averaged).decoding == own_way

    # Averaging more epochs than were kept is one line.
    assert main(["average", "--model", run, "--last", "3", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-tf average: error: --last 3: ") and err.count("\n") == 1, err
    assert "holds 2 epoch checkpoint(s); train with" in err and "(--keep-checkpoints 3)" in err
    assert not os.path.exists(tmp_path / "x")

    # Fine-tuning on a new corpus keeps the tokenizers and says so; the loss falls.
    new = tmp_path / "new.tsv"
    write_corpus(new, 160, seed=11)
    tuned = str(tmp_path / "tuned")
    assert main(["train", "--train", str(new), "--out", tuned, "--epochs", "2", "--steps", "6",
                 "--init-from", averaged, "--batch-size", "16", "--keep-best", "loss"]) == 0
    err = capsys.readouterr().err
    assert f"Fine-tuning {averaged}/model.keras: kept its sentencepiece tokenizers" in err
    assert (pathlib.Path(os.path.join(tuned, "tokenizers", "shared.spm")).read_bytes()
            == pathlib.Path(os.path.join(run, "tokenizers", "shared.spm")).read_bytes())
    assert preset_files <= set(os.listdir(tuned))
    assert (pathlib.Path(os.path.join(tuned, "decoding.json")).read_bytes()
            == pathlib.Path(os.path.join(averaged, "decoding.json")).read_bytes())
    assert Seq2SeqTranslator.from_preset(tuned).decoding == own_way
    with open(os.path.join(tuned, "history.csv")) as file:
        losses = [float(row["loss"]) for row in csv.DictReader(file)]
    assert losses[1] < losses[0]
