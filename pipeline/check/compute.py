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

from pipeline.graph.tf_attrs import decode_node_def_attrs, decode_tf_attr

MINIMUM_SEGMENT_SIZE = 3  # TrtGraphConverterV2's default
_BOOKKEEPING = frozenset(["Placeholder", "Const", "Identity", "NoOp"])
_CONV = frozenset(["Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "Conv3D", "MatMul", "BatchMatMul",
                   "BatchMatMulV2", "BatchMatMulV3", "_FusedConv2D", "_FusedMatMul"])
_WINDOW = frozenset(["Conv2D", "DepthwiseConv2dNative", "_FusedConv2D", "MaxPool", "AvgPool"])
# ops whose output has the shape of their first input
_SAME_SHAPE = frozenset([
    "Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Sigmoid", "Tanh", "Softmax", "Softplus", "Swish", "Identity",
    "BiasAdd", "Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "FusedBatchNorm", "FusedBatchNormV2",
    "FusedBatchNormV3", "Rsqrt", "Sqrt", "Square", "Abs", "Neg", "Exp", "Log", "Cast", "Floor", "SelectV2", "Select",
    "StopGradient", "ClipByValue", "Dropout", "Cumsum", "Cumprod", "Pow", "SquaredDifference", "Softsign",
    "Reciprocal", "Erf", "Gelu", "HardSwish", "Round", "Ceil", "Sign", "LRN", "FloorDiv", "FloorMod", "Mod",
    "AddN", "PreventGradient", "CheckNumerics", "Snapshot",
])
# ops whose output shape _Shapes follows from their first input's
_FOLLOWS = _SAME_SHAPE | _WINDOW | frozenset(["Pad", "MirrorPad", "PadV2", "Mean", "ConcatV2"])


def tftrt_share(graph, supported, skip=frozenset()):
    """{"nodes", "compute": shares in 0..1, "segments": engines, "flops": total estimate,
    "estimated": whether some conv's size was guessed}. ``supported(op)``: TF-TRT converts it."""
    work = [n for n in graph.nodes.values() if n.op not in _BOOKKEEPING and n.name not in skip]
    groups = [g for g in _components(graph, [n for n in work if supported(n.op)])
              if len(g) >= MINIMUM_SEGMENT_SIZE]
    in_trt = {n for group in groups for n in group}
    shapes = _Shapes(graph)
    total_flops, trt_flops, convs = 0, 0, set()
    for node in work:
        if node.op not in _CONV:
            continue
        convs.add(node.name)
        shapes.get(node.name)  # every conv's output size is followed: an unknown one makes the share estimated
        flops = _flops(graph, node, shapes)
        total_flops += flops
        if node.name in in_trt:
            trt_flops += flops
    estimated = bool(shapes.guessed & convs)
    return {
        "nodes": round(len(in_trt) / len(work), 4) if work else 1.0,
        "compute": round(trt_flops / total_flops, 4) if total_flops else (round(len(in_trt) / len(work), 4) if work else 1.0),
        "flops": total_flops,
        "segments": len(groups),
        "estimated": estimated or not total_flops,
    }


def _components(graph, members):
    """Connected components (data edges, either direction) of the nodes ``members`` (a list of
    Nodes in graph order), each a list of names in that order; components in the order of their
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
            j = get(tensor.lstrip("^").partition(":")[0] if tensorflow else producer_name(tensor))
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


def _raw_attrs(node):
    """The NodeDef's attribute map of a TF node not decoded yet, else None (then use node.attrs)."""
    source = node.__dict__.get("_attr_source")
    if source is None or source[0] is not decode_node_def_attrs:
        return None
    return source[1].attr


def _raw_attr(raw, key, default):
    """``_attr`` on a raw attribute map (see ``_raw_attrs``)."""
    value = raw.get(key)
    if value is None:
        return default
    return _decode_small(value)


def _decode_small(value):
    kind = value.WhichOneof("value")
    if kind == "s":
        try:
            return value.s.decode("utf-8")
        except UnicodeDecodeError:
            return value.s
    if kind == "list" and value.list.i:
        return list(value.list.i)
    return decode_tf_attr(value)


