"""A small graph IR shared by the checker, rewrite passes and graph diff.

    graph = read_model("frozen.pb")                 # pipeline.graph.readers
    graph.nodes["conv1/Conv2D"].attrs["strides"]    # [1, 2, 2, 1]
    graph.consumers("conv1/Conv2D")                 # [Node(name="conv1/Relu", ...)]
    graph.producer("conv1/Relu:0")                  # Node(name="conv1/Relu", ...)

Tensor names: TensorFlow edges are ``"node"`` (port 0) or ``"node:1"``; ``Graph.inputs`` and
``Graph.outputs`` are always ``"node:port"``. ONNX edges are ONNX value names (``Node.outputs``
lists what a node produces); a missing optional ONNX input is kept as ``""`` so positions hold.

Attributes are decoded on first access of ``Node.attrs`` (a 200,000-node GraphDef is viewed
without decoding any attribute; see ``decode_tf_attr`` for what each kind becomes), into a plain
dict a pass may change. Until then the node keeps a reference to its parsed NodeDef (so the
parsed file stays in memory while undecoded nodes live). ``Graph.tensor_types`` of a TensorFlow
graph is likewise computed on first access. Pickling or deep-copying decodes everything first.

The graph caches its consumer index (``consumers``) and producer index (``producer``); a pass that
changes nodes or edges calls ``graph.invalidate()`` afterwards.
"""

from dataclasses import dataclass, field

# A shape attribute of unknown rank decodes to UNKNOWN_RANK (which is None): test it with
# ``shape is UNKNOWN_RANK``. A known-rank shape is a list of int, with None for an unknown dim.
UNKNOWN_RANK = None

# TensorValue.value holds a numpy array only up to this many elements.
SMALL_TENSOR_ELEMENTS = 10_000


class TensorValue:
    """A constant tensor: dtype name, shape, dense size in bytes, and the values when small.

    ``value`` (a numpy array, or None for big or undecodable tensors) is decoded on first access,
    so reading a graph never imports numpy; ``ints()`` gives small integer tensors (axes, shapes)
    as Python ints without numpy.
    """

    __slots__ = ("dtype", "shape", "nbytes", "_value", "_decode", "_proto", "_full")

    def __init__(self, dtype, shape, nbytes, value=None, decode=None, proto=None, full=None):
        self.dtype, self.shape, self.nbytes = dtype, shape, nbytes
        self._value, self._decode, self._proto, self._full = value, decode, proto, full

    def array(self):
        """The values whatever the size (``value`` stops at SMALL_TENSOR_ELEMENTS); None if undecodable."""
        value = self.value
        if value is None and self._full is not None:
            value = self._full()
        return value

    @property
    def value(self):
        if self._decode is not None:
            self._value, self._decode = self._decode(), None
        return self._value

    def ints(self):
        """The values of a small integer tensor as a list of ints (None if not an int tensor)."""
        proto = self._proto
        if proto is None or self.dtype not in ("int32", "int64"):
            return None if proto is not None or self.value is None else [int(v) for v in self.value.flat]
        if proto.tensor_content:
            import array

            values = array.array("i" if self.dtype == "int32" else "q")
            values.frombytes(proto.tensor_content)
            return list(values)
        return list(proto.int_val if self.dtype == "int32" else proto.int64_val)

    def __repr__(self):
        return "TensorValue(dtype={!r}, shape={!r}, nbytes={!r})".format(self.dtype, self.shape, self.nbytes)

    def __eq__(self, other):
        if not isinstance(other, TensorValue):
            return NotImplemented
        if (self.dtype, self.shape, self.nbytes) != (other.dtype, other.shape, other.nbytes):
            return False
        if self.value is None or other.value is None:
            return self.value is None and other.value is None
        import numpy as np

        return self.value.shape == other.value.shape and bool(np.array_equal(self.value, other.value))

    def __getstate__(self):
        return (self.dtype, self.shape, self.nbytes, self.value)

    def __setstate__(self, state):
        self.dtype, self.shape, self.nbytes, self._value = state
        self._decode = self._proto = self._full = None


@dataclass(frozen=True)
class AttrPlaceholder:
    """An attribute that refers to an attribute of the enclosing function (``$T`` in TF)."""

    name: str


