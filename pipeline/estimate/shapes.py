"""Every tensor's shape, followed from the graph's inputs, for the engine model (pipeline.estimate.layers).

    shapes = tensor_shapes(graph, overrides={"input:0": [1, 224, 224, 3]})
    shapes.get(graph, "conv1/Conv2D")     # [1, 112, 112, 64]; None where it cannot be followed

TensorFlow graphs are NHWC unless a node says ``data_format: NCHW``; ONNX graphs are NCHW. A graph
input's unknown first dimension is the batch and reads as 1 (the estimate scales by ``--batch``);
any other unknown dimension of an input is a DeployError naming the input and ``--input-shape``.
Small integer tensors (a Reshape's target shape, through Shape / StridedSlice / Pack / Concat /
Gather of constants) are evaluated, so Keras' Flatten, frozen, keeps its shape.
"""

from pipeline.errors import DeployError
from pipeline.estimate.shape_ops import broadcast, ints_of, reshape_dims, small, window
from pipeline.graph.tf_attrs import decode_node_def_attrs, decode_tf_attr

_DTYPES = {1: "float32", 3: "int32", 9: "int64", 19: "float16"}  # TensorFlow's DataType numbers

SKIP = frozenset(["NoOp", "Assert", "SaveV2", "RestoreV2"])


def tensor_key(graph, tensor):
    """One name per tensor: TF "node" for port 0, "node:k" else; ONNX value names as they are."""
    if graph.kind != "tensorflow" or (":" not in tensor and "^" not in tensor):
        return tensor
    tensor = tensor.lstrip("^")
    return tensor[:-2] if tensor.endswith(":0") else tensor


def input_dims(graph, overrides=None):
    """{input tensor key: dims (ints, batch 1)} of the graph's inputs; DeployError for an unknown dim."""
    overrides = {tensor_key(graph, k): v for k, v in (overrides or {}).items()}
    known = {tensor_key(graph, name): name for name in graph.inputs}
    stray = [k for k in overrides if k not in known and k + ":0" not in known and k.partition(":")[0] not in known]
    if stray:
        raise DeployError("--input-shape {}: the graph has no such input (inputs: {})".format(
            stray[0], ", ".join(graph.inputs) or "none"))
    dims = {}
    for key, name in known.items():
        given = overrides.get(key, overrides.get(key.partition(":")[0]))
        if given is not None:
            dims[key] = list(given)
            continue
        shape = (graph.input_shapes or {}).get(name)
        if shape is None:
            raise DeployError("input {!r} has no shape in the model (unknown rank); give it a fixed shape: "
                              "deploy estimate MODEL --input-shape {}=1,224,224,3".format(name, key))
        fixed = []
        for i, d in enumerate(shape):
            if isinstance(d, int) and d > 0:
                fixed.append(d)
            elif i == 0:
                fixed.append(1)  # the batch: the estimate scales by --batch
            else:
                raise DeployError("input {!r} has an unknown dimension {} (shape {}); the estimate needs a fixed "
                                  "shape: deploy estimate MODEL --input-shape {}={}".format(
                                      name, i, _show(shape), key, ",".join(str(x if isinstance(x, int) and x > 0
                                                                               else (1 if j == 0 else 224))
                                                                           for j, x in enumerate(shape))))
        dims[key] = fixed
    return dims


def node_attr(node, key, default=None):
    """``node.attrs.get(key, default)``, decoding only that attribute of a TF node not decoded yet (a
    200,000-node graph is estimated without decoding every attribute of every node)."""
    source = node.__dict__.get("_attr_source")
    if source is None or source[0] is not decode_node_def_attrs:
        return node.attrs.get(key, default)
    value = source[1].attr.get(key)
    return default if value is None else decode_tf_attr(value)


