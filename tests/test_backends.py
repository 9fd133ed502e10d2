"""The layers, models and decoding on JAX: a test subset, TensorFlow <-> JAX parity, no TensorFlow.

A process has one Keras backend, so each JAX check runs in a subprocess
with `KERAS_BACKEND=jax`; this module itself runs on TensorFlow.
"""

import os
import pathlib
import re
import subprocess
import sys

import keras
import numpy as np

from tests.helpers import to_numpy

ROOT = pathlib.Path(__file__).resolve().parents[1]
HIDE_TENSORFLOW = ROOT / "tests" / "hide_tensorflow.py"

# The tests the issue asks to pass under JAX: parity with Keras's and
# keras-hub's layers, one beam == greedy, beam scores == teacher-forced
# log-probs over the penalty, the reverse task, a .keras round trip (in the
# layer checks), the loss, metric and schedule, and what is JAX-specific
# (weights read at call time, seeds in the compiled loop), and gradient
# accumulation (the schedule per update; N batches, one update). Issue 50's
# decoding equalities at batch 16: the beam tests' batch16 cases and cached ==
# uncached greedy as the full model's argmax on its own prefix in one forward
# pass (int8 agreement runs on its own: JAX_OPTIMIZED). The uncached loop
# itself (the other test in test_greedy.py, and the int8 one in
# test_quantize.py) would spend minutes compiling JAX's eager ops for every
# prefix length; gpu_check.py --cpu runs it on JAX, without TensorFlow. The
# staged cache against one fixed cache (test_stages.py) is keras.ops alone, the
# same on both backends, and runs on TensorFlow only: 10 s of this process's JAX
# compiles; one trace per shape on JAX is test_generate's.
JAX_SUBSET = [
    "tests/layers/test_multi_head_attention.py::test_matches_keras_self_attention",
    "tests/layers/test_multi_head_attention.py::test_matches_keras_with_causal_mask",
    "tests/layers/test_multi_head_attention.py::test_matches_keras_cross_attention_with_padding_masks",
    "tests/layers/test_multi_head_attention.py::test_cache_gives_the_same_outputs_as_the_full_sequence",
    "tests/layers/test_multi_head_attention.py::test_layer_checks",
    "tests/layers/test_transformer_blocks.py::test_encoder_matches_keras_hub",
    "tests/layers/test_transformer_blocks.py::test_decoder_matches_keras_hub",
    "tests/decoding/test_beam_search.py",
    "tests/decoding/test_greedy.py::test_cached_greedy_at_batch_16_is_the_full_models_argmax_on_its_own_prefix",
    "tests/decoding/test_generate.py::test_a_second_call_with_the_same_shapes_does_not_retrace",
    "tests/decoding/test_compile.py",
    "tests/decoding/test_sampling.py::test_each_compiled_step_draws_afresh",
    "tests/decoding/test_sampling.py::test_a_seed_gives_the_same_tokens_every_call",
    "tests/decoding/test_generate.py::test_free_running_reverse_task_exact_match",
    "tests/training/test_losses_metrics_schedules.py",
    "tests/training/test_gradient_accumulation.py::test_the_schedule_is_read_per_update_and_saved_with_the_optimizer",
    "tests/training/test_gradient_accumulation.py::test_two_batches_accumulated_update_as_one_batch_of_both",
]

# Issue 50's int8 agreement on the reverse task (200 sources in one batch), in
# a JAX process of its own at XLA's usual optimization. At -O0 (run_on_jax's
# default) JAX trains another reverse model: measured, 97.5 % of sequences
# exact in float32 instead of 100 %, and int8 agrees with it on 98.5 % (the
# test asks 99 %): 3 sequences where float32 was wrong by a margin of 0.2 to
# 0.3 between its top two logits and int8 picked the label. The int8 decoder
# equals the int8 full model on its own prefix in all 200 there.
JAX_OPTIMIZED = [
    "tests/decoding/test_quantize.py::test_int8_decodes_the_reverse_task_as_float32_does",
]


