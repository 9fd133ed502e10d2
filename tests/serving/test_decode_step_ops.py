"""What one decoding step of an export runs: counted from the graph of its loop body.

Without XLA, TensorFlow's graph executor runs every op of the loop body at
every step, so the number of ops is most of a step's cost at small batches
(docs/serving.md, "Where the time goes"). The ceilings are the counts this
code ends with; a change that adds ops to the step fails here and says by
how many.
"""

import collections

import pytest
import tensorflow as tf

from keras_tf.serving import loop_body_ops, saved_model_op_counts

# Ops of one step, constants and no-ops left out (Grappler folds or drops
# them), for the serving tests' one-block transformer_tiny exports.
CEILINGS = {"greedy": 138, "beam": 288, "int8": 210}
# Steps per iteration of the loop: greedy search runs two without XLA
# (`keras_tf.decoding.greedy`), beam search one.
STEPS = {"greedy": 2, "beam": 1, "int8": 2}


def running_ops(counter):
    return sum(n for op, n in counter.items() if op not in ("Const", "NoOp"))


@pytest.mark.parametrize("key", sorted(CEILINGS))
def test_step_ops_stay_under_the_ceiling(key, greedy_export, beam_export, int8_export):
    export_dir = {"greedy": greedy_export, "beam": beam_export, "int8": int8_export}[key].export_dir
    bodies = loop_body_ops(export_dir)
    # max_length 12: one cache stage, one loop.
    assert len(bodies) == 1, sorted(bodies)
    (ops,) = bodies.values()
    # Each step writes the one block's keys and values in place.
    assert ops["InplaceUpdate"] == 2 * STEPS[key], ops
    per_step = running_ops(ops) / STEPS[key]
    assert per_step <= CEILINGS[key], (
        f"one {key} step runs {per_step} ops, more than the {CEILINGS[key]} of "
        f"this ceiling: {collections.Counter(ops).most_common(12)}"
    )


def test_default_export_writes_caches_in_place_and_copies_no_weights(greedy_export, beam_export):
    for exported, steps in ((greedy_export, STEPS["greedy"]), (beam_export, STEPS["beam"])):
        (ops,) = loop_body_ops(exported.export_dir).values()
        # The one decoder block's self-attention keys and values, written in place.
        assert ops["InplaceUpdate"] == 2 * steps, ops
        # Only beam search scatters (copies) into buffers: its tokens and the
        # ancestor table. Greedy writes its token buffer with one select.
        assert ops["TensorScatterUpdate"] == (2 if exported is beam_export else 0), ops
        # The step's matrix products: self-attention q, k and v in one
        # (their kernels concatenated before the loop), its output, the
        # cross-attention query and output, two feed-forward layers and the
        # output layer. Seven a step, and each one MatMul: no tensordot.
        assert ops["MatMul"] == 7 * steps, ops
        # No bias added right after a product, which Grappler would fuse into
        # one slower oneDNN call: each bias is added apart
        # (`dense_call.step_weights_once`).
        assert ops["BiasAdd"] == 0, ops
        # The cross-attention's two batched products per block are Eigen's
        # (`BatchMatMulV3`); TensorFlow hands `BatchMatMul` and its V2 to
        # oneDNN, at about 0.1 ms a call.
        assert ops["BatchMatMulV3"] == 2 * steps, ops
        assert ops["BatchMatMul"] == ops["BatchMatMulV2"] == 0, ops
        if exported is greedy_export:
            # The tied output layer multiplies by the embedding table
            # transposed once before the loop, not at every step. (Beam
            # search transposes its own small tables.)
            assert ops["Transpose"] == 0, ops


def read_dtype(node):
    if node.op != "ReadVariableOp":
        return node.op
    return f"read {tf.as_dtype(node.attr['dtype'].type).name}"


@pytest.mark.parametrize("tied", [False, True])
def test_int8_step_reads_no_int8_weight(tied, int8_export, tied_int8_export):
    """The int8 weights are cast to float once per request, before the loop: a step reads none."""
    exported = tied_int8_export if tied else int8_export
    (ops,) = loop_body_ops(exported.export_dir, label=read_dtype).values()
    steps = STEPS["int8"]
    # The int8 embedding table is read only by the new token's lookup (its
    # shape and its gather, no copy); every int8 kernel, and the table as
    # the tied output layer, only before the loop.
    assert ops["read int8"] == 2 * steps, ops
    # One cast a step: the embedded token's int8 row. None of a weight.
    assert ops["Cast"] == steps, ops
    # Still read in the step: the float32 biases, scales and norms.
    assert ops["read float32"] > 0, ops
    # A tied output layer multiplies by the table cast and transposed once
    # before the loop, not at every step.
    assert ops["Transpose"] == 0, ops


def test_xla_export_keeps_the_static_cache(xla_export):
    bodies = loop_body_ops(xla_export.export_dir)
    assert bodies and all(ops["InplaceUpdate"] == 0 for ops in bodies.values()), bodies


def transpose_dtype(node):
    """A `Transpose` with its dtype.

    A `Dense` on `[batch, length, width]` is a `tensordot`, whose `Transpose`
    keeps the axes in order (Grappler drops it): counted apart.
    """
    if node.name.endswith("Tensordot/transpose"):
        return "Tensordot/transpose"
    if node.op == "Transpose":
        return f"Transpose {tf.as_dtype(node.attr['T'].type).name}"
    return node.op


def all_ops(export_dir):
    return saved_model_op_counts(export_dir, label=transpose_dtype)


def test_default_export_calls_no_fixed_cost_onednn_op(greedy_export, beam_export, int8_export):
    """The encoder's and cross-attention's heads move by Eigen's transposes, their products are Eigen's."""
    for exported in (greedy_export, beam_export, int8_export):
        ops = all_ops(exported.export_dir)
        # einsum and matmul over 3 or more axes make these, which TensorFlow
        # hands to oneDNN at 60-80 µs a call on one sentence.
        assert ops["BatchMatMul"] == ops["BatchMatMulV2"] == ops["Einsum"] == 0, ops
        # Encoder self-attention and the cross-attention: two each per block.
        assert ops["BatchMatMulV3"] > 0, ops
        # Heads move as integers (`eigen_transpose`): q, k and v and the
        # context of the encoder block, the cross-attention keys and values.
        assert ops["Transpose int32"] >= 4, ops
    # A float transpose goes to oneDNN: greedy search runs one per request,
    # of the tied output table.
    assert all_ops(greedy_export.export_dir)["Transpose float32"] <= 1
