"""A small graph IR shared by the checker, rewrite passes and graph diff.

    graph = read_model("frozen.pb")                 # pipeline.graph.readers
    graph.nodes["conv1/Conv2D"].attrs["strides"]    # [1, 2, 2, 1]
    graph.consumers("conv1/Conv2D")                 # [Node(name="conv1/Relu", ...)]
    graph.producer("conv1/Relu:0")                  # Node(name="conv1/Relu", ...)

Tensor names: TensorFlow edges are ``"node"`` (port 0) or ``"node:1"``; ``Graph.inputs`` and
``Graph.outputs`` are always ``"node:port"``. ONNX edges are ONNX value names (``Node.outputs``
lists what a node produces); a missing optional ONNX input is kept as ``""`` so positions hold.

Attributes are decoded on first access of ``Node.attrs`` (a 200,000-node GraphDef is viewed
without decoding any attribute; see ``pipeline.graph.tf_attrs.decode_tf_attr`` for what each kind becomes), into a plain
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
        return list(self.consumer_index().get(name, ()))

    def consumer_index(self):
        """{node name: the nodes with a data input from it, in file order} (cached, see
        ``invalidate``): what ``consumers`` answers from. Read it, do not change it."""
        index = self._consumer_index
        if index is None:
            index = {}
            tensorflow = self.kind == "tensorflow"
            producer_name = self.producer_name
            for node in self.nodes.values():
                inputs = node.inputs
                if not inputs:
                    continue
                seen = None
                for tensor in inputs:
                    if not tensor:
                        continue
                    # TensorFlow: the node name is the tensor name's prefix (producer_name, inlined)
                    src = tensor.lstrip("^").partition(":")[0] if tensorflow else producer_name(tensor)
                    if src is None or src == seen:
                        continue
                    users = index.get(src)
                    if users is None:
                        index[src] = [node]
                    elif users[-1] is not node:
                        users.append(node)
                    seen = src
            self.__dict__["_consumer_index"] = index
        return index

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
