"""Why TensorFlow and ONNX Runtime disagree on a converted model, named for the user.

The convert stage compares the frozen graph (TensorFlow) with the ONNX model (ONNX Runtime) on
the same images. When they differ beyond tolerance, ``explain_mismatch`` says why, in this order:

1. the TensorFlow graph is not a function of its input: random ops (dropout in training mode) or
   batch statistics (batch norm in training mode); the same search as ``deploy consistency``;
2. otherwise the first layer, in TensorFlow's topological order, whose output differs between
   the two runtimes (tf2onnx keeps TensorFlow tensor names, so the ONNX model exposes them as
   extra outputs; NCHW copies of NHWC tensors are compared transposed).

(Moved from ``pipeline.tf.mismatch``: TensorFlow's wing stays a layer below check and convert; the
dropout question, ``keep_prob_input``, is ``pipeline.check.patterns``'.)
"""

from pipeline.errors import DeployError


def explain_mismatch(graph_def_path, graph_def, io, model, images, tolerance):
    """One line: why the outputs differ (see module doc); "" when no cause is found."""
    from pipeline.numeric.divergence import divergences

    try:
        found = divergences(graph_def_path, images[:1], images[1:] if len(images) > 1 else images[:1, ::-1], io=io,
                            tolerance=tolerance)
    except DeployError:
        found = []
    if found:
        parts = ["{} at {} ({})".format("random output" if d.reason == "stochastic" else "batch statistics", d.node, d.op)
                 for d in found]
        return "the TensorFlow graph is not a function of its input: {}; {}".format("; ".join(parts), found[0].hint)
    layer = first_layer_mismatch(graph_def, io, model, images[:1], tolerance)
    if layer:
        node, op, diff = layer
        return ("first divergence between TensorFlow and ONNX Runtime at {} ({}): max abs diff {:.3g}; "
                "deploy check names the op's conversion, or try another opset (stages.convert.opset)".format(node, op, diff))
    return ""


def first_layer_mismatch(graph_def, io, model, images, tolerance, rtol=1e-4):
    """(node, op, max abs diff) of the first TensorFlow tensor, in topological order, that the
    ONNX model also has and whose values differ beyond tolerance; None."""
    import numpy as np
    import onnx
    import onnxruntime

    from pipeline.numeric import diff as _diff
    from pipeline.graph.analysis import topological_names
    from pipeline.backends.tensorflow import TensorFlowSession

    onnx_values = {v for n in model.graph.node for v in n.output}
    by_name = {n.name: n for n in graph_def.node}
    shared = [name for name in topological_names(graph_def)
              if by_name[name].op not in ("Const", "Placeholder", "Identity") and name + ":0" in onnx_values]
    if not shared:
        return None
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for name in shared:
        probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(name + ":0"))
    try:
        session = onnxruntime.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
        got = session.run([name + ":0" for name in shared], {session.get_inputs()[0].name: images})
        want = TensorFlowSession(graph_def, {"inputs": io["inputs"], "outputs": [{"name": n} for n in shared]}).run(
            {io["inputs"][0]["name"]: images})
    except Exception:  # a tensor one runtime cannot expose: no layer-level answer
        return None
    for name, a, b in zip(shared, want, got):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind not in "f":
            continue
        if a.shape != b.shape and a.ndim == 4 and b.shape == (a.shape[0], a.shape[3], a.shape[1], a.shape[2]):
            b = b.transpose(0, 2, 3, 1)  # ONNX NCHW copy of a TensorFlow NHWC tensor
        if a.shape != b.shape:
            continue
        abs_d, _, over = _diff(a, b, tolerance, rtol)
        if over:
            return name, by_name[name].op, abs_d
    return None