def const_shape(node, cache=None):
    """A TF Const's dims and dtype without decoding its values: ([dims], dtype name) or (None, None).
    ``cache``: {serialized shape: dims}, for a graph whose kernels have a few distinct shapes."""
    source = node.__dict__.get("_attr_source")
    if source is None or source[0] is not decode_node_def_attrs:
        value = node.attrs.get("value")
        return (list(value.shape), value.dtype) if value is not None and value.shape is not None else (None, None)
    value = source[1].attr.get("value")
    if value is None:
        return None, None
    tensor = value.tensor  # an AttrValue holding something else gives an empty TensorProto: dtype 0
    dtype = tensor.dtype
    if not dtype and value.WhichOneof("value") != "tensor":
        return None, None
    if cache is None:
        dims = [d.size for d in tensor.tensor_shape.dim]
        return (dims if all(d >= 0 for d in dims) else None), _DTYPES.get(dtype)
    key = tensor.tensor_shape.SerializeToString()
    dims = cache.get(key, False)
    if dims is False:
        dims = [d.size for d in tensor.tensor_shape.dim]
        dims = cache[key] = dims if all(d >= 0 for d in dims) else None
    return (list(dims) if dims is not None else None), _DTYPES.get(dtype)


def _show(shape):
    return "[" + ", ".join("?" if not (isinstance(d, int) and d > 0) else str(d) for d in shape) + "]"


class Shapes:
    """Shapes of tensors (keys: ``tensor_key``) and small integer values (``ints``)."""

    def __init__(self, graph):
        self.graph = graph
        self.dims = {}
        self.ints = {}
        self.window_cache = {}  # const_shape's: {serialized TensorShapeProto: dims}
        self.attr_cache = {}  # _window_attrs': {attr_bytes: decoded attributes}
        self._plain = graph.kind != "tensorflow"  # every name is its own key (ONNX)

    def of(self, tensor):
        if not tensor:
            return None
        if self._plain or (":" not in tensor and "^" not in tensor):  # tensor_key's own answer, without the call
            return self.dims.get(tensor)
        return self.dims.get(tensor_key(self.graph, tensor))

    def value(self, tensor):
        if not tensor:
            return None
        if self._plain or (":" not in tensor and "^" not in tensor):
            return self.ints.get(tensor)
        return self.ints.get(tensor_key(self.graph, tensor))


def tensor_shapes(graph, order, overrides=None):
    """Shapes of every tensor ``order`` (the graph's nodes, producers first) lets it follow."""
    shapes = Shapes(graph)
    shapes.dims.update(input_dims(graph, overrides))
    if graph.kind == "onnx":
        for name, tv in (graph.initializers or {}).items():
            shapes.dims[name] = list(tv.shape)
            if tv.dtype in ("int32", "int64") and small(tv.shape):
                shapes.ints[name] = ints_of(tv)
    if graph.kind != "onnx":
        _follow_tf(shapes, order)
        return shapes
    from pipeline.estimate.onnx_shapes import infer_onnx

    for node in order:
        if node.op in SKIP:
            continue
        try:
            infer_onnx(shapes, node)
        except _ERRORS:
            pass  # left unknown: the layer says so
    return shapes


_ERRORS = (TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError)


def _follow_tf(shapes, order):
    """_infer_tf over ``order``, with its two commonest cases inline (a 200,000-node frozen graph is 40%
    Consts and 40% ops whose output has their input's shape): a Const's dims read as const_shape reads them,
    a _TF_SAME op's (not one that also passes small integers on) its first input's."""
    dims, of, cache = shapes.dims, shapes.of, shapes.window_cache
    ints = shapes.ints
    for node in order:
        op = node.op
        try:
            if op == "Const":
                shape, dtype = const_shape(node, cache)
                if shape is not None:
                    dims[node.name] = shape
                    if dtype in ("int32", "int64") and small(shape):
                        ints[node.name] = ints_of(node_attr(node, "value"))
            elif op in _TF_SAME_ONLY:
                ins = node.inputs
                if ins:
                    t = ins[0]  # of(t) inlined for a plain name
                    dims[node.name] = dims.get(t) if t and ":" not in t and "^" not in t else of(t)
                else:
                    dims[node.name] = None
            elif op not in SKIP:
                _infer_tf(shapes, node)
        except _ERRORS:
            pass  # left unknown: the layer says so


# ---------------------------------------------------------------------------------------------- TensorFlow

