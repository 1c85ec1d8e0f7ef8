"""The onnx route of a TensorFlow graph judged on tf2onnx's real output (``pipeline.check.convert_probe`` runs
tf2onnx): the ONNX model it wrote checked like any .onnx file, its nodes explained by the TensorFlow graph's
patterns (tf2onnx names its nodes after them), a conversion that failed named by the TF ops behind it."""


def converted_route(conversion, graph, target, table, tf_by_node, plugins, known_plugins, predicted):
    """The onnx RouteResult of TensorFlow ``graph`` judged on tf2onnx's output (basis "converted"),
    or None when tf2onnx did not run to an answer (refused, timeout, error: the prediction stands).

    ``tf_by_node``: the TF graph's patterns by node (they explain the ONNX nodes tf2onnx named after
    them, e.g. a dropout's RandomUniform); ``predicted``: the offline result, whose blockers name
    the TF ops behind a conversion that failed."""
    from pipeline.check.findings import CONVERTED, Finding, RouteResult
    from pipeline.check.routes import onnx_runtime_label

    info = {"tf2onnx": conversion.tf2onnx, "opset": conversion.opset, "log": conversion.log}
    if conversion.status == "failed":
        result = RouteResult("onnx", table.name, "opset {}, {}".format(conversion.opset, onnx_runtime_label(target, table)),
                             opset=conversion.opset, basis=CONVERTED, convert_seconds=round(conversion.seconds, 2),
                             converter=info)
        result.findings.append(Finding(
            "blocker", "onnx", "unsupported_op", None, [], conversion.message,
            "deploy check names the TensorFlow ops behind it below; replace or cut them before conversion", "cut"))
        result.findings += [f for f in predicted.findings if f.severity == "blocker"]
        return result
    if conversion.status != "converted":
        return None
    from pathlib import Path

    from pipeline.graph.onnx_reader import read_onnx

    from pipeline.check.convert_probe import step

    with step("checking the ONNX model tf2onnx wrote for {model}"):
        return _check_converted(conversion, graph, target, table, tf_by_node, plugins, known_plugins, read_onnx(
            Path(conversion.onnx_path)))


def _check_converted(conversion, graph, target, table, tf_by_node, plugins, known_plugins, onnx_graph):
    import onnx

    from pipeline.check.batch_flow import REDUCTIONS, flagged_reductions
    from pipeline.check.dropout import branch_findings
    from pipeline.check.findings import CONVERTED, Finding
    from pipeline.check.patterns import find_onnx_patterns
    from pipeline.check.routes import check_onnx_model, onnx_runtime_label

    info = {"tf2onnx": conversion.tf2onnx, "opset": conversion.opset, "log": conversion.log}
    by_node = {}
    # a reduction tf2onnx named after a TF node the TF batch analysis clears (shape arithmetic,
    # e.g. Keras Flatten's Prod over the shape vector) is not batch-dependent in ONNX either
    flagged = flagged_reductions(graph)
    cleared = {n.name for n in graph.nodes.values() if n.op in REDUCTIONS} - {n for n, _ in flagged}
    for match in find_onnx_patterns(onnx_graph):
        if match.kind == "batch_reduction" and all(n in cleared for n in match.nodes):
            continue
        for name in match.nodes:
            by_node.setdefault(name, match)
    for name, match in tf_by_node.items():  # tf2onnx names its nodes after the TF nodes; a keep_prob's default: TF's
        if name in onnx_graph.nodes and (match.stochastic or match.batch_dependent or match.fed_by or name not in by_node):
            by_node[name] = match
    model = onnx.load(conversion.onnx_path)
    # op support, plugins, attributes, and onnx_rules.onnx_findings (every node and tensor) on the model
    result = check_onnx_model(onnx_graph, target, table, by_node, plugins, known_plugins, model=model)
    result.accepted_but_wrong += branch_findings(model, tf_by_node)  # what tf2onnx put in If/Loop bodies
    ops = sorted({n.op_type for n in model.graph.node})
    info.update(onnx_nodes=len(model.graph.node), ops=ops, left=conversion.left)
    result.basis, result.convert_seconds, result.converter = CONVERTED, round(conversion.seconds, 2), info
    result.detail = "opset {}, {}".format(conversion.opset, onnx_runtime_label(target, table))
    for finding in result.findings:
        if finding.op in conversion.left and finding.kind in ("unsupported_op", "custom_op"):
            _left_in_tensorflow(finding, conversion, tf_by_node)
    for finding in result.accepted_but_wrong:
        said = [line for line in conversion.log if any(n in line for n in finding.nodes) or "Dropout" in line]
        if said:
            finding.cause += "; tf2onnx: " + said[0]
    dropouts = [n.name for n in model.graph.node if n.op_type == "Dropout"]
    if dropouts:
        result.findings.append(Finding(
            "info", "onnx", "pattern", "Dropout", dropouts,
            "tf2onnx's dropout rewriter replaced dropout with a constant rate by ONNX Dropout, a no-op at inference",
            "none needed for the onnx route; rewrite strip_dropout removes it for every route", "strip_dropout"))
    return result


def _left_in_tensorflow(finding, conversion, tf_by_node):
    """A TF op tf2onnx could not convert (it stays a TF node in the ONNX model): say so, with the
    pattern that explains it in the TF graph."""
    said = next((line for line in conversion.log if finding.op in line), "")
    finding.kind, finding.severity = "unsupported_op", "blocker"
    finding.cause = "tf2onnx {} has no conversion for {} at opset {}: it stays a TensorFlow op in the ONNX model{}".format(
        conversion.tf2onnx, finding.op, conversion.opset, " (tf2onnx: {})".format(said) if said else "")
    match = next((tf_by_node[n] for n in finding.nodes if n in tf_by_node), None)
    if match is not None:
        finding.cause = "{}: {}".format(match.cause, finding.cause)
        finding.fix, finding.rewrite = match.fix, match.rewrite
    else:
        finding.fix = "replace {} before conversion, or cut it out of the graph".format(finding.op)
