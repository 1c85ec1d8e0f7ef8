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
    by_conv, guessed = (flops.result() if flops is not None else None) or conv_flops(graph)
    if skip:
        by_conv = {name: f for name, f in by_conv.items() if name not in skip}
    estimated = bool(guessed) and any(name in guessed for name in by_conv)
    total_flops = sum(by_conv.values())
    trt_flops = sum(f for name, f in by_conv.items() if name in in_trt)
    return {
        "nodes": round(len(in_trt) / work, 4) if work else 1.0,
        "compute": round(trt_flops / total_flops, 4) if total_flops else (round(len(in_trt) / work, 4) if work else 1.0),
        "flops": total_flops,
        "segments": len(groups),
        "estimated": estimated or not total_flops,
    }


def conv_flops(graph):
    """({name: FLOPs} of every conv and matrix product, the names of those whose spatial size was
    guessed): the compute half of tftrt_share, which needs nothing of the clusters or of what the
    check skips (tftrt_share leaves those out), so it can run on its own (pipeline.check.background)."""
    shapes = Shapes(graph)
    shapes.fill_in_file_order()
    by_conv = {}
    conv_ops = _CONV
    for node in graph.nodes.values():
        if node.op in conv_ops:
            by_conv[node.name] = _flops(graph, node, shapes)  # follows its output size: unknown -> guessed
    return by_conv, {name for name in shapes.guessed if name in by_conv}


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
    kernel = shapes.const_shape(node.inputs[1]) if len(node.inputs) > 1 else None
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
