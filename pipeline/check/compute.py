"""How much of a TensorFlow graph TF-TRT would hand to TensorRT: by nodes and by compute.

TF-TRT (TrtGraphConverterV2) puts connected clusters of nodes it can convert into TensorRT
engines when a cluster has at least ``minimum_segment_size`` (3) nodes; everything else runs in
TensorFlow. The share of compute is estimated from the multiply-adds of convolutions and matrix
products (2 FLOPs each), the ops that dominate vision models, with shapes propagated from the
inputs through the common NHWC ops:

    share = tftrt_share(graph, supported)   # {"nodes": 0.93, "compute": 0.99, "flops": ..., ...}

A conv whose spatial size cannot be followed (dynamic input size, an unmodelled op on the way)
counts one output position, and the share says ``estimated: true``.

A conv or matrix product inside a loop body (a TF1 / lowered ``while`` frame: Enter … Exit, or a
functional While's inlined body) runs once per iteration: its FLOPs are multiplied by the loop's trip
count where the graph fixes it (``i < N`` from a constant start and step, for ``tf.while_loop`` and an
LSTM over a fixed sequence length), and the total is unknown (``flops: None``) where it does not (a
sequence length fixed only at run time). Such a share says so under ``loops``: each loop's frame, its
trip count (None: not static) and the FLOPs of one iteration of its body.
"""

from pipeline.check.conv_shapes import Shapes, node_attr

MINIMUM_SEGMENT_SIZE = 3  # TrtGraphConverterV2's default
_BOOKKEEPING = frozenset(["Placeholder", "Const", "Identity", "NoOp"])
_CONV = frozenset(["Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv3D", "MatMul", "BatchMatMul",
                   "BatchMatMulV2", "BatchMatMulV3", "_FusedConv2D", "_FusedMatMul"])


def tftrt_share(graph, supported, skip=frozenset(), flops=None, index=None):
    """{"nodes", "compute": shares in 0..1, "segments": engines, "flops": total estimate,
    "estimated": whether some conv's size was guessed}. ``supported(op)``: TF-TRT converts it.
    ``flops``: ``conv_flops(graph)`` under way elsewhere (the check runs it beside the other
    routes: a pipeline.check.background pending, asked for its result only once the clusters are
    found), else computed here. ``index``: the graph's OpIndex, if the caller has one."""
    from pipeline.check.op_index import OpIndex

    index = index or OpIndex(graph)
    bookkeeping = _BOOKKEEPING
    keep = (lambda n: n.name not in skip) if skip else None
    work = index.count(lambda op: op not in bookkeeping, keep)
    members = index.nodes(lambda op: op not in bookkeeping and supported(op), keep)  # any order: counts only
    groups = [g for g in _components(graph, members) if len(g) >= MINIMUM_SEGMENT_SIZE]
    in_trt = {n for group in groups for n in group}
    by_conv, guessed, loops = _unpack((flops.result() if flops is not None else None) or conv_flops(graph))
    if skip:
        by_conv = {name: f for name, f in by_conv.items() if name not in skip}
    estimated = bool(guessed) and any(name in guessed for name in by_conv)
    total_flops = sum(by_conv.values())
    trt_flops = sum(f for name, f in by_conv.items() if name in in_trt)
    share = {
        "nodes": round(len(in_trt) / work, 4) if work else 1.0,
        "compute": round(trt_flops / total_flops, 4) if total_flops else (round(len(in_trt) / work, 4) if work else 1.0),
        "flops": total_flops,
        "segments": len(groups),
        "estimated": estimated or not total_flops,
    }
    if loops:  # only a graph with loops has the key (a loop-free share is as before)
        share["loops"] = loops
        if any(loop["trip_count"] is None for loop in loops):
            share["flops"] = None  # a loop body runs a number of times fixed only at run time
    return share


def _unpack(result):
    """conv_flops' answer, also from a child of an older deploy (two values, no loops)."""
    return (result[0], result[1], result[2]) if len(result) > 2 else (result[0], result[1], [])


