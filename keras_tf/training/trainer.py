"""The training entry point: a config and a dataset in, a trained model and its files out.

`train` builds and compiles the model inside a `tf.distribute` strategy's
scope and trains it with `model.fit`, on one device, several GPUs, several
machines or a TPU. A killed run resumes when the same call is made again, at
the next unseen batch, and ends with the weights an uninterrupted run ends with.

Files in `out_dir` (written by the chief only):

    config.json                  the TransformerConfig, for TransformerConfig.from_dict
    model.keras                  the best model so far on the monitored loss
    backup/state.json            where the backup is (epoch, step), its weights
                                 file, the random and metric state, the best
                                 value, the history, the training time so far
                                 and at each finished epoch's end
    backup/epoch-NNNN[-step-SSSSSS].weights.h5
                                 model and optimizer variables after NNNN
                                 epochs (and SSSSSS steps of the next one)
    history.csv                  one row per finished epoch, across restarts
    logs/                        TensorBoard curves, one point per finished epoch

Every file is written to a temporary name in its directory and renamed into
place, so a kill at any moment leaves the previous file whole. `state.json`
is renamed last: it is the commit point of a backup. `history.csv` and
`logs/` are rewritten from the committed history when a run resumes, so they
hold each finished epoch exactly once.
"""

import json
import logging
import math
import os
import time

import keras
import numpy as np
from keras import tree

from keras_tf.models import Seq2SeqTransformer, TransformerConfig, get_preset
from keras_tf.atomic_files import write_atomically as _write_atomically
from keras_tf.tensorflow_import import require_tensorflow
from keras_tf.translation import presets
from keras_tf.translation.training_options import KEEP_BEST, MIXED_PRECISION_POLICIES
from keras_tf.training.distribute import (
    any_worker,
    make_strategy,
    prepare_for_strategy,
    remove_worker_dir,
    resolve_jit_compile,
    worker_dir,
)
from keras_tf.training.callbacks import LearningRateMonitor, TimeBudget, TrainingClock
from keras_tf.models.losses import MaskedSparseCategoricalCrossentropy, never_emitted_ids
from keras_tf.models.metrics import MaskedTokenAccuracy
from keras_tf.models.schedules import (
    checked_accumulation_steps,
    paper_adam,
    planned_learning_rate,
)

tf = require_tensorflow("keras_tf.training.train")
logger = logging.getLogger(__name__)

