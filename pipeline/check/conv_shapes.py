"""Output shapes followed from a TensorFlow graph's inputs through the common NHWC ops, for the
TF-TRT share's compute estimate (pipeline.check.compute): each conv's and pool's output size from
its input, kernel, strides and padding, read straight from the protobuf without decoding a node's
other attributes or a constant's values.

    shapes = Shapes(graph)
    shapes.fill_in_file_order()         # every node in one pass (graphs written producers first)
    shapes.get("conv1/Conv2D")          # [N, H, W, C] (None: unknown); a conv not followed -> shapes.guessed
    shapes.const_shape("conv1/kernel")  # a constant's dims without its values
"""

from pipeline.graph.tf_attrs import decode_node_def_attrs, decode_tf_attr

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
# ops whose output shape Shapes follows from their first input's
_FOLLOWS = _SAME_SHAPE | _WINDOW | frozenset(["Pad", "MirrorPad", "PadV2", "Mean", "ConcatV2"])


def _raw_attrs(node):
    """The NodeDef's attribute map of a TF node not decoded yet, else None (then use node.attrs)."""
    source = node.__dict__.get("_attr_source")
    if source is None or source[0] is not decode_node_def_attrs:
        return None
    return source[1].attr


def _raw_attr(raw, key, default):
    """``node_attr`` on a raw attribute map (see ``_raw_attrs``)."""
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


def node_attr(node, key, default=None):
    """``node.attrs.get(key, default)``, decoding only that attribute while the node is still
    undecoded (a conv's strides need not decode its other attributes). Strings and int lists,
    what a conv's attributes are, are read straight from the protobuf; anything else goes
    through ``decode_tf_attr``, so the value is the one ``node.attrs`` would hold."""
    raw = _raw_attrs(node)
    if raw is None:
        return node.attrs.get(key, default)
    return _raw_attr(raw, key, default)


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


class Shapes:
    """{node name: [N, H, W, C] or other dims (None unknown)} for port 0 of the nodes it can
    follow, computed on demand (``get``): only the convs' chains of first inputs back to a graph
    input are followed, not the whole graph. ``guessed``: the convs whose spatial input size was
    not known."""

    def __init__(self, graph):
        self.graph = graph
        self.known = {}
        self.guessed = set()
        self.consts = {}
        self.dims_cache, self.attr_cache = {}, {}  # see _const_shape, _window_attrs
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

    def fill_in_file_order(self):
        """Every node's shape in one pass, when each node's first input comes earlier in the file (as
        graphs are written; a 200,000-node graph costs a fraction of following each conv's chain):
        True. Else (a forward reference: a loop's back edge, a hand-ordered file) False, nothing
        kept, and ``get`` follows chains on demand."""
        graph = self.graph
        if graph.kind != "tensorflow":
            return False
        nodes = graph.nodes
        filled = dict(self.known)
        guessed = set(self.guessed)
        same_shape, follows, shape = _SAME_SHAPE, _FOLLOWS, self._shape
        for name, node in nodes.items():
            if name in filled:  # a graph input's shape, from the file
                continue
            first = None
            inputs = node.inputs
            if inputs:
                source = inputs[0]
                if ":" in source or "^" in source:
                    source = source.lstrip("^").partition(":")[0]
                if source in filled:
                    first = filled[source]
                elif source in nodes:  # its producer comes later: this pass cannot know it yet
                    self.guessed = guessed
                    return False
            op = node.op
            if op in same_shape:
                filled[name] = first
            elif op in follows:
                filled[name] = shape(node, first)
            else:
                filled[name] = None
        self.known = filled
        return True

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
                keep = node_attr(node, "keep_dims")
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
    value = node_attr(node, "value")
    return value.ints() if value is not None else None


def _window(node, inp, kernel, cache=None):
    """Output NHWC of a conv or pool from its input, strides, padding and window (``cache``: see
    _window_attrs)."""
    if not inp or len(inp) != 4:
        return None
    pool = node.op in ("MaxPool", "AvgPool")
    raw = _raw_attrs(node)
    if raw is None:
        attrs = node.attrs
        data_format, strides, padding, ksize = (attrs.get("data_format", "NHWC"), attrs.get("strides"),
                                                attrs.get("padding", "SAME"), attrs.get("ksize") if pool else None)
    else:
        data_format, strides, padding, ksize = _window_attrs(raw, pool, {} if cache is None else cache)
    if data_format not in ("NHWC", b"NHWC"):
        return None
    strides = strides or [1, 1, 1, 1]
    if pool:
        ksize = ksize or [1, 1, 1, 1]
        kh, kw, channels = ksize[1], ksize[2], inp[3]
    else:
        if not kernel or len(kernel) != 4:
            return None
        kh, kw = kernel[0], kernel[1]
        channels = kernel[3] if node.op != "DepthwiseConv2dNative" else (inp[3] * kernel[3] if inp[3] else None)
    dims = []
    for size, k, s in ((inp[1], kh, strides[1]), (inp[2], kw, strides[2])):
        if size is None:
            dims.append(None)
        elif padding == "VALID":
            dims.append((size - k) // s + 1)
        else:
            dims.append(-(-size // s))
    return [inp[0], dims[0], dims[1], channels]


def _window_attrs(raw, pool, cache):
    """(data_format, strides, padding, ksize) of a raw attribute map, defaults for the missing,
    decoded once per distinct serialized set (``cache``): a 200,000-node graph repeats a few."""
    get = raw.get
    fmt, strides, padding = get("data_format"), get("strides"), get("padding")
    ksize = get("ksize") if pool else None
    key = (fmt.SerializeToString() if fmt is not None else None,
           strides.SerializeToString() if strides is not None else None,
           padding.SerializeToString() if padding is not None else None,
           ksize.SerializeToString() if ksize is not None else None)
    hit = cache.get(key)
    if hit is None:
        hit = (_decode_small(fmt) if fmt is not None else "NHWC",
               _decode_small(strides) if strides is not None else None,
               _decode_small(padding) if padding is not None else "SAME",
               _decode_small(ksize) if ksize is not None else None)
        hit = tuple(tuple(v) if type(v) is list else v for v in hit)  # shared between nodes: never changed
        cache[key] = hit
    return hit