@dataclass
class Node:
    """One op. TF names are the GraphDef's (inlined function bodies: ``<call>/<body node>``)."""

    name: str
    op: str
    inputs: list  # data inputs: TF "node" / "node:1"; ONNX value names
    control_inputs: list  # TF control inputs, names without "^"
    attrs: dict  # decoded attributes (decoded lazily when built by a reader)
    device: str = ""
    domain: str = ""  # ONNX domain ("" = default); "" for TF
    outputs: list = field(default_factory=list)  # ONNX output value names; [] for TF (ports are implicit)

    def __getattr__(self, key):
        # Only called when normal lookup fails: ``attrs`` of a lazily built node.
        if key == "attrs":
            d = self.__dict__
            source = d.pop("_attr_source", None)
            if source is not None:
                decode, raw = source
                d["attrs"] = attrs = decode(raw)
                return attrs
        raise AttributeError("{!r} object has no attribute {!r}".format(type(self).__name__, key))

    def __getstate__(self):
        self.attrs  # noqa: B018 - decode before pickling: protobuf references do not pickle
        return dict(self.__dict__)


def lazy_node(name, op, inputs, control_inputs, decode, raw_attrs, device="", domain="", outputs=None):
    """A Node whose ``attrs`` is ``decode(raw_attrs)``, computed on first access (readers use this)."""
    node = Node.__new__(Node)
    node.__dict__ = {"name": name, "op": op, "inputs": inputs, "control_inputs": control_inputs, "device": device,
                     "domain": domain, "outputs": outputs if outputs is not None else [],
                     "_attr_source": (decode, raw_attrs)}
    return node


@dataclass
class Graph:
    """A model's nodes in file order, its inputs and outputs, and what the file says of its tensors."""

    kind: str  # "tensorflow" or "onnx"
    nodes: dict  # name -> Node, in file order
    inputs: list  # tensor names ("input:0" for TF, value names for ONNX)
    outputs: list
    source: str = ""  # path it was read from
    format: str = ""  # "frozen_pb", "pbtxt", "saved_model", "meta_graph", "keras", "onnx"
    opset: int = None  # ONNX default-domain opset; None for TF
    tensor_types: dict = field(default_factory=dict)  # tensor name -> dtype name (TF: best effort, port 0)
    input_shapes: dict = field(default_factory=dict)  # graph input -> dims (int, None, symbolic str) or None
    output_shapes: dict = field(default_factory=dict)  # graph output -> dims, when the model says
    signature: dict = field(default_factory=dict)  # {"name", "inputs": {key: tensor}, "outputs": {key: tensor}}
    initializers: dict = field(default_factory=dict)  # ONNX initializer name -> TensorValue

    def __getattr__(self, key):
        # Only called when normal lookup fails: caches, and a lazily computed ``tensor_types``.
        d = self.__dict__
        if key == "tensor_types" and "_tensor_types_source" in d:
            compute = d.pop("_tensor_types_source")
            d["tensor_types"] = value = compute(self)
            return value
        if key in ("_consumer_index", "_producer_index"):
            return None
        raise AttributeError("{!r} object has no attribute {!r}".format(type(self).__name__, key))

    def __getstate__(self):
        self.tensor_types  # noqa: B018 - compute before pickling
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def invalidate(self):
        """Forget the cached consumer/producer indexes (after changing nodes or edges)."""
        self.__dict__.pop("_consumer_index", None)
        self.__dict__.pop("_producer_index", None)

    # -- edges ----------------------------------------------------------------------------------

    def _producers(self):
        """ONNX: value name -> node name. TF: {} (the node name is the tensor name's prefix)."""
        index = self._producer_index
        if index is None:
            index = {}
            if self.kind == "onnx":
                for node in self.nodes.values():
                    for out in node.outputs:
                        if out:
                            index[out] = node.name
            self.__dict__["_producer_index"] = index
        return index

    def producer_name(self, tensor):
        """Name of the node producing ``tensor`` (may not be in ``nodes``), or None for ONNX graph inputs."""
        if self.kind == "onnx":
            return self._producers().get(tensor)
        return tensor.lstrip("^").partition(":")[0]

    def producer(self, tensor):
        """The node producing ``tensor`` ("node", "node:1"; ONNX: a value name), or None."""
        name = self.producer_name(tensor)
        return self.nodes.get(name) if name is not None else None

    def consumers(self, name):
        """Nodes with a data input from node ``name`` (any port), in file order."""
        index = self._consumer_index
        if index is None:
            index = {}
            for node in self.nodes.values():
                seen = None
                for tensor in node.inputs:
                    if not tensor:
                        continue
                    src = self.producer_name(tensor)
                    if src is None or src == seen:
                        continue
                    users = index.setdefault(src, [])
                    if not users or users[-1] is not node:
                        users.append(node)
                    seen = src
            self.__dict__["_consumer_index"] = index
        return list(index.get(name, ()))

    def topological_order(self):
        """All nodes, each after the producers of its data and control inputs.

        Depth-first from the nodes in file order, so a graph already in order keeps it. A TF1 while
        loop's back edge (NextIteration -> Merge) is ignored, and so is any other edge that closes
        a cycle.
        """
        nodes = self.nodes
        state = {}  # name -> 1 on the stack, 2 done
        order = []
        for root in nodes:
            if root in state:
                continue
            stack = [(root, self._deps(nodes[root]))]
            state[root] = 1
            while stack:
                name, deps = stack[-1]
                for dep in deps:
                    if dep not in state and dep in nodes:
                        state[dep] = 1
                        stack.append((dep, self._deps(nodes[dep])))
                        break
                else:
                    stack.pop()
                    state[name] = 2
                    order.append(nodes[name])
        return order

    def _deps(self, node):
        deps = [self.producer_name(t) for t in node.inputs if t]
        deps.extend(node.control_inputs)
        if node.op in _MERGE_OPS:  # a loop's back edge: Merge <- NextIteration
            nodes = self.nodes
            return iter([d for d in deps if d is not None and getattr(nodes.get(d), "op", None) not in _NEXT_OPS])
        return iter([d for d in deps if d is not None])


