"""Run Python code as if TensorFlow were not installed.

    python tests/hide_tensorflow.py -c "import keras_tf"
    python tests/hide_tensorflow.py benchmarks/gpu_check.py --cpu

A meta-path finder answers every import of `tensorflow` (and of the wheels
built on it) with `ModuleNotFoundError`, as a machine without them would;
Keras then treats TensorFlow as absent. Use it with `KERAS_BACKEND=jax`.
"""

import runpy
import sys

HIDDEN = ("tensorflow", "tensorflow_text", "tensorflow_serving", "tf_keras")


class HideTensorFlow:
    """A `sys.meta_path` finder that refuses the `HIDDEN` packages."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def main(argv):
    sys.meta_path.insert(0, HideTensorFlow())
    if argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        exec(compile(argv[1], "<hide_tensorflow -c>", "exec"), {"__name__": "__main__"})
    else:
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
