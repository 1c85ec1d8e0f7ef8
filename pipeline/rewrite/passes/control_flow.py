"""Where a frozen graph's control flow lives, for the passes that must leave it alone (no TensorFlow needed).

A frozen Keras LSTM (``convert_variables_to_constants_v2``) holds its loop lowered to TF1 frames:
Enter -> Merge -> Switch -> body -> NextIteration -> Merge, Exit out. Inside a frame an Identity is
not a pass-through: it carries loop state, a Switch's pivot, or a control edge that keeps the body's
constants in the frame; a node there cannot become a root-frame Const either. Functional loops
(While, If, their Stateless forms, function calls) are opaque ops that are never folded.
"""

FRAME_OPS = ("Enter", "RefEnter", "Exit", "RefExit", "Switch", "RefSwitch", "Merge", "RefMerge",
             "NextIteration", "RefNextIteration", "LoopCond", "ControlTrigger")
FUNCTIONAL_OPS = ("While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase",
                  "PartitionedCall", "StatefulPartitionedCall")
CONTROL_FLOW_OPS = FRAME_OPS + FUNCTIONAL_OPS
LOOP_OPS = ("Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration", "LoopCond")


def readers(graph):
    """name -> names that read it (data or control)."""
    from pipeline.rewrite.tfgraph import split_tensor

    readers = {}
    for node in graph.graph_def.node:
        for tensor in node.input:
            readers.setdefault(split_tensor(tensor)[0], []).append(node.name)
    return readers


def _reach(seeds, readers, stop=lambda name: False):
    seen, stack = set(), list(seeds)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if not stop(name):
            stack.extend(readers.get(name, ()))
    return seen


def frame_nodes(graph, seeds=("Enter", "RefEnter", "Switch", "RefSwitch"),
                leaves=("Exit", "RefExit", "Merge", "RefMerge")):
    """Names of the nodes inside a loop frame or a cond branch: reached (data or control edges) from
    an Enter or a Switch, up to the Exit / Merge that leaves it (those included). ``seeds=("Enter",),
    leaves=("Exit",)``: the loops only; ``seeds=("Switch",), leaves=("Merge",)``: the conds."""
    nodes = graph.nodes
    starts = [n.name for n in nodes.values() if n.op in seeds]
    if not starts:
        return set()
    ends = {n.name for n in nodes.values() if n.op in leaves}
    return _reach(starts, readers(graph), stop=ends.__contains__)


def feed_dependent(graph):
    """Names of the nodes that need a fed Placeholder to run: reached from one through data or
    control edges, loop back edges included (a PlaceholderWithDefault counts: it may be fed)."""
    seeds = [n.name for n in graph.graph_def.node if n.op in ("Placeholder", "PlaceholderV2", "PlaceholderWithDefault")]
    return _reach(seeds, readers(graph)) if seeds else set()
