"""Checkpoint averaging: the averaged weights are the mean of the kept checkpoints."""

import os

import keras
import numpy as np

import keras_tf.training  # noqa: F401  (registers the loss and metric)
from keras_tf.training import make_reverse_task, train
from keras_tf.training.averaging import average_checkpoints, epoch_checkpoints


def test_averaged_weights_equal_the_mean(tmp_path):
    train("transformer_tiny", make_reverse_task(128), out_dir=str(tmp_path), epochs=4,
          batch_size=32, learning_rate=3e-3, jit_compile=False, verbose=0, keep_checkpoints=3)
    checkpoints = epoch_checkpoints(str(tmp_path / "backup"))
    assert [epoch for epoch, _ in checkpoints] == [2, 3, 4]
    model = keras.models.load_model(tmp_path / "model.keras", compile=False)
    each = []
    for _, path in checkpoints:
        model.load_weights(path)
        each.append([np.array(w) for w in model.get_weights()])
    assert not np.array_equal(each[0][0], each[2][0])  # the epochs differ
    average_checkpoints(model, [path for _, path in checkpoints])
    for index, averaged in enumerate(model.get_weights()):
        expected = np.mean([weights[index] for weights in each], axis=0)
        np.testing.assert_allclose(averaged, expected, rtol=1e-6, atol=1e-7)
    assert sorted(os.listdir(tmp_path / "backup"))[-1] == "state.json"
