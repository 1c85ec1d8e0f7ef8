"""The checker: a Graph view (pipeline.graph) and a target in, a CheckReport out.

    report = check_graph(read_model("frozen.pb"), load_target("jetson_tx2"))

Every route the target has is judged from its op table (pipeline.check.routes), the onnx route of a
frozen TensorFlow graph on tf2onnx's real output when it can run (pipeline.check.convert_probe).
Reading the file and the `deploy rewrite --auto` prediction are check_model's (pipeline.check.model).
"""

from dataclasses import dataclass

from pipeline.check.findings import CheckReport, Finding, RouteResult
from pipeline.graph.analysis import constant_subgraph, input_dtype


def check_graph(graph, target, routes=None, convert=False, convert_timeout=None, flops=None):
    """Check a Graph view. ``convert`` (see check_model): only a graph read from a frozen .pb or
    .pbtxt file can be converted; in-memory graphs (deploy rewrite's) are predicted. ``flops``: the
    TF-TRT share's compute half already under way (check_model's, from the file), else started here."""
    from pipeline.check import patterns
    from pipeline.check.op_index import OpIndex
    from pipeline.errors import DeployError

    wanted = list(routes) if routes else list(target.routes)
    for route in wanted:
        if route not in target.routes:
            raise DeployError("--route {}: {} has no {} route (it has: {})".format(route, target.name, route, ", ".join(target.routes)))
    graph, pruned = unused_inputs_pruned(graph)
    share = flops if flops is not None else _start_tftrt_share(graph, target, wanted)  # beside the rest from here
    try:
        plugins, known_plugins = _plugins(target)
        index = OpIndex(graph)  # one question per op, not per node, in every route
        custom = custom_ops(graph, known_plugins, index)
        unchecked = {n for names in custom.values() for n in names}  # reported once, for every route
        unfrozen = graph.format in ("saved_model", "meta_graph")
        matches = patterns.find_patterns(graph) if graph.kind == "tensorflow" else patterns.find_onnx_patterns(graph)
        by_node = {}
        for match in matches:
            for name in match.nodes:
                by_node.setdefault(name, match)
        if unfrozen:
            # not frozen yet, as expected: freezing turns the variables into constants
            for match in matches:
                if match.family == "variables":
                    match.severity = "info"
                    match.cause = "the weights are variables (a SavedModel / checkpoint graph is not frozen yet)"
                    match.fix = "nothing to do: freezing (deploy's freeze stage) turns them into constants"
                    unchecked |= set(match.nodes)
        report = _check_routes(CheckInputs(graph, target, wanted, matches, by_node, custom, unchecked, plugins,
                                           known_plugins, convert, convert_timeout, share, index))
        if pruned:
            report.findings.append(Finding(
                "info", "all", "pattern", "Placeholder", pruned,
                "placeholder(s) nothing in the graph reads (convert_variables_to_constants_v2 leaves "
                "unused_control_flow_input_N ones): not inputs, pruned before the check",
                "nothing to do (deploy's freeze stage and rewrite prune drop them from the file)", "prune"))
        return report
    finally:
        if share is not None:
            share.close()


def unused_inputs_pruned(graph):
    """(graph, [pruned names]): a TensorFlow graph's Placeholders that no node reads (data or control)
    are not inputs (``convert_variables_to_constants_v2`` leaves VARIANT ones behind a Keras LSTM):
    a view without them. The graph given is not changed; an ONNX graph is returned as it is."""
    if graph.kind != "tensorflow":
        return graph, []
    consumed = graph.consumer_index()  # data edges (cached: the rest of the check reads it too)
    unused = [t for t in graph.inputs if not consumed.get(graph.producer_name(t))
              and getattr(graph.producer(t), "op", None) == "Placeholder" and t not in (graph.outputs or ())]
    if unused:  # a control edge from a placeholder also reads it (rare: looked for only here)
        controls = {c.lstrip("^") for node in graph.nodes.values() for c in (getattr(node, "control_inputs", None) or ())}
        unused = [t for t in unused if graph.producer_name(t) not in controls]
    if not unused:
        return graph, []
    import copy

    names = {graph.producer_name(t) for t in unused}
    view = copy.copy(graph)
    view.__dict__ = {k: v for k, v in graph.__dict__.items() if not k.startswith("_") or k == "_tensor_types_source"}
    view.nodes = {k: v for k, v in graph.nodes.items() if k not in names}
    view.inputs = [t for t in graph.inputs if t not in unused]
    view.input_shapes = {k: v for k, v in (graph.input_shapes or {}).items() if k not in unused}
    return view, sorted(names)