def run_on_jax(args, timeout=600, cwd=ROOT, llvm_o0=True):
    """Run `python ARGS` in `cwd` (default: the repository root) with KERAS_BACKEND=jax.

    JAX compiles every op it runs, even eagerly, and these tiny models spend
    far longer in LLVM's optimizer than running, so the process compiles at
    LLVM -O0 (`XLA_FLAGS`): measured on this module, 209 s -> 175 s of CPU.
    Only here: TensorFlow's tests train larger models under XLA, which ran
    slower at -O0 (the README example 40 s -> 121 s), and their trained
    models moved enough to fail two int8 tolerances. `llvm_o0=False` keeps
    XLA's usual optimization, for a test that trains a model (JAX_OPTIMIZED).
    """
    environ = dict(os.environ)
    if not llvm_o0:
        # Not an xdist worker for tests/helpers.shared_folder: a model trained
        # at the usual optimization is its own, never the -O0 processes' one
        # that the workers share.
        environ.pop("PYTEST_XDIST_WORKER", None)
    env = {
        **environ,
        "KERAS_BACKEND": "jax",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "XLA_FLAGS": " ".join(filter(None, [
            os.environ.get("XLA_FLAGS"), "--xla_backend_optimization_level=0" if llvm_o0 else ""])),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout,
    )


# First, in the same process: on JAX keras_tf leaves TensorFlow unimported, and
# after keras_tf.quiet_tensorflow(), when Keras imports it (saving a model) or
# a script does, its C++ start-up lines stay off stderr. Then the subset, in pytest.
QUIET_LATER_THEN_PYTEST = """
import os, sys, tempfile
import keras_tf
keras_tf.quiet_tensorflow()
assert "tensorflow" not in sys.modules
with tempfile.TemporaryFile() as written:
    stderr_fd = os.dup(2)
    os.dup2(written.fileno(), 2)
    try:
        import tensorflow
    finally:
        os.dup2(stderr_fd, 2)
        os.close(stderr_fd)
    written.seek(0)
    lines = written.read().decode()
assert lines == "", lines
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def test_the_jax_subset_passes():
    result = run_on_jax(
        ["-c", QUIET_LATER_THEN_PYTEST, "-q", "-p", "no:cacheprovider", *JAX_SUBSET], timeout=900
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and not re.search(
        r"failed|skipped|error|warning", summary
    ), summary


def test_int8_agrees_with_float32_on_the_reverse_task_on_jax():
    result = run_on_jax(["-m", "pytest", "-q", "-p", "no:cacheprovider", *JAX_OPTIMIZED],
                        llvm_o0=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert re.search(rf"\b{len(JAX_OPTIMIZED)} passed", summary) and not re.search(
        r"failed|skipped|error|warning", summary
    ), summary


WITHOUT_TENSORFLOW = """
import importlib, io, sys, contextlib
import keras, numpy as np
import keras_tf
from keras_tf.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy, transformer_adam

assert keras.backend.backend() == "jax"

# The paper's loss, metric and schedule, on the docs example's model (`model`,
# `inputs`, `labels` above). Training and cached-vs-uncached decoding without
# TensorFlow are gpu_check.py --cpu's, which runs under the same blocker.
batch = {key: value[:64] for key, value in inputs.items()}
logits = np.asarray(keras.ops.convert_to_numpy(model(batch)), "float64")
y, real = labels[:64], labels[:64] != 0
top = logits.max(-1, keepdims=True)
log_probs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
nll = -np.take_along_axis(log_probs, y[..., None], -1)[..., 0]
expected = (0.9 * nll + 0.1 * -log_probs.mean(-1))[real].mean()
loss = float(MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)(y, logits.astype("float32")))
np.testing.assert_allclose(loss, expected, rtol=1e-5)
assert loss < np.log(64), loss  # the example's 2 epochs beat a uniform guess over 64 ids
metric = MaskedTokenAccuracy()
metric.update_state(y, logits.astype("float32"))
np.testing.assert_allclose(float(metric.result()), (logits.argmax(-1) == y)[real].mean(), rtol=1e-6)
optimizer = transformer_adam(32, warmup_steps=10, scale=2.0)
np.testing.assert_allclose(float(optimizer.learning_rate), 2.0 * 32**-0.5 * 10**-1.5, rtol=1e-6)
print("OK", round(loss, 3))

# The TensorFlow-only parts say so in one line.
for name in ("keras_tf.text", "keras_tf.serving", "keras_tf.training.trainer"):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as error:
        assert "needs TensorFlow" in str(error) and "\\n" not in str(error), error
    else:
        raise AssertionError(name + " imported without TensorFlow")
try:
    from keras_tf.training import train
except ModuleNotFoundError as error:
    assert "keras_tf.training" in str(error) and "needs TensorFlow" in str(error), error
else:
    raise AssertionError("train imported without TensorFlow")
