"""The small structure `deploy diff` matches on: per node its op, inputs (resolved through
pass-through Identity nodes), consumers, an attribute signature and a bottom-up structural hash.

Built straight from a frozen GraphDef (one pass over the protobuf: the fast path for big graphs)
or from any graph view deploy reads (SavedModel, Keras, ONNX).
"""

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

PASS_THROUGH = frozenset(["Identity", "Snapshot"])  # one input in, the same tensor out
# Attributes that are names, not computation: a variable's or table's resource name (``shared_name``,
# ``container``), the name Keras gave it (``debug_name``), a TensorArray's name. Two graphs identical up
# to renaming differ in them too (model.export names a variable ``dense/bias_1``, tf.saved_model.save
# ``dense/bias``), so they are left out like node names.
NAMING_ATTRS = frozenset(["shared_name", "debug_name", "container", "tensor_array_name"])
_SUFFIX = re.compile(r"_\d+(?=/|$)")


@dataclass
class DiffGraph:
    source: str
    kind: str  # tensorflow | onnx
    names: List[str]  # node keys, file order
    ops: List[str]
    sigs: List[int]  # attribute signature (constants: dtype and shape, not values)
    inputs: List[tuple]  # per node: ((producer index, port), ...), through pass-through nodes
    const: List[bool]
    passthrough: List[int] = field(default_factory=list)  # indices of Identity nodes bypassed
    outputs: List[int] = field(default_factory=list)
    tensors: Dict[int, object] = field(default_factory=dict)  # const index -> TensorProto / TensorValue
    attrs_of: object = None  # index -> decoded attribute dict (for the report)
    shapes: Dict[int, list] = field(default_factory=dict)  # index -> output shape, where the file says
    hashes: Optional[List[int]] = None
    consumers: Optional[List[list]] = None
    from_bytes: bool = False  # sigs hash the NodeDefs' bytes (from_graph_def), not decoded attributes (from_view)

    fingerprints: Dict[int, int] = field(default_factory=dict)  # const index -> hash of its bytes (computed once)
    weights: object = None  # variable values outside the graph (weights.SavedModelVariables), where deploy reads them

    def index(self):
        return {name: i for i, name in enumerate(self.names)}

    def fingerprint(self, i):
        """A hash of constant ``i``'s bytes (dtype, shape and values)."""
        fp = self.fingerprints.get(i)
        if fp is None:
            fp = self.fingerprints[i] = hash(tensor_bytes(self.tensors.get(i)))
        return fp

    def compact(self):
        """What crosses a process boundary: the structure and constant fingerprints, no protobuf."""
        for i in self.tensors:
            self.fingerprint(i)
        keep = ("source", "kind", "names", "ops", "sigs", "inputs", "const", "passthrough", "outputs", "shapes",
                "hashes", "consumers", "fingerprints", "from_bytes")
        return {k: getattr(self, k) for k in keep}

    @classmethod
    def restore(cls, data, reload):
        """A DiffGraph from ``compact()``; constants and attributes are read again from the file
        (``reload()`` -> DiffGraph) only if a report needs their values."""
        g = cls(**{k: v for k, v in data.items() if k not in ("hashes", "consumers", "fingerprints")})
        g.hashes, g.consumers, g.fingerprints = data["hashes"], data["consumers"], data["fingerprints"]
        full = []

        def loaded():
            if not full:
                full.append(reload())
            return full[0]

        g.tensors = _Lazy(lambda: loaded().tensors, keys=list(data["fingerprints"]))
        g.attrs_of = lambda i: loaded().attrs_of(i)
        return g


def reliable_names(names):
    """Indices of names people chose: a name whose form without ``_<n>`` suffixes (TensorFlow's
    ``concat_1``, Keras's ``conv2d_16``) is unique in its graph. ``concat``/``concat_1`` and
    ``dense/kernel``/``dense_1/kernel`` are creation-order names; ``input``, ``logits`` and
    ``block1/conv/Conv2D`` are not."""
    first, repeated = {}, set()  # form -> index of its only name so far; forms seen twice
    sub = _SUFFIX.sub
    for i, name in enumerate(names):
        form = sub("", name) if "_" in name else name
        if form in first:
            repeated.add(form)
        else:
            first[form] = i
    return {i for form, i in first.items() if form not in repeated and form == names[i]}


# a map entry's key field (tag, length, key) starting with "_", or one of NAMING_ATTRS followed by its value's tag
_PRIVATE_KEY = re.compile(rb"\x0a(?:[\x80-\xff]*[\x00-\x7f]_|\x0bshared_name\x12|\x0adebug_name\x12|"
                          rb"\x09container\x12|\x11tensor_array_name\x12)")


