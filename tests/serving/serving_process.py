"""A stand-in for TF Serving's Predict handler, run in a fresh process by the serving tests.

Usage: python serving_process.py SPEC.json RESULT.json

It imports only `tensorflow`, `tensorflow_text` and the request protos of
`tensorflow-serving-api`, never keras_tf or keras-hub, and runs the way the
model server runs:
* it loads each SavedModel as the server's `LoadSavedModel` does, into a
  session: the graph of the `serve` MetaGraph, its restore op run on the
  `variables/` checkpoint, its initializers (tables, TF-Text resources) run.
  The object graph that `tf.saved_model.load` reads is never used, so a
  variable that only the object graph restores fails here as it fails in
  the server ("Could not find variable");
* XLA compilation is disabled (the model server calls
  `tensorflow::DisableXlaCompilation()` unless started with
  `--xla_cpu_compilation_enabled` or `--xla_gpu_compilation_enabled`) until a
  request asks for it.
For each serialized `PredictRequest` of the spec it looks up the
`SignatureDef` named in `model_spec.signature_name`, feeds the inputs to
their tensors by name with `tf.make_ndarray`, fetches every output tensor and
answers a serialized `PredictResponse` built with `tf.make_tensor_proto`, or
the error.

Before loading anything it walks each SavedModel's graph and function
library and classifies every op: registered by TensorFlow itself, registered
only once `tensorflow_text` is imported, or not registered at all.

SPEC: {"exports": {key: export_dir},
       "requests": [{"id", "export", "request" (base64 PredictRequest), "xla": bool}]}
RESULT: {"modules", "xla_switch", "ops": {key: {...}}, "responses": {id: {...}}}
"""

import base64
import ctypes
import json
import os
import sys

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

# XLA's on/off switch of the model server, exported by TensorFlow's C++ library.
_LIBRARY = os.path.join(os.path.dirname(tf.__file__), "libtensorflow_cc.so.2")
_DISABLE_XLA = "_ZN10tensorflow21DisableXlaCompilationEv"
_ENABLE_XLA = "_ZN10tensorflow20EnableXlaCompilationEv"


def xla_switch():
    """`set_xla(enabled)`, or None where this TensorFlow build does not export the switch."""
    try:
        library = ctypes.CDLL(_LIBRARY)
        disable, enable = getattr(library, _DISABLE_XLA), getattr(library, _ENABLE_XLA)
    except (OSError, AttributeError):
        return None
    return lambda enabled: enable() if enabled else disable()


def graph_ops(export_dir):
    """Op names of the graph and of every library function, and the functions XLA must compile."""
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as file:
        saved_model.ParseFromString(file.read())
    graph_def = saved_model.meta_graphs[0].graph_def
    functions = {f.signature.name for f in graph_def.library.function}
    ops = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        ops.update(node.op for node in function.node_def)
    must_compile = sorted(
        f.signature.name
        for f in graph_def.library.function
        if f.attr.get("_XlaMustCompile") is not None and f.attr["_XlaMustCompile"].b
    )
    return ops - functions, must_compile


def load_into_session(export_dir):
    """`(session, {name: SignatureDef})`: the SavedModel loaded as TF Serving loads it."""
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph)
    with graph.as_default():
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
    return session, dict(meta_graph.signature_def)


def main(spec_path, result_path):
    with open(spec_path, encoding="utf-8") as file:
        spec = json.load(file)
    result = {"ops": {}, "responses": {}}

    # Classify the ops before tensorflow_text registers its own.
    ops = {key: graph_ops(path) for key, path in spec["exports"].items()}
    core = {key: {op for op in names if op_def_registry.get(op) is not None}
            for key, (names, _) in ops.items()}
    import tensorflow_text  # noqa: F401  registers the TF-Text ops, as the model server links them
    from tensorflow_serving.apis import predict_pb2

    for key, (names, must_compile) in ops.items():
        text_ops = {op for op in names - core[key] if op_def_registry.get(op) is not None}
        result["ops"][key] = {
            "tensorflow": sorted(core[key]),
            "raw_ops": sorted(op for op in core[key] if hasattr(tf.raw_ops, op)),
            "tensorflow_text": sorted(text_ops),
            "unregistered": sorted(names - core[key] - text_ops),
            "xla_must_compile": must_compile,
        }

    set_xla = xla_switch()
    result["xla_switch"] = set_xla is not None
    if set_xla:
        set_xla(False)
    loaded = {key: load_into_session(path) for key, path in spec["exports"].items()}

    for item in spec["requests"]:
        if set_xla:
            set_xla(item.get("xla", False))
        request = predict_pb2.PredictRequest.FromString(base64.b64decode(item["request"]))
        try:
            session, signatures = loaded[item["export"]]
            signature_name = request.model_spec.signature_name or "serving_default"
            signature = signatures[signature_name]
            feeds = {signature.inputs[name].name: tf.make_ndarray(proto)
                     for name, proto in request.inputs.items()}
            fetches = {name: info.name for name, info in signature.outputs.items()}
            outputs = session.run(fetches, feeds)
            response = predict_pb2.PredictResponse()
            response.model_spec.CopyFrom(request.model_spec)
            response.model_spec.signature_name = signature_name
            for name, value in outputs.items():
                response.outputs[name].CopyFrom(tf.make_tensor_proto(value))
            serialized = base64.b64encode(response.SerializeToString()).decode()
            answer = {"ok": True, "response": serialized}
        except Exception as error:  # noqa: BLE001  reported to the test, as a server would
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        result["responses"][item["id"]] = answer

    result["modules"] = sorted({name.split(".")[0] for name in sys.modules})
    with open(result_path, "w", encoding="utf-8") as file:
        json.dump(result, file)


if __name__ == "__main__":
    main(*sys.argv[1:])
