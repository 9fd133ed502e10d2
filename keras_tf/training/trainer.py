"""The training entry point: a config and a dataset in, a trained model and its files out.

`train` builds and compiles the model inside a `tf.distribute` strategy's
scope and trains it with `model.fit`, on one device, several GPUs, several
machines or a TPU. A killed run resumes when the same call is made again.

Files in `out_dir` (written by the chief only):

    config.json                  the TransformerConfig, for TransformerConfig.from_dict
    model.keras                  the best model so far on the monitored loss
    backup/state.json            {"epoch": epochs done, "weights": file, "best": ...}
    backup/epoch-NNNN.weights.h5 model and optimizer variables after NNNN epochs
    history.csv                  one row per finished epoch, across restarts
    logs/                        TensorBoard summaries

Every file is written to a temporary name in its directory and renamed into
place, so a kill at any moment leaves the previous file whole. `state.json`
is renamed last: it is the commit point of a backup.
"""

import json
import logging
import math
import os

import keras
import tensorflow as tf
from keras import tree

from keras_tf.models import Seq2SeqTransformer, TransformerConfig, get_preset
from keras_tf.training.distribute import (
    make_strategy,
    prepare_for_strategy,
    remove_worker_dir,
    resolve_jit_compile,
    worker_dir,
)
from keras_tf.training.losses import MaskedSparseCategoricalCrossentropy
from keras_tf.training.metrics import MaskedTokenAccuracy
from keras_tf.training.bleu import KEEP_BEST
from keras_tf.training.callbacks import LearningRateMonitor
from keras_tf.training.schedules import TransformerSchedule, planned_schedule

logger = logging.getLogger(__name__)

MIXED_PRECISION_POLICIES = ("mixed_bfloat16", "mixed_float16")
BACKUP_STATE = "state.json"


