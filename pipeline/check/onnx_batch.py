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


class _Step:
    """One node's view for a shape rule: its inputs, their carry states (``ins``; ``data`` the first),
    the rank of its first output, and the graph's scope, small integer constants and opset."""

    __slots__ = ("node", "op", "inputs", "ins", "data", "out_rank", "scope", "consts", "opset")

    def __init__(self, node, carry, scope, consts, opset):
        self.node, self.op, self.scope, self.consts, self.opset = node, node.op_type, scope, consts, opset
        self.inputs = list(node.input)
        self.ins = [carry.get(t) if t else None for t in self.inputs]
        self.data = self.ins[0] if self.ins else None
        self.out_rank = scope.rank(node.output[0]) if node.output and node.output[0] else None


def _propagate(node, carry, scope, consts, opset):
    """(carry state of the outputs or None, the batch axis this node mixes or None): the op's shape
    rule from _RULES, element-wise alignment for the rest."""
    op = node.op_type
    if node.domain not in STANDARD or op in _NO_CARRY:
        return None, None
    step = _Step(node, carry, scope, consts, opset)
    if op in _FIRST_ONLY or op in _REDUCE or op in _ARG or op in _ALONG:
        if step.data is None:
            return None, None
    elif not any(step.ins):
        return None, None
    return _RULES.get(op, _elementwise)(step)


def _reduce(s):
    """Reduce* and ArgMax/ArgMin: batch-dependent when the reduced axes hold the batch's."""
    node, inputs, data = s.node, s.inputs, s.data
    b, rank = data
    keep = attr(node, "keepdims", 1)
    if s.op in _ARG:
        axes = [attr(node, "axis", 0)]
    else:
        axes = attr(node, "axes")
        if axes is None and len(inputs) > 1 and inputs[1]:
            axes = s.consts.get(inputs[1])
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


def _along(s):
    """Softmax, CumSum, TopK, LpNormalization ...: along one axis."""
    op, inputs, data = s.op, s.inputs, s.data
    b, rank = data
    if op == "CumSum":
        axis = (s.consts.get(inputs[1]) or [None])[0] if len(inputs) > 1 else None
    elif op in ("Softmax", "LogSoftmax", "Hardmax"):
        axis = attr(s.node, "axis", -1 if s.opset >= 13 else 1)
    else:
        axis = attr(s.node, "axis", -1)
    axis = _norm(axis, rank)
    if axis is None:
        return data, None
    if op in ("Softmax", "LogSoftmax", "Hardmax") and s.opset < 13:
        return data, (b if b >= axis else None)  # coerced to 2D: axes [axis, rank) are one
    return data, (b if b == axis else None)


def _normalization(s):
    data = s.data
    b, rank = data
    if s.op == "MeanVarianceNormalization":
        axes = [_norm(a, rank) for a in attr(s.node, "axes", [0, 2, 3])]
        return data, (b if b in axes else None)
    if s.op == "LayerNormalization":
        axis = _norm(attr(s.node, "axis", -1), rank)
        return data, (b if axis is not None and b >= axis else None)
    return data, (b if b != 0 else None)  # GroupNormalization


def _transpose(s):
    b, rank = s.data
    perm = attr(s.node, "perm")
    if perm is None:
        return ((rank - 1 - b, rank) if rank is not None else None), None
    perm = list(perm)
    return ((perm.index(b), rank) if b in perm else None), None


def _unsqueeze(s):
    inputs = s.inputs
    b, rank = s.data
    axes = attr(s.node, "axes")
    if axes is None and len(inputs) > 1:
        axes = s.consts.get(inputs[1])
    new_rank = s.out_rank if s.out_rank is not None else (rank + len(axes) if rank is not None and axes else None)
    if axes is None or new_rank is None:
        return None, None
    axes = {_norm(a, new_rank) for a in axes}
    kept = [i for i in range(new_rank) if i not in axes]
    return ((kept[b], new_rank) if b < len(kept) else None), None