from keras_tf.cli.main import main
stderr = io.StringIO()
with contextlib.redirect_stderr(stderr):
    status = main(["translate", "--model", "nowhere"])
assert status == 1 and stderr.getvalue().count("\\n") == 1, stderr.getvalue()
assert "keras-tf translate: error: the keras-tf command line needs TensorFlow" in stderr.getvalue()

assert not [m for m in sys.modules if m.split(".")[0] in ("tensorflow", "tensorflow_text")]
"""


def docs_example():
    """The Python example of docs/backends.md and the output its comment shows."""
    text = (ROOT / "docs" / "backends.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    (shown,) = re.findall(r"^print\(.*\)  # (.*)$", code, re.MULTILINE)
    return code, shown


# A translator preset saved on TensorFlow (tokenizers included) loads on JAX
# without TensorFlow and translates ids; text says in one line why it cannot.
# The preset JAX writes back (ids only) is checked on TensorFlow by the test.
PRESETS_ACROSS_BACKENDS = """
from keras_tf.translation import Seq2SeqTranslator
batch = dict(np.load("batch.npz"))
translator = Seq2SeqTranslator.from_preset("from_tf")
assert translator.preprocessor is None


def outputs(translator):
    return dict(
        logits=keras.ops.convert_to_numpy(translator.backbone(batch)),
        greedy=translator.generate(batch["encoder_tokens"], method="greedy"),
        beam=translator.generate(batch["encoder_tokens"], method="beam", beam_size=3),
    )


np.savez("from_tf_on_jax.npz", **outputs(translator))
try:
    translator.generate("red cat")
except ValueError as error:
    assert "needs TensorFlow" in str(error) and "from_tf/tokenizers" in str(error), error
else:
    raise AssertionError("text translated without TensorFlow")

# A JAX model of its own, written as a preset (ids only) for TensorFlow to read.
keras.utils.set_random_seed(6)
jax_translator = Seq2SeqTranslator.from_preset("transformer_tiny", tie_embeddings=False)
jax_translator.save_to_preset("from_jax")
np.savez("jax.npz", **outputs(jax_translator))
reloaded = Seq2SeqTranslator.from_preset("from_jax")
for key, value in outputs(reloaded).items():  # the round trip on JAX itself
    np.testing.assert_array_equal(value, np.load("jax.npz")[key], err_msg=key)
