"""How one decoding step of bench-small splits at a large batch: the parts timed alone, compiled with XLA.

Bench-small (vocabulary 8000, d_model 256, 8 heads, d_ff 1024, 3 + 3 layers).
A step of greedy search at batch B multiplies B rows, beam 4 multiplies 4·B.
For each row count, each part of one step (all three decoder blocks) runs
alone as one XLA program over random inputs of the step's shapes, the way the
step computes it (`MultiHeadAttention._attend_one` over position-major
caches), and the printout gives its median time and its share of their sum,
beside the measured time of a whole step (`generate`, 64 new tokens, end
token off, divided by 64):

* projections: self-attention q/k/v (one product) and output, cross-attention
  query and output;
* feed-forward: the two products and the activation;
* attention: products and sums over a 64-position self-attention cache and a
  64-token source, the softmax over the positions;
* output layer: the product over the vocabulary, with the log-softmax and the
  top-k of the search.

    python benchmarks/decode_step_split.py --rows 64 256
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    import keras_tf

    keras_tf.quiet_tensorflow()
    import keras
    import numpy as np
    import tensorflow as tf

    from decode_speed import BENCH_SMALL
    from keras_tf.decoding import generate
    from keras_tf.models import Seq2SeqTransformer

    c = BENCH_SMALL
    layers, d, heads, ff, vocabulary = (c.num_decoder_layers, c.d_model, c.num_heads, c.d_ff,
                                        c.target_vocabulary_size)
    head_dim, positions = d // heads, 64
    rng = np.random.default_rng(0)

    def weights(*shape):
        return tf.constant(rng.standard_normal(shape).astype("float32") * 0.05)

    def parts(rows):
        x = weights(rows, d)
        qkv, out, cross_q, cross_out = (weights(d, 3 * d), weights(d, d), weights(d, d),
                                        weights(d, d))
        inner, outer = weights(d, ff), weights(ff, d)
        cache = weights(2, positions, rows, heads, head_dim)
        embedding = weights(vocabulary, d)
        beam = rows // 64 if rows > 64 else 1

        def projections(x):
            for _ in range(layers):
                x = tf.matmul(x, qkv)[:, :d] + tf.matmul(x, out) + tf.matmul(tf.matmul(x, cross_q),
                                                                              cross_out)
            return x

        def feed_forward(x):
            for _ in range(layers):
                x = tf.matmul(tf.nn.relu(tf.matmul(x, inner)), outer)
            return x

        def attention(x):
            q = tf.reshape(x, (-1, heads, head_dim))
            for _ in range(2 * layers):  # self- and cross-attention
                scores = tf.reduce_sum(q[None] * cache[0], -1)
                w = tf.exp(scores - tf.reduce_max(scores, 0, keepdims=True))
                w = w / tf.reduce_sum(w, 0, keepdims=True)
                q = tf.reduce_sum(w[..., None] * cache[1], 0)
            return tf.reshape(q, (-1, d))

        def output_layer(x):
            log_probs = tf.nn.log_softmax(tf.matmul(x, embedding, transpose_b=True))
            if beam > 1:
                return tf.math.top_k(tf.reshape(log_probs, (-1, beam * vocabulary)), 2 * beam)[0]
            return tf.math.top_k(log_probs, 1)[0]

        return x, {"projections": projections, "feed-forward": feed_forward,
                   "attention over the caches": attention,
                   "output layer, log-softmax, top-k": output_layer}

    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer(BENCH_SMALL)
    for rows in args.rows:
        x, functions = parts(rows)
        medians = {}
        for name, function in functions.items():
            compiled = tf.function(function, jit_compile=True)
            compiled(x)
            seconds = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                compiled(x).numpy()
                seconds.append(time.perf_counter() - start)
            medians[name] = float(np.median(seconds))
        method = "greedy" if rows <= 64 else "beam"
        batch = rows if method == "greedy" else rows // 4
        sources = rng.integers(4, c.source_vocabulary_size, size=(batch, 64)).astype("int32")
        settings = dict(max_length=64, end_id=None, method=method, beam_size=4)
        generate(model, sources, **settings)
        steps = []
        for _ in range(3):
            start = time.perf_counter()
            generate(model, sources, **settings)
            steps.append((time.perf_counter() - start) / 64)
        total = sum(medians.values())
        print(f"\n{rows} rows ({method}, batch {batch}): a whole step {np.median(steps) * 1e3:.2f} "
              f"ms; the parts alone {total * 1e3:.2f} ms")
        print("| part | ms | share of the parts |")
        print("|---|---|---|")
        for name, seconds in medians.items():
            print(f"| {name} | {seconds * 1e3:.2f} | {seconds / total:.0%} |")


if __name__ == "__main__":
    main()