_MISS = object()
_SMALL_KINDS = (str, bytes, int, float, bool)


def _small_attr(raw, key, default, cache):
    """``_raw_attr`` for an attribute with a small value (a conv's strides, padding, data format):
    decoded once per distinct serialized AttrValue (``cache``), as 200,000-node graphs repeat a few."""
    value = raw.get(key)
    if value is None:
        return default
    data = value.SerializeToString()
    hit = cache.get(data, _MISS)
    if hit is _MISS:
        hit = _decode_small(value)
        if not (isinstance(hit, _SMALL_KINDS) or (type(hit) is list and all(type(v) is int for v in hit))):
            return hit
        cache[data] = hit
    return list(hit) if type(hit) is list else hit


def _attr(node, key, default=None):
    """``node.attrs.get(key, default)``, decoding only that attribute while the node is still
    undecoded (a conv's strides need not decode its other attributes). Strings and int lists,
    what a conv's attributes are, are read straight from the protobuf; anything else goes
    through ``decode_tf_attr``, so the value is the one ``node.attrs`` would hold."""
    raw = _raw_attrs(node)
    if raw is None:
        return node.attrs.get(key, default)
    return _raw_attr(raw, key, default)


def _flops(graph, node, shapes):
    if node.op not in _CONV:
        return 0
    kernel = shapes.const_shape(node.inputs[1]) if len(node.inputs) > 1 else None
    if not kernel:
        return 0
    if node.op.startswith(("MatMul", "BatchMatMul", "_FusedMatMul")):
        k, n = (kernel[-2], kernel[-1]) if len(kernel) >= 2 else (kernel[0], 1)
        if _attr(node, "transpose_b") or _attr(node, "adj_y"):
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


def _producer(graph, tensor):
    """graph.producer(tensor), the TensorFlow case inlined."""
    if graph.kind == "tensorflow":
        return graph.nodes.get(tensor.lstrip("^").partition(":")[0])
    return graph.producer(tensor)


def _const_shape(graph, tensor, dims_cache=None):
    node = _producer(graph, tensor)
    while node is not None and node.op == "Identity" and node.inputs:
        node = _producer(graph, node.inputs[0])
    if node is None or node.op != "Const":
        return None
    raw = _raw_attrs(node)
    if raw is not None:  # still raw: the shape without the values
        value = raw.get("value")
        if value is not None and value.WhichOneof("value") == "tensor":
            shape = value.tensor.tensor_shape
            if dims_cache is None:
                dims = [d.size for d in shape.dim]
                return dims if all(d >= 0 for d in dims) else None
            key = shape.SerializeToString()  # a graph's kernels have a few distinct shapes
            dims = dims_cache.get(key, _MISS)
            if dims is _MISS:
                dims = [d.size for d in shape.dim]
                dims = dims_cache[key] = dims if all(d >= 0 for d in dims) else None
            return list(dims) if dims is not None else None
        shape = getattr(_raw_attr(raw, "value", None), "shape", None)
    else:
        shape = getattr(node.attrs.get("value"), "shape", None)
    return [int(d) for d in shape] if shape is not None and all(isinstance(d, int) and d >= 0 for d in shape) else None


