"""Batch semantics of an ONNX model (issue 20 point 3, the ONNX half of patterns.batch_axes).

    batch_reductions(model) -> [(node name, op, batch axis)]

Which axis of which tensor carries the batch is propagated from axis 0 of the graph inputs; a
reduction (or softmax/cumsum/topk/normalisation along an axis, or a MatMul/Gemm contracting over
it) is batch-dependent only when that axis carries the batch. Shape/Size end it: shape arithmetic
never carries the batch as data.
"""

from pipeline.check.onnx_types import STANDARD, Scope, attr, default_opset, infer, node_names


_REDUCE = frozenset(["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                     "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"])
_ARG = frozenset(["ArgMax", "ArgMin"])
_ALONG = frozenset(["Softmax", "LogSoftmax", "Hardmax", "CumSum", "LpNormalization", "TopK"])
# outputs that carry no batch whatever their inputs: shape arithmetic and generators
_NO_CARRY = frozenset(["Shape", "Size", "ConstantOfShape", "Constant", "Range", "NonZero", "EyeLike", "If", "Loop",
                       "Scan", "Einsum"])
# ops whose inputs after the first are parameters (shapes, axes, indices, scales), never data
_FIRST_ONLY = frozenset(["Reshape", "Expand", "Tile", "Slice", "Pad", "Resize", "Upsample", "Squeeze", "Unsqueeze",
                         "TopK", "CumSum", "Split", "OneHot", "ScatterElements", "ScatterND", "GatherElements",
                         "GatherND", "DepthToSpace", "SpaceToDepth", "Dropout", "Clip", "Conv", "ConvTranspose",
                         "BatchNormalization", "InstanceNormalization", "LayerNormalization", "GroupNormalization"])


def _constant_values(graph):
    """{tensor: [ints]} of small integer initializers and Constant outputs."""
    from onnx import numpy_helper

    values = {}
    for t in graph.initializer:
        if t.data_type in (6, 7) and len(t.dims) <= 1:
            try:
                values[t.name] = [int(v) for v in numpy_helper.to_array(t).reshape(-1)]
            except Exception:  # noqa: BLE001
                pass
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value" and a.t.data_type in (6, 7) and len(a.t.dims) <= 1:
                    values[node.output[0]] = [int(v) for v in numpy_helper.to_array(a.t).reshape(-1)]
                elif a.name in ("value_ints",):
                    values[node.output[0]] = list(a.ints)
                elif a.name == "value_int":
                    values[node.output[0]] = [a.i]
    return values


def batch_reductions(model):
    """[(node name, op, batch axis)] of the main graph's nodes that mix samples of a batch: a reduction
    (Reduce*, ArgMax/ArgMin), a normalisation or a softmax/cumsum/topk along the axis that carries the
    batch, or a MatMul/Gemm that contracts over it. Which axis of which tensor carries the batch is
    propagated from axis 0 of the graph inputs (rank >= 1); Shape/Size end it, so shape arithmetic
    (Shape -> Gather -> Concat -> Reshape, a Prod over a shape vector) never carries it as data."""
    inferred, _ = infer(model)
    graph = inferred.graph
    scope = Scope(graph)
    consts = _constant_values(graph)
    opset = default_opset(model) or 1
    carry, flagged = {}, []
    for info in graph.input:
        if info.name in scope.initializers:
            continue
        rank = scope.rank(info.name)
        if rank is None or rank >= 1:
            carry[info.name] = (0, rank)
    for name, node in zip(node_names(graph), graph.node):
        state, hit = _propagate(node, carry, scope, consts, opset)
        if hit is not None:
            flagged.append((name, node.op_type, hit))
        if state is not None:
            for out in node.output:
                if out:
                    carry[out] = (state[0], scope.rank(out) if scope.rank(out) is not None else state[1])
    return flagged


def _norm(axis, rank):
    if axis is None:
        return None
    if axis < 0:
        return None if rank is None else axis + rank
    return axis


def _propagate(node, carry, scope, consts, opset):
    """(carry state of the outputs or None, the batch axis this node mixes or None)."""
    op = node.op_type
    if node.domain not in STANDARD or op in _NO_CARRY:
        return None, None
    inputs = list(node.input)
    ins = [carry.get(t) if t else None for t in inputs]
    data = ins[0] if ins else None
    out_rank = scope.rank(node.output[0]) if node.output and node.output[0] else None
    if op in _FIRST_ONLY or op in _REDUCE or op in _ARG or op in _ALONG:
        if data is None:
            return None, None
    elif not any(ins):
        return None, None
    if op in _REDUCE or op in _ARG:
        b, rank = data
        keep = attr(node, "keepdims", 1)
        if op in _ARG:
            axes = [attr(node, "axis", 0)]
        else:
            axes = attr(node, "axes")
            if axes is None and len(inputs) > 1 and inputs[1]:
                axes = consts.get(inputs[1])
                if axes is None:
                    return (data if keep else None), None  # computed axes: not claimed either way
            if not axes:
                if attr(node, "noop_with_empty_axes", 0) == 1:
                    return data, None
                return None, b  # every axis, the batch's too
        axes = [_norm(a, rank) for a in axes]
        if None in axes:
            return (data if keep else None), None
        if b in axes:
            return None, b
        if keep:
            return (b, rank), None
        return (b - sum(1 for a in set(axes) if a < b), None if rank is None else rank - len(set(axes))), None
    if op in _ALONG:
        b, rank = data
        if op == "CumSum":
            axis = (consts.get(inputs[1]) or [None])[0] if len(inputs) > 1 else None
        elif op in ("Softmax", "LogSoftmax", "Hardmax"):
            axis = attr(node, "axis", -1 if opset >= 13 else 1)
        else:
            axis = attr(node, "axis", -1)
        axis = _norm(axis, rank)
        if axis is None:
            return data, None
        if op in ("Softmax", "LogSoftmax", "Hardmax") and opset < 13:
            return data, (b if b >= axis else None)  # coerced to 2D: axes [axis, rank) are one
        return data, (b if b == axis else None)
    if op in ("MeanVarianceNormalization", "LayerNormalization", "GroupNormalization"):
        b, rank = data
        if op == "MeanVarianceNormalization":
            axes = [_norm(a, rank) for a in attr(node, "axes", [0, 2, 3])]
            return data, (b if b in axes else None)
        if op == "LayerNormalization":
            axis = _norm(attr(node, "axis", -1), rank)
            return data, (b if axis is not None and b >= axis else None)
        return data, (b if b != 0 else None)
    if op == "Transpose":
        b, rank = data
        perm = attr(node, "perm")
        if perm is None:
            return ((rank - 1 - b, rank) if rank is not None else None), None
        perm = list(perm)
        return ((perm.index(b), rank) if b in perm else None), None
    if op == "Unsqueeze":
        b, rank = data
        axes = attr(node, "axes")
        if axes is None and len(inputs) > 1:
            axes = consts.get(inputs[1])
        new_rank = out_rank if out_rank is not None else (rank + len(axes) if rank is not None and axes else None)
        if axes is None or new_rank is None:
            return None, None
        axes = {_norm(a, new_rank) for a in axes}
        kept = [i for i in range(new_rank) if i not in axes]
        return ((kept[b], new_rank) if b < len(kept) else None), None
    if op == "Squeeze":
        b, rank = data
        axes = attr(node, "axes")
        if axes is None and len(inputs) > 1 and inputs[1]:
            axes = consts.get(inputs[1])
            if axes is None:
                return None, None
        if axes is None:
            dims = scope.shape(inputs[0])
            if dims is None:
                return None, None
            axes = [i for i, d in enumerate(dims) if d == 1]
        axes = [_norm(a, rank) for a in axes]
        if None in axes or b in axes:
            return None, None
        return (b - sum(1 for a in set(axes) if a < b), out_rank), None
    if op == "Flatten":
        b, rank = data
        axis = _norm(attr(node, "axis", 1), rank)
        if axis is None:
            return None, None
        return ((0 if b < axis else 1), 2), None
    if op == "Reshape":
        b, rank = data
        if b == 0:
            shape = consts.get(inputs[1]) if len(inputs) > 1 else None
            if shape is not None and shape and shape[0] not in (0, -1) and -1 not in shape[1:] and shape[0] == 1:
                return None, None  # the batch is folded into another axis ([1, N*...])
            return (0, out_rank), None
        before, after = scope.shape(inputs[0]), scope.shape(node.output[0])
        if before and after and len(after) > b and before[:b + 1] == after[:b + 1] and None not in before[:b + 1]:
            return (b, out_rank), None
        return None, None
    if op == "Gather":
        rank = data[1] if data else scope.rank(inputs[0])
        axis = _norm(attr(node, "axis", 0), rank)
        indices = ins[1] if len(ins) > 1 else None
        if data is not None and axis is not None and data[0] != axis:
            b = data[0]
            if b < axis:
                return (b, out_rank), None
            idx_rank = scope.rank(inputs[1])
            return ((b + idx_rank - 1, out_rank) if idx_rank is not None else None), None
        if indices is not None and axis is not None:
            return (axis + indices[0], out_rank), None
        return None, None
    if op in ("MatMul", "MatMulInteger", "QLinearMatMul") and len(inputs) > 1:
        a_rank, b_rank = scope.rank(inputs[0]), scope.rank(inputs[1])
        if data is not None:
            b, rank = data
            rank = rank if rank is not None else a_rank
            if rank is not None and rank >= 2 and b == rank - 1:
                return None, b  # contracts over the batch
            if rank is not None and out_rank is not None:
                return (b + out_rank - rank, out_rank), None
            return (b, out_rank), None
        other = ins[1]
        if other is not None:
            b, rank = other
            rank = rank if rank is not None else b_rank
            if rank is not None and (rank == 1 or b == rank - 2):
                return None, b
            if rank is not None and out_rank is not None:
                return (b + out_rank - rank, out_rank), None
        return None, None
    if op == "Gemm":
        trans_a, trans_b = attr(node, "transA", 0), attr(node, "transB", 0)
        if data is not None:
            contracted = 0 if trans_a else 1
            if data[0] == contracted:
                return None, data[0]
            return (0, 2), None
        other = ins[1] if len(ins) > 1 else None
        if other is not None:
            contracted = 1 if trans_b else 0
            if other[0] == contracted:
                return None, other[0]
            return (1, 2), None
        return None, None
    # element-wise and the rest: the first carrying data input's axis, aligned from the right
    carriers = [(i, s) for i, s in enumerate(ins) if s is not None and (op not in _FIRST_ONLY or i == 0)]
    if not carriers:
        return None, None
    index, (b, rank) = carriers[0]
    rank = rank if rank is not None else scope.rank(inputs[index])
    if rank is not None and out_rank is not None:
        return (b + out_rank - rank, out_rank), None
    return (b, out_rank), None