def train(
    model_config,
    train_data,
    valid_data=None,
    *,
    out_dir,
    epochs=1,
    batch_size=None,
    steps_per_epoch=None,
    validation_steps=None,
    strategy="default",
    mixed_precision=None,
    learning_rate=None,
    warmup_steps=None,
    label_smoothing=0.1,
    seed=0,
    jit_compile=True,
    validation_bleu=None,
    keep_best="loss",
    early_stopping=None,
    keep_checkpoints=1,
    initial_model=None,
    callbacks=(),
    verbose="auto",
):
    """Train a `Seq2SeqTransformer` with `model.fit` under a `tf.distribute` strategy.

    Calling it again with the same arguments after a kill resumes from the
    last finished epoch; after a finished run it trains nothing more.

    Args:
        model_config: a `TransformerConfig`, a preset name, or a config dict.
        train_data: a `tf.data.Dataset` of batches `({"encoder_tokens",
            "decoder_tokens"}, labels)`, int32, padded with 0; or such a pair
            of numpy arrays, batched here with `batch_size` and shuffled with
            a permutation that depends only on `seed` and the epoch number,
            so a resumed run sees the same batches as an uninterrupted one.
        valid_data: the same, for the validation loss. Optional.
        out_dir: where checkpoints, the backup, logs and config.json go.
        epochs: total epochs, counting those already done by a killed run.
        batch_size: global batch size, for numpy data only.
        steps_per_epoch: batches per epoch, for a dataset only. Defaults to
            one pass over it.
        validation_steps: validation batches per epoch. Defaults to all.
        strategy: `"default"`, `"mirrored"`, `"multi-worker"` (reads
            `TF_CONFIG`) or a `tf.distribute.Strategy`. See
            `keras_tf.training.distribute.make_strategy`.
        mixed_precision: None (float32), `"mixed_bfloat16"` or
            `"mixed_float16"` (the optimizer is wrapped in a
            `LossScaleOptimizer`).
        learning_rate: None for a warm-up schedule (see `warmup_steps`), or
            a float or a `LearningRateSchedule`, for Adam(β1=0.9, β2=0.98,
            ε=1e-9).
        warmup_steps: with `learning_rate=None`: None (default) for
            `planned_schedule(d_model, epochs * steps per epoch)`, whose
            warm-up is a tenth of the run, so even a short run reaches the
            paper's peak; an int for the paper's schedule with that warm-up
            (`transformer_adam(d_model, warmup_steps)`). The learning rate
            goes to the logs (`LearningRateMonitor`), and a run that ends
            inside its warm-up logs a warning.
        label_smoothing: ε of the loss. Defaults to 0.1, the paper's value.
        seed: seeds the weights and the numpy-data shuffle. Defaults to 0.
        jit_compile: compile the train step with XLA. Defaults to True; turned
            off, with a warning, under strategies with several replicas,
            where XLA cannot compile Keras's step.
        validation_bleu: a `keras_tf.training.bleu.ValidationBleu`, which
            adds `val_bleu` and `val_chrf` to each epoch's logs (progress
            bar, `history.csv`, TensorBoard). Defaults to None.
        keep_best: `"loss"` (default) keeps in `model.keras` the model of
            the lowest validation loss (training loss without
            `valid_data`); `"bleu"` that of the highest `val_bleu`, which
            needs `validation_bleu`.
        early_stopping: int N: stop after N epochs without a gain in the
            `keep_best` quantity. Defaults to None: run every epoch.
        keep_checkpoints: how many of the last epochs' weights files to keep
            in `out_dir/backup/`, for `keras_tf.training.averaging`.
            Defaults to 1: the backup alone.
        initial_model: a trained `Seq2SeqTransformer` of the same
            architecture to start from (fine-tuning), instead of fresh
            weights. A resumed run restores its own backup instead.
        callbacks: extra Keras callbacks, run after the built-in ones.
        verbose: passed to `model.fit`.

    Returns:
        `(model, history)`: the model with its final weights, and the
        `History` of the epochs run by this call.

    Example:
        >>> from keras_tf.training import make_reverse_task
        >>> from keras_tf.training.trainer import train
        >>> data = make_reverse_task(512)
        >>> import tempfile
        >>> model, history = train("transformer_tiny", data, out_dir=tempfile.mkdtemp(),
        ...     epochs=2, batch_size=64, learning_rate=3e-3, verbose=0)
        >>> sorted(history.history)
        ['learning_rate', 'loss', 'masked_accuracy']
    """
    # A multi-worker strategy must exist before any other TensorFlow op.
    strategy = make_strategy(strategy)
    config = _as_config(model_config)
    if mixed_precision not in (None, *MIXED_PRECISION_POLICIES):
        raise ValueError(
            f"mixed_precision must be None or one of {list(MIXED_PRECISION_POLICIES)}; "
            f"received {mixed_precision!r}"
        )
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer; received {epochs!r}")
    if keep_best not in KEEP_BEST:
        raise ValueError(f"keep_best must be one of {sorted(KEEP_BEST)}; received {keep_best!r}")
    if keep_best == "bleu" and validation_bleu is None:
        raise ValueError("keep_best='bleu' needs validation_bleu, a ValidationBleu callback")
    if not isinstance(keep_checkpoints, int) or keep_checkpoints < 1:
        raise ValueError(
            f"keep_checkpoints must be a positive integer; received {keep_checkpoints!r}"
        )
    if early_stopping is not None and (not isinstance(early_stopping, int) or early_stopping < 1):
        raise ValueError(
            f"early_stopping must be a positive integer; received early_stopping={early_stopping!r}"
        )
    keras.utils.set_random_seed(seed)

    backup_dir = os.path.join(out_dir, "backup")
    state = _read_backup_state(backup_dir)
    initial_epoch = state["epoch"] if state else 0
    distributed = strategy.num_replicas_in_sync > 1
    train_set, steps_per_epoch = _as_dataset(
        train_data, batch_size, steps_per_epoch, seed=seed,
        epochs=range(initial_epoch, max(epochs, initial_epoch + 1)),
        drop_remainder=True, distributed=distributed, name="train_data",
    )
    valid_set = None
    if valid_data is not None:
        valid_set, _ = _as_dataset(
            valid_data, batch_size, None, seed=None, epochs=None,
            drop_remainder=distributed, distributed=distributed, name="valid_data",
        )

    schedule = _schedule(config, learning_rate, warmup_steps, epochs, steps_per_epoch, train_set)
    with strategy.scope():
        model = Seq2SeqTransformer(config, dtype=mixed_precision)
        model.compile(
            optimizer=_make_optimizer(schedule, mixed_precision),
            loss=MaskedSparseCategoricalCrossentropy(label_smoothing=label_smoothing),
            metrics=[MaskedTokenAccuracy()],
            jit_compile=resolve_jit_compile(jit_compile, strategy),
        )
        # Built now, the optimizer's variables are not created while the
        # train step is traced, which would trace it twice.
        model.optimizer.build(model.trainable_variables)
    prepare_for_strategy(model, train_set.element_spec)
    best = math.inf
    if initial_model is not None and not state:
        # The same architecture: set_weights checks every shape.
        model.set_weights(initial_model.get_weights())
    if state:
        # Every worker restores from the chief's backup: `out_dir` must be on
        # a file system that all workers can read.
        model.load_weights(os.path.join(backup_dir, state["weights"]))
        best = state["best"]
        logger.info("Resuming from %s after epoch %d", backup_dir, initial_epoch)

    # Non-chief workers write the same files to a temporary directory.
    write_dir = worker_dir(out_dir, strategy)
    try:
        tf.io.gfile.makedirs(write_dir)
        _write_atomically(
            os.path.join(write_dir, "config.json"),
            lambda path: _write_text(path, json.dumps(config.to_dict(), indent=2)),
        )
        monitor, mode = KEEP_BEST[keep_best]
        if valid_set is None and keep_best == "loss":
            monitor = "loss"
        if state is None:
            best = math.inf if mode == "min" else -math.inf
        builtin = [
            keras.callbacks.TerminateOnNaN(raise_error=True),  # keeps the last good backup
            LearningRateMonitor(getattr(schedule, "warmup_steps", None)),
            *([validation_bleu] if validation_bleu is not None else []),
            _Checkpointer(write_dir, monitor=monitor, best=best, mode=mode, keep=keep_checkpoints),
            keras.callbacks.CSVLogger(os.path.join(write_dir, "history.csv"), append=True),
        ]
        builtin.append(keras.callbacks.TensorBoard(os.path.join(write_dir, "logs")))
        if early_stopping is not None:
            builtin.append(
                keras.callbacks.EarlyStopping(monitor=monitor, mode=mode, patience=early_stopping)
            )
        history = model.fit(
            train_set,
            validation_data=valid_set,
            epochs=epochs,
            initial_epoch=initial_epoch,
            steps_per_epoch=steps_per_epoch,
            validation_steps=validation_steps,
            callbacks=[*builtin, *callbacks],
            shuffle=False,  # numpy data is shuffled above; a dataset shuffles itself
            verbose=verbose,
        )
    finally:
        remove_worker_dir(write_dir, out_dir)
    return model, history


