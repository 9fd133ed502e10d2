"""Where a SavedModel export spends a request without XLA: ops per step and time per op type.

Loads an export the way TF Serving does (a TF1 session, the restore op, the
`translate_tokens` SignatureDef), runs one request with TensorFlow's full
trace (`RunOptions.FULL_TRACE`, the step statistics of every node the
executor ran, inside the decoding loop too) and prints:

* the ops of each decoding loop's body from the graph
  (`keras_tf.serving.loop_body_ops`), constants apart: one iteration, which
  for greedy search without XLA is two steps;
* the nodes the executor ran for the request and the median wall time of
  the request (untraced);
* the time of each op type summed over the request, its share, the number
  of times it ran and its mean time: what bounds a step.

With `--export DIR` it profiles that export; otherwise it builds the model of
`benchmarks/serving_latency.py` (transformer_small's shape, untrained,
vocabulary 2000) and exports it first. `--compare DIR` profiles a second
export in the same run (for example one written by an older keras_tf).

    python benchmarks/serving_profile.py --batch-sizes 1 32
    python benchmarks/serving_profile.py --export models/translator/1 --batch-sizes 1

The figures are per request of `--max-length` new tokens (an untrained model
never ends early), so divide by that for a step. Under the trace every node
is timed on its own, which slows the request; the untraced wall time is the
one to quote.
"""

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def profile(export_dir, batch_size, source_length, calls, top):
    """Print the profile of one export at one batch size (in this process: TensorFlow only)."""
    import numpy as np
    import tensorflow as tf

    from serving_latency import load_session

    session, signatures = load_session(export_dir)
    signature = signatures["translate_tokens"]
    feed_name = signature.inputs["source_ids"].name
    fetches = {name: info.name for name, info in signature.outputs.items()}
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 1000, size=(batch_size, source_length)).astype("int32")
    for _ in range(3):
        session.run(fetches, {feed_name: ids})
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        session.run(fetches, {feed_name: ids})
        seconds.append(time.perf_counter() - start)

    run_metadata = tf.compat.v1.RunMetadata()
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    session.run(fetches, {feed_name: ids}, options=options, run_metadata=run_metadata)
    micros, runs = collections.Counter(), collections.Counter()
    for device in run_metadata.step_stats.dev_stats:
        for node in device.node_stats:
            # timeline_label: "name = Op(inputs)"; a node without one is named by itself
            label = node.timeline_label
            op = label.split("=", 1)[1].split("(", 1)[0].strip() if "=" in label else node.node_name
            micros[op] += node.all_end_rel_micros
            runs[op] += 1
    total = sum(micros.values())
    print(f"\n### {export_dir}, batch {batch_size}\n")
    print(f"request: {np.median(seconds) * 1e3:.1f} ms median of {calls} untraced; "
          f"{sum(runs.values()):,} nodes run; {total / 1e3:.1f} ms of op time traced\n")
    print("| op | ms | share | runs | µs per run |")
    print("|---|---|---|---|---|")
    for op, us in micros.most_common(top):
        print(f"| {op} | {us / 1e3:.2f} | {us / total:.0%} | {runs[op]:,} | {us / runs[op]:.1f} |")


def print_loop_bodies(export_dir):
    from keras_tf.serving import loop_body_ops

    for body, ops in loop_body_ops(export_dir).items():
        constants = ops["Const"] + ops["NoOp"]
        print(f"{export_dir}: loop body {body}: {sum(ops.values()) - constants} ops "
              f"(and {constants} constants); most common: "
              + ", ".join(f"{op} {n}" for op, n in ops.most_common() if op not in ("Const", "NoOp"))
              [:300])


def build_export(folder, max_length):
    from keras_tf.serving import export
    from keras_tf.text import Seq2SeqTokenizers
    from serving_latency import corpus_sentences, serving_model

    sources, targets, _ = corpus_sentences()
    tokenizers = Seq2SeqTokenizers.train(sources, targets, vocabulary_size=2000)
    model = serving_model(tokenizers)
    return export(model, tokenizers, os.path.join(folder, "translator"), max_length=max_length)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", help="an export version folder; default: build one")
    parser.add_argument("--compare", help="a second export to profile in the same run")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--source-length", type=int, default=20)
    parser.add_argument("--max-length", type=int, default=32, help="of the built export")
    parser.add_argument("--calls", type=int, default=20, help="untraced calls timed")
    parser.add_argument("--top", type=int, default=15, help="op types listed")
    parser.add_argument("--profile-one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profile_one:
        export_dir, batch_size, source_length = args.profile_one
        return profile(export_dir, int(batch_size), int(source_length), args.calls, args.top)

    import keras_tf

    keras_tf.quiet_tensorflow()
    from keras_tf.tensorflow_import import is_start_up_line

    exports = [args.export or build_export(tempfile.mkdtemp(prefix="serving_profile_"),
                                           args.max_length)]
    if args.compare:
        exports.append(args.compare)
    for export_dir in exports:
        print_loop_bodies(export_dir)
    for export_dir in exports:
        for batch_size in args.batch_sizes:
            # A fresh process each: TensorFlow and TF-Text only, as in the server.
            sys.stdout.flush()
            completed = subprocess.run(
                [sys.executable, __file__, "--calls", str(args.calls), "--top", str(args.top),
                 "--profile-one", export_dir, str(batch_size), str(args.source_length)],
                stderr=subprocess.PIPE, text=True,
            )
            # TensorFlow's start-up lines stay off stderr; anything else is passed on.
            sys.stderr.writelines(line for line in completed.stderr.splitlines(True)
                                  if not is_start_up_line(line))
            if completed.returncode:
                sys.exit(completed.returncode)


if __name__ == "__main__":
    main()