def start_file_flops(path, signature="serving_default"):
    """The TF-TRT share's compute half of a big frozen graph file (each conv's FLOPs), under way in a
    child that reads the file itself while this process loads the target and reads it too
    (pipeline.check.background): it needs no target, so it can start before one is loaded. None when
    it does not pay (not a big .pb/.pbtxt file, no child to be had) or the memory for a second copy of
    the graph is not there: the file is never read twice in one process. The child answers None for a
    graph that is not a frozen TensorFlow graph, and check_tftrt then computes it here. Give it to
    check_model (``flops=``), or ``close()`` it."""
    import os

    from pipeline.check import background

    path = str(path)
    if not path.lower().endswith((".pb", ".pbtxt")) or not os.path.isfile(path):
        return None
    size = os.path.getsize(path)
    if size < background.EARLY_BYTES or not background.memory_allows(background.EARLY_MEMORY * size):
        return None
    return background.fork(_file_flops, path, signature, on_failure=None)


def _file_flops(path, signature):
    from pipeline.check.compute import conv_flops
    from pipeline.graph.readers import read_model

    graph = read_model(path, signature=signature)
    if graph.kind != "tensorflow" or graph.format in ("saved_model", "meta_graph"):
        return None
    return conv_flops(graph)


def _start_tftrt_share(graph, target, wanted):
    """The compute half of the TF-TRT share (each conv's FLOPs) under way beside the other routes
    (pipeline.check.background), or None."""
    if "tftrt" not in wanted or graph.kind != "tensorflow" or not target.op_table_for("tftrt"):
        return None
    from pipeline.check import background
    from pipeline.check.compute import conv_flops

    return background.start(conv_flops, graph, nodes=len(graph.nodes))


@dataclass
class CheckInputs:
    """What check_graph's first step (patterns, custom ops, plugins) hands the route checks."""

    graph: object  # the Graph view (pipeline.graph)
    target: object  # the Target (pipeline.targets)
    wanted: list  # the routes asked for, in order
    matches: list  # patterns.Match, every one found
    by_node: dict  # node name -> its Match (the first one that names it)
    custom: dict  # {op: [nodes]} TensorFlow does not register (custom_ops)
    unchecked: set  # nodes reported once for every route (custom ops, a SavedModel's variables)
    plugins: dict  # plugins in the target's TensorRT {name: versions}
    known_plugins: frozenset  # every plugin name deploy knows
    convert: object  # True / False / None: run tf2onnx (see check_model)
    convert_timeout: object  # seconds, or None for the default
    share: object  # the TF-TRT share's FLOPs half under way (pipeline.check.background), or None
    index: object  # the graph's OpIndex


def _check_routes(c):
    """Every route asked for, then the route-independent findings: a CheckReport. ``c``: CheckInputs."""
    from pipeline.check.dropout import tf2onnx_replaces_dropout
    from pipeline.check.inference import inference_findings, unsafe_op_findings

    graph = c.graph
    folded = constant_subgraph(graph, frozen=c.unchecked - {n for names in c.custom.values() for n in names}) \
        if graph.kind == "tensorflow" else set()
    # what tf2onnx's dropout rewriter really replaces (a constant rate, its exact patterns)
    dropout_rewritten = {n for m in c.matches if m.kind == "dropout_training" and tf2onnx_replaces_dropout(
        graph, m, folded) for n in m.nodes}
    findings = inference_findings(graph, c.matches)
    blocked = bool(c.custom) or any(f.severity == "blocker" for f in findings)
    results = [_check_route(c, route, folded, dropout_rewritten, blocked) for route in c.wanted]
    covered = {n for f in findings for n in f.nodes}
    findings += _graph_findings(graph, [m for m in c.matches if not covered.issuperset(m.nodes)], results, c.custom)
    findings += unsafe_op_findings(graph, c.index)
    if graph.format == "keras":
        from pipeline.check.keras_lambda import explain_lambdas

        explain_lambdas(graph, results, findings)
    return CheckReport(model=_describe_model(graph), target=_describe_target(c.target), routes=results,
                       findings=findings)


def _check_route(c, route, folded, dropout_rewritten, blocked):
    """One route's RouteResult. ``blocked``: the graph is NO before conversion (tf2onnx is not asked)."""
    from pipeline.check import routes as route_checks
    from pipeline.targets.optables import load_op_table

    graph, target = c.graph, c.target
    table_name = target.op_table_for(route)
    table = load_op_table(table_name) if table_name else None
    if graph.kind == "onnx" and route != "onnx":
        return RouteResult(route, table_name, "", applicable=False, note="an ONNX model takes the onnx route only")
    if table is None:
        return RouteResult(route, None, "", applicable=False, note="no op table for this route")
    if route == "uff":
        return route_checks.check_uff(graph, target, table, c.by_node, c.plugins, c.known_plugins, c.unchecked,
                                      c.index)
    if route == "tftrt":
        return route_checks.check_tftrt(graph, target, table, c.by_node, c.unchecked, c.share, c.index)
    if graph.kind == "onnx":
        return route_checks.check_onnx_model(graph, target, table, c.by_node, c.plugins, c.known_plugins)
    from pipeline.targets.tf2onnx import load_tf2onnx_table

    converter = load_tf2onnx_table()
    opset = min(target.max_opset, converter.max_opset)  # what deploy's convert stage emits
    result = route_checks.check_tf_onnx(graph, target, table, converter, opset, c.by_node, c.plugins,
                                        c.known_plugins, dropout_rewritten | folded | c.unchecked, c.index)
    if dropout_rewritten:
        result.findings.append(Finding(
            "info", "onnx", "pattern", "RandomUniform", sorted(dropout_rewritten),
            "dropout in training mode with a constant rate: tf2onnx's dropout rewriter turns it into ONNX "
            "Dropout, a no-op at inference", "none needed for the onnx route; rewrite strip_dropout removes it "
            "for every route", "strip_dropout"))
    return _ask_converter(c, table, result, blocked)


