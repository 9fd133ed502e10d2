"""`train` under the mixed_bfloat16 and mixed_float16 policies."""

import keras
import numpy as np

from keras_tf.training import make_reverse_task
from keras_tf.training.trainer import train
from tests.helpers import one_block_tiny


def test_mixed_bfloat16_trains_without_nan(tmp_path):
    # The single-machine path: model.fit under XLA.
    model, history = train(
        one_block_tiny(), make_reverse_task(512), out_dir=str(tmp_path),
        epochs=3, batch_size=64, learning_rate=3e-3, mixed_precision="mixed_bfloat16",
        jit_compile=True, verbose=0,
    )
    assert model.jit_compile is True
    embedding = model.get_layer("source_embedding")
    assert embedding.dtype_policy.name == "mixed_bfloat16"
    assert all(w.dtype == "float32" for w in model.weights)  # float32 master weights
    losses = history.history["loss"]
    assert np.isfinite(losses).all()
    assert losses[0] > losses[1] > losses[2]
    assert losses[2] < 0.95 * losses[0]


def test_mixed_float16_scales_the_loss(tmp_path):
    model, history = train(
        one_block_tiny(), make_reverse_task(256), out_dir=str(tmp_path),
        epochs=2, batch_size=32, learning_rate=3e-3, mixed_precision="mixed_float16",
        jit_compile=False, verbose=0,
    )
    assert model.get_layer("source_embedding").dtype_policy.name == "mixed_float16"
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    losses = history.history["loss"]
    assert np.isfinite(losses).all()
    assert losses[1] < losses[0]