def _squeeze(s):
    inputs = s.inputs
    b, rank = s.data
    axes = attr(s.node, "axes")
    if axes is None and len(inputs) > 1 and inputs[1]:
        axes = s.consts.get(inputs[1])
        if axes is None:
            return None, None
    if axes is None:
        dims = s.scope.shape(inputs[0])
        if dims is None:
            return None, None
        axes = [i for i, d in enumerate(dims) if d == 1]
    axes = [_norm(a, rank) for a in axes]
    if None in axes or b in axes:
        return None, None
    return (b - sum(1 for a in set(axes) if a < b), s.out_rank), None


def _flatten(s):
    b, rank = s.data
    axis = _norm(attr(s.node, "axis", 1), rank)
    if axis is None:
        return None, None
    return ((0 if b < axis else 1), 2), None


def _reshape(s):
    inputs, out_rank = s.inputs, s.out_rank
    b, rank = s.data
    if b == 0:
        shape = s.consts.get(inputs[1]) if len(inputs) > 1 else None
        if shape is not None and shape and shape[0] not in (0, -1) and -1 not in shape[1:] and shape[0] == 1:
            return None, None  # the batch is folded into another axis ([1, N*...])
        return (0, out_rank), None
    before, after = s.scope.shape(inputs[0]), s.scope.shape(s.node.output[0])
    if before and after and len(after) > b and before[:b + 1] == after[:b + 1] and None not in before[:b + 1]:
        return (b, out_rank), None
    return None, None


def _gather(s):
    inputs, ins, data, out_rank = s.inputs, s.ins, s.data, s.out_rank
    rank = data[1] if data else s.scope.rank(inputs[0])
    axis = _norm(attr(s.node, "axis", 0), rank)
    indices = ins[1] if len(ins) > 1 else None
    if data is not None and axis is not None and data[0] != axis:
        b = data[0]
        if b < axis:
            return (b, out_rank), None
        idx_rank = s.scope.rank(inputs[1])
        return ((b + idx_rank - 1, out_rank) if idx_rank is not None else None), None
    if indices is not None and axis is not None:
        return (axis + indices[0], out_rank), None
    return None, None


def _matmul(s):
    """MatMul and its quantized forms: batch-dependent when they contract over the batch's axis."""
    inputs, ins, data, out_rank = s.inputs, s.ins, s.data, s.out_rank
    if len(inputs) <= 1:
        return _elementwise(s)
    a_rank, b_rank = s.scope.rank(inputs[0]), s.scope.rank(inputs[1])
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


def _gemm(s):
    trans_a, trans_b = attr(s.node, "transA", 0), attr(s.node, "transB", 0)
    if s.data is not None:
        contracted = 0 if trans_a else 1
        if s.data[0] == contracted:
            return None, s.data[0]
        return (0, 2), None
    other = s.ins[1] if len(s.ins) > 1 else None
    if other is not None:
        contracted = 1 if trans_b else 0
        if other[0] == contracted:
            return None, other[0]
        return (1, 2), None
    return None, None


def _elementwise(s):
    """Element-wise and the rest: the first carrying data input's axis, aligned from the right."""
    carriers = [(i, c) for i, c in enumerate(s.ins) if c is not None and (s.op not in _FIRST_ONLY or i == 0)]
    if not carriers:
        return None, None
    index, (b, rank) = carriers[0]
    rank = rank if rank is not None else s.scope.rank(s.inputs[index])
    if rank is not None and s.out_rank is not None:
        return (b + s.out_rank - rank, s.out_rank), None
    return (b, s.out_rank), None


# op type -> its shape rule: (carry state of the outputs, the batch axis it mixes); _elementwise otherwise
_RULES = dict(
    [(op, _reduce) for op in _REDUCE | _ARG] + [(op, _along) for op in _ALONG]
    + [(op, _normalization) for op in ("MeanVarianceNormalization", "LayerNormalization", "GroupNormalization")]
    + [(op, _matmul) for op in ("MatMul", "MatMulInteger", "QLinearMatMul")]
    + [("Transpose", _transpose), ("Unsqueeze", _unsqueeze), ("Squeeze", _squeeze), ("Flatten", _flatten),
       ("Reshape", _reshape), ("Gather", _gather), ("Gemm", _gemm)])
