"""Is this an inference graph at all? Graph-level findings, checked before any route.

A graph written from a training session (``tf.io.write_graph(sess.graph_def)``, a TF1 meta graph
of the training step) carries what no converter should see: unfrozen variables, optimizer and
gradient ops, saver and summary ops, an input pipeline of queues, readers or iterators instead of
a placeholder. Each is a blocker on every route, whatever a route's op table says about the ops
(TF-TRT would happily leave them all in TensorFlow): the verdict is NO, with the fix.

A graph frozen with convert_variables_to_constants from a training-mode graph has its weights as
constants but may keep batch norm's moving-average update ops (Assign*/AssignVariableOp on what
are now constants), tied to the output by control dependencies: that is said as such, with the fix
(freeze the inference graph), not as "not frozen". TF1's training switches left at their defaults
(``placeholder_with_default`` keep_prob 1.0) are a warning naming the placeholder.
"""

from pipeline.check.findings import Finding

_EXPORT = ("export the inference graph (training=False) and freeze it: deploy run with model.source set to the "
           "SavedModel or .keras file (its export and freeze stages), or export_inference_graph.py then freeze_graph")
_UPDATES = ("freeze the inference graph instead: build it with training=False (or leave the update ops out of the "
            "output's control dependencies: in TF1 run tf.compat.v1.GraphKeys.UPDATE_OPS with the train_op, not "
            "through tf.control_dependencies around the model) and run convert_variables_to_constants on that; or "
            "export the inference graph: deploy run with model.source set to the SavedModel or .keras file")
_VARIABLE_HOLDERS = frozenset(["VariableV2", "Variable", "VarHandleOp", "TemporaryVariable"])
_ASSIGNS = frozenset(["Assign", "AssignAdd", "AssignSub", "AssignVariableOp", "AssignAddVariableOp",
                      "AssignSubVariableOp"])
_WHAT = {
    "variables": "its weights are still variables ({ops}): the graph was written from a session, not frozen, so the "
                 "file holds no weights",
    "optimizer": "it holds the training step ({ops})",
    "gradients": "it holds gradient ops of the training step ({ops})",
    "saver": "it holds checkpoint save/restore ops ({ops})",
    "summary": "it holds TensorBoard summary ops ({ops})",
}


def inference_findings(graph, matches):
    """Blocker findings (route "all", kind "not_inference_graph") for a TensorFlow graph that is not
    an inference graph; [] for one that is. ``matches``: patterns.find_patterns(graph)."""
    if graph.kind != "tensorflow":
        return []
    unfrozen_is_expected = graph.format in ("saved_model", "meta_graph")  # freezing comes later
    findings = []
    for match in matches:
        family = match.family
        updates = _frozen_updates(graph, match.nodes) if family == "variables" and not unfrozen_is_expected else None
        if updates is not None:
            findings.append(_update_finding(graph, match, updates))
            continue
        if family in _WHAT:
            if family == "variables" and unfrozen_is_expected:
                continue
            if family == "saver" and graph.format == "meta_graph":
                continue  # every checkpoint's meta graph has its saver; it is not what gets converted
            findings.append(Finding(
                "blocker", "all", "not_inference_graph", _ops(graph, match.nodes), list(match.nodes),
                "not an inference graph: " + _WHAT[family].format(ops=_op_summary(graph, match.nodes)),
                _EXPORT if family == "variables" else _EXPORT + "; or keep only what the outputs need: deploy rewrite "
                "--pass prune --outputs NODE,..."))
        elif family == "input_pipeline" and not graph.inputs:
            cut = ", ".join(match.boundary[:3])
            findings.append(Finding(
                "blocker", "all", "not_inference_graph", _ops(graph, match.nodes), list(match.nodes),
                "not an inference graph: its input is a queue/reader/dataset pipeline ({}) and it has no placeholder "
                "to feed".format(_op_summary(graph, match.nodes)),
                ("cut the graph at {} so it becomes the input: deploy rewrite --pass cut --cut {}=N,H,W,C; or ".format(
                    cut, match.boundary[0]) if match.boundary else "") + _EXPORT, None))
    return findings + _switch_findings(graph, matches)


def _frozen_updates(graph, names):
    """{update op: the constant it assigns to} when the variables-family nodes ``names`` are only
    assignments to constants (a frozen graph that kept training's moving-average updates, e.g.
    bn/AssignMovingAvg); None when a variable is still there (not frozen)."""
    nodes = [graph.nodes[n] for n in names if n in graph.nodes]
    if not nodes or any(n.op in _VARIABLE_HOLDERS for n in graph.nodes.values()):
        return None
    targets = {}
    for node in nodes:
        if node.op in _ASSIGNS:
            target = graph.producer(node.inputs[0]) if node.inputs else None
            while target is not None and target.op == "Identity" and target.inputs:
                target = graph.producer(target.inputs[0])
            if target is None or target.op != "Const":
                return None
            targets[node.name] = target.name
        elif node.op not in ("ReadVariableOp", "VarIsInitializedOp", "IsVariableInitialized"):
            return None
    return targets or None