def _as_config(model_config):
    if isinstance(model_config, TransformerConfig):
        return model_config
    if isinstance(model_config, str):
        return get_preset(model_config)
    if isinstance(model_config, dict):
        return TransformerConfig.from_dict(model_config)
    raise TypeError(
        "model_config must be a TransformerConfig, a preset name or a dict; "
        f"received {type(model_config).__name__}"
    )


def _schedule(config, learning_rate, warmup_steps, epochs, steps_per_epoch, train_set):
    """The learning rate (a float or a `LearningRateSchedule`) for `train`'s arguments."""
    if learning_rate is not None:
        return learning_rate
    if warmup_steps is not None:
        return TransformerSchedule(config.d_model, warmup_steps)
    steps = steps_per_epoch or int(train_set.cardinality())
    if steps < 1:
        raise ValueError(
            "The default learning-rate schedule follows the planned number of steps; "
            "train_data has no known length, so pass steps_per_epoch or warmup_steps"
        )
    return planned_schedule(config.d_model, epochs * steps)


def _make_optimizer(learning_rate, mixed_precision):
    # Adam with the paper's β2 and ε (section 5.3), whatever the schedule.
    optimizer = keras.optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    if mixed_precision == "mixed_float16":
        # float16 gradients underflow without loss scaling. `compile` would
        # wrap the optimizer itself only if the model's own policy were
        # mixed_float16; a functional model keeps float32 and passes the
        # policy to its layers.
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


# --- input data ---