_MERGE_OPS = frozenset(["Merge", "RefMerge"])
_NEXT_OPS = frozenset(["NextIteration", "RefNextIteration"])


# -- TensorFlow attribute decoding ---------------------------------------------------------------

def decode_tf_attrs(attr_map):
    """A NodeDef's ``attr`` map -> {name: decoded value} (see decode_tf_attr)."""
    return {key: decode_tf_attr(value) for key, value in attr_map.items()}


def decode_node_def_attrs(node_def):
    """A NodeDef's attributes, decoded (the lazy decoder readers give TensorFlow nodes)."""
    return {key: decode_tf_attr(value) for key, value in node_def.attr.items()}


def decode_tf_attr(value):
    """One AttrValue -> Python.

    s -> str (bytes if not UTF-8), i -> int, f -> float, b -> bool, type -> dtype name
    ("float32"), shape -> list of int/None or UNKNOWN_RANK, tensor -> TensorValue, func -> the
    function's name, list -> list of those, placeholder -> AttrPlaceholder, unset -> None.
    """
    from pipeline.graph.proto import dtype_name

    kind = value.WhichOneof("value")
    if kind == "type":
        return dtype_name(value.type)
    if kind == "s":
        return _text(value.s)
    if kind == "i":
        return value.i
    if kind == "b":
        return value.b
    if kind == "f":
        return value.f
    if kind == "list":
        lst = value.list
        if lst.i:
            return list(lst.i)
        if lst.type:
            return [dtype_name(t) for t in lst.type]
        if lst.s:
            return [_text(s) for s in lst.s]
        if lst.f:
            return list(lst.f)
        if lst.b:
            return list(lst.b)
        if lst.shape:
            return [decode_tf_shape(s) for s in lst.shape]
        if lst.tensor:
            return [decode_tf_tensor(t) for t in lst.tensor]
        if lst.func:
            return [f.name for f in lst.func]
        return []
    if kind == "shape":
        return decode_tf_shape(value.shape)
    if kind == "tensor":
        return decode_tf_tensor(value.tensor)
    if kind == "func":
        return value.func.name
    if kind == "placeholder":
        return AttrPlaceholder(value.placeholder)
    return None


def _text(data):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def decode_tf_shape(shape):
    """TensorShapeProto -> list of int (None for -1) or UNKNOWN_RANK."""
    if shape.unknown_rank:
        return UNKNOWN_RANK
    return [d.size if d.size >= 0 else None for d in shape.dim]


# TF dtype name -> (numpy dtype name, itemsize); None = no numpy equivalent (value not decoded).
_NUMPY = {
    "float32": ("float32", 4), "float64": ("float64", 8), "float16": ("float16", 2), "int8": ("int8", 1),
    "int16": ("int16", 2), "int32": ("int32", 4), "int64": ("int64", 8), "uint8": ("uint8", 1),
    "uint16": ("uint16", 2), "uint32": ("uint32", 4), "uint64": ("uint64", 8), "bool": ("bool", 1),
    "complex64": ("complex64", 8), "complex128": ("complex128", 16), "qint8": ("int8", 1),
    "quint8": ("uint8", 1), "qint16": ("int16", 2), "quint16": ("uint16", 2), "qint32": ("int32", 4),
    "bfloat16": (None, 2), "float8_e5m2": (None, 1), "float8_e4m3fn": (None, 1), "float8_e4m3fnuz": (None, 1),
    "float8_e4m3b11fnuz": (None, 1), "float8_e5m2fnuz": (None, 1),
}
# Which repeated *_val field holds each dtype's values when tensor_content is empty.
_VAL_FIELD = {
    "float32": "float_val", "float64": "double_val", "int32": "int_val", "int16": "int_val", "int8": "int_val",
    "uint8": "int_val", "uint16": "int_val", "qint8": "int_val", "quint8": "int_val", "qint16": "int_val",
    "quint16": "int_val", "qint32": "int_val", "int64": "int64_val", "uint32": "uint32_val",
    "uint64": "uint64_val", "bool": "bool_val", "float16": "half_val", "bfloat16": "half_val",
    "complex64": "scomplex_val", "complex128": "dcomplex_val",
}


