"""Checks every keras_tf layer must pass, in the spirit of keras-hub's run_layer_test."""

import fcntl
import os
import shutil
import tempfile

import keras_tf  # noqa: F401  (tests/conftest.py keeps TensorFlow's start-up lines off stderr)
import keras
import numpy as np


def one_block_tiny(**overrides):
    """`transformer_tiny` with one encoder and one decoder block, as a `TransformerConfig`.

    For the tests of training's mechanics (resume, distribution, the files
    `train` writes, mixed precision, keep-best, the warm-up warning, fit's
    trace count, the loss's token weighting) and of serving's exports, where
    depth checks nothing: a fresh process traces and trains it in about 11 s
    of CPU against 18 to 20 s for the preset's two blocks (2 epochs of 8
    batches, the Zen 1 VM, 2026-12-05).
    """
    from keras_tf.models import get_preset

    return get_preset("transformer_tiny", num_encoder_layers=1, num_decoder_layers=1, **overrides)


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


def _call(layer, inputs, call_kwargs):
    if isinstance(inputs, (list, tuple)):
        return layer(*inputs, **call_kwargs)
    return layer(inputs, **call_kwargs)


def run_layer_checks(cls, init_kwargs, inputs, call_kwargs=None, tmp_path=None):
    """Serialization, saving, XLA fit and bfloat16 checks for one layer class.

    - `get_config` → `from_config` gives a layer with the same config and,
      with the weights copied, the same outputs;
    - a `.keras` save → load round trip of a model wrapping the layer gives
      identical outputs;
    - one `fit` step with `jit_compile=True` changes the weights and leaves
      the loss finite;
    - under `mixed_bfloat16` the outputs are bfloat16 and finite, and close
      to the float32 outputs.
    """
    call_kwargs = call_kwargs or {}
    tensors = [inputs] if not isinstance(inputs, (list, tuple)) else list(inputs)
    tensors = [keras.ops.convert_to_tensor(t) for t in tensors]
    layer = cls(**init_kwargs)
    expected = to_numpy(_call(layer, tensors, call_kwargs))

    # get_config -> from_config round trip.
    config = layer.get_config()
    clone = cls.from_config(config)
    _call(clone, tensors, call_kwargs)
    assert clone.get_config() == config
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(to_numpy(_call(clone, tensors, call_kwargs)), expected, atol=1e-6)

    # .keras save -> load round trip inside a functional model.
    symbolic = [
        keras.Input(t.shape[1:], dtype=keras.backend.standardize_dtype(t.dtype))
        for t in tensors
    ]
    model = keras.Model(symbolic, _call(layer, symbolic, call_kwargs))
    directory = tmp_path or tempfile.mkdtemp()
    path = os.path.join(str(directory), f"{cls.__name__}.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)  # safe_mode stays on
    np.testing.assert_allclose(to_numpy(reloaded(tensors)), expected, atol=1e-6)

    # One fit step with XLA.
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=True)
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(tensors, np.zeros_like(expected), epochs=1, batch_size=len(expected), verbose=0)
    assert np.isfinite(history.history["loss"][0])
    changed = [not np.array_equal(a, b) for a, b in zip(before, model.get_weights())]
    assert any(changed), "one fit step left every weight unchanged"

    # mixed_bfloat16.
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        mixed = cls(**init_kwargs)
        _call(mixed, tensors, call_kwargs)
        mixed.set_weights(layer.get_weights())
        out = _call(mixed, tensors, call_kwargs)
    finally:
        keras.config.set_dtype_policy("float32")
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    out = to_numpy(keras.ops.cast(out, "float32"))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, to_numpy(_call(layer, tensors, call_kwargs)), atol=0.15, rtol=0.05)


def copy_attention_weights(ours, theirs, d_model, num_heads):
    """Copy a keras_tf MultiHeadAttention's weights into a keras.layers.MultiHeadAttention.

    Ours keeps [d_model, d_model] kernels; Keras keeps EinsumDense kernels
    [d_model, heads, head_dim] (and [heads, head_dim, d_model] for the output).
    """
    head_dim = d_model // num_heads
    for mine, other in [
        (ours.query_dense, theirs._query_dense),
        (ours.key_dense, theirs._key_dense),
        (ours.value_dense, theirs._value_dense),
    ]:
        kernel, bias = mine.get_weights()
        other.set_weights(
            [kernel.reshape(d_model, num_heads, head_dim), bias.reshape(num_heads, head_dim)]
        )
    kernel, bias = ours.output_dense.get_weights()
    theirs._output_dense.set_weights([kernel.reshape(num_heads, head_dim, d_model), bias])


def train_reverse_model():
    """transformer_tiny trained with model.fit (XLA) on the generated reverse task.

    About 17 s on 2 idle cores; with one thread per op, as the suite runs,
    96.9 % of 256 held-out sequences decode exactly.
    """
    from keras_tf.models import Seq2SeqTransformer, get_preset
    from keras_tf.training import (
        MaskedSparseCategoricalCrossentropy,
        MaskedTokenAccuracy,
        make_reverse_task,
    )

    keras.utils.set_random_seed(0)
    inputs, labels = make_reverse_task(8000, seed=1)
    model = Seq2SeqTransformer(get_preset("transformer_tiny"))
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=MaskedSparseCategoricalCrossentropy(),
        metrics=[MaskedTokenAccuracy()],
        jit_compile=True,
    )
    model.fit(inputs, labels, batch_size=64, epochs=4, verbose=0)
    return model


def shared_folder(tmp_path_factory, name):
    """A folder of this test run that every pytest-xdist worker sees."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


def build_once(folder, build):
    """Run `build(folder)` in the first process to get here; the others wait and reuse it.

    Under `pytest -n 2` each worker has its own session fixtures; this keeps
    them from training, exporting and serving everything twice.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "done").exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
            folder.mkdir()
            build(folder)
            (folder / "done").touch()
    return folder


def shared_reverse_model(tmp_path_factory):
    """`train_reverse_model()`, trained once per test run and backend, shared by the workers."""

    def build(folder):
        train_reverse_model().save(folder / "model.keras")

    name = f"reverse_model-{keras.backend.backend()}"
    folder = build_once(shared_folder(tmp_path_factory, name), build)
    return keras.models.load_model(folder / "model.keras")


class BatchesPerEpoch(keras.callbacks.Callback):
    """The number of batches `fit` trained in each epoch."""

    def __init__(self):
        super().__init__()
        self.batches = []

    def on_epoch_begin(self, epoch, logs=None):
        self.batches.append(0)

    def on_train_batch_end(self, batch, logs=None):
        self.batches[-1] += 1


def folder_snapshot(folder):
    """`{relative path: bytes, or None for a folder}` of everything under `folder`."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            found[os.path.relpath(os.path.join(root, name), folder)] = None
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as file:
                found[os.path.relpath(path, folder)] = file.read()
    return found


# Takes the lock, says so, and waits to be killed. Loads the lock module from
# its file: a holder that starts in a fraction of TensorFlow's time.
_LOCK_HOLDER = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("run_lock", sys.argv[1])
run_lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_lock)
with run_lock.run_lock(sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


def start_lock_holder(folder):
    """A `subprocess.Popen` that holds `run_lock(folder)` once this returns; kill it after."""
    import subprocess
    import sys

    import keras_tf.training.run_lock as module

    process = subprocess.Popen(
        [sys.executable, "-c", _LOCK_HOLDER, module.__file__, str(folder)],
        stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    with process.stdout:  # all it says
        assert process.stdout.readline() == "held\n"
    return process