def conv_flops(graph):
    """({name: FLOPs} of every conv and matrix product, the names of those whose spatial size was
    guessed, the loops (see ``loop_counts``)): the compute half of tftrt_share, which needs nothing of
    the clusters or of what the check skips (tftrt_share leaves those out), so it can run on its own
    (pipeline.check.background). A conv in a loop body counts its FLOPs times the loop's trip count,
    once where the trip count is not static."""
    shapes = Shapes(graph)
    shapes.fill_in_file_order()
    by_conv = {}
    conv_ops, loop_ops = _CONV, _LOOP_OPS
    looped = False
    for node in graph.nodes.values():
        op = node.op
        if op in conv_ops:
            by_conv[node.name] = _flops(graph, node, shapes)  # follows its output size: unknown -> guessed
        elif op in loop_ops:
            looped = True
    loops = loop_counts(graph, by_conv) if looped and graph.kind == "tensorflow" else []
    return by_conv, {name for name in shapes.guessed if name in by_conv}, loops


def _components(graph, members):
    """Connected components (data edges, either direction) of the nodes ``members`` (a list of
    Nodes), each a list of names in the order of ``members``; components in the order of their
    first node.

    Union-find over integer indices with path halving, inlined: a 200,000-node graph has as many
    edges, and a call per find was most of the check's time.
    """
    names = [n.name for n in members]
    index = {name: i for i, name in enumerate(names)}
    get = index.get
    parent = list(range(len(names)))
    tensorflow = graph.kind == "tensorflow"
    producer_name = graph.producer_name
    for i, node in enumerate(members):
        for tensor in node.inputs:
            if not tensor:
                continue
            if tensorflow:
                j = get(tensor)  # a view's TF data inputs are plain names but for ports other than 0
                if j is None:
                    if ":" not in tensor and "^" not in tensor:
                        continue
                    j = get(tensor.lstrip("^").partition(":")[0])
            else:
                j = get(producer_name(tensor))
            if j is None:
                continue
            a = i
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            b = j
            while parent[b] != b:
                parent[b] = parent[parent[b]]
                b = parent[b]
            if a != b:
                parent[a] = b
    groups = {}
    for i, name in enumerate(names):
        a = i
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        if a in groups:
            groups[a].append(name)
        else:
            groups[a] = [name]
    return list(groups.values())


def _flops(graph, node, shapes):
    if node.op not in _CONV:
        return 0
    kernel = _kernel_shape(graph, node.inputs[1], shapes) if len(node.inputs) > 1 else None
    if not kernel:
        return 0
    if node.op.startswith(("MatMul", "BatchMatMul", "_FusedMatMul")):
        k, n = (kernel[-2], kernel[-1]) if len(kernel) >= 2 else (kernel[0], 1)
        if node_attr(node, "transpose_b") or node_attr(node, "adj_y"):
            k, n = n, k
        rows = 1
        out = shapes.get(node.name)
        if out and len(out) > 2:
            for d in out[1:-1]:
                rows *= d or 1
        return 2 * k * n * rows
    macs_per_position = 1
    for d in kernel:
        macs_per_position *= d
    out = shapes.get(node.name)
    positions = 1
    if out and len(out) == 4:
        positions = (out[1] or 1) * (out[2] or 1)
    return 2 * macs_per_position * positions


# ---------------------------------------------------------------- loop bodies

_LOOP_OPS = frozenset(["Enter", "RefEnter", "LoopCond", "While", "StatelessWhile", "_While"])
_WHILE_OPS = frozenset(["While", "StatelessWhile", "_While"])
_PASS_THROUGH = frozenset(["Identity", "Enter", "RefEnter", "Cast", "Snapshot", "StopGradient"])
_MAX_DEPTH = 32