def decode_tf_tensor(tensor):
    """TensorProto -> TensorValue; the numpy value only for small tensors."""
    from pipeline.graph.proto import dtype_name

    dtype = dtype_name(tensor.dtype)
    shape = [d.size for d in tensor.tensor_shape.dim]
    count = 1
    for d in shape:
        count *= max(d, 0)
    if dtype == "string":
        strings = tensor.string_val
        nbytes = sum(len(s) for s in strings)

        def decode_strings():
            import numpy as np

            items = list(strings)
            if items and len(items) < count:
                items += [items[-1]] * (count - len(items))
            return np.array(items, dtype=object).reshape(shape) if len(items) == count else None

        return TensorValue(dtype, shape, nbytes, decode=decode_strings if count <= SMALL_TENSOR_ELEMENTS else None,
                           proto=tensor)
    np_name, itemsize = _NUMPY.get(dtype, (None, 0))
    nbytes = count * itemsize
    decodable = count <= SMALL_TENSOR_ELEMENTS and (np_name or dtype == "bfloat16")

    def decode():
        return _tensor_array(tensor, dtype, np_name, shape, count)

    return TensorValue(dtype, shape, nbytes, decode=decode if decodable else None, proto=tensor,
                       full=decode if (np_name or dtype == "bfloat16") else None)


def _tensor_array(tensor, dtype, np_name, shape, count):
    import numpy as np

    content = tensor.tensor_content
    if content:
        if dtype == "bfloat16":
            bits = np.frombuffer(content, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(content, dtype=np.dtype(np_name).newbyteorder("<")).astype(np_name)
        return arr.reshape(shape) if arr.size == count else None
    field_name = _VAL_FIELD.get(dtype)
    if field_name is None:
        return None
    vals = getattr(tensor, field_name)
    if dtype == "float16":
        arr = np.array(vals, dtype=np.uint16).view(np.float16)
    elif dtype == "bfloat16":
        arr = (np.array(vals, dtype=np.uint32) << 16).view(np.float32)
    elif dtype in ("complex64", "complex128"):
        flat = np.array(vals, dtype="float32" if dtype == "complex64" else "float64")
        arr = flat[0::2] + 1j * flat[1::2] if flat.size else flat
        arr = arr.astype(np_name)
    else:
        arr = np.array(vals, dtype=np_name)
    if arr.size == count:
        return arr.reshape(shape)
    if arr.size == 0:  # all zeros
        return np.zeros(shape, dtype=arr.dtype)
    if arr.size < count:  # TF repeats the last value to fill the tensor
        return np.concatenate([arr, np.full(count - arr.size, arr[-1], dtype=arr.dtype)]).reshape(shape)
    return None


# Attributes naming a TF node's output-0 dtype, in order of preference.
_DTYPE_ATTRS = ("dtype", "out_type", "output_type", "DstT", "T", "Tidx")
_RESOURCE_OPS = frozenset(["VarHandleOp", "_VarHandlesOp", "HashTableV2", "MutableHashTableV2"])


def tf_tensor_types(graph):
    """Best-effort dtype of each TF node's output 0 ("node:0" -> dtype name), from its attributes."""
    from pipeline.graph.proto import dtype_name

    types = {}
    for node in graph.nodes.values():
        if node.op in _RESOURCE_OPS:
            types[node.name + ":0"] = "resource"
            continue
        source = node.__dict__.get("_attr_source")
        if source is not None and source[0] is decode_node_def_attrs:  # still raw: read the protobuf map
            raw = source[1].attr
            for key in _DTYPE_ATTRS:
                if key in raw:
                    v = raw[key]
                    if v.WhichOneof("value") == "type":
                        types[node.name + ":0"] = dtype_name(v.type)
                        break
            continue
        for key in _DTYPE_ATTRS:
            v = node.attrs.get(key)
            if isinstance(v, str) and key in node.attrs:
                types[node.name + ":0"] = v
                break
    return types
