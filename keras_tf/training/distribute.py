"""Distribution strategies for `train`: choosing one, the chief, and Keras 3.15 workarounds.

`model.fit` is the training loop under every strategy. Two pieces of Keras
3.15.1's TensorFlow trainer break under `tf.distribute` for this model, and
`prepare_for_strategy` replaces exactly those two, on the model instance:

1. `_maybe_symbolic_build` (keras-team/keras #20585). Before training, `fit`
   takes one batch and calls `strategy.reduce("MEAN", batch, axis=None)` on
   it to get tensors to build the model from. Under
   `MultiWorkerMirroredStrategy` the collective reduce does not map over the
   nested `({"encoder_tokens", "decoder_tokens"}, labels)` batch and raises;
   under `MirroredStrategy` with several replicas it returns the *mean of the
   token ids* as float64, which the model rightly rejects. Only the batch's
   shapes and dtypes are used, so we build from the dataset's `element_spec`
   instead: no batch is read and nothing is reduced.
2. The train and test functions, under `MultiWorkerMirroredStrategy` only.
   Keras reduces each per-replica log with `strategy.reduce("MEAN", v,
   axis=0)`, which fails on the scalar losses and metrics. Ours run the same
   `model.train_step` / `model.test_step` under `strategy.run` and reduce with
   `axis=None`. `fit` uses a train function that is already set
   (`make_train_function` returns early), so the loop, callbacks and history
   are still Keras's own.
"""

import hashlib
import json
import logging
import os
import shutil
import tempfile

from keras import tree

from keras_tf.tensorflow_import import require_tensorflow

tf = require_tensorflow("keras_tf.training.distribute (make_strategy, train)")

logger = logging.getLogger(__name__)

STRATEGIES = ("default", "mirrored", "multi-worker")


def make_strategy(strategy="default"):
    """Return the `tf.distribute.Strategy` for a name, or pass an instance through.

    Create a `"multi-worker"` strategy before any other TensorFlow op in the
    process: it configures the collective ops of the runtime, which can only
    be done at startup.

    Args:
        strategy: `"default"` (one device, no distribution), `"mirrored"`
            (all local GPUs, synchronous), `"multi-worker"` (all workers named
            in `TF_CONFIG`, synchronous), or a `tf.distribute.Strategy`
            instance, e.g. a `TPUStrategy`.

    Example:
        >>> make_strategy("default").num_replicas_in_sync
        1
    """
    if isinstance(strategy, tf.distribute.Strategy):
        return strategy
    if strategy == "default":
        return tf.distribute.get_strategy()
    if strategy == "mirrored":
        return tf.distribute.MirroredStrategy()
    if strategy == "multi-worker":
        read_tf_config(required=True)
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(
        f"Unknown strategy {strategy!r}; expected one of {list(STRATEGIES)} "
        "or a tf.distribute.Strategy instance"
    )


def read_tf_config(required=False):
    """Parse and check the `TF_CONFIG` environment variable.

    Returns:
        The dict, e.g. `{"cluster": {"worker": ["host1:2222", "host2:2222"]},
        "task": {"type": "worker", "index": 0}}`, or None when `TF_CONFIG` is
        unset and not `required`.
    """
    text = os.environ.get("TF_CONFIG")
    if not text:
        if required:
            raise ValueError(
                "strategy='multi-worker' needs the cluster in TF_CONFIG, e.g. "
                '{"cluster": {"worker": ["host1:2222", "host2:2222"]}, '
                '"task": {"type": "worker", "index": 0}}; received no TF_CONFIG'
            )
        return None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}); received {text!r}")
    cluster, task = config.get("cluster"), config.get("task")
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise ValueError(
            "TF_CONFIG needs a 'cluster' dict and a 'task' dict; "
            f"received {text!r}"
        )
    task_type, index = task.get("type"), task.get("index")
    if task_type not in cluster or not (
        isinstance(index, int) and 0 <= index < len(cluster[task_type])
    ):
        raise ValueError(
            "TF_CONFIG task must name a job in its cluster and an index into it; "
            f"received task={task!r}, cluster jobs={sorted(cluster)}"
        )
    return config


def is_chief(strategy):
    """Whether this process writes checkpoints, backups and logs.

    True except on the non-chief workers of a multi-worker cluster (the chief
    is the "chief" task, or worker 0 when there is none).
    """
    return strategy.extended.should_checkpoint


def any_worker(strategy, flag):
    """Whether `flag` is true on any worker: the same answer on every worker.

    For decisions that every worker must take together, such as backing up
    now, when each takes it from its own clock. A collective op under
    `MultiWorkerMirroredStrategy`; `flag` itself under any other strategy.

    Example:
        >>> any_worker(make_strategy("default"), True)
        True
    """
    if not _is_multi_worker(strategy):
        return bool(flag)
    votes = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant(int(bool(flag)), tf.int32)
    )
    return int(strategy.reduce("SUM", votes, axis=None)) > 0


