"""Where a frozen TensorFlow graph's control flow lives (no TensorFlow needed): for the rewrite passes
that must leave it alone and for the check, which must not advise what those passes refuse to do.

A frozen Keras LSTM (``convert_variables_to_constants_v2``) holds its loop lowered to TF1 frames:
Enter -> Merge -> Switch -> body -> NextIteration -> Merge, Exit out. Inside a frame an Identity is
not a pass-through: it carries loop state, a Switch's pivot, or a control edge that keeps the body's
constants in the frame; a node there cannot become a root-frame Const either. Functional loops
(While, If, their Stateless forms, function calls) are opaque ops that are never folded.

Every function takes ``edges``: ``[(name, op, inputs)]`` with TensorFlow input strings (``"node"``,
``"node:1"``, ``"^node"`` for a control edge); ``tf_edges`` makes them from a GraphDef or a graph view.
"""

FRAME_OPS = ("Enter", "RefEnter", "Exit", "RefExit", "Switch", "RefSwitch", "Merge", "RefMerge",
             "NextIteration", "RefNextIteration", "LoopCond", "ControlTrigger")
FUNCTIONAL_OPS = ("While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase",
                  "PartitionedCall", "StatefulPartitionedCall")
CONTROL_FLOW_OPS = FRAME_OPS + FUNCTIONAL_OPS
LOOP_OPS = ("Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration", "LoopCond")
# a loop in any format deploy reads: TF1 frames, TF2's functional While, ONNX's Loop and Scan (a body that runs a
# number of times no offline count knows: the latency estimate refuses it rather than count it once or never)
ANY_LOOP_OPS = ("Enter", "RefEnter", "NextIteration", "RefNextIteration", "LoopCond", "While", "StatelessWhile",
                "Loop", "Scan")  # the ops that make a loop (an Exit only ends one)


def loop_ops(graph):
    """The sorted op types of ``graph`` (a pipeline.graph view, any format) that make a loop (ANY_LOOP_OPS)."""
    return sorted({node.op for node in graph.nodes.values() if node.op in ANY_LOOP_OPS})
# what rewrite remove_identity bypasses (one data input; Print: its first, the others are only printed)
# and removes (control edges only: PrintV2, tf.print's op, has no output)
PASS_THROUGH = ("Identity", "CheckNumerics", "CheckNumericsV2", "StopGradient", "PreventGradient", "Snapshot")
FIRST_THROUGH = ("Print",)
CONTROL_ONLY = ("NoOp", "Assert", "PrintV2")


def tf_edges(graph):
    """``edges`` of a GraphDef-backed rewrite graph (``graph.graph_def``) or a pipeline.graph.view Graph."""
    graph_def = getattr(graph, "graph_def", None)
    if graph_def is not None:
        return [(n.name, n.op, list(n.input)) for n in graph_def.node]
    return [(n.name, n.op, list(n.inputs) + ["^" + c for c in n.control_inputs]) for n in graph.nodes.values()]


def _source(tensor):
    name = tensor[1:] if tensor.startswith("^") else tensor
    head, sep, port = name.rpartition(":")
    return head if sep and port.isdigit() else name


def readers(edges):
    """name -> names that read it (data or control)."""
    out = {}
    for name, _, inputs in edges:
        for tensor in inputs:
            out.setdefault(_source(tensor), []).append(name)
    return out


def _reach(seeds, read_by, stop=lambda name: False):
    seen, stack = set(), list(seeds)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if not stop(name):
            stack.extend(read_by.get(name, ()))
    return seen


def frame_nodes(edges, seeds=("Enter", "RefEnter", "Switch", "RefSwitch"),
                leaves=("Exit", "RefExit", "Merge", "RefMerge"), read_by=None):
    """Names of the nodes inside a loop frame or a cond branch: reached (data or control edges) from
    an Enter or a Switch, up to the Exit / Merge that leaves it (those included). ``seeds=("Enter",),
    leaves=("Exit",)``: the loops only; ``seeds=("Switch",), leaves=("Merge",)``: the conds."""
    starts = [name for name, op, _ in edges if op in seeds]
    if not starts:
        return set()
    ends = {name for name, op, _ in edges if op in leaves}
    return _reach(starts, read_by if read_by is not None else readers(edges), stop=ends.__contains__)


def feed_dependent(edges):
    """Names of the nodes that need a fed Placeholder to run: reached from one through data or
    control edges, loop back edges included (a PlaceholderWithDefault counts: it may be fed)."""
    seeds = [name for name, op, _ in edges if op in ("Placeholder", "PlaceholderV2", "PlaceholderWithDefault")]
    return _reach(seeds, readers(edges)) if seeds else set()


def held_by_control_flow(edges):
    """Names of the nodes that carry control flow and so are no pass-through to remove: every node
    inside a loop or cond frame; a node read by a control-flow op or a frame node (a NoOp whose
    control edge a loop waits on); a PASS_THROUGH or FIRST_THROUGH op whose data input comes from one."""
    ops = {name: op for name, op, _ in edges}
    if not any(op in CONTROL_FLOW_OPS for op in ops.values()):
        return set()
    read_by = readers(edges)
    held = frame_nodes(edges, read_by=read_by)

    def control_flow(name):
        return name in held or ops.get(name) in CONTROL_FLOW_OPS

    out = set(held)
    for name, op, inputs in edges:
        through = op in PASS_THROUGH or op in FIRST_THROUGH
        data = [_source(t) for t in inputs if not t.startswith("^")] if through else []
        if any(control_flow(n) for n in data) or any(control_flow(r) for r in read_by.get(name, ())):
            out.add(name)
    return out
