"""Batch semantics of a TensorFlow graph from its data flow (issue 20 point 3).

    carry, flagged = batch_axes(graph)
    carry["flatten/Reshape"]   # (0, 2): axis 0 of a rank-2 tensor carries the batch
    flagged                    # [("moments/mean", 0)]: reductions over a batch-carrying axis

The batch is axis 0 of every placeholder of rank >= 1; each op moves it (Transpose, ExpandDims,
Squeeze, Pack, reductions that drop axes) or keeps it; Shape, Size and Rank end it, so the
arithmetic on a shape vector (Keras Flatten's Shape -> StridedSlice -> Prod -> Pack -> Reshape)
carries no batch. Port 0 of each node is followed. The ONNX half is onnx_batch.flagged_reductions.

A 200,000-node graph is walked over integer indices, with no call per node or edge in the inner
loops: only the ops that move the batch (reductions, Reshape, Transpose, ...) get a call.
"""

from itertools import accumulate, chain, compress, repeat
from operator import attrgetter, lt

REDUCTIONS = frozenset(["Mean", "Sum", "Max", "Min", "Prod", "All", "Any", "EuclideanNorm", "ArgMax", "ArgMin",
                        "Cumsum", "Cumprod"])
_KEEP_RANK = frozenset(["ArgMax", "ArgMin"])  # drop the reduced axis whatever the attributes
_ALONG = frozenset(["Cumsum", "Cumprod"])  # keep every axis: mix values along one
_SHAPE_OPS = frozenset(["Shape", "ShapeN", "Size", "Rank", "Const", "BroadcastArgs", "BroadcastGradientArgs"])
_INPUT_OPS = frozenset(["Placeholder", "PlaceholderWithDefault"])
_MATMUL = frozenset(["MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"])
# ops _moved handles (everything else keeps the batch where its carrying input has it)
_MOVES = REDUCTIONS | _MATMUL | frozenset(["Reshape", "Transpose", "ExpandDims", "Squeeze", "Pack"])


def batch_axes(graph):
    """({node: (batch axis, rank or None)} for the nodes whose output carries the batch, in the
    order they were reached, [(node, axis)] of the reductions over a batch-carrying axis)."""
    names, order, state, flagged = _flow(graph)
    if isinstance(order, range):
        carry = dict(compress(zip(names, state), state))
    else:
        carry = {names[i]: state[i] for i in order if state[i] is not None}
    return carry, flagged


def flagged_reductions(graph):
    """[(node, axis)] of the reductions over a batch-carrying axis: batch_axes' second half, without
    building the first (a dict of every batch-carrying node); no walk at all in a graph without reductions."""
    if {n.op for n in graph.nodes.values()}.isdisjoint(REDUCTIONS):
        return []
    return _flow(graph)[3]


def _flow(graph):
    """(node names, the order they were visited in, each node's carry state, flagged reductions)."""
    names = list(graph.nodes)
    nodes = list(graph.nodes.values())
    n = len(nodes)
    index = dict(zip(names, range(n)))
    lists = list(map(attrgetter("inputs"), nodes))
    flat = list(chain.from_iterable(lists))  # every data input, node after node
    starts = list(accumulate(map(len, lists), initial=0))  # node i's inputs: flat[starts[i]:starts[i + 1]]
    # the producer's index of each input; -1: none (or not in the graph), which reads state[-1], always None
    if graph.kind == "tensorflow":
        idx = list(map(index.get, flat))  # "node" (port 0): found at once; "node:1", "^node", "": below
        for k in [k for k, j in enumerate(idx) if j is None]:
            t = flat[k]
            idx[k] = index.get(t.lstrip("^").partition(":")[0], -1) if t else -1
    else:
        producer_name = graph.producer_name
        idx = [index.get(producer_name(t), -1) if t else -1 for t in flat]
    owner = list(chain.from_iterable(map(repeat, range(n), map(len, lists))))  # the node of each input
    if all(map(lt, idx, owner)):
        order = range(n)  # every input comes earlier in the file: the depth-first order is the file's
    else:
        order = _topological([idx[starts[i]:starts[i + 1]] for i in range(n)])
    ops = list(map(attrgetter("op"), nodes))
    state = [None] * (n + 1)
    flagged = []
    for i in order:
        op = ops[i]
        if op in _SHAPE_OPS:
            continue
        if op in _INPUT_OPS:
            shape = nodes[i].attrs.get("shape")
            state[i] = (0, None) if shape is None else (0, len(shape)) if len(shape) else None
            continue
        a = starts[i]
        width = starts[i + 1] - a
        if not width:
            continue
        if op in _MOVES:
            state[i] = _moved(graph, nodes[i], [state[j] for j in idx[a:a + width]], flagged)
            continue
        s0 = state[idx[a]]
        if width == 1:
            state[i] = s0
            continue
        if width == 2:
            s1 = state[idx[a + 1]]
            if s1 is None:
                state[i] = s0
                continue
            if s0 is None:
                state[i] = s1
                continue
            carriers = (s0, s1)
        else:
            carriers = [s for s in map(state.__getitem__, idx[a:a + width]) if s is not None]
            if len(carriers) < 2:
                state[i] = carriers[0] if carriers else None
                continue
        # element-wise and the rest: the batch where the carrying input has it, aligned from the right
        axis, rank = carriers[0]
        ranks = [c[1] for c in carriers]
        if None not in ranks and rank is not None:
            high = max(ranks)
            state[i] = (axis + high - rank, high)
        else:
            state[i] = (axis, rank)
    return names, order, state, flagged


