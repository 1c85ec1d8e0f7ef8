"""How much of a TensorFlow graph TF-TRT would hand to TensorRT: by nodes and by compute.

TF-TRT (TrtGraphConverterV2) puts connected clusters of nodes it can convert into TensorRT
engines when a cluster has at least ``minimum_segment_size`` (3) nodes; everything else runs in
TensorFlow. The share of compute is estimated from the multiply-adds of convolutions and matrix
products (2 FLOPs each), the ops that dominate vision models, with shapes propagated from the
inputs through the common NHWC ops:

    share = tftrt_share(graph, supported)   # {"nodes": 0.93, "compute": 0.99, "flops": ..., ...}

A conv whose spatial size cannot be followed (dynamic input size, an unmodelled op on the way)
counts one output position, and the share says ``estimated: true``.
"""

MINIMUM_SEGMENT_SIZE = 3  # TrtGraphConverterV2's default
_BOOKKEEPING = frozenset(["Placeholder", "Const", "Identity", "NoOp"])
_CONV = frozenset(["Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv3D", "MatMul", "BatchMatMul",
                   "BatchMatMulV2", "BatchMatMulV3", "_FusedConv2D", "_FusedMatMul"])
# ops whose output has the shape of their first input
_SAME_SHAPE = frozenset([
    "Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Sigmoid", "Tanh", "Softmax", "Softplus", "Swish", "Identity",
    "BiasAdd", "Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "FusedBatchNorm", "FusedBatchNormV2",
    "FusedBatchNormV3", "Rsqrt", "Sqrt", "Square", "Abs", "Neg", "Exp", "Log", "Cast", "Floor", "SelectV2", "Select",
    "StopGradient", "ClipByValue", "Dropout", "Cumsum", "Cumprod", "Pow", "SquaredDifference", "Softsign",
    "Reciprocal", "Erf", "Gelu", "HardSwish", "Round", "Ceil", "Sign", "LRN", "FloorDiv", "FloorMod", "Mod",
    "AddN", "PreventGradient", "CheckNumerics", "Snapshot",
])


def tftrt_share(graph, supported, skip=frozenset()):
    """{"nodes", "compute": shares in 0..1, "segments": engines, "flops": total estimate,
    "estimated": whether some conv's size was guessed}. ``supported(op)``: TF-TRT converts it."""
    shapes, guessed = _propagate_shapes(graph)
    work = [n for n in graph.nodes.values() if n.op not in _BOOKKEEPING and n.name not in skip]
    in_trt = _segments(graph, {n.name for n in work if supported(n.op)})
    total_flops, trt_flops = 0, 0
    for node in work:
        flops = _flops(graph, node, shapes)
        total_flops += flops
        if node.name in in_trt:
            trt_flops += flops
    return {
        "nodes": round(len(in_trt) / len(work), 4) if work else 1.0,
        "compute": round(trt_flops / total_flops, 4) if total_flops else (round(len(in_trt) / len(work), 4) if work else 1.0),
        "flops": total_flops,
        "segments": len(_components(graph, in_trt)),
        "estimated": bool(guessed & {n.name for n in work if n.op in _CONV}) or not total_flops,
    }


def _components(graph, names):
    """Connected components (data edges, either direction) of the nodes ``names``."""
    parent = {n: n for n in names}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for name in names:
        for tensor in graph.nodes[name].inputs:
            src = graph.producer_name(tensor) if tensor else None
            if src in parent:
                a, b = find(name), find(src)
                if a != b:
                    parent[a] = b
    groups = {}
    for name in names:
        groups.setdefault(find(name), []).append(name)
    return list(groups.values())


def _segments(graph, convertible):
    """The convertible nodes in clusters big enough to become TensorRT engines."""
    return {n for group in _components(graph, convertible) if len(group) >= MINIMUM_SEGMENT_SIZE for n in group}


