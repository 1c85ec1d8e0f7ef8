"""Clean-ups that keep behaviour: pass-through ops bypassed, what the outputs do not need dropped."""

from pipeline.rewrite.pass_table import rewrite_pass


@rewrite_pass("remove_identity")
def remove_identity(graph, options):
    """Identity, CheckNumerics, StopGradient, Snapshot, Print bypassed; NoOp, Assert, PrintV2 removed (outputs kept).

    Control flow is left alone: a node inside a loop or cond frame (a frozen LSTM's lowered while
    loop), a pass-through that reads from or feeds a control-flow op, and a NoOp or Assert whose
    control edge a control-flow op waits on carry loop state or frame membership, not a value."""
    from pipeline.graph.frames import CONTROL_ONLY, FIRST_THROUGH, PASS_THROUGH, held_by_control_flow, tf_edges

    outputs = set(options.get("_outputs", ()))
    held = held_by_control_flow(tf_edges(graph))  # the same rule the check uses before it advises this pass
    sites = []
    for node in list(graph.graph_def.node):
        if node.name in outputs or node.name in held:
            continue
        data = [t for t in node.input if not t.startswith("^")]
        if (node.op in PASS_THROUGH and len(data) == 1) or (node.op in FIRST_THROUGH and data):
            graph.rewire(node.name, data[0])
            sites.append(node.name)
        elif node.op in CONTROL_ONLY:
            sites.append(node.name)
    removable = [s for s in sites if not graph.consumers(s)]
    graph.remove(removable)
    return sites


@rewrite_pass("prune")
def prune(graph, options):
    """Drop every node the outputs do not need."""
    return graph.prune(options["_outputs"])
