"""How fast will the TensorRT engine run on a board: an offline estimate with a range (docs/estimate.md).

    from pipeline.estimate import estimate_model
    report = estimate_model("frozen.pb", ["jetson_nano"], precision="fp16", batches=[1])
    report["estimates"][0]["latency_ms"], ["low_ms"], ["high_ms"], ["bound"], ["top_layers"]

Modules: shapes (every tensor's shape from the inputs), layers (the engine's layers, fused as TensorRT
fuses them), roofline (a layer's time from its FLOPs, its bytes and the board's peaks), calibration
(the fitted parameters, shipped or the user's), fit (the grid fit and leave-one-model-out), runs (a
user's benchmark.json files), report (text, markdown). No TensorFlow, TensorRT or GPU: a model file in,
numbers out.
"""

from pipeline.errors import DeployError

TOP = 10
WEAK = ("dynamic shapes are fixed to the shape given; loops, plugins and custom layers are not modelled; the DLA is "
        "not counted; clocks not locked, a power mode below the one named and TensorRT's tactic choice move the "
        "measured figure")


def layers_of(path, input_shapes=None, precision="fp16", signature=None):
    """The engine layers of the model at ``path`` (any format deploy check reads)."""
    from pipeline.estimate.layers import engine_layers
    from pipeline.files import gc_paused
    from pipeline.graph import read_model

    graph = read_model(path, signature)
    with gc_paused():  # a layer, a shape list a tensor, no cycles: the collector's passes over the graph only cost
        return graph, engine_layers(graph, input_shapes, precision)


def board(target_name, precision):
    """(Target, EstimateFacts) for a target that has an ``estimate:`` block and builds ``precision``."""
    from pipeline.targets.device import load_target

    target = load_target(target_name)
    if target.estimate is None:
        raise DeployError("target {}: no estimate facts (targets/{}.yaml has no estimate: block); estimate for a Jetson "
                          "target instead".format(target.name, target.name))
    if precision not in target.precisions:
        raise DeployError("target {}: no fast {} (precisions: {}); pass --precision {}".format(
            target.name, precision, ", ".join(target.precisions), target.precisions[-1]))
    return target, target.estimate


def estimate_layers(layers, target_name, precision, batch, params=None, basis=None):
    """One estimate (a dict) of given engine layers on one board."""
    from pipeline.estimate.calibration import board_params
    from pipeline.estimate.roofline import estimate_latency

    target, facts = board(target_name, precision)
    if params is None:
        params, basis = board_params(target.name)
    result = estimate_latency(layers, facts, params, precision, batch)
    costed = sorted(result["layers"], key=lambda item: -item[1])[:TOP]
    unknown = [layer.name for layer in layers if not layer.known]
    return {
        "target": target.name, "precision": precision, "batch": batch,
        "latency_ms": _round(result["latency_ms"]), "low_ms": _round(result["low_ms"]),
        "high_ms": _round(result["high_ms"]), "throughput": _round(result["throughput"]),
        "bound": result["bound"], "shares": {k: round(v, 4) for k, v in result["shares"].items()},
        "power_mode": facts.power_mode, "gpu": facts.gpu, "calibration": basis, "parameters": params.to_dict(),
        "top_layers": [{"name": layer.name, "kind": layer.kind, "ops": list(layer.ops), "ms": _round(ms),
                        "bound": bound, "gflops": round(layer.flops * batch / 1e9, 4)} for layer, ms, bound in costed],
        "unknown_layers": unknown[:TOP], "unknown_count": len(unknown),
    }


def estimate_model(path, targets, precision="fp16", batches=(1,), input_shapes=None, signature=None, outlive=False):
    """The estimate report of a model on each target, for each batch size (a dict ``deploy estimate`` prints).
    ``outlive``: the graph is kept until the process ends (pipeline.files.outlive; the CLI's: freeing a
    200,000-node graph object by object takes 0.2 s)."""
    from pipeline.files import gc_paused

    # one pause from the reading to the report (each resume's first pass walked every object of the graph), left
    # paused for a graph kept to the end (its objects would be walked once more)
    with gc_paused(resume=not outlive):
        return _estimate_model(path, targets, precision, batches, input_shapes, signature, outlive)


def too_little_costed(layers):
    """True when an estimate of ``layers`` would be meaningless: no layer costed, or most of them (reformats aside)
    with shapes the engine model could not follow, which count nothing."""
    countable = [layer for layer in layers if layer.kind != "reformat"]
    unknown = [layer for layer in countable if not layer.known]
    return not any(layer.known and layer.flops for layer in layers) or 2 * len(unknown) > len(countable)


def nothing_costed(graph, layers):
    """Why ``graph``'s layers were too little costed for an estimate (each input's open sizes are refused before):
    the op where the shapes stopped, or that it has no layer the engine model costs."""
    countable = [layer for layer in layers if layer.kind != "reformat"]
    stopped = next((layer for layer in countable if not layer.known), None)
    if stopped is not None:  # layers are in graph order: the first whose shapes were not followed
        known = sum(1 for layer in countable if layer.known)
        return ("{} from the inputs ({}): they stop at {} ({}), an op the engine model does not follow; measure it on "
                "a board (deploy run, or trtexec on its ONNX model)".format(
                    "no layer's shape could be followed" if not known else
                    "only {} of {} layers' shapes could be followed".format(known, len(countable)),
                    ", ".join(graph.inputs) or "none", stopped.name, "/".join(stopped.ops) or stopped.kind))
    return ("none of its layers is one the engine model costs (convolutions, matrix products, pooling, element-wise: "
            "docs/estimate.md); measure it on a board (deploy run, or trtexec on its ONNX model)")


def _estimate_model(path, targets, precision, batches, input_shapes, signature, outlive):
    graph, layers = layers_of(path, input_shapes, precision, signature)
    if outlive:
        from pipeline.files import outlive as keep

        keep(graph)
    from pipeline.graph.frames import loop_ops

    loops = loop_ops(graph)
    if loops:
        raise DeployError("{}: the graph has a loop ({}): its body runs a number of times the engine model cannot count "
                          "offline; estimate an unrolled model (Keras: LSTM(unroll=True) with a fixed sequence length) "
                          "or measure it on a board (deploy run)".format(path, ", ".join(loops)))
    if too_little_costed(layers):
        raise DeployError("{}: {}".format(path, nothing_costed(graph, layers)))
    estimates = [estimate_layers(layers, t, precision, b) for t in targets for b in batches]
    known = [layer for layer in layers if layer.known]
    return {
        "model": str(path), "format": graph.format, "inputs": list(graph.inputs),
        "layers": len(layers), "gflops": round(sum(layer.flops for layer in known) / 1e9, 4),
        "weights_mb": round(sum(layer.weights for layer in known) * _bytes(precision) / 1e6, 3),
        "estimates": estimates, "weak_where": WEAK, "dla": "not counted: the estimate is the GPU's",
    }


def _bytes(precision):
    from pipeline.estimate.roofline import BYTES

    return BYTES[precision]


def _round(value):
    if value is None:
        return None
    return float("{:.4g}".format(value))