def worker_dir(path, strategy):
    """`path` on the chief; an emptied temporary directory on any other worker.

    Every worker runs the same saving code, since reading some distributed
    variables is itself a collective op; only the chief's files are kept.
    The directory's name depends only on `path`, the worker's task and the
    user, so a worker restarted after a kill (SIGKILL or a preemption, which
    leave no chance to clean up) empties and reuses the one its predecessor
    left, rather than leaving a model and backups in the temporary folder
    per crash. The caller removes it with `remove_worker_dir`.
    """
    if is_chief(strategy):
        return path
    resolver = getattr(strategy, "cluster_resolver", None)
    task_type = getattr(resolver, "task_type", None) or "worker"
    task = f"{task_type}{getattr(resolver, 'task_id', None) or 0}"
    # The user too: on a shared machine the temporary folder is everyone's.
    owner = getattr(os, "getuid", lambda: "")()
    digest = hashlib.sha1(f"{owner}:{os.path.abspath(os.fspath(path))}".encode()).hexdigest()[:12]
    directory = os.path.join(tempfile.gettempdir(), f"keras_tf_{task}_{digest}")
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    return directory


def remove_worker_dir(directory, path):
    """Delete `directory` if it is a temporary one made by `worker_dir` for `path`."""
    if directory != path:
        shutil.rmtree(directory, ignore_errors=True)


def resolve_jit_compile(jit_compile, strategy):
    """`jit_compile`, unless XLA cannot compile this strategy's train step.

    Keras compiles the whole step, cross-replica update included, into one
    XLA program for one device. With several replicas that fails: under
    `MirroredStrategy` the step touches variables on every replica's device
    ("Trying to access resource ... located in device CPU:1 from device
    CPU:0"), and under `MultiWorkerMirroredStrategy` the all-gather of the
    embedding's sparse gradient (`CollectiveGatherV2`) has no XLA kernel.
    A TPU compiles every step whatever this flag says.
    """
    if not jit_compile or isinstance(strategy, tf.distribute.TPUStrategy):
        return jit_compile
    if strategy.num_replicas_in_sync > 1 or _is_multi_worker(strategy):
        logger.warning(
            "jit_compile=True is not supported by Keras's fit under %s with %d "
            "replicas (XLA compiles one device's step; the cross-replica update "
            "spans several); training with jit_compile=False.",
            type(strategy).__name__,
            strategy.num_replicas_in_sync,
        )
        return False
    return jit_compile


# The private Keras attributes `prepare_for_strategy` replaces or calls. setup.py
# pins keras to the minor release they were read from; `check_keras_hooks`
# fails loudly, rather than letting the fix silently stop applying, if a
# Keras release moves them.
KERAS_HOOKS = ("_maybe_symbolic_build", "_symbolic_build", "_distribute_strategy")


def check_keras_hooks(model):
    """Raise `RuntimeError` unless `model` has every attribute of `KERAS_HOOKS`."""
    import keras

    missing = [name for name in KERAS_HOOKS if not hasattr(model, name)]
    if missing:
        raise RuntimeError(
            f"keras_tf.training.distribute works around keras-team/keras#20585 by "
            f"replacing keras.Model attributes {missing}, which keras {keras.__version__} "
            "does not have. Install the keras release setup.py pins (keras>=3.15,<3.16)."
        )


def prepare_for_strategy(model, element_spec):
    """Make a compiled model's `fit` and `evaluate` work under its strategy (see the module doc).

    Call after `model.compile`, which resets the train and test functions.
    A no-op for a model built outside any strategy scope.

    Args:
        model: a compiled Keras model, built inside `strategy.scope()`.
        element_spec: the `element_spec` of the training dataset,
            `({"encoder_tokens": TensorSpec, "decoder_tokens": TensorSpec},
            TensorSpec)`.
    """
    check_keras_hooks(model)
    strategy = model._distribute_strategy
    if strategy is None:
        return

    def maybe_symbolic_build(*args, **kwargs):  # (iterator=None, data_batch=None)
        with strategy.scope():
            model._symbolic_build(data_batch=element_spec)

    model._maybe_symbolic_build = maybe_symbolic_build
    if _is_multi_worker(strategy):
        model.train_function = _multi_worker_function(model.train_step, strategy)
        model.test_function = _multi_worker_function(model.test_step, strategy)


def _is_multi_worker(strategy):
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def _multi_worker_function(step, strategy):
    """One step of `step` on the next global batch; logs averaged over all replicas."""

    @tf.function
    def function(iterator):
        # Raises OutOfRangeError at the end of the data, which Keras's epoch
        # iterator turns into the end of the epoch.
        logs = strategy.run(step, args=(next(iterator),))
        return tree.map_structure(
            lambda value: strategy.reduce("MEAN", value, axis=None), logs
        )

    return function
