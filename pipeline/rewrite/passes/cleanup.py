"""Clean-ups that keep behaviour: pass-through ops bypassed, what the outputs do not need dropped."""

from pipeline.rewrite.pass_table import rewrite_pass


_PASS_THROUGH = ("Identity", "CheckNumerics", "CheckNumericsV2", "StopGradient", "PreventGradient", "Snapshot")


_CONTROL_ONLY = ("NoOp", "Assert")


@rewrite_pass("remove_identity")
def remove_identity(graph, options):
    """Identity, CheckNumerics, StopGradient, Snapshot bypassed; NoOp and Assert removed (outputs kept)."""
    outputs = set(options.get("_outputs", ()))
    sites = []
    for node in list(graph.graph_def.node):
        if node.name in outputs:
            continue
        data = [t for t in node.input if not t.startswith("^")]
        if node.op in _PASS_THROUGH and len(data) == 1:
            graph.rewire(node.name, data[0])
            sites.append(node.name)
        elif node.op in _CONTROL_ONLY:
            sites.append(node.name)
    removable = [s for s in sites if not graph.consumers(s)]
    graph.remove(removable)
    return sites


@rewrite_pass("prune")
def prune(graph, options):
    """Drop every node the outputs do not need."""
    return graph.prune(options["_outputs"])