_TF_SAME = frozenset([
    "Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Sigmoid", "Tanh", "Softmax", "Softplus", "Swish", "Identity",
    "BiasAdd", "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "Rsqrt", "Sqrt", "Square", "Abs", "Neg",
    "Exp", "Log", "Cast", "Floor", "StopGradient", "ClipByValue", "Softsign", "Reciprocal", "Erf", "Gelu",
    "HardSwish", "Round", "Ceil", "Sign", "LRN", "Snapshot", "PreventGradient", "CheckNumerics", "LogSoftmax",
])
# _TF_SAME ops that do not pass small integer values on
_TF_SAME_ONLY = _TF_SAME - frozenset(["Identity", "Snapshot", "Cast", "StopGradient"])
_TF_BINARY = frozenset(["Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum", "Pow",
                        "SquaredDifference", "FloorDiv", "FloorMod", "BiasAddV1", "DivNoNan"])


def _infer_tf(shapes, node):
    op, dims = node.op, shapes.dims
    key = node.name
    if op == "Const":  # the weights: most nodes of a frozen graph, and they have no input to look up
        shape, dtype = const_shape(node, shapes.window_cache)
        if shape is not None:
            dims[key] = shape
            if dtype in ("int32", "int64") and small(shape):
                shapes.ints[key] = ints_of(node_attr(node, "value"))
        return
    ins = node.inputs
    first = shapes.of(ins[0]) if ins else None
    if op in ("VarHandleOp", "VariableV2"):  # a SavedModel's weights: the variable's declared shape
        shape = node_attr(node, "shape")
        if shape is not None and all(isinstance(d, int) and d >= 0 for d in shape):
            dims[key] = list(shape)
        return
    if op == "ReadVariableOp":
        dims[key] = first
        return
    if op in ("Placeholder", "PlaceholderWithDefault") and key not in dims:
        shape = node_attr(node, "shape")
        if shape and all(isinstance(d, int) and d > 0 for d in shape[1:]):
            dims[key] = [1] + list(shape[1:])
        return
    if op in _TF_SAME:
        dims[key] = first
        if op in ("Identity", "Snapshot", "Cast", "StopGradient") and ins:
            shapes.ints[key] = shapes.value(ins[0])
    elif op in _TF_BINARY:
        dims[key] = broadcast(first, shapes.of(ins[1]))
    elif op == "AddN":
        dims[key] = first
    elif op in ("Conv2D", "DepthwiseConv2dNative", "_FusedConv2D", "MaxPool", "AvgPool"):
        dims[key] = _tf_window(shapes, node, first)
    elif op in ("MatMul", "_FusedMatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        b = shapes.of(ins[1])
        ta = node_attr(node, "transpose_a") or node_attr(node, "adj_x")
        tb = node_attr(node, "transpose_b") or node_attr(node, "adj_y")
        m = first[-1] if ta else first[-2]
        n = b[-2] if tb else b[-1]
        dims[key] = list(first[:-2]) + [m, n]
    elif op in ("Mean", "Sum", "Max", "Min", "Prod"):
        axes = shapes.value(ins[1])
        axes = [a % len(first) for a in axes]
        if node_attr(node, "keep_dims"):
            dims[key] = [1 if i in axes else d for i, d in enumerate(first)]
        else:
            dims[key] = [d for i, d in enumerate(first) if i not in axes]
    elif op == "ConcatV2":
        axis = shapes.value(ins[-1])[0]
        parts = [shapes.of(t) for t in ins[:-1]]
        axis %= len(parts[0])
        out = list(parts[0])
        out[axis] = sum(p[axis] for p in parts)
        dims[key] = out
    elif op in ("Reshape",):
        dims[key] = reshape_dims(first, shapes.value(ins[1]))
    elif op == "Squeeze":
        axes = node_attr(node, "squeeze_dims") or []
        axes = [a % len(first) for a in axes]
        dims[key] = [d for i, d in enumerate(first) if (i not in axes if axes else d != 1)]
    elif op == "ExpandDims":
        axis = shapes.value(ins[1])[0]
        out = list(first)
        out.insert(axis % (len(first) + 1), 1)
        dims[key] = out
    elif op in ("Pad", "MirrorPad", "PadV2"):
        pads = shapes.value(ins[1])
        dims[key] = [d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(first)]
    elif op == "Transpose":
        perm = shapes.value(ins[1])
        dims[key] = [first[p] for p in perm]
    elif op in ("ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic"):
        size = shapes.value(ins[1])
        dims[key] = [first[0], size[0], size[1], first[3]]
    elif op == "Shape":
        dims[key] = [len(first)]
        shapes.ints[key] = list(first)
    elif op == "StridedSlice":
        shapes.ints[key] = _strided(shapes, node)
        dims[key] = [] if node_attr(node, "shrink_axis_mask") else [len(shapes.ints[key] or [])]
    elif op == "Pack":
        values = [shapes.value(t) for t in ins]
        if all(v is not None and len(v) == 1 for v in values):
            shapes.ints[key] = [v[0] for v in values]
        dims[key] = [len(ins)]


_WINDOW_KEYS = ("data_format", "strides", "dilations", "padding", "ksize", "explicit_paddings")


def _window_attrs(node, cache):
    """(data_format, strides, dilations, padding, ksize, explicit_paddings) of a conv or pool, decoded once
    per distinct set of attributes (a 200,000-node graph repeats a few): keyed by the NodeDef's attributes
    as bytes (attr_bytes: one serialization, where looking up six attributes took twice as long)."""
    source = node.__dict__.get("_attr_source")
    key = None
    if source is not None and source[0] is decode_node_def_attrs:
        key = attr_bytes(source[1])
        hit = cache.get(key)
        if hit is not None:
            return hit
    values = [node_attr(node, k) for k in _WINDOW_KEYS]
    values = tuple(v.decode() if isinstance(v, bytes) else v for v in values)
    if key is not None:
        cache[key] = values
    return values


_NODE_HEAD = (0x0A, 0x12, 0x1A, 0x22)  # NodeDef's name, op, input, device: length-delimited fields 1 to 4


def attr_bytes(node_def):
    """A NodeDef serialized (map keys sorted) without its leading name, op, inputs and device: equal bytes,
    equal attributes (the rest of the message is all there), whatever the node's name and inputs."""
    data = node_def.SerializeToString(deterministic=True)
    i, n = 0, len(data)
    while i < n and data[i] in _NODE_HEAD:
        length = data[i + 1]
        i += 2
        if length & 0x80:  # a varint of more than one byte
            length &= 0x7F
            shift = 7
            while True:
                byte = data[i]
                i += 1
                length |= (byte & 0x7F) << shift
                if not byte & 0x80:
                    break
                shift += 7
        i += length
    return data[i:]


def _tf_window(shapes, node, first):
    data_format, strides, dilations, padding, ksize, explicit = _window_attrs(node, shapes.attr_cache)
    nchw = data_format == "NCHW"
    h_axis, c_axis = (2, 1) if nchw else (1, 3)
    strides = strides or [1, 1, 1, 1]
    dilations = dilations or [1, 1, 1, 1]
    padding = padding or "SAME"
    if node.op in ("MaxPool", "AvgPool"):
        ksize = ksize or [1, 1, 1, 1]
        k, channels = (ksize[h_axis], ksize[h_axis + 1]), first[c_axis]
    else:
        kernel = shapes.of(node.inputs[1])
        k = (kernel[0], kernel[1])
        channels = kernel[3] if node.op != "DepthwiseConv2dNative" else first[c_axis] * kernel[3]
    explicit = explicit if padding == "EXPLICIT" else None
    out = list(first)
    for j in range(2):
        axis = h_axis + j
        total = explicit[2 * axis] + explicit[2 * axis + 1] if explicit else None
        out[axis] = window(first[axis], k[j], strides[axis], dilations[axis], total, padding == "SAME")
    out[c_axis] = channels
    return out


def _strided(shapes, node):
    values = shapes.value(node.inputs[0])
    begin, end, step = (shapes.value(t) for t in node.inputs[1:4])
    if values is None or begin is None or end is None or len(begin) != 1:
        return None
    s = step[0] if step else 1
    b = None if node_attr(node, "begin_mask") else begin[0]
    e = None if node_attr(node, "end_mask") else end[0]
    if node_attr(node, "shrink_axis_mask"):
        return [values[begin[0]]]
    return values[b:e:s]