def _as_dataset(data, batch_size, steps_per_epoch, seed, epochs, drop_remainder,
                distributed, name):
    """A batched `tf.data.Dataset` and the steps per epoch to pass to `fit`."""
    if isinstance(data, tf.data.Dataset):
        if batch_size is not None:
            raise ValueError(
                f"batch_size applies to numpy data; {name} is a tf.data.Dataset, "
                f"so batch it yourself (received batch_size={batch_size})"
            )
        return data, steps_per_epoch
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise TypeError(
            f"{name} must be a tf.data.Dataset or a pair (inputs dict, labels) of "
            f"numpy arrays; received {type(data).__name__}"
        )
    if steps_per_epoch is not None:
        raise ValueError(
            f"steps_per_epoch applies to a tf.data.Dataset; numpy {name} is "
            f"read once per epoch (received steps_per_epoch={steps_per_epoch})"
        )
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(
            f"numpy {name} needs a positive integer batch_size; received {batch_size!r}"
        )
    inputs, labels = data
    count = len(labels)
    if count < batch_size:
        raise ValueError(
            f"{name} has fewer examples than one batch; received {count} examples, "
            f"batch_size={batch_size}"
        )
    if epochs is None:
        dataset = tf.data.Dataset.from_tensor_slices((dict(inputs), labels))
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
        steps = None
    else:
        dataset = _shuffled_epochs((dict(inputs), labels), batch_size, seed, epochs)
        steps = count // batch_size
    if distributed:
        # Each worker reads its own part of every global batch; the data has
        # no files to shard by.
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA
        )
        dataset = dataset.with_options(options)
    return dataset.prefetch(tf.data.AUTOTUNE), steps


def _shuffled_epochs(arrays, batch_size, seed, epochs):
    """Full batches for `epochs`, each epoch in a permutation drawn from (seed, epoch).

    The order of an epoch does not depend on what this process has read
    before, so a resumed run gets the same batches as an uninterrupted one.
    """
    count = len(arrays[1])
    steps = count // batch_size

    def epoch_batches(epoch):
        order = tf.random.experimental.stateless_shuffle(
            tf.range(count), seed=tf.stack([tf.constant(seed, tf.int64), epoch])
        )
        return tf.data.Dataset.from_tensor_slices(order[: steps * batch_size]).batch(
            batch_size
        )

    def gather(indices):
        return tree.map_structure(lambda array: tf.gather(array, indices), arrays)

    return (
        tf.data.Dataset.range(epochs.start, epochs.stop)
        .flat_map(epoch_batches)
        .map(gather, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    )


# --- checkpoints and backups ---


class _Checkpointer(keras.callbacks.Callback):
    """At each epoch end: save the best model, then back up the training state.

    The backup is the weights file of the epoch plus `state.json` naming it;
    writing `state.json` commits the backup, and older weights files are
    deleted after it. The best monitored value goes into `state.json` too, so
    a resumed run keeps comparing against it.
    """

    def __init__(self, directory, monitor, best, mode="min", keep=1):
        super().__init__()
        self.keep = keep
        self.model_path = os.path.join(directory, "model.keras")
        self.backup_dir = os.path.join(directory, "backup")
        self.monitor = monitor
        self.best = best
        self.mode = mode

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        better = value is not None and (
            value < self.best if self.mode == "min" else value > self.best
        )
        if better:
            self.best = float(value)
            _write_atomically(self.model_path, self.model.save)
        self._back_up(epochs_done=epoch + 1)

    def _back_up(self, epochs_done):
        tf.io.gfile.makedirs(self.backup_dir)
        weights = f"epoch-{epochs_done:04d}.weights.h5"
        _write_atomically(os.path.join(self.backup_dir, weights), self.model.save_weights)
        state = {"epoch": epochs_done, "weights": weights, "best": self.best}
        _write_atomically(
            os.path.join(self.backup_dir, BACKUP_STATE),
            lambda path: _write_text(path, json.dumps(state)),
        )
        # Keep the weights of the last `keep` epochs (for averaging), delete older ones.
        kept = {f"epoch-{epochs_done - i:04d}.weights.h5" for i in range(self.keep)}
        for name in tf.io.gfile.listdir(self.backup_dir):
            if name.endswith(".weights.h5") and name not in kept:
                tf.io.gfile.remove(os.path.join(self.backup_dir, name))


def _read_backup_state(backup_dir):
    path = os.path.join(backup_dir, BACKUP_STATE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        state = json.loads(f.read())
    state["best"] = float(state["best"])  # json writes inf as Infinity
    return state


def _write_atomically(path, write):
    """`write(temporary_path)`, then rename the file to `path`.

    The temporary name keeps the final suffix (`.keras`, `.weights.h5`),
    which Keras's savers require. A rename within a directory is atomic on
    POSIX file systems, so `path` is always either the old file or the new.
    """
    directory, name = os.path.split(path)
    temporary = os.path.join(directory, f".partial-{name}")
    write(temporary)
    tf.io.gfile.rename(temporary, path, overwrite=True)


def _write_text(path, text):
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(text)