class _Shapes:
    """{node name: [N, H, W, C] or other dims (None unknown)} for port 0 of the nodes it can
    follow, computed on demand (``get``): only the convs' chains of first inputs back to a graph
    input are followed, not the whole graph. ``guessed``: the convs whose spatial input size was
    not known."""

    def __init__(self, graph):
        self.graph = graph
        self.known = {}
        self.guessed = set()
        self.consts = {}
        self.dims_cache, self.attr_cache = {}, {}  # see _const_shape, _small_attr
        for name, dims in (graph.input_shapes or {}).items():
            if isinstance(dims, list):
                self.known[graph.producer_name(name)] = list(dims)

    def get(self, name):
        known = self.known
        if name in known:
            return known[name]
        graph = self.graph
        nodes = graph.nodes
        tensorflow = graph.kind == "tensorflow"
        producer_name = graph.producer_name
        follows, same_shape = _FOLLOWS, _SAME_SHAPE
        chain, on_chain = [], set()  # (node, name of its first input's producer)
        while name is not None and name not in known and name in nodes and name not in on_chain:
            node = nodes[name]
            on_chain.add(name)
            inputs = node.inputs
            first = inputs[0] if inputs else None
            if first:
                name = first.lstrip("^").partition(":")[0] if tensorflow else producer_name(first)
            else:
                name = None
            chain.append((node, name))
            if node.op not in follows:
                break  # its shape does not depend on its input's: nothing further back is needed
        if not chain:
            return known.get(name)
        for node, source in reversed(chain):
            first = known.get(source) if source is not None else None
            known[node.name] = first if node.op in same_shape else self._shape(node, first)
        return known.get(chain[0][0].name)

    def const_shape(self, tensor):
        """_const_shape, once per tensor (a conv's kernel is asked for its output size and its FLOPs)."""
        consts = self.consts
        if tensor in consts:
            return consts[tensor]
        shape = consts[tensor] = _const_shape(self.graph, tensor, self.dims_cache)
        return shape

    def _shape(self, node, first):
        graph = self.graph
        out = None
        try:
            if node.op in _SAME_SHAPE:
                out = first
            elif node.op in _WINDOW:
                out = _window(node, first, self.const_shape(node.inputs[1]) if len(node.inputs) > 1 else None,
                              self.attr_cache)
                if node.op not in ("MaxPool", "AvgPool") and (out is None or None in out[1:3]):
                    self.guessed.add(node.name)
            elif node.op in ("Pad", "MirrorPad", "PadV2") and first and len(first) == 4:
                pads = _const_ints(graph, node.inputs[1])
                if pads and len(pads) == 8:
                    out = [d + pads[2 * i] + pads[2 * i + 1] if d is not None else None for i, d in enumerate(first)]
            elif node.op == "Mean" and first and len(first) == 4:
                axes = _const_ints(graph, node.inputs[1]) or []
                keep = _attr(node, "keep_dims")
                out = [1 if i in axes else d for i, d in enumerate(first)] if keep else \
                    [d for i, d in enumerate(first) if i not in axes]
            elif node.op == "ConcatV2" and first:
                out = first
        except (TypeError, ValueError, IndexError, AttributeError):
            out = None
        return out


def _const_ints(graph, tensor):
    node = _producer(graph, tensor)
    if node is None or node.op != "Const":
        return None
    value = _attr(node, "value")
    return value.ints() if value is not None else None


def _window(node, inp, kernel, cache=None):
    """Output NHWC of a conv or pool from its input, strides, padding and window (``cache``: see
    _small_attr)."""
    if not inp or len(inp) != 4:
        return None
    raw = _raw_attrs(node)
    if raw is None:
        attrs = node.attrs

        def attr(key, default=None):
            return attrs.get(key, default)
    else:
        cache = {} if cache is None else cache

        def attr(key, default=None):
            return _small_attr(raw, key, default, cache)
    if attr("data_format", "NHWC") not in ("NHWC", b"NHWC"):
        return None
    strides = attr("strides") or [1, 1, 1, 1]
    if node.op in ("MaxPool", "AvgPool"):
        ksize = attr("ksize") or [1, 1, 1, 1]
        kh, kw, channels = ksize[1], ksize[2], inp[3]
    else:
        if not kernel or len(kernel) != 4:
            return None
        kh, kw = kernel[0], kernel[1]
        channels = kernel[3] if node.op != "DepthwiseConv2dNative" else (inp[3] * kernel[3] if inp[3] else None)
    padding = attr("padding", "SAME")
    dims = []
    for size, k, s in ((inp[1], kh, strides[1]), (inp[2], kw, strides[2])):
        if size is None:
            dims.append(None)
        elif padding == "VALID":
            dims.append((size - k) // s + 1)
        else:
            dims.append(-(-size // s))
    return [inp[0], dims[0], dims[1], channels]
