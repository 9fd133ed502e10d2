import atexit
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# `-n 2` runs one pytest worker per core. TensorFlow otherwise sizes its
# thread pools to the machine in every worker and every subprocess the tests
# start (they inherit this), and its idle threads spin: measured on
# tests/decoding, one thread each cut the CPU time by a fifth.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
# Many tests compile the same tiny models' XLA programs (the shared
# command-line run's train step, say), in a worker and in the processes it
# starts. One XLA cache folder for the run, made by the first process (the
# xdist controller) and removed when it exits, compiles each program once per
# worker. TensorFlow writes a cache file in place and fails a compile that
# reads a half-written one, so each worker has its own file prefix, which its
# subprocesses inherit: a worker waits on the processes it starts, while the
# two workers compile side by side. Measured on tests/cli: 17 % less CPU.
if "KERAS_TF_TEST_XLA_CACHE" not in os.environ:
    os.environ["KERAS_TF_TEST_XLA_CACHE"] = tempfile.mkdtemp(prefix="keras_tf_xla_cache_")
    atexit.register(shutil.rmtree, os.environ["KERAS_TF_TEST_XLA_CACHE"], ignore_errors=True)
flags = os.environ.get("TF_XLA_FLAGS", "")
if os.environ.get("PYTEST_XDIST_WORKER") and "--tf_xla_persistent_cache" not in flags:
    os.environ["TF_XLA_FLAGS"] = " ".join(filter(None, [
        flags,
        "--tf_xla_persistent_cache_directory=" + os.environ["KERAS_TF_TEST_XLA_CACHE"],
        "--tf_xla_persistent_cache_prefix=" + os.environ["PYTEST_XDIST_WORKER"],
    ]))

import pytest  # noqa: E402

from keras_tf.tensorflow_import import quiet_first_import  # noqa: E402

# The test processes are ours to configure (`import keras_tf` alone leaves a
# process as it is): TensorFlow's C++ start-up lines stay off their stderr.
# First, at no cost, for TensorFlow's first import whenever it comes: pytest
# loads the conftests below tests/ that it is given (`-n 2 tests/cli`) before
# pytest_configure, in the xdist controller too, and they import Keras.
quiet_first_import("tensorflow")


def pytest_configure(config):
    # Then Keras itself, quietly, before any test module imports it. Not in
    # the xdist controller, which runs no test: its TensorFlow start (about
    # 8 s) would only delay the workers' start.
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    import keras_tf

    keras_tf.quiet_tensorflow()


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Each test starts from the float32 policy and a fixed seed."""
    import keras

    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")


# The longest tests, each a minute or so of fresh processes, run first. Under
# `-n 2 --dist worksteal` a worker starts on the first half of the collection
# and, once done, steals from the end of the other's; a long test collected
# late could leave one core idle for its whole length at the end of the run.
# Whole modules move (their module fixtures stay set up once).
LONGEST_FIRST = (
    "tests/test_docs_examples.py",
    "tests/training/test_distribute.py",
    "tests/test_backends.py",
    "tests/cli/test_resume.py",
)


def pytest_collection_modifyitems(items):
    def rank(item):
        path = item.nodeid.split("::")[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order