def from_graph_def(graph_def, source, outputs=None):
    """The fast path: a frozen GraphDef without a function library. ``outputs``: node names (None:
    the nodes nothing reads). Clears the nodes' names, inputs and devices (read here first)."""
    names, ops, sigs, raw_inputs, const, tensors, shapes = [], [], [], [], [], {}, {}
    consumed = set()
    consume, consume_all = consumed.add, consumed.update
    private_key = _PRIVATE_KEY.search
    const_dims = {}  # a tensor shape's bytes -> its dims (a graph has a few distinct shapes)
    for i, nd in enumerate(graph_def.node):
        name, op = nd.name, nd.op
        names.append(name)
        ops.append(op)
        data = list(nd.input)
        if data:
            if "^" in "".join(data):
                data = []
                for t in nd.input:
                    if t[:1] == "^":
                        consume(t[1:])
                    else:
                        data.append(t)
                        consume(t.partition(":")[0])
            else:
                for t in data:
                    consume(t.partition(":")[0])
        raw_inputs.append(data)
        if op == "Const":
            value = nd.attr["value"].tensor
            tensors[i] = value
            shape = value.tensor_shape
            key = shape.SerializeToString()
            dims = const_dims.get(key)
            if dims is None:
                dims = const_dims[key] = tuple(d.size for d in shape.dim)
            sigs.append(hash((op, value.dtype, dims)))
            const.append(True)
            continue
        const.append(False)
        # the node's bytes without its name, inputs and device: op and attributes
        nd.ClearField("name")
        nd.ClearField("input")
        nd.ClearField("device")
        body = nd.SerializeToString(deterministic=True)
        if private_key(body) is None:  # no attribute name starts with "_" nor is a name (most nodes): the bytes say it all
            sigs.append(hash(body))
            continue
        attr = nd.attr
        private = [k for k in attr if k[:1] == "_" or k in NAMING_ATTRS]
        if private:
            if "_output_shapes" in attr:
                shapes[i] = [[d.size for d in s.dim] for s in attr["_output_shapes"].list.shape]
            sigs.append(hash((op, tuple((k, attr[k].SerializeToString(deterministic=True)) for k in sorted(attr)
                                        if k[:1] != "_" and k not in NAMING_ATTRS))))
        else:
            sigs.append(hash(body))
    index = {name: i for i, name in enumerate(names)}
    if outputs is None:
        outputs = [n for n in names if n not in consumed]

    def attrs_of(i):
        from pipeline.graph.tf_attrs import decode_node_def_attrs

        return decode_node_def_attrs(graph_def.node[i])

    g = DiffGraph(source, "tensorflow", names, ops, sigs, [], const, tensors=tensors, attrs_of=attrs_of, shapes=shapes,
                  from_bytes=True)
    _resolve(g, raw_inputs, index, _tf_producer, outputs)
    return g


def decoded_signatures(g):
    """Give ``g`` (read by from_graph_def) the signatures from_view computes, from its decoded attributes,
    and hash it again: a frozen .pb diffed with the same model as .keras or a SavedModel (read through a
    reader) then compares like with like. Before, every node of such a pair was "changed"."""
    sigs = []
    for i, op in enumerate(g.ops):
        attrs = g.attrs_of(i)
        if g.const[i]:
            attrs = dict(attrs)
            attrs.setdefault("value", g.tensors.get(i))
        sigs.append(hash((op, "", attr_signature(op, attrs))))
    g.sigs, g.from_bytes = sigs, False
    return prepare(g)


def from_view(graph):
    """Any graph view (pipeline.graph.view.Graph): SavedModels, Keras, ONNX, graphs with functions."""
    names, ops, sigs, raw_inputs, const, tensors, attrs = [], [], [], [], [], {}, []
    if graph.kind == "onnx":
        for i, name in enumerate(graph.inputs):
            _add(names, ops, sigs, raw_inputs, const, attrs, "input:" + name, "Input", [],
                 {"position": i, "dtype": graph.tensor_types.get(name)})
        for name, tensor in (getattr(graph, "initializers", None) or {}).items():
            tensors[len(names)] = tensor
            _add(names, ops, sigs, raw_inputs, const, attrs, "init:" + name, "Initializer", [], {"value": tensor})
    for node in graph.nodes.values():
        if node.op == "Const":
            tensors[len(names)] = node.attrs.get("value")
        _add(names, ops, sigs, raw_inputs, const, attrs, node.name, node.op, [t for t in node.inputs if t], node.attrs,
             getattr(node, "domain", ""))
    index = {name: i for i, name in enumerate(names)}
    g = DiffGraph(str(graph.source), graph.kind, names, ops, sigs, [], const, tensors=tensors,
                  attrs_of=lambda i: attrs[i])
    if graph.kind == "onnx":
        producer = _onnx_producer(graph, index)
        outputs = [graph.producer_name(t) for t in graph.outputs]
    else:
        producer, outputs = _tf_producer, [t.partition(":")[0] for t in graph.outputs]
    _resolve(g, raw_inputs, index, producer, [o for o in outputs if o])
    return g