def _flops(graph, node, shapes):
    if node.op not in _CONV:
        return 0
    kernel = _const_shape(graph, node.inputs[1]) if len(node.inputs) > 1 else None
    if not kernel:
        return 0
    if node.op.startswith(("MatMul", "BatchMatMul", "_FusedMatMul")):
        k, n = (kernel[-2], kernel[-1]) if len(kernel) >= 2 else (kernel[0], 1)
        if node.attrs.get("transpose_b") or node.attrs.get("adj_y"):
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


def _const_shape(graph, tensor):
    node = graph.producer(tensor)
    while node is not None and node.op == "Identity" and node.inputs:
        node = graph.producer(node.inputs[0])
    if node is None or node.op != "Const":
        return None
    value = node.attrs.get("value")
    shape = getattr(value, "shape", None)
    return [int(d) for d in shape] if shape is not None and all(isinstance(d, int) and d >= 0 for d in shape) else None


def _propagate_shapes(graph):
    """{node name: [N, H, W, C] or other dims (None unknown)} for port 0 of the nodes it can
    follow, and the set of conv nodes whose spatial input size was not known."""
    shapes, guessed = {}, set()
    for name, dims in (graph.input_shapes or {}).items():
        if isinstance(dims, list):
            shapes[graph.producer_name(name)] = list(dims)
    for node in graph.topological_order():
        if node.name in shapes:
            continue
        first = shapes.get(graph.producer_name(node.inputs[0])) if node.inputs and node.inputs[0] else None
        out = None
        try:
            if node.op in _SAME_SHAPE:
                out = first
            elif node.op in ("Conv2D", "DepthwiseConv2dNative", "_FusedConv2D", "MaxPool", "AvgPool"):
                out = _window(node, first, _const_shape(graph, node.inputs[1]) if len(node.inputs) > 1 else None)
                if node.op not in ("MaxPool", "AvgPool") and (out is None or None in out[1:3]):
                    guessed.add(node.name)
            elif node.op in ("Pad", "MirrorPad", "PadV2") and first and len(first) == 4:
                pads = _const_ints(graph, node.inputs[1])
                if pads and len(pads) == 8:
                    out = [d + pads[2 * i] + pads[2 * i + 1] if d is not None else None for i, d in enumerate(first)]
            elif node.op == "Mean" and first and len(first) == 4:
                axes = _const_ints(graph, node.inputs[1]) or []
                keep = node.attrs.get("keep_dims")
                out = [1 if i in axes else d for i, d in enumerate(first)] if keep else \
                    [d for i, d in enumerate(first) if i not in axes]
            elif node.op == "ConcatV2" and first:
                out = first
        except (TypeError, ValueError, IndexError, AttributeError):
            out = None
        if out is not None:
            shapes[node.name] = out
    return shapes, guessed


def _const_ints(graph, tensor):
    node = graph.producer(tensor)
    if node is None or node.op != "Const":
        return None
    value = node.attrs.get("value")
    return value.ints() if value is not None else None


def _window(node, inp, kernel):
    """Output NHWC of a conv or pool from its input, strides, padding and window."""
    if not inp or len(inp) != 4:
        return None
    if node.attrs.get("data_format", "NHWC") not in ("NHWC", b"NHWC"):
        return None
    strides = node.attrs.get("strides") or [1, 1, 1, 1]
    if node.op in ("MaxPool", "AvgPool"):
        ksize = node.attrs.get("ksize") or [1, 1, 1, 1]
        kh, kw, channels = ksize[1], ksize[2], inp[3]
    else:
        if not kernel or len(kernel) != 4:
            return None
        kh, kw = kernel[0], kernel[1]
        channels = kernel[3] if node.op != "DepthwiseConv2dNative" else (inp[3] * kernel[3] if inp[3] else None)
    padding = node.attrs.get("padding", "SAME")
    dims = []
    for size, k, s in ((inp[1], kh, strides[1]), (inp[2], kw, strides[2])):
        if size is None:
            dims.append(None)
        elif padding == "VALID":
            dims.append((size - k) // s + 1)
        else:
            dims.append(-(-size // s))
    return [inp[0], dims[0], dims[1], channels]
