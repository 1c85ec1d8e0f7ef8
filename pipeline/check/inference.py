"""Is this an inference graph at all? Graph-level findings, checked before any route.

A graph written from a training session (``tf.io.write_graph(sess.graph_def)``, a TF1 meta graph
of the training step) carries what no converter should see: unfrozen variables, optimizer and
gradient ops, saver and summary ops, an input pipeline of queues, readers or iterators instead of
a placeholder. Each is a blocker on every route, whatever a route's op table says about the ops
(TF-TRT would happily leave them all in TensorFlow): the verdict is NO, with the fix.
"""

from pipeline.check.findings import Finding

_EXPORT = ("export the inference graph (training=False) and freeze it: deploy run with model.source set to the "
           "SavedModel or .keras file (its export and freeze stages), or export_inference_graph.py then freeze_graph")
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
    return findings


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
