"""Clean-ups that keep behaviour: pass-through ops bypassed, what the outputs do not need dropped."""

from pipeline.rewrite.pass_table import rewrite_pass


_PASS_THROUGH = ("Identity", "CheckNumerics", "CheckNumericsV2", "StopGradient", "PreventGradient", "Snapshot")


_FIRST_THROUGH = ("Print",)  # tf.compat.v1.Print: its first input passes through, the rest are only printed


_CONTROL_ONLY = ("NoOp", "Assert", "PrintV2")  # PrintV2 (tf.print) has no output: a control edge holds it


@rewrite_pass("remove_identity")
def remove_identity(graph, options):
    """Identity, CheckNumerics, StopGradient, Snapshot, Print bypassed; NoOp, Assert, PrintV2 removed (outputs kept).

    Control flow is left alone: a node inside a loop or cond frame (a frozen LSTM's lowered while
    loop), a pass-through that reads from or feeds a control-flow op, and a NoOp or Assert whose
    control edge a control-flow op waits on carry loop state or frame membership, not a value."""
    from pipeline.rewrite.passes.control_flow import CONTROL_FLOW_OPS, frame_nodes, readers

    outputs = set(options.get("_outputs", ()))
    in_frame = frame_nodes(graph)
    nodes = graph.nodes
    read_by = readers(graph) if in_frame or any(n.op in CONTROL_FLOW_OPS for n in nodes.values()) else {}

    def touches_control_flow(node, data):
        around = [graph.producer(t) for t in data] + [nodes.get(r) for r in read_by.get(node.name, ())]
        return any(n is not None and (n.op in CONTROL_FLOW_OPS or n.name in in_frame) for n in around)

    sites = []
    for node in list(graph.graph_def.node):
        if node.name in outputs or node.name in in_frame:
            continue
        data = [t for t in node.input if not t.startswith("^")]
        passes_first = (node.op in _PASS_THROUGH and len(data) == 1) or (node.op in _FIRST_THROUGH and data)
        if passes_first and not touches_control_flow(node, data):
            graph.rewire(node.name, data[0])
            sites.append(node.name)
        elif node.op in _CONTROL_ONLY and not touches_control_flow(node, ()):
            sites.append(node.name)
    removable = [s for s in sites if not graph.consumers(s)]
    graph.remove(removable)
    return sites


@rewrite_pass("prune")
def prune(graph, options):
    """Drop every node the outputs do not need."""
    return graph.prune(options["_outputs"])
