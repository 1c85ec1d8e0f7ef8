"""convert: frozen graph to ONNX with tf2onnx at the target's opset, checked and compared with TF."""

import math

from pipeline import records
from pipeline.errors import EXIT_NOT_DEPLOYABLE, DeployError, StageFailed
from pipeline.stages import stage


@stage(
    "convert",
    inputs={"frozen_graph": "freeze", "io": "freeze"},
    outputs={"onnx": "model.onnx", "comparison": "comparison.json"},
    version=2,
    uses=("target", "dataset"),
    tools=("tensorflow", "tf2onnx", "onnx", "onnxruntime"),
)
def convert(ctx):
    """Convert to ONNX (tf2onnx), run onnx.checker, compare with TensorFlow on dataset images."""
    opset = choose_opset(ctx.options.opset, ctx.target, converter_max_opset())
    from pipeline.graph.io import graph_io, read_io_json
    from pipeline.tf.graph import load_graph_def

    graph_def = load_graph_def(ctx.inputs["frozen_graph"])
    io = read_io_json(ctx.inputs["io"]) if "io" in ctx.inputs else graph_io(graph_def, ctx.inputs["frozen_graph"])
    from pipeline.tf.screen import screen_graph

    # tf2onnx's grappler pass evaluates constant subgraphs: screen before it sees the graph
    screen_graph(graph_def, ctx.inputs["frozen_graph"], outputs=[o["name"] for o in io["outputs"]])
    model = to_onnx(graph_def, io, opset)
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as e:
        raise StageFailed("onnx.checker rejects the converted model: {}".format(str(e).splitlines()[0]))
    onnx.save(model, str(ctx.output("onnx")))
    comparison, images = compare_with_tf(ctx, graph_def, io)
    if not math.isfinite(comparison["max_abs_diff"]):  # NaN passes every ">": say so, never a silent pass
        raise StageFailed("ONNX Runtime or TensorFlow gave non-finite outputs on {} (max abs diff {}): the model "
                          "computes NaN or inf there; check its weights and inputs".format(
                              comparison["inputs"], comparison["max_abs_diff"]))
    if comparison["max_abs_diff"] > ctx.options.tolerance:
        from pipeline.tf.mismatch import explain_mismatch

        comparison["why"] = explain_mismatch(ctx.inputs["frozen_graph"], graph_def, io, model, images,
                                             ctx.options.tolerance)
    records.write(ctx.output("comparison"), comparison, "conversion")
    if comparison["max_abs_diff"] > ctx.options.tolerance:
        raise StageFailed(
            "ONNX Runtime and TensorFlow outputs differ by {:.3g} (> stages.convert.tolerance {:g}) on {}{}".format(
                comparison["max_abs_diff"], ctx.options.tolerance, comparison["inputs"],
                ": " + comparison["why"] if comparison["why"] else ""))
    ops = sorted({n.op_type for n in model.graph.node})
    return {
        "summary": "opset {}, {} nodes, max diff {:.2g}".format(opset, len(model.graph.node), comparison["max_abs_diff"]),
        "opset": opset,
        "nodes": len(model.graph.node),
        "op_types": ops,
        "max_abs_diff": comparison["max_abs_diff"],
    }


def converter_max_opset():
    """The highest ONNX opset the installed tf2onnx converts to (1.17: 18)."""
    from pipeline.tf import import_tf

    import_tf()
    import tf2onnx.constants

    return max(tf2onnx.constants.OPSET_TO_IR_VERSION)


def choose_opset(requested, target, converter_max):
    """The ONNX opset to emit: the highest both the target's parser and tf2onnx take, unless the
    config asks for one (which the target must parse)."""
    high, low = target.max_opset, target.min_opset
    if requested is None:
        return min(high, converter_max)
    if requested > converter_max:
        raise DeployError("stages.convert.opset: {} is above what the installed tf2onnx converts to ({})".format(
            requested, converter_max))
    if requested > high or (low is not None and requested < low):
        where = "TensorRT {}".format(target.tensorrt) if target.tensorrt else target.runtime
        raise DeployError("stages.convert.opset: {} is outside what {} on {} parses ({}..{}); leave it unset to use {}".format(
            requested, where, target.name, low if low is not None else "", high, high))
    return requested