def _update_finding(graph, match, updates):
    """The blocker for a frozen graph that kept its moving-average update ops; ``match`` (the
    variables family's, which every route reads) says the same from now on."""
    waiting = _waiting_on(graph, set(updates))
    tied = ", tied to {} by control dependencies".format(", ".join(waiting[:3]) + (
        " (+{} more)".format(len(waiting) - 3) if len(waiting) > 3 else "")) if waiting else ""
    names = sorted(updates)
    targets = sorted(set(updates.values()))
    moving = " (batch norm's moving averages)" if any("moving" in t for t in targets) else ""
    cause = ("it holds training's update ops ({}: {}{}) assigning to {}{}{}: the weights are constants (it was "
             "frozen), but what was frozen is the training graph, so its update ops came along (no converter "
             "assigns to a constant)".format(
                 _op_summary(graph, match.nodes), ", ".join(names[:3]), " (+{} more)".format(len(names) - 3)
                 if len(names) > 3 else "", ", ".join(targets[:4]), moving, tied))
    match.cause, match.fix, match.rewrite = cause, _UPDATES, None
    return Finding("blocker", "all", "not_inference_graph", _ops(graph, match.nodes), list(match.nodes),
                   "not an inference graph: " + cause, _UPDATES)


def _waiting_on(graph, updates, hops=4):
    """The nodes outside the update subgraph that wait on ``updates`` by control dependencies,
    directly or through tf.group's NoOp / an Identity."""
    waiting, frontier = [], set(updates)
    for _ in range(hops):
        nxt = set()
        for node in graph.nodes.values():
            if node.name in frontier or not any(c in frontier for c in node.control_inputs):
                continue
            if node.op in ("NoOp", "Identity") and node.name not in updates:
                nxt.add(node.name)
            elif node.name not in waiting:
                waiting.append(node.name)
        frontier = nxt
        if not frontier:
            break
    return waiting


def _switch_findings(graph, matches):
    """A warning for each training-mode subgraph a training switch leaves idle at its default
    (pipeline.check.dropout: dropout whose keep_prob defaults to 1.0, batch norm in the tf.cond
    branch is_training selects): deterministic as converted, training mode when fed."""
    return [Finding("warning", "all", "training_switch", _ops(graph, m.fed_by + m.nodes), m.fed_by + m.nodes,
                    m.cause, m.fix, m.rewrite)
            for m in matches if m.kind in ("dropout_training", "batchnorm_training") and m.fed_by
            and not (m.stochastic or m.batch_dependent)]


def _ops(graph, names):
    return "/".join(sorted({graph.nodes[n].op for n in names if n in graph.nodes}))


def _op_summary(graph, names):
    """"3 ops: ApplyAdam ×2, Assign" — counts by op, most frequent first, at most four named."""
    counts = {}
    for name in names:
        node = graph.nodes.get(name)
        if node is not None:
            counts[node.op] = counts.get(node.op, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join("{} ×{}".format(op, n) if n > 1 else op for op, n in ranked[:4])
    more = " and {} more op types".format(len(ranked) - 4) if len(ranked) > 4 else ""
    total = sum(counts.values())
    return "{} node{}: {}{}".format(total, "" if total == 1 else "s", shown, more)


def unsafe_op_findings(graph, index=None):
    """A warning on every route for ops that act outside the graph (files, Python, checkpoints,
    queues; pipeline.tf.screen's policy): deploy refuses to run such a graph unless trusted.
    deploy check itself never runs anything. ``index``: the graph's OpIndex, if the caller has one."""
    if graph.kind != "tensorflow":
        return []
    from pipeline.check.op_index import OpIndex
    from pipeline.tf.screen import execution_policy

    policy = execution_policy()
    expected_variables = graph.format in ("saved_model", "meta_graph")  # frozen before anything runs
    verdicts, found = {}, {}

    def may_act(op):  # PrintV2's verdict depends on each node's attributes
        if op == "PrintV2":
            return True
        if op not in verdicts:
            verdicts[op] = policy.refusal(op)
        return bool(verdicts[op]) and op in policy.registered

    index = index or OpIndex(graph)
    kept = index.nodes(may_act)  # grouped by op: back into file order when several ops are there
    if len({node.op for node in kept}) > 1:
        kept.sort(key=lambda n: index.position(n.name))
    for node in kept:
        if node.op == "PrintV2":
            why = policy.refusal(node.op, {"output_stream": node.attrs.get("output_stream")})
        else:
            why = verdicts[node.op]  # may_act asked it
        if why and node.op in policy.registered and not (expected_variables and why.startswith("reads or writes a variable")):
            found.setdefault((node.op, why), []).append(node.name)
    return [Finding("warning", "all", "acts_outside_graph", op, names,
                    "{} {}: deploy refuses to run this graph (consistency, rewrite checks, convert) unless you pass "
                    "--trust-model".format(op, why),
                    "remove it from the graph (export the inference graph again), or pass --trust-model if you trust "
                    "the file") for (op, why), names in found.items()]
