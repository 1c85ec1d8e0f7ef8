"""Converting a frozen graph to ONNX and checking the result: the convert stage's work, taking values.

    opset = choose_opset(requested, target, converter_max_opset())
    model = to_onnx(graph_def, io, opset)                      # tf2onnx, every op it cannot convert named
    size = image_size(io, frozen_graph)                        # (height, width) of the one NHWC image input
    comparison = compare_with_tf(graph_def, io, onnx_path, images, source=..., tolerance=1e-4)
    comparison["within_tolerance"]                             # max abs diff <= 1e-4 (numeric.compare_runs)

The convert stage (``pipeline.stages.convert``) turns the config into these values and writes
model.onnx and comparison.json; ``deploy check``'s conversion probe uses ``to_onnx`` too.
"""

from pipeline.errors import EXIT_NOT_DEPLOYABLE, DeployError, StageFailed


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


BY_HAND = ("deploy run takes image models; deploy check {} --target {} prints the tf2onnx and trtexec commands "
           "that take this one to an engine")


def image_size(io, frozen_graph, target="TARGET"):
    """(height, width) of the graph's one NHWC image input (``pipeline.graph.io.image_input``): the images
    the comparison feeds. A second input that is dropout's keep probability is named as such."""
    from pipeline.graph.io import image_input

    if len(io["inputs"]) != 1:
        from pipeline.check.patterns import keep_prob_input

        names = [i["name"] for i in io["inputs"]]
        keep_prob = keep_prob_input(frozen_graph, names[1:])
        if keep_prob:
            raise DeployError("input {} is dropout's keep probability (a training-time input): the graph was frozen "
                              "in training mode; strip the dropout (rewrite stage passes: [strip_dropout], or deploy "
                              "rewrite --pass strip_dropout) or export with training=False".format(keep_prob))
        raise DeployError("convert compares models with one image input; this graph has {} ({}): {}".format(
            len(names), ", ".join(names), BY_HAND.format(frozen_graph, target)))
    image = image_input(io["inputs"])
    if image is None:
        raise DeployError("input {} has shape {}; convert needs a fixed-size NHWC image input: {}".format(
            io["inputs"][0]["name"], io["inputs"][0].get("shape"), BY_HAND.format(frozen_graph, target)))
    return image[1], image[2]


def compare_with_tf(graph_def, io, onnx_path, images, *, source, tolerance, frozen_graph="the frozen graph"):
    """Run the frozen graph (TensorFlow) and the ONNX model at ``onnx_path`` (ONNX Runtime) on ``images``
    (``source`` says where they came from) through ``pipeline.numeric.compare_runs``: comparison.json's
    content, with the verdict ``within_tolerance``. ``tolerance`` is stages.convert.tolerance, a max abs
    difference: compared as atol with rtol 0. Non-finite outputs fail (NaN in both runs counts as the
    same, so a model that computes NaN would pass)."""
    from pipeline.backends import load_onnx
    from pipeline.backends.tensorflow import TensorFlowSession
    from pipeline.numeric import compare_runs

    reference = TensorFlowSession(graph_def, io, source=frozen_graph)
    session = load_onnx(onnx_path)
    found = compare_runs(reference, session, images, tolerance, 0.0, batch=max(1, len(images)))
    if not found["finite"]:
        raise StageFailed("ONNX Runtime or TensorFlow gave non-finite outputs on {} (max abs diff {}): the model "
                          "computes NaN or inf there; check its weights and inputs".format(
                              source, found["max_abs_diff"]))
    return {
        "inputs": source,
        "samples": int(images.shape[0]),
        "tolerance": tolerance,
        "outputs": found["outputs"],
        "max_abs_diff": found["max_abs_diff"],
        "within_tolerance": found["within_tolerance"],
        "runtimes": {"reference": "tensorflow", "candidate": session.label},
    }