def _add(names, ops, sigs, raw_inputs, const, attrs, name, op, inputs, node_attrs, domain=""):
    names.append(name)
    ops.append(op)
    raw_inputs.append(inputs)
    attrs.append(node_attrs)
    const.append(op in ("Const", "Initializer"))
    sigs.append(hash((op, domain, attr_signature(op, node_attrs))))


def attr_signature(op, attrs):
    """Decoded attributes as a hashable tuple: names starting with ``_`` and NAMING_ATTRS left out,
    tensors by dtype and shape (not values)."""
    if op == "Input":
        return ("input", attrs.get("position"), attrs.get("dtype"))
    items = []
    for key in sorted(attrs):
        if key.startswith("_") or key in NAMING_ATTRS:
            continue
        value = attrs[key]
        if hasattr(value, "nbytes") and hasattr(value, "dtype"):
            value = ("tensor", value.dtype, tuple(value.shape or ()))
        items.append((key, repr(value)))
    return tuple(items)


def _tf_producer(tensor, index):
    name, _, port = tensor.partition(":")
    return index.get(name), int(port) if port.isdigit() else 0


def _onnx_producer(graph, index):
    def producer(tensor, _):
        for prefix in ("init:", "input:"):
            if prefix + tensor in index:
                return index[prefix + tensor], 0
        node = graph.producer(tensor)
        return (index.get(node.name), list(node.outputs).index(tensor)) if node is not None else (None, 0)

    return producer


def _resolve(g, raw_inputs, index, producer, outputs):
    """Inputs as (producer index, port), through pass-through nodes (not the graph's outputs)."""
    outs = {index[o] for o in (outputs or ()) if o in index}
    if producer is _tf_producer:  # inlined: a call per edge is most of the time on big graphs
        get = index.get
        resolved = []
        for ins in raw_inputs:
            row = []
            for t in ins:
                if ":" in t:
                    name, _, port = t.partition(":")
                    row.append((get(name), int(port) if port.isdigit() else 0))
                else:
                    row.append((get(t), 0))
            resolved.append(row)
    else:
        resolved = [[producer(t, index) for t in ins] for ins in raw_inputs]
    bypass = {i for i, op in enumerate(g.ops) if op in PASS_THROUGH and len(resolved[i]) == 1 and i not in outs
              and resolved[i][0][0] is not None}

    def through(p, port):
        hops = 0
        while p in bypass and port == 0 and hops < 10000:
            p, port = resolved[p][0]
            hops += 1
        return p, port

    g.inputs = [tuple(through(p, port) if not port and p in bypass else (p, port) for p, port in ins if p is not None)
                for ins in resolved]
    g.passthrough = sorted(bypass)
    g.outputs = sorted(outs)


def prepare(g):
    """Consumers and bottom-up hashes (a node's op and attributes with its inputs' hashes)."""
    n = len(g.names)
    skip = set(g.passthrough)
    consumers = [[] for _ in range(n)]
    for i, ins in enumerate(g.inputs):
        if i in skip:
            continue
        for slot, (p, _) in enumerate(ins):
            consumers[p].append((i, slot))
    g.consumers = consumers
    hashes = [None] * n
    sigs, inputs = g.sigs, g.inputs
    for i in range(n):  # most graphs are stored inputs first: one pass does nearly all
        parts = []
        for p, port in inputs[i]:
            h = hashes[p]
            if h is None:
                break
            parts.append((h, port))
        else:
            hashes[i] = hash((sigs[i], tuple(parts)))
    for root in range(n):
        if hashes[root] is not None:
            continue
        stack, open_ = [root], {root}
        while stack:
            i = stack[-1]
            pending = [p for p, _ in inputs[i] if hashes[p] is None and p not in open_]
            if pending:
                stack.extend(pending)
                open_.update(pending)
                continue
            stack.pop()
            # a loop's back edge (an input still open) hashes as a marker
            hashes[i] = hash((sigs[i], tuple((hashes[p] if hashes[p] is not None else 0, port) for p, port in inputs[i])))
    g.hashes = hashes
    return g


class _Lazy:
    """A read-only mapping whose contents are built on first access."""

    def __init__(self, build, keys):
        self._build, self._keys, self._data = build, keys, None

    def _get(self):
        if self._data is None:
            self._data = self._build()
        return self._data

    def get(self, key, default=None):
        return self._get().get(key, default)

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)


def tensor_bytes(value):
    """A constant's bytes: its TensorProto serialized (dtype, shape, values), whatever reader made it."""
    if value is None:
        return b""
    if hasattr(value, "SerializeToString"):
        return value.SerializeToString(deterministic=True)
    proto = getattr(value, "_proto", None)
    if proto is not None:
        return proto.SerializeToString(deterministic=True)
    array = value.array() if hasattr(value, "array") else None
    return array.tobytes() if array is not None else repr(value).encode()