def to_onnx(graph_def, io, opset):
    """tf2onnx.convert.from_graph_def with every unsupported op reported at once."""
    import logging

    from pipeline.tf import import_tf

    import_tf()
    import tf2onnx

    tf2onnx.logging.set_level(logging.ERROR)
    inputs = [i["name"] + ":0" for i in io["inputs"]]
    outputs = [o["name"] + ":0" for o in io["outputs"]]
    try:
        model, _ = tf2onnx.convert.from_graph_def(graph_def, input_names=inputs, output_names=outputs, opset=opset)
    except Exception as e:  # tf2onnx raises ValueError/RuntimeError/KeyError... with the reason
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise StageFailed("tf2onnx failed at opset {}: {}".format(opset, text))
    # tf2onnx logs an op it cannot convert and leaves the TensorFlow node in the ONNX graph
    import onnx

    left = {}
    for node in model.graph.node:
        if not onnx.defs.has(node.op_type, node.domain or ""):
            left.setdefault(node.op_type, []).append(node.name)
    if left:
        raise DeployError("tf2onnx cannot convert {} at opset {} (nodes: {}); deploy check names the cause and fix".format(
            ", ".join(sorted(left)), opset, ", ".join(n for names in left.values() for n in names[:2])), code=EXIT_NOT_DEPLOYABLE)
    return model


def compare_with_tf(ctx, graph_def, io):
    """Run the frozen graph (TensorFlow) and the ONNX model (ONNX Runtime) on the same images."""
    import numpy as np

    from pipeline.backends import load_onnx
    from pipeline.backends.tensorflow import TensorFlowSession
    from pipeline.data.dataset import dataset_samples

    if len(io["inputs"]) != 1:
        from pipeline.tf.mismatch import keep_prob_input

        names = [i["name"] for i in io["inputs"]]
        keep_prob = keep_prob_input(ctx.inputs["frozen_graph"], names[1:])
        if keep_prob:
            raise DeployError("input {} is dropout's keep probability (a training-time input): the graph was frozen "
                              "in training mode; strip the dropout (rewrite stage passes: [strip_dropout], or deploy "
                              "rewrite --pass strip_dropout) or export with training=False".format(keep_prob))
        raise DeployError("convert compares models with one image input; this graph has {} ({})".format(
            len(names), ", ".join(names)))
    shape = io["inputs"][0]["shape"]
    if not shape or len(shape) != 4 or shape[1] is None or shape[2] is None:
        raise DeployError("input {} has shape {}; convert needs a fixed-size NHWC image input".format(io["inputs"][0]["name"], shape))
    images, source = dataset_samples(ctx.config, ctx.options.compare_samples, (shape[1], shape[2]))
    reference = TensorFlowSession(graph_def, io, source=ctx.inputs["frozen_graph"]).run({io["inputs"][0]["name"]: images})
    session = load_onnx(ctx.output("onnx"))
    got = session.run({session.inputs[0][0]: images})
    per_output = {}
    for spec, want, have in zip(io["outputs"], reference, got):
        diff = np.abs(np.asarray(want, dtype=np.float64) - np.asarray(have, dtype=np.float64))
        per_output[spec["name"]] = {"max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean())}
    return {
        "inputs": source,
        "samples": int(images.shape[0]),
        "tolerance": ctx.options.tolerance,
        "outputs": per_output,
        "max_abs_diff": max(v["max_abs_diff"] for v in per_output.values()),
        "runtimes": {"reference": "tensorflow", "candidate": session.label},
    }, images