def _ask_converter(c, table, predicted, blocked):
    """The onnx route on tf2onnx's real output when it can run, else ``predicted`` labelled why not."""
    from pipeline.check import convert_probe
    from pipeline.check.converted_route import converted_route
    from pipeline.check.findings import PREDICTED

    graph = c.graph
    predicted.basis = PREDICTED
    if c.convert is False:
        return predicted
    if not convert_probe.available():
        predicted.note = "TensorFlow or tf2onnx is not installed (pip install deploy[tf]), or {}=0".format(
            convert_probe.CONVERT_ENV)
        return predicted
    if graph.format not in convert_probe.FORMATS or not graph.source:
        predicted.note = "tf2onnx converts the frozen graph; this is a {} (deploy's freeze stage makes one)".format(
            graph.format or "graph in memory")
        return predicted
    if blocked:
        predicted.note = "the graph is NO before conversion (see every route)"
        return predicted
    conversion = convert_probe.convert(graph.source, predicted.opset, timeout=c.convert_timeout)
    result = converted_route(conversion, graph, c.target, table, c.by_node, c.plugins, c.known_plugins, predicted)
    if result is None:
        predicted.note = conversion.message
        return predicted
    return result


def _plugins(target):
    """(plugins in the target's TensorRT {name: versions}, every plugin name deploy knows)."""
    from pipeline.targets.plugins import known_plugin_names, plugins_for

    return plugins_for(target.tensorrt), known_plugin_names()


def custom_ops(graph, known_plugins, index=None):
    """{op: [nodes]} of a TensorFlow graph's ops that TensorFlow does not register (and no plugin has).
    ``index``: the graph's OpIndex (pipeline.check.op_index), if the caller has one."""
    from pipeline.check import patterns
    from pipeline.check.op_index import OpIndex

    if graph.kind != "tensorflow":
        return {}
    _, registered = patterns.tensorflow_ops()
    return dict((index or OpIndex(graph)).grouped(lambda op: op not in registered and op not in known_plugins))


def _graph_findings(graph, matches, results, custom):
    """Route-independent findings: custom ops, unfrozen variables, batch dependence, and the
    patterns no route finding has explained yet."""
    from pipeline.check import patterns

    findings = []
    if custom:
        tf_version, _ = patterns.tensorflow_ops()
        for op, names in custom.items():
            findings.append(Finding(
                "blocker", "all", "custom_op", op, names,
                "custom op {}: TensorFlow {} has no such op, so the graph cannot be loaded without its op library".format(op, tf_version),
                "load its library (tf.load_op_library) and replace it with standard ops or a TensorRT plugin, or cut it out"))
    explained = {n for r in results for f in r.findings + r.accepted_but_wrong for n in f.nodes if f.severity != "info"}
    for match in matches:
        if match.batch_dependent or match.stochastic:
            findings.append(Finding("warning", "all", "batch_dependent" if match.batch_dependent else "stochastic",
                                    _ops(graph, match.nodes), match.nodes, match.cause, match.fix, match.rewrite,
                                    match.batch_dependent))
            continue
        if match.explains_only or all(n in explained for n in match.nodes):
            continue
        severity = match.severity if match.family in ("variables", "debug") else "info"
        findings.append(Finding(severity, "all", "pattern", _ops(graph, match.nodes), match.nodes, match.cause, match.fix,
                                match.rewrite))
    return findings


def _ops(graph, names):
    return "/".join(sorted({graph.nodes[n].op for n in names if n in graph.nodes}))


def _describe_model(graph):
    ops = sorted({n.op for n in graph.nodes.values()})
    return {
        "path": str(graph.source),
        "format": graph.format,
        "kind": graph.kind,
        "nodes": len(graph.nodes),
        "op_types": len(ops),
        "opset": graph.opset,
        "inputs": [{"name": t, "dtype": input_dtype(graph, t), "shape": (graph.input_shapes or {}).get(t)} for t in graph.inputs],
        "outputs": list(graph.outputs),
        # a SavedModel / meta graph read with a signature: every signature and its inputs (tf_reader)
        "signatures": getattr(graph, "signatures", None),
    }


def _describe_target(target):
    return {"name": target.name, "jetpack": target.jetpack, "tensorrt": target.tensorrt, "routes": list(target.routes),
            "max_opset": target.max_opset, "runtime": target.runtime,
            "runtime_label": "ONNX Runtime on this machine" if target.runtime == "onnxruntime" else None}
