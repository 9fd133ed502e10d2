"""Shared pieces of the benchmark scripts: the bench-small configuration and timing helpers."""

import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras_tf  # noqa: E402

keras_tf.quiet_tensorflow()  # first: TensorFlow's C++ start-up lines kept off stderr
import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_tf.models import TransformerConfig  # noqa: E402

# Bench-small, as the issues define it.
BENCH_SMALL = TransformerConfig(
    source_vocabulary_size=8000,
    target_vocabulary_size=8000,
    d_model=256,
    num_heads=8,
    d_ff=1024,
    num_encoder_layers=3,
    num_decoder_layers=3,
    dropout=0.1,
    max_source_length=64,
    max_target_length=64,
)
BATCH_SIZE = 64
SEQUENCE_LENGTH = 64


def random_batch(config=BENCH_SMALL, batch_size=BATCH_SIZE, length=SEQUENCE_LENGTH, seed=0):
    """Full-length random token ids (no padding), labels = decoder tokens shifted by one."""
    rng = np.random.default_rng(seed)
    encoder = rng.integers(4, config.source_vocabulary_size, (batch_size, length)).astype("int32")
    target = rng.integers(4, config.target_vocabulary_size, (batch_size, length + 1)).astype("int32")
    return {"encoder_tokens": encoder, "decoder_tokens": target[:, :-1]}, target[:, 1:]


class StepTimer(keras.callbacks.Callback):
    """Records the wall time of every training batch."""

    def __init__(self):
        super().__init__()
        self.times = []

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter() - self._start)


def median(values):
    return statistics.median(values)


def matmul_flops_per_second(size=2048, repeats=20, dtype="float32"):
    """Peak matmul throughput on this machine (FLOP/s) on the current backend: the best of repeats.

    The best, not the median, because it is the ceiling that model FLOPs
    utilisation is measured against; noise only ever slows a run down. The
    matmul is compiled with the backend's XLA entry point and summed to a
    scalar, so that reading the result back costs nothing.
    """
    from keras_tf.decoding.compile import xla_compile

    rng = np.random.default_rng(0)
    a = keras.ops.convert_to_tensor(rng.standard_normal((size, size)), dtype=dtype)
    b = keras.ops.convert_to_tensor(rng.standard_normal((size, size)), dtype=dtype)
    matmul = xla_compile(
        lambda x, y: keras.ops.sum(keras.ops.cast(keras.ops.matmul(x, y), "float32")), lambda: []
    )
    keras.ops.convert_to_numpy(matmul(a, b))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        keras.ops.convert_to_numpy(matmul(a, b))
        times.append(time.perf_counter() - start)
    return 2 * size**3 / min(times)


def training_flops_per_step(config, batch_size, source_length, target_length):
    """Model FLOPs of one training step (forward + backward = 3 × forward matmul FLOPs)."""
    d, d_ff, vocab = config.d_model, config.d_ff, config.target_vocabulary_size
    S, T = source_length, target_length
    # Multiply-accumulates per sequence, forward pass.
    encoder = config.num_encoder_layers * S * (4 * d * d + 2 * d * d_ff + 2 * S * d)
    decoder = config.num_decoder_layers * (
        T * (4 * d * d + 2 * T * d)  # masked self-attention
        + T * 2 * d * d + S * 2 * d * d + T * 2 * S * d  # cross-attention
        + T * 2 * d * d_ff  # feed-forward
    )
    output = T * d * vocab
    forward_flops = 2 * (encoder + decoder + output)
    return 3 * forward_flops * batch_size


def tf_uncached_greedy(model, batch_size):
    """The tutorials' uncached greedy loop, the full model in one `tf.function` for any prefix.

    Returns `run(encoder_tokens, max_length) -> int32 numpy [batch, max_length]`:
    every step runs the model on the whole prefix and appends the argmax
    (padding and START excluded, as the cached loops do).
    """
    import tensorflow as tf

    from keras_tf.decoding.greedy import exclude_unpickable
    from keras_tf.models import START_ID

    spec = tf.TensorSpec((batch_size, None), tf.int32)

    @tf.function(input_signature=[spec, spec], autograph=False)
    def next_tokens(encoder_tokens, decoder_tokens):
        logits = model({"encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens})
        return tf.argmax(exclude_unpickable(logits[:, -1, :]), axis=-1, output_type=tf.int32)

    def run(encoder_tokens, max_length):
        encoder_tokens = tf.constant(encoder_tokens)
        prefix = tf.fill((batch_size, 1), START_ID)
        for _ in range(max_length):
            prefix = tf.concat([prefix, next_tokens(encoder_tokens, prefix)[:, None]], axis=1)
        return prefix[:, 1:].numpy()

    return run