assert not [m for m in sys.modules if m.split(".")[0] in ("tensorflow", "tensorflow_text")]
print("PRESETS OK")
"""


def _outputs(translator, batch):
    return dict(
        logits=to_numpy(translator.backbone(batch)),
        greedy=translator.generate(batch["encoder_tokens"], method="greedy"),
        beam=translator.generate(batch["encoder_tokens"], method="beam", beam_size=3),
    )


def test_without_tensorflow_a_preset_trains_and_generates_on_jax(tmp_path):
    """With TensorFlow hidden: the docs' example, training, and presets both ways.

    A translator preset saved on TensorFlow (tokenizers included) loads on
    JAX, gives the same logits (within 1e-5) and the same greedy and beam
    tokens, and says in one line why it cannot read text; a preset saved on
    JAX loads on TensorFlow with the same outputs.
    """
    from keras_tf.translation import Seq2SeqTranslator
    from keras_tf.text import Seq2SeqTokenizers

    assert keras.backend.backend() == "tensorflow"
    keras.utils.set_random_seed(11)
    sources = ["red cat", "open the file", "two small dogs", "save the notebook"] * 4
    targets = ["chat rouge", "ouvre le fichier", "deux petits chiens", "enregistre"] * 4
    tokenizers = Seq2SeqTokenizers.train(sources, targets, vocabulary_size=40)
    translator = Seq2SeqTranslator.from_preset(
        "transformer_tiny", tokenizers=tokenizers, tie_embeddings=False
    )
    translator.save_to_preset(tmp_path / "from_tf")
    import tensorflow as tf

    batch, _ = translator.preprocessor(tf.constant(sources[:4]), tf.constant(targets[:4]))
    batch = {key: value.numpy() for key, value in batch.items()}
    np.savez(tmp_path / "batch.npz", **batch)
    on_tensorflow = _outputs(translator, batch)

    # The docs' example first, as written (in an empty folder: it saves a file).
    code, shown = docs_example()
    result = run_on_jax(
        [str(HIDE_TENSORFLOW), "-c", "\n".join([code, WITHOUT_TENSORFLOW, PRESETS_ACROSS_BACKENDS])],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == shown, result.stdout
    assert (tmp_path / "reverse.keras").is_file()
    assert lines[1].startswith("OK"), result.stdout
    assert lines[2] == "PRESETS OK", result.stdout

    # TensorFlow -> JAX: the same logits and tokens from the same preset.
    on_jax = np.load(tmp_path / "from_tf_on_jax.npz")
    np.testing.assert_allclose(on_jax["logits"], on_tensorflow["logits"], atol=1e-5, rtol=0)
    for key in ("greedy", "beam"):
        np.testing.assert_array_equal(on_jax[key], on_tensorflow[key], err_msg=key)
    # JAX -> TensorFlow: the preset JAX wrote loads here and gives its outputs again.
    from_jax = Seq2SeqTranslator.from_preset(tmp_path / "from_jax")
    assert from_jax.preprocessor is None
    jax = np.load(tmp_path / "jax.npz")
    again = _outputs(from_jax, batch)
    np.testing.assert_allclose(again["logits"], jax["logits"], atol=1e-5, rtol=0)
    for key in ("greedy", "beam"):
        np.testing.assert_array_equal(again[key], jax[key], err_msg=key)
    # Two models (the JAX one keeps the preset's 64 ids), not one set of weights twice.
    assert jax["logits"].shape[-1] == 64 and on_tensorflow["logits"].shape[-1] == 40


def test_gpu_check_runs_on_the_cpu_without_tensorflow():
    result = run_on_jax(
        [str(HIDE_TENSORFLOW), "benchmarks/gpu_check.py", "--cpu", "--steps", "3", "--repeats", "1"]
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Warning" not in result.stderr, result.stderr[-3000:]
    out = result.stdout
    peaks = re.findall(r"(bfloat16|float32) ([\d.]+) TFLOP/s", out)
    assert [dtype for dtype, _ in peaks] == ["bfloat16", "float32"] and all(
        float(value) > 0 for _, value in peaks
    ), out
    training = re.findall(r"^\| (.+?) \| (bfloat16|float32) \| [\d.]+ \| ([\d,]+) \| ([\d.]+)% \|$",
                          out, re.MULTILINE)
    assert [(name.split(" (")[0], dtype) for name, dtype, _, _ in training] == [
        ("bench-small", "bfloat16"), ("bench-small", "float32"),
        ("transformer_base", "bfloat16"), ("transformer_base", "float32"),
    ], out
    assert all(float(rate.replace(",", "")) > 0 and float(mfu) > 0 for *_, rate, mfu in training)
    decoding = re.findall(r"^\| (\d+) \| (greedy|beam4) \| [\d,]+ \| [\d,]+ \| [\d.]+x \|$",
                          out, re.MULTILINE)
    assert decoding == [("2", "greedy"), ("2", "beam4")], out  # one batch size with --cpu
    assert len(re.findall(r"tokens equal True", out)) == 2, out
    assert "cached equals uncached: True" in out


# A jitted program whose 128 MB temporary (`a @ b`) XLA allocates on every run.
PAGE_FAULTS_PER_RUN = """
import resource, jax, jax.numpy as jnp
@jax.jit
def f(a, b):
    return (jnp.tanh(a @ b) @ jnp.ones((8192, 4), jnp.float32)).sum()
a, b = jnp.ones((4096, 64)) / 64, jnp.ones((64, 8192))
f(a, b).block_until_ready()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    f(a, b).block_until_ready()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(faults / 3 / (4096 * 8192 * 4 // resource.getpagesize()))
"""


def test_the_documented_glibc_settings_stop_jax_faulting_its_temporaries_in_each_run():
    """docs/backends.md's `export` line, run as written: a run's temporary is no longer faulted in anew."""
    text = (ROOT / "docs" / "backends.md").read_text(encoding="utf-8")
    section = text.split("## JAX on a CPU", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)
    fractions = {}
    for name, settings in (("without", ""), ("with", block)):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
        result = subprocess.run(
            ["bash", "-c", f'{settings}\n"$0" -c "$1"\n', sys.executable, PAGE_FAULTS_PER_RUN],
            env=env, capture_output=True, text=True, timeout=120,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        fractions[name] = float(result.stdout.split()[-1])
    # Without them each run faults the whole temporary in again; with them, none of it.
    assert fractions["without"] > 0.5 and fractions["with"] < 0.01, fractions
