"""What one op costs in a SavedModel's decoding loop, untraced: the graph executor against XLA.

A traced profile (`serving_profile.py`) times each node on its own, which
slows the small ones most and misleads about what to change. This measures
the forms of the ops a decoding step runs without a trace: each form is
repeated 32 times in a chain inside a `tf.while_loop` of 32 iterations,
saved as a SavedModel and loaded into a TF1 session as TF Serving loads one
(`serving_latency.load_session`), so the figure is one form's cost inside a
loop, executor overhead included. The peer is the same loop saved with
`jit_compile=True` (the `xla=True` export's form), loaded the same way, in
the same run. Both are timed in interleaved rounds; medians.

The shapes are transformer_small's (d_model 128, 4 heads of 32, a
feed-forward of 512, a vocabulary of 2000, 16 positions), at 1 row and at
`--rows` rows. The pairs to read side by side: a product with its bias fused
by Grappler against the bias added apart (`keras_tf.layers.dense_call`),
TensorFlow's softmax against the five ops of the step's attention, a product
with the transposed vocabulary table against the table transposed ahead.

    python benchmarks/serving_op_costs.py [--rows 32] [--rounds 40]
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

D_MODEL, HEADS, D_FF, VOCABULARY, POSITIONS = 128, 4, 512, 2000, 16
CHAIN, ITERATIONS = 32, 32


def forms(tf, weights):
    """`{name: fn(x [rows, D_MODEL], loop invariants) -> [rows, D_MODEL]}`: one op form each."""
    w, w_ff, bias, table = weights

    def softmax_in_five_ops(z, axis=-1):
        e = tf.exp(z - tf.reduce_max(z, axis, keepdims=True))
        return e / tf.reduce_sum(e, axis, keepdims=True)

    def scores(x):  # [rows, heads, positions]
        return tf.reshape(x[:, : HEADS * POSITIONS], (-1, HEADS, POSITIONS))

    def back(x, z):  # one [rows, 1] number of z, so that the chain depends on every form
        return x + tf.reduce_sum(tf.reshape(z, (tf.shape(x)[0], -1))[:, :1], -1, keepdims=True)

    def attend(x, c):
        # One query per row over position-major keys and values [positions,
        # rows, heads, head_dim], as the export's step reads its cache.
        query = tf.reshape(x, (1, -1, HEADS, D_MODEL // HEADS))
        weights = softmax_in_five_ops(tf.reduce_sum(query * c["keys"], -1, keepdims=True), axis=0)
        return tf.reshape(tf.reduce_sum(weights * c["keys"], 0), (-1, D_MODEL))

    def layer_norm(x):
        mean = tf.reduce_mean(x, -1, keepdims=True)
        centered = x - mean
        variance = tf.reduce_mean(tf.square(centered), -1, keepdims=True)
        return centered * tf.math.rsqrt(variance + 1e-6) * bias + bias

    return {
        "add, two [rows, 128]": lambda x, c: x + c["other"],
        "LayerNorm in nine ops": lambda x, c: layer_norm(x),
        "product [rows, 128] × [128, 128]": lambda x, c: tf.matmul(x, w),
        "product + bias, fused by Grappler": lambda x, c: tf.nn.bias_add(tf.matmul(x, w), bias),
        "product + bias repeated over rows": lambda x, c: tf.matmul(x, w) + c["rows_bias"],
        "feed-forward 128 → 512 → 128": lambda x, c: tf.matmul(tf.nn.relu(tf.matmul(x, w_ff)),
                                                            w_ff, transpose_b=True),
        "softmax over [rows, 4, 16], tf.nn": lambda x, c: back(x, tf.nn.softmax(scores(x))),
        "softmax over [rows, 4, 16], five ops": lambda x, c: back(x, softmax_in_five_ops(scores(x))),
        "vocabulary product, table transposed in it": lambda x, c: back(
            x, tf.matmul(x, table, transpose_b=True)),
        "vocabulary product, table transposed ahead": lambda x, c: back(
            x, tf.matmul(x, c["table_t"])),
        "attention over 16 cached positions, products and sums": lambda x, c: attend(x, c),
        "top_k(1) over the vocabulary": lambda x, c: back(
            x, tf.cast(tf.math.top_k(c["logits"] + x[:, :1], 1)[1], x.dtype)),
    }


def loop_of(tf, form, weights):
    """`x -> x` through `ITERATIONS` iterations of `CHAIN` calls of `form`, its invariants made before the loop."""

    def loop(x):
        invariants = dict(
            other=x * 0.5,
            rows_bias=tf.tile(weights[2][None], (tf.shape(x)[0], 1)),
            table_t=tf.transpose(weights[3]),
            logits=tf.tile(x, (1, VOCABULARY // D_MODEL + 1))[:, :VOCABULARY],
            keys=tf.tile(tf.reshape(x, (1, -1, HEADS, D_MODEL // HEADS)), (POSITIONS, 1, 1, 1)),
        )

        def body(i, x):
            for _ in range(CHAIN):
                x = form(x, invariants)
            return i + 1, x

        return tf.while_loop(lambda i, x: i < ITERATIONS, body, (tf.constant(0), x))[1]

    return loop


def save_loops(tf, folder):
    """One SavedModel per form and executor; `{(name, xla): export dir}`."""
    import numpy as np

    rng = np.random.default_rng(0)
    weights = [tf.Variable(rng.standard_normal(shape).astype("float32") * 0.05) for shape in (
        (D_MODEL, D_MODEL), (D_MODEL, D_FF), (D_MODEL,), (VOCABULARY, D_MODEL))]
    paths = {}
    for name, form in forms(tf, weights).items():
        for xla in (False, True):
            module = tf.Module()
            module.weights = weights
            module.loop = tf.function(loop_of(tf, form, weights), jit_compile=xla,
                                      input_signature=[tf.TensorSpec([None, D_MODEL], tf.float32)])
            path = os.path.join(folder, f"{len(paths)}")
            tf.saved_model.save(module, path, signatures=module.loop)
            paths[(name, xla)] = path
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()

    import numpy as np

    from serving_latency import load_session, serving_tensorflow

    tf = serving_tensorflow()
    folder = tempfile.mkdtemp(prefix="serving_op_costs_")
    try:
        paths = save_loops(tf, folder)
        sessions = {}
        for key, path in paths.items():
            session, signatures = load_session(path)
            signature = signatures["serving_default"]
            sessions[key] = (session, next(iter(signature.inputs.values())).name,
                             next(iter(signature.outputs.values())).name)
        print(f"One form's cost in µs, untraced: a chain of {CHAIN} in a while loop of "
              f"{ITERATIONS} iterations, loaded as TF Serving loads a SavedModel; medians of "
              f"{args.rounds} interleaved rounds.\n")
        print("| form | rows | graph executor | XLA (peer) | ratio |")
        print("|---|---|---|---|---|")
        rng = np.random.default_rng(1)
        for rows in (1, args.rows):
            x = (rng.standard_normal((rows, D_MODEL)) * 0.1).astype("float32")
            seconds = {key: [] for key in sessions}
            for session, feed, fetch in sessions.values():
                session.run(fetch, {feed: x})  # compile and warm up
            for _ in range(args.rounds):
                for key, (session, feed, fetch) in sessions.items():
                    start = time.perf_counter()
                    session.run(fetch, {feed: x})
                    seconds[key].append(time.perf_counter() - start)
            per_form = {key: np.median(s) * 1e6 / (CHAIN * ITERATIONS) for key, s in seconds.items()}
            for name in dict.fromkeys(name for name, _ in sessions):
                graph, xla = per_form[(name, False)], per_form[(name, True)]
                print(f"| {name} | {rows} | {graph:.2f} | {xla:.2f} | {graph / xla:.1f}× |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