BACKUP_STATE = "state.json"
# backup_every=None backs up after this much training time (and at every
# epoch end): a kill loses at most about five minutes of work.
BACKUP_INTERVAL_S = 300


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
    peak_learning_rate=None,
    gradient_accumulation_steps=None,
    label_smoothing=0.1,
    seed=0,
    jit_compile=True,
    backup_every=None,
    validation_bleu=None,
    keep_best="loss",
    early_stopping=None,
    keep_checkpoints=1,
    max_minutes=None,
    initial_model=None,
    lora_rank=None,
    lora_target_layer_names=("query", "value"),
    callbacks=(),
    verbose="auto",
):
    """Train a `Seq2SeqTransformer` with `model.fit` under a `tf.distribute` strategy.

    Calling it again with the same arguments after a kill resumes from the
    last backup, at the next unseen batch; after a finished run it trains
    nothing more. With numpy data or an epoch function (see `train_data`) the
    resumed run ends with the same weights and history as an uninterrupted
    one: the backup holds the model and optimizer variables, the dropout
    seed generators' states, the running loss and metric sums of the epoch,
    and the position (epoch, step) in the data.

    Args:
        model_config: a `TransformerConfig`, a preset name, or a config dict.
        train_data: the training batches `({"encoder_tokens",
            "decoder_tokens"}, labels)`, int32, padded with 0, as one of:
            a pair of numpy arrays, batched here with `batch_size` and
            shuffled with a permutation that depends only on `seed` and the
            epoch (an epoch is `len // batch_size` full batches; the
            `len % batch_size` examples its permutation puts last sit that
            epoch out, other ones each epoch); a function `epoch ->
            tf.data.Dataset` of one pass over the data, the same pass for
            the same epoch in every process
            (`keras_tf.text.make_dataset_by_epoch` makes one), read pass after
            pass; or a `tf.data.Dataset`. With the first two a resumed run
            reads exactly the batches an uninterrupted one would. A dataset
            is read from its start again after a resume, skipping the steps
            already trained in the epoch, in whatever order it then yields.
        valid_data: the same, for the validation loss. Optional. Numpy
            validation data is read whole, in order: its short last batch is
            filled with rows of padding, which no loss or metric counts.
        out_dir: where checkpoints, the backup, logs and config.json go.
        epochs: total epochs, counting those already done by a killed run.
        batch_size: global batch size, for numpy data only.
        steps_per_epoch: batches per epoch, for a dataset or an epoch
            function only. Defaults to one pass over it.
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
            `planned_schedule(d_model, planned updates)`, whose
            warm-up is a tenth of the run, so even a short run reaches the
            paper's peak; an int for the paper's schedule with that warm-up
            (`transformer_adam(d_model, warmup_steps)`). The learning rate
            goes to the logs (`LearningRateMonitor`), and a run that ends
            inside its warm-up logs a warning. With `initial_model`, the
            fine-tuning schedule (`planned_fine_tuning_schedule`): a short
            warm-up to the paper's peak.
        peak_learning_rate: with `learning_rate=None`, the peak of the
            warm-up schedule instead of its default (the paper's peak for
            `d_model`, from scratch and when fine-tuning).
        gradient_accumulation_steps: N: update the weights once every N
            batches, with the mean of their gradients (each batch's loss is
            already a mean over its target tokens), as from one batch N
            times as large: the paper's 25,000-token batches on a device
            that holds a fraction of them. The learning-rate schedule and
            `warmup_steps` count updates, not batches; `steps_per_epoch`,
            `backup_every` and the progress bar count batches. Defaults to
            None: every batch. A resumed run must use the same N. Refused
            under strategies with several replicas (keras-team/keras
            #20582): add replicas for a larger global batch instead.
        label_smoothing: ε of the loss. Defaults to 0.1, the paper's value.
            It takes no mass on the ids the model never emits
            (`keras_tf.models.losses.never_emitted_ids`).
        seed: seeds the weights and the numpy-data shuffle. Defaults to 0.
        jit_compile: compile the train step with XLA. Defaults to True; turned
            off, with a warning, under strategies with several replicas,
            where XLA cannot compile Keras's step.
        backup_every: back up every this many steps (counted from the start
            of training), besides at every epoch end. Defaults to None: after
            every `BACKUP_INTERVAL_S` (300) seconds of training, which bounds
            the work a kill loses to about five minutes.
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
        max_minutes: a budget of training time for the whole run: once it
            is spent, training stops after the step in progress (Keras then
            validates the part epoch, which may still improve `model.keras`)
            and backs up there, so that a call with a larger budget goes on
            at the next unseen batch, and one with the same budget trains
            nothing more. The time counts from the first step of each call
            (its compile included, not the data's preparation) and adds to
            what the backup records: an interrupted and resumed run trains
            as long in total as an uninterrupted one, which is what an
            equal-time comparison needs. Defaults to None: no budget.
        initial_model: a trained `Seq2SeqTransformer` of the same
            architecture to start from (fine-tuning), instead of fresh
            weights. A resumed run restores its own backup instead.
        lora_rank: train rank-`lora_rank` LoRA factors of the layers named
            `lora_target_layer_names` alone (`Seq2SeqBackbone.enable_lora`);
            the files hold the merged kernels. Defaults to None: every weight.
        lora_target_layer_names: the Dense layers LoRA adapts. Defaults to
            the query and value projections.
        callbacks: extra Keras callbacks, run after the built-in ones. After
            a resume inside an epoch, `fit` is called twice: once for the rest
            of that epoch (whose batch indices then start at 0), once for the
            epochs after it.
        verbose: passed to `model.fit`.

    Returns:
        `(model, history)`: the model with its final weights, and the
        `History` of the epochs finished by this call.

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
    if backup_every is not None and (
        not isinstance(backup_every, int) or isinstance(backup_every, bool) or backup_every < 1
    ):
        raise ValueError(
            f"backup_every must be a positive number of steps or None; "
            f"received backup_every={backup_every!r}"
        )
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
    if max_minutes is not None and not (
        isinstance(max_minutes, (int, float)) and not isinstance(max_minutes, bool)
        and math.isfinite(max_minutes) and max_minutes > 0
    ):
        raise ValueError(
            f"max_minutes must be a finite number > 0 or None; received max_minutes={max_minutes!r}"
        )
    batches_per_update = checked_accumulation_steps(gradient_accumulation_steps)
    keras.utils.set_random_seed(seed)

    backup_dir = os.path.join(out_dir, presets.BACKUP_DIR)
    state = _read_backup_state(backup_dir)
    distributed = strategy.num_replicas_in_sync > 1
    check_accumulation_fits(batches_per_update, strategy)
    batches = _TrainingBatches(train_data, batch_size, steps_per_epoch, seed, distributed)
    if state and state["steps_per_epoch"] not in (None, batches.steps_per_epoch):
        raise ValueError(
            f"{backup_dir} was made with {state['steps_per_epoch']} steps per epoch; this "
            f"run has {batches.steps_per_epoch}: resume with the same data and batch size, "
            "or use a new out_dir"
        )
    if state and state["batches_per_update"] != batches_per_update:
        raise ValueError(
            f"{backup_dir} was made with gradient_accumulation_steps="
            f"{state['batches_per_update']}; this run has {batches_per_update}: the "
            "optimizer's accumulated gradients do not carry over, so resume with the same "
            "value, or use a new out_dir"
        )
    valid_set = None
    if valid_data is not None:
        valid_set = _as_validation_dataset(valid_data, batch_size, distributed)

    schedule = _schedule(
        config, learning_rate, warmup_steps, epochs, batches.steps_per_epoch, batches_per_update,
        peak_learning_rate=peak_learning_rate, fine_tuning=initial_model is not None,
    )
    with strategy.scope():
        model = Seq2SeqTransformer(config, dtype=mixed_precision)
        if initial_model is not None and not state:
            # The same architecture: set_weights checks every shape.
            model.set_weights(initial_model.get_weights())
        if lora_rank:
            # Only the factors train; every save holds the merged kernels. A
            # resumed run starts from those, its factors at zero again.
            model.enable_lora(lora_rank, lora_target_layer_names)
        model.compile(
            optimizer=_make_optimizer(schedule, mixed_precision, batches_per_update),
            # The ids read from the starting weights, the same on a resume.
            loss=MaskedSparseCategoricalCrossentropy(
                label_smoothing=label_smoothing,
                excluded_ids=never_emitted_ids(initial_model if initial_model is not None else model),
            ),
            metrics=[MaskedTokenAccuracy()],
            jit_compile=resolve_jit_compile(jit_compile, strategy),
        )
        # Built now, the optimizer's variables are not created while the
        # train step is traced, which would trace it twice.
        model.optimizer.build(model.trainable_variables)
    prepare_for_strategy(model, batches.element_spec)
    epoch, step = (state["epoch"], state["step"]) if state else (0, 0)
    if state:
        # Every worker restores from the chief's backup: `out_dir` must be on
        # a file system that all workers can read.
        model.load_weights(os.path.join(backup_dir, state["weights"]))
        if state["seed_states"]:  # absent from backups made before they were saved
            _assign(_seed_states(model), state["seed_states"], backup_dir)
        logger.info("%s", _resume_message(backup_dir, epoch, step, epochs, batches.steps_per_epoch))

    # Non-chief workers write the same files to a temporary directory.
    write_dir = worker_dir(out_dir, strategy)
    histories = []
    try:
        tf.io.gfile.makedirs(write_dir)
        _write_atomically(
            os.path.join(write_dir, presets.CONFIG_FILE),
            lambda path: _write_text(path, json.dumps(config.to_dict(), indent=2)),
        )
        monitor, mode = KEEP_BEST[keep_best]
        if valid_set is None and keep_best == "loss":
            monitor = "loss"
        clock = TrainingClock(state["train_seconds"] if state else 0.0)
        checkpointer = _Checkpointer(
            write_dir,
            clock=clock,
            monitor=monitor,
            mode=mode,
            keep=keep_checkpoints,
            state=state,
            steps_per_epoch=batches.steps_per_epoch,
            batches_per_update=batches_per_update,
            backup_every=backup_every,
            strategy=strategy,
            element_spec=batches.element_spec,
        )
        # Order matters: the learning rate and BLEU enter the logs before the
        # checkpointer commits them to the history.
        builtin = [
            keras.callbacks.TerminateOnNaN(raise_error=True),  # keeps the last good backup
            LearningRateMonitor(getattr(schedule, "warmup_steps", None)),
            *([validation_bleu] if validation_bleu is not None else []),
        ]
        budget = None
        if max_minutes is not None:
            # Before the checkpointer, which backs up where it stops.
            budget = TimeBudget(
                max_minutes * 60, clock, any_worker=lambda flag: any_worker(strategy, flag)
            )
            builtin.append(budget)
        builtin.append(checkpointer)
        stopper = None
        if early_stopping is not None:
            stopper = keras.callbacks.EarlyStopping(
                monitor=monitor, mode=mode, patience=early_stopping
            )
            builtin.append(stopper)
        calls = _fit_calls(epoch, step, epochs)
        if budget is not None and calls and clock.seconds() >= budget.seconds:
            logger.info(
                "The time budget of %s minutes is spent (%.1f minutes trained): nothing more "
                "to train; a larger max_minutes goes on", f"{max_minutes:g}", clock.seconds() / 60,
            )
            calls = []
        for first_epoch, first_step, stop_epoch in calls:
            data, fit_steps = batches.stream(first_epoch, first_step, stop_epoch)
            checkpointer.first_step = first_step
            histories.append(
                model.fit(
                    data,
                    validation_data=valid_set,
                    epochs=stop_epoch,
                    initial_epoch=first_epoch,
                    steps_per_epoch=fit_steps,
                    validation_steps=validation_steps,
                    callbacks=[*builtin, *callbacks],
                    shuffle=False,  # numpy data is shuffled by batches.stream
                    verbose=verbose,
                )
            )
            if stopper is not None and stopper.stopped_epoch:
                break
            if budget is not None and budget.stopped:
                stopped_at = checkpointer.state["train_seconds"]
                logger.info("%s", _budget_message(
                    max_minutes, stopped_at, checkpointer.position, epochs, batches.steps_per_epoch
                ))
                break
    finally:
        remove_worker_dir(write_dir, out_dir)
    history = _joined(histories, model)
    # `(epoch, step)` where a time budget cut an epoch, whose part Keras
    # counts in `history.epoch` as if it were whole; None otherwise.
    cut = budget is not None and budget.stopped and checkpointer.position[1]
    history.stopped_inside_epoch = checkpointer.position if cut else None
    return model, history


def check_accumulation_fits(batches_per_update, strategy):
    """Refuse gradient accumulation under several replicas, which Keras 3.15 cannot run.

    Keras's optimizer updates inside an `ops.cond`, and under a
    `tf.distribute` strategy with several replicas that update is a
    cross-replica `merge_call`, which TensorFlow refuses inside a cond
    (keras-team/keras #20582): `fit` would fail at its first step.
    """
    replicas = strategy.num_replicas_in_sync
    if batches_per_update > 1 and replicas > 1:
        raise ValueError(
            f"gradient_accumulation_steps={batches_per_update} needs a strategy with one "
            f"replica; this one has {replicas}. Keras 3.15's optimizers cannot accumulate "
            "across replicas (keras-team/keras #20582); the replicas already multiply the "
            "batch, so leave accumulation out or use one device"
        )


def _fit_calls(epoch, step, epochs):
    """`(initial_epoch, first step, epochs)` of each `fit` call that resumes at `(epoch, step)`.

    Keras's `fit` starts an epoch at its first batch: a run resumed inside an
    epoch finishes that epoch with one call of `fit` over its remaining
    steps, then runs the epochs after it with another.
    """
    calls = []
    if step and epoch < epochs:
        calls.append((epoch, step, epoch + 1))
        epoch += 1
    if epoch < epochs:
        calls.append((epoch, 0, epochs))
    return calls


def _joined(histories, model):
    """One `History` for the epochs of several `fit` calls."""
    if len(histories) == 1:
        return histories[0]
    history = keras.callbacks.History()
    history.set_model(model)
    history.epoch = []
    for part in histories:
        history.epoch += part.epoch
        for key, values in part.history.items():
            history.history.setdefault(key, []).extend(values)
    return history


def _budget_message(max_minutes, seconds, position, epochs, steps_per_epoch):
    # Keras counts epochs and steps from 1 in its progress lines.
    epoch, step = position
    if step:
        of_steps = f"/{steps_per_epoch}" if steps_per_epoch else ""
        where = f"after step {step}{of_steps} of epoch {epoch + 1}/{epochs}"
    else:
        where = f"after epoch {epoch}/{epochs}"
    return (
        f"Stopped at the time budget of {max_minutes:g} minutes ({seconds / 60:.1f} minutes "
        f"trained) {where}; the backup goes on from there with a larger max_minutes"
    )


def _resume_message(backup_dir, epoch, step, epochs, steps_per_epoch):
    # Keras counts epochs and steps from 1 in its progress lines.
    done = f"after epoch {epoch}" + (f" and {step} steps of epoch {epoch + 1}" if step else "")
    if epoch >= epochs:
        return f"Resuming from {backup_dir} {done}: all {epochs} epochs are done"
    of_steps = f"/{steps_per_epoch}" if steps_per_epoch else ""
    return (
        f"Resuming from {backup_dir} {done}: continuing at step {step + 1}{of_steps} "
        f"of epoch {epoch + 1}/{epochs}"
    )


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


def _schedule(config, learning_rate, warmup_steps, epochs, steps_per_epoch, batches_per_update=1,
              peak_learning_rate=None, fine_tuning=False):
    """The learning rate (a float or a `LearningRateSchedule`) for `train`'s arguments.

    Its steps are updates: `epochs * steps_per_epoch / batches_per_update` are
    planned (`planned_learning_rate`, the plan `Seq2SeqTranslator.fit` shares).
    """
    if learning_rate is not None:
        return learning_rate
    total = epochs * steps_per_epoch // batches_per_update if steps_per_epoch else None
    return planned_learning_rate(
        config.d_model, total, warmup_steps=warmup_steps,
        peak_learning_rate=peak_learning_rate, fine_tuning=fine_tuning,
    )


def _make_optimizer(learning_rate, mixed_precision, batches_per_update=1):
    # Adam with the paper's β2 and ε (section 5.3), whatever the schedule;
    # under accumulation the schedule is read per update.
    optimizer = paper_adam(learning_rate, gradient_accumulation_steps=batches_per_update)
    if mixed_precision == "mixed_float16":
        # float16 gradients underflow without loss scaling. `compile` would
        # wrap the optimizer itself only if the model's own policy were
        # mixed_float16; a functional model keeps float32 and passes the
        # policy to its layers.
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


# --- input data ---


def _check_numpy(data, batch_size, name, forms="a tf.data.Dataset"):
    """The `(inputs dict, labels)` numpy pair `data`, checked; its example count."""
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise TypeError(
            f"{name} must be {forms} or a pair (inputs dict, labels) of "
            f"numpy arrays; received {type(data).__name__}"
        )
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(
            f"numpy {name} needs a positive integer batch_size; received {batch_size!r}"
        )
    count = len(data[1])
    if count < batch_size:
        raise ValueError(
            f"{name} has fewer examples than one batch; received {count} examples, "
            f"batch_size={batch_size}"
        )
    return count


def _shard_by_data(dataset):
    # Each worker reads its own part of every global batch; the data has
    # no files to shard by.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    return dataset.with_options(options)


def _as_validation_dataset(data, batch_size, distributed):
    if isinstance(data, tf.data.Dataset):
        return data
    _check_numpy(data, batch_size, "valid_data")
    # Every example counts, and every batch has one shape (one compiled
    # eval step): the short last batch is filled with rows of padding, which
    # the masked loss and accuracy and the token-weighted `loss` skip, on
    # one replica or on several (a replica's share may be padding alone).
    from keras_tf.text.pipeline import fill_rows

    inputs, labels = data
    dataset = (
        tf.data.Dataset.from_tensor_slices((dict(inputs), labels))
        .batch(batch_size)
        .map(lambda *batch: tree.map_structure(lambda t: fill_rows(t, batch_size), batch))
    )
    if distributed:
        dataset = _shard_by_data(dataset)
    return dataset.prefetch(tf.data.AUTOTUNE)


class _TrainingBatches:
    """The training batches from any position: epoch `e`, after its first `s` steps.

    `steps_per_epoch` is the number of batches in an epoch (None for a
    dataset of unknown length), and `element_spec` that of a batch.
    """

    def __init__(self, data, batch_size, steps_per_epoch, seed, distributed):
        self.data, self.seed, self.distributed = data, seed, distributed
        if isinstance(data, tf.data.Dataset) or callable(data):
            name = "a tf.data.Dataset" if isinstance(data, tf.data.Dataset) else "a function"
            if batch_size is not None:
                raise ValueError(
                    f"batch_size applies to numpy data; train_data is {name}, "
                    f"so batch it yourself (received batch_size={batch_size})"
                )
        if isinstance(data, tf.data.Dataset):
            self.kind = "dataset"
            known = int(data.cardinality())
            self.steps_per_epoch = steps_per_epoch or (known if known > 0 else None)
            self.element_spec = data.element_spec
        elif callable(data):
            self.kind = "epochs"
            first = data(tf.constant(0, tf.int64))
            if not isinstance(first, tf.data.Dataset):
                raise TypeError(
                    "train_data as a function must return a tf.data.Dataset for an "
                    f"epoch; received {type(first).__name__}"
                )
            self.pass_steps = int(first.cardinality())
            if self.pass_steps < 1:
                raise ValueError(
                    "train_data as a function must return datasets of known, positive "
                    f"cardinality; received cardinality {self.pass_steps} for epoch 0"
                )
            self.steps_per_epoch = steps_per_epoch or self.pass_steps
            self.element_spec = first.element_spec
        else:
            count = _check_numpy(
                data, batch_size, "train_data",
                forms="a tf.data.Dataset, a function epoch -> tf.data.Dataset",
            )
            if steps_per_epoch is not None:
                raise ValueError(
                    "steps_per_epoch applies to a tf.data.Dataset; numpy train_data is "
                    f"read once per epoch (received steps_per_epoch={steps_per_epoch})"
                )
            self.kind = "numpy"
            self.arrays = (dict(data[0]), data[1])
            self.batch_size = batch_size
            self.steps_per_epoch = count // batch_size
            self.element_spec = _shuffled_epochs(self.arrays, batch_size, seed, range(1)).element_spec

    def stream(self, epoch, step, stop_epoch):
        """`(dataset, steps_per_epoch)` for `fit` from epoch `epoch`, step `step` to `stop_epoch`.

        With `step > 0`, `stop_epoch` must be `epoch + 1`: the dataset holds
        the rest of that epoch, and the steps are those remaining.
        """
        steps = self.steps_per_epoch
        fit_steps = steps - step if step and steps else steps
        if self.kind == "dataset":
            # Keras reads a dataset from its start again at each epoch unless
            # steps_per_epoch is set; then it keeps reading one iterator.
            return (self.data.skip(step) if step else self.data), fit_steps
        if self.kind == "numpy":
            dataset = _shuffled_epochs(
                self.arrays, self.batch_size, self.seed, range(epoch, stop_epoch)
            ).skip(step)
        else:
            # Passes over the data laid end to end; step `g` of the run is
            # batch `g % pass_steps` of pass `g // pass_steps`.
            first = epoch * steps + step
            count = (stop_epoch - epoch) * steps - step
            dataset = (
                tf.data.Dataset.range(
                    first // self.pass_steps, -(-(first + count) // self.pass_steps)
                )
                .flat_map(self.data)
                .skip(first % self.pass_steps)
                .take(count)
            )
        if self.distributed:
            dataset = _shard_by_data(dataset)
        return dataset.prefetch(tf.data.AUTOTUNE), fit_steps


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
    """Backs up the training state, keeps the best model and writes the history files.

    A backup is a weights file (model and optimizer variables) plus
    `state.json`, which names it and holds everything else needed to go on
    exactly: the position `(epoch, step)`, the seed generators' states, the
    loss and metric sums of the unfinished epoch, the best monitored value
    and the history rows so far. Writing `state.json` commits the backup;
    older weights files are deleted after it.

    Backups happen after every `backup_every` steps of the run (or every
    `BACKUP_INTERVAL_S` seconds when it is None), at each epoch end, after
    validation, and at the step where a `TimeBudget` (before it in the
    callbacks) stops the epoch. `first_step` is the step at which the current `fit`
    call starts its first epoch (non-zero when it resumes inside an epoch).
    """

    def __init__(self, directory, clock, monitor, mode, keep, state, steps_per_epoch,
                 batches_per_update, backup_every, strategy, element_spec):
        super().__init__()
        self.clock = clock
        self.keep = keep
        self.batches_per_update = batches_per_update
        self.element_spec = element_spec
        self.model_path = os.path.join(directory, presets.MODEL_FILE)
        self.backup_dir = os.path.join(directory, presets.BACKUP_DIR)
        self.history_path = os.path.join(directory, presets.HISTORY_FILE)
        self.logs_dir = os.path.join(directory, presets.LOGS_DIR)
        self.monitor = monitor
        self.steps_per_epoch = steps_per_epoch
        self.backup_every = backup_every
        self.strategy = strategy
        self.mode = mode
        self.best = state["best"] if state else (math.inf if mode == "min" else -math.inf)
        self.history = list(state["history"]) if state else []
        # The run's training time at each finished epoch's end (after its
        # validation): the time axis of a learning curve.
        self.epoch_seconds = list(state["epoch_train_seconds"]) if state else []
        # The loss and metric sums of an epoch resumed inside.
        self.metric_sums = state["metric_sums"] if state and state["step"] else None
        self.first_step = 0
        self.epoch = None
        # The (epochs done, steps of the next) of the last backup, and its state.
        self.position = (state["epoch"], state["step"]) if state else (0, 0)
        self.state = None
        self.stopped_inside_epoch = False
        self.last_backup = time.monotonic()
        # What the killed run wrote after its last backup is dropped.
        self._write_history()
        _write_curves(self.logs_dir, self.history)

    def on_train_begin(self, logs=None):
        self.clock.start()

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        if self.first_step and self.metric_sums is not None:
            # `fit` has just reset the metrics; go on from the backed-up sums.
            if len(self.model.metrics_variables) != len(self.metric_sums):
                _build_metrics(self.model, self.element_spec)
            _assign(self.model.metrics_variables, self.metric_sums, self.backup_dir)
            self.metric_sums = None

    def on_train_batch_end(self, batch, logs=None):
        step = self.first_step + batch + 1  # steps done in this epoch
        if self.steps_per_epoch and step >= self.steps_per_epoch:
            return  # the epoch-end backup follows validation
        if self.model.stop_training:
            # A time budget stops the epoch here: back up now, while the
            # metrics hold the epoch's sums (the validation Keras runs next
            # resets them).
            self.stopped_inside_epoch = True
            self._back_up(self.epoch, step)
            return
        if self.backup_every is not None:
            done = self.epoch * (self.steps_per_epoch or 0) + step
            due = done % self.backup_every == 0
        else:
            # Workers must back up at the same steps (reading the metric
            # sums is a collective op): back up when any worker's clock says so.
            due = any_worker(
                self.strategy, time.monotonic() - self.last_backup >= BACKUP_INTERVAL_S
            )
        if due:
            self._back_up(self.epoch, step)

    def on_epoch_end(self, epoch, logs=None):
        self.first_step = 0
        logs = {key: float(value) for key, value in (logs or {}).items()}
        value = logs.get(self.monitor)
        better = value is not None and (
            value < self.best if self.mode == "min" else value > self.best
        )
        if better:
            self.best = value
            _write_atomically(self.model_path, self.model.save)
        if self.stopped_inside_epoch:
            # The part of an epoch a time budget ran: its validation may pick
            # the model, but the epoch is not finished, and the backup stays
            # where the budget stopped. Its logs are kept beside it, with the
            # training time once they are known (as `epoch_train_seconds`,
            # after the validation): the last point of a learning curve.
            stop = {"train_seconds": self.clock.seconds(), **logs}
            self._write_state({**self.state, "best": self.best, "stopped_inside_epoch": stop})
            return
        self.history.append({"epoch": epoch, **logs})
        self.epoch_seconds.append(self.clock.seconds())
        self._back_up(epoch + 1, 0)
        self._write_history()
        _write_curves(self.logs_dir, self.history[-1:], append=True)

    def _back_up(self, epochs_done, step):
        tf.io.gfile.makedirs(self.backup_dir)
        weights = f"epoch-{epochs_done:04d}" + (f"-step-{step:06d}" if step else "")
        weights += ".weights.h5"
        _write_atomically(os.path.join(self.backup_dir, weights), self.model.save_weights)
        self._write_state({
            "epoch": epochs_done,
            "step": step,
            "steps_per_epoch": self.steps_per_epoch,
            "batches_per_update": self.batches_per_update,
            "weights": weights,
            "best": self.best,
            "seed_states": _values(_seed_states(self.model)),
            "metric_sums": _values(self.model.metrics_variables) if step else None,
            "history": self.history,
            "train_seconds": self.clock.seconds(),
            "epoch_train_seconds": self.epoch_seconds,
        })
        self.position = (epochs_done, step)
        # Keep this backup's weights and those of the last `keep` epoch ends
        # (for averaging); delete the others.
        kept = {weights} | {f"epoch-{epochs_done - i:04d}.weights.h5" for i in range(self.keep)}
        for name in tf.io.gfile.listdir(self.backup_dir):
            if name.endswith(".weights.h5") and name not in kept:
                tf.io.gfile.remove(os.path.join(self.backup_dir, name))
        self.last_backup = time.monotonic()

    def _write_state(self, state):
        """Commit the backup whose weights file `state` names."""
        _write_atomically(
            os.path.join(self.backup_dir, BACKUP_STATE),
            lambda path: _write_text(path, json.dumps(state)),
        )
        self.state = state

    def _write_history(self):
        """history.csv: `epoch`, then the logs' keys in sorted order, as CSVLogger writes it."""
        if not self.history:
            if tf.io.gfile.exists(self.history_path):
                tf.io.gfile.remove(self.history_path)
            return
        keys = sorted({key for row in self.history for key in row} - {"epoch"})
        lines = [",".join(["epoch", *keys])]
        for row in self.history:
            lines.append(",".join([str(row["epoch"]), *(repr(row.get(k, "")) for k in keys)]))
        text = "\n".join(lines) + "\n"
        _write_atomically(self.history_path, lambda path: _write_text(path, text))


def _write_curves(logs_dir, rows, append=False):
    """TensorBoard scalars `epoch_<name>` at step `epoch`, in `train/` and `validation/`.

    The layout and names of `keras.callbacks.TensorBoard`. Without `append`,
    `logs_dir` is first emptied, so each epoch has exactly one point.
    """
    if not append and tf.io.gfile.exists(logs_dir):
        tf.io.gfile.rmtree(logs_dir)
    if not rows:
        return
    writers = {}
    for row in rows:
        for key, value in row.items():
            if key == "epoch":
                continue
            run, name = ("validation", key[4:]) if key.startswith("val_") else ("train", key)
            if run not in writers:
                writers[run] = tf.summary.create_file_writer(os.path.join(logs_dir, run))
            with writers[run].as_default():
                tf.summary.scalar(f"epoch_{name}", value, step=row["epoch"])
    for writer in writers.values():
        writer.close()


def _build_metrics(model, element_spec):
    """Create the compiled metrics' variables, which Keras otherwise makes in the first step.

    Their sums can then be restored before that step. One update with a
    one-token batch of padding (which the masked metrics ignore), then a reset.
    """
    def zeros(spec):
        return tf.zeros([1] * len(spec.shape), spec.dtype)

    inputs, labels = tree.map_structure(zeros, element_spec)
    logits = tf.zeros([1, 1, model.outputs[0].shape[-1]])  # [batch, target_len, vocabulary]
    model.compute_metrics(inputs, labels, logits, sample_weight=None)
    model.reset_metrics()


def _seed_states(model):
    """The state variables of the model's seed generators (dropout's random streams)."""
    weights = {id(variable) for variable in model.weights}
    return [variable for variable in model.variables if id(variable) not in weights]


def _values(variables):
    """The variables' values as lists: exact in JSON (float32 and int values round-trip)."""
    return [keras.ops.convert_to_numpy(variable).tolist() for variable in variables]


def _assign(variables, values, backup_dir):
    # Seed generators are named by a process-wide counter: match by order.
    shapes = [list(variable.shape) for variable in variables]
    if [list(np.shape(value)) for value in values] != shapes:
        raise ValueError(
            f"{backup_dir}/{BACKUP_STATE} does not match this model: it holds "
            f"{len(values)} random or metric states, the model has {len(shapes)} "
            f"of shapes {shapes}; resume with the same configuration, or use a new out_dir"
        )
    for variable, value in zip(variables, values):
        variable.assign(np.asarray(value, dtype=variable.dtype))


def _read_backup_state(backup_dir):
    """The committed backup's state, or None; older backups (epoch ends only) read as step 0."""
    path = os.path.join(backup_dir, BACKUP_STATE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        state = json.loads(f.read())
    state["best"] = float(state["best"])  # json writes inf as Infinity
    for key, default in (("step", 0), ("steps_per_epoch", None), ("batches_per_update", 1),
                         ("seed_states", []), ("metric_sums", None), ("history", []),
                         ("train_seconds", 0.0), ("epoch_train_seconds", [])):
        state.setdefault(key, default)
    return state


def _write_text(path, text):
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(text)