def loop_counts(graph, by_conv):
    """[{"loop", "trip_count", "flops_per_iteration", "nodes"}] of a TensorFlow graph's loops, one per
    frame with a conv or matrix product in its body; ``by_conv`` multiplied in place by the trip counts
    that are static (a body in nested loops: by each). ``trip_count`` None: the graph does not fix it.

    TF1 / lowered control flow: a node is in the frames its data inputs are in, an Enter opens its
    ``frame_name`` and an Exit closes the innermost; the frame's LoopCond gives the count. A functional
    While's inlined body (``<while>/body/…``, pipeline.graph.inline) counts as a loop with no static
    trip count."""
    frames = _frames(graph)
    trips = {}
    for node in graph.nodes.values():
        if node.op == "LoopCond" and frames.get(node.name):
            trips[frames[node.name][-1]] = _trip_count(graph, node.inputs[0] if node.inputs else None)
    whiles = [n.name + "/" for n in graph.nodes.values() if n.op in _WHILE_OPS]
    loops = {}
    for name, flops in list(by_conv.items()):
        stack = frames.get(name, ())
        stack += tuple(w[:-1] for w in whiles if name.startswith(w))  # functional bodies: no static count
        if not stack:
            continue
        factor = 1
        for frame in stack:
            loop = loops.setdefault(frame, {"loop": frame, "trip_count": trips.get(frame), "flops_per_iteration": 0,
                                            "nodes": 0})
            loop["flops_per_iteration"] += flops
            loop["nodes"] += 1
            factor = None if factor is None or loop["trip_count"] is None else factor * loop["trip_count"]
        if factor is not None:
            by_conv[name] = flops * factor
    return [loops[k] for k in sorted(loops)]


def _frames(graph):
    """{node name: (outermost frame, …, innermost)} of the nodes inside TF1 while frames."""
    frames = {}
    producer_name = graph.producer_name
    for node in graph.topological_order():  # the back edge NextIteration -> Merge is left out
        stack = ()
        for tensor in node.inputs:
            if tensor:
                inner = frames.get(producer_name(tensor))
                if inner and len(inner) > len(stack):
                    stack = inner
        if node.op in ("Enter", "RefEnter"):
            stack = stack + (str(node_attr(node, "frame_name") or node.name),)
        elif node.op in ("Exit", "RefExit"):
            stack = stack[:-1]
        if stack:
            frames[node.name] = stack
    return frames


