"""`import keras_tf` is enough for `keras.saving.load_model` of the model.keras that `train` writes.

In a fresh process. (Keras imported before keras_tf is the simple case:
`import keras_tf` registers at once.)
"""

import os
import subprocess
import sys

import pytest

LOAD = """
import sys
{imports}
model = keras.saving.load_model(sys.argv[1])
print(type(model).__name__, type(model.loss).__name__)
"""


@pytest.mark.parametrize("imports", [
    # Keras imported after keras_tf, by the user: registered once Keras has loaded.
    "import keras_tf\nimport keras",
    # Keras imported by a keras_tf module that registers nothing: registered after it.
    "import keras_tf.decoding\nimport keras",
])
def test_load_model_after_import_keras_tf(trained_run, imports):
    model_dir, _ = trained_run
    result = subprocess.run(
        [sys.executable, "-c", LOAD.format(imports=imports), str(model_dir / "model.keras")],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["Seq2SeqTransformer", "MaskedSparseCategoricalCrossentropy"]