def _topological(srcs):
    """Node indices with their data inputs first (iterative DFS from the nodes in file order;
    loop back edges are cut)."""
    done = [False] * len(srcs)
    order = []
    append = order.append
    for root in range(len(srcs)):
        if done[root]:
            continue
        done[root] = True
        stack = [(root, iter(srcs[root]))]
        while stack:
            i, inputs = stack[-1]
            for j in inputs:
                if j >= 0 and not done[j]:
                    done[j] = True
                    stack.append((j, iter(srcs[j])))
                    break
            else:
                stack.pop()
                append(i)
    return order


def const_ints(graph, tensor):
    """The values of a small integer Const feeding ``tensor`` (axes, shapes, perms), or None."""
    src = graph.producer(tensor) if tensor else None
    if src is None or src.op != "Const":
        return None
    value = src.attrs.get("value")
    return value.ints() if value is not None and hasattr(value, "ints") else None


def _moved(graph, node, ins, flagged):
    """The carry state of an op that moves (or ends) the batch; ``ins``: its inputs' states."""
    op = node.op
    data = ins[0]
    if op in REDUCTIONS and len(node.inputs) > 1:
        if data is None:
            return None  # e.g. Prod over a shape vector: shape arithmetic
        axis, rank = data
        axes = const_ints(graph, node.inputs[1])
        if axes is None:
            return data  # computed axes: not claimed either way
        axes = [a + rank if a < 0 and rank is not None else a for a in axes]
        if axis in axes:
            flagged.append((node.name, axis))
            return None if op not in _ALONG else data
        if op in _ALONG or (op not in _KEEP_RANK and (node.attrs.get("keep_dims") or node.attrs.get("keepdims"))):
            return data
        return (axis - sum(1 for a in axes if 0 <= a < axis), None if rank is None else rank - len(set(axes)))
    if data is None and not any(ins):
        return None
    if op == "Reshape":
        if data is None:
            return None  # only the shape input carries the batch: a shape vector
        dims = const_ints(graph, node.inputs[1])
        src = graph.producer(node.inputs[1])
        rank = len(dims) if dims is not None else len(src.inputs) if src is not None and src.op == "Pack" else None
        return (0, rank)
    if op == "Transpose" and data is not None:
        perm = const_ints(graph, node.inputs[1])
        return (perm.index(data[0]), data[1]) if perm and data[0] in perm else data
    if op == "ExpandDims" and data is not None:
        dims = const_ints(graph, node.inputs[1])
        rank = None if data[1] is None else data[1] + 1
        if dims and len(dims) == 1:
            where = dims[0] + rank if dims[0] < 0 and rank is not None else dims[0]
            return (data[0] + 1 if 0 <= where <= data[0] else data[0], rank)
        return (data[0], rank)
    if op == "Squeeze" and data is not None:
        dims = node.attrs.get("squeeze_dims") or node.attrs.get("axis") or []
        if dims and data[1] is not None:
            dims = [d + data[1] if d < 0 else d for d in dims]
            return (data[0] - sum(1 for d in dims if d < data[0]), data[1] - len(dims))
        return (data[0], None)
    if op == "Pack":
        first = next(s for s in ins if s is not None)
        where = node.attrs.get("axis") or 0
        rank = None if first[1] is None else first[1] + 1
        where = where + rank if where < 0 and rank is not None else where
        return (first[0] + 1 if 0 <= where <= first[0] else first[0], rank)
    if op in _MATMUL:
        if data is not None:
            return (1 - data[0] if op == "MatMul" and node.attrs.get("transpose_a") and data[0] in (0, 1) else data[0],
                    data[1])
        return (1, 2) if op == "MatMul" else ins[1]
    # element-wise and the rest: the batch where the carrying input has it, aligned from the right
    carriers = [s for s in ins if s is not None]
    axis, rank = carriers[0]
    ranks = [s[1] for s in carriers]
    if None not in ranks and rank is not None:
        high = max(ranks)
        return (axis + high - rank, high)
    return (axis, rank)