def _trip_count(graph, tensor, depth=0):
    """How many times a loop whose condition is ``tensor`` runs, when the graph fixes it: ``i < N`` (or
    ``N > i``) for a loop variable i from a constant start by a constant positive step, and N constant;
    the smaller of two such conditions joined by LogicalAnd (Keras' RNN loop: time < steps and the
    iteration counter < maximum_iterations). None otherwise."""
    node = _source(graph, tensor)
    if node is None or depth > _MAX_DEPTH:
        return None
    if node.op == "LogicalAnd" and len(node.inputs) == 2:
        counts = [_trip_count(graph, t, depth + 1) for t in node.inputs]
        return None if None in counts else min(counts)
    if node.op in ("Less", "Greater") and len(node.inputs) == 2:
        var, bound = node.inputs if node.op == "Less" else reversed(node.inputs)
        start, step = _induction(graph, var)
        limit = _static_int(graph, bound)
        if start is None or step is None or limit is None or step <= 0:
            return None
        return max(0, -(-(limit - start) // step))
    return None


def _source(graph, tensor):
    """The node producing ``tensor``, through Identity (None for an edge the graph does not hold)."""
    node = graph.producer(tensor) if tensor else None
    for _ in range(_MAX_DEPTH):
        if node is None or node.op not in ("Identity", "Snapshot") or not node.inputs:
            return node
        node = graph.producer(node.inputs[0])
    return node


def _loop_merge(graph, tensor):
    """(Merge, Enter, NextIteration) when ``tensor`` is a loop variable's Merge, else None."""
    merge = _source(graph, tensor)
    if merge is None or merge.op not in ("Merge", "RefMerge") or len(merge.inputs) != 2:
        return None
    a, b = (graph.producer(t) for t in merge.inputs)
    if a is not None and b is not None and a.op in ("NextIteration", "RefNextIteration"):
        a, b = b, a
    if a is None or b is None or a.op not in ("Enter", "RefEnter") or b.op not in ("NextIteration", "RefNextIteration"):
        return None
    return merge, a, b


def _from_switch_of(graph, tensor, merge):
    """Whether ``tensor`` is the body side of the Switch of ``merge`` (through Identity)."""
    node = _source(graph, tensor)
    return node is not None and node.op in ("Switch", "RefSwitch") and bool(node.inputs) \
        and _source(graph, node.inputs[0]) is merge


def _induction(graph, tensor):
    """(start, step) of a loop variable ``i = start; i = i + step`` (constants), else (None, None)."""
    found = _loop_merge(graph, tensor)
    if found is None:
        return None, None
    merge, enter, nxt = found
    add = _source(graph, nxt.inputs[0]) if nxt.inputs else None
    if add is None or add.op not in ("Add", "AddV2") or len(add.inputs) != 2:
        return None, None
    for var, step in (add.inputs, reversed(add.inputs)):
        if _from_switch_of(graph, var, merge):
            return _static_int(graph, enter.inputs[0] if enter.inputs else None), _static_int(graph, step)
    return None, None


def _static_int(graph, tensor, depth=0):
    """The value of an integer scalar the graph fixes: a constant, through Identity/Enter/Cast, a loop
    invariant (a Merge that passes its Enter's value round), Max/Min of constants, Maximum/Minimum;
    None otherwise."""
    node = graph.producer(tensor) if tensor else None
    if node is None or depth > _MAX_DEPTH:
        return None
    op = node.op
    if op == "Const":
        values = _const_ints(node)
        return values[0] if values is not None and len(values) == 1 else None
    if op in _PASS_THROUGH and node.inputs:
        return _static_int(graph, node.inputs[0], depth + 1)
    if op in ("Merge", "RefMerge"):
        found = _loop_merge(graph, tensor)
        if found is not None and found[2].inputs and _from_switch_of(graph, found[2].inputs[0], found[0]):
            return _static_int(graph, found[1].inputs[0] if found[1].inputs else None, depth + 1)
        return None
    if op in ("Max", "Min") and node.inputs:
        source = graph.producer(node.inputs[0])
        values = _const_ints(source) if source is not None and source.op == "Const" else None
        return (max(values) if op == "Max" else min(values)) if values else None
    if op in ("Maximum", "Minimum") and len(node.inputs) == 2:
        a, b = (_static_int(graph, t, depth + 1) for t in node.inputs)
        return None if a is None or b is None else (max(a, b) if op == "Maximum" else min(a, b))
    return None


def _const_ints(node):
    """A small integer constant's values as a list (a scalar: one value), else None. TensorFlow writes a
    zero scalar with no value at all, which reads as 0."""
    value = node_attr(node, "value")
    if value is None or getattr(value, "dtype", None) not in ("int32", "int64"):
        return None
    shape = list(value.shape or [])
    count = 1
    for d in shape:
        count *= d
    if count > 64:
        return None
    ints = value.ints()
    if ints is None:
        return None
    if len(ints) < count:  # TensorFlow repeats the last value to fill the tensor (none written: zeros)
        ints = list(ints) + [ints[-1] if ints else 0] * (count - len(ints))
    return ints


def _kernel_shape(graph, tensor, shapes):
    """A conv's or matrix product's constant weight shape, also where the weight enters a loop body
    through Enter (an LSTM cell's kernel)."""
    shape = shapes.const_shape(tensor)
    if shape is not None:
        return shape
    node = graph.producer(tensor)
    for _ in range(_MAX_DEPTH):
        if node is None or node.op not in _PASS_THROUGH or not node.inputs:
            break
        if node.op == "Const":
            break
        node = graph.producer(node.inputs[0])
    if node is not None and node.op == "Const":
        return shapes.const_shape(node.name)
    return None
