"""A small mutable view of a frozen TensorFlow GraphDef, for rewrite passes (no TensorFlow needed).

    g = TFGraph.load("frozen.pb")
    node = g.node("dropout/mul")
    g.rewire("dropout/mul", "relu")        # every consumer of dropout/mul:0 now reads relu:0
    g.prune(["probabilities"])             # drop what the outputs no longer need
    g.save("out.pb")                       # deterministic bytes

It works on deploy's own copy of TensorFlow's protobuf messages (pipeline.graph.proto).
"""

from collections import Counter, OrderedDict
from pathlib import Path

from pipeline.errors import DeployError


def split_tensor(tensor):
    """"name:1" -> ("name", 1); "name" -> ("name", 0); "^name" -> ("name", -1) (control)."""
    if tensor.startswith("^"):
        return tensor[1:], -1
    name, sep, port = tensor.rpartition(":")
    if sep and port.isdigit():
        return name, int(port)
    return tensor, 0


def _frozen_graph_def(path):
    """The GraphDef of a .pb (binary) or .pbtxt (text) file, read once, when pipeline.graph.readers.read_model
    would view the file as a frozen graph with no function library (tf_reader.read_pb / read_pbtxt: it
    parses, has nodes); else None, and the caller asks read_model."""
    from pipeline.graph import proto
    from pipeline.graph.parsing import looks_like_graph, parse_binary, parse_text, sniff_protobuf

    if path.suffix not in (".pb", ".pbtxt") or path.name in ("saved_model.pb", "saved_model.pbtxt"):
        return None
    if not path.is_file():
        return None
    kind = sniff_protobuf(path, expected="text" if path.suffix == ".pbtxt" else "binary")
    if kind == "onnx":
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if kind == "text":
        try:
            graph_def, _ = parse_text(proto.GraphDef, data.decode("utf-8"))
        except UnicodeDecodeError:
            return None
        found = graph_def is not None and len(graph_def.node) > 0
    else:
        graph_def, _ = parse_binary(proto.GraphDef, data)
        found = graph_def is not None and looks_like_graph(graph_def)
    return graph_def if found and not graph_def.library.function else None


def _graph_def_after_read_model(path):
    """Anything else: read_model's one-line error for what is not a readable model, deploy rewrite's for a
    model that is not a frozen graph; else the file parsed as a GraphDef (a second read, on this rare path)."""
    from pipeline.graph import proto
    from pipeline.graph.parsing import sniff_protobuf
    from pipeline.graph.readers import read_model

    view = read_model(path)
    what = ("a SavedModel" if path.is_dir() or path.name in ("saved_model.pb", "saved_model.pbtxt")
            else "a Keras model" if path.suffix.lower() in (".keras", ".h5", ".hdf5")
            else "a meta graph (a training checkpoint's graph)" if path.suffix.lower() == ".meta"
            else "an ONNX model (rename it to .onnx to rewrite it as one)" if view.kind == "onnx" else None)
    if what is not None:
        raise DeployError("{}: is {}; deploy rewrite takes a frozen graph (.pb, .pbtxt) or an .onnx model: freeze "
                          "it first (deploy run with model.source: {} and --until freeze, then rewrite the run's "
                          "freeze/frozen.pb)".format(path, what, path))
    graph_def = proto.GraphDef()
    data = path.read_bytes()
    if sniff_protobuf(path, expected="text" if str(path).endswith(".pbtxt") else "binary") == "text":
        from google.protobuf import text_format

        text_format.Parse(data.decode("utf-8"), graph_def, allow_unknown_field=True)
    else:
        graph_def.ParseFromString(data)
    return graph_def


class TFGraph:
    def __init__(self, graph_def):
        self.graph_def = graph_def
        self._consumers = None

    @classmethod
    def load(cls, path):
        path = Path(path)
        graph_def = _frozen_graph_def(path)  # a frozen graph file: read and parsed once
        if graph_def is None:
            graph_def = _graph_def_after_read_model(path)
        if graph_def.library.function:
            raise DeployError("{}: the graph has a function library; rewrite works on frozen graphs "
                              "(deploy's freeze stage inlines functions)".format(path))
        return cls(graph_def)

    # -------------------------------------------------------------------------- reading

    @property
    def nodes(self):
        return OrderedDict((n.name, n) for n in self.graph_def.node)

    def node(self, name):
        for n in self.graph_def.node:
            if n.name == name:
                return n
        raise KeyError(name)

    def consumers(self, name):
        """Nodes with a data input from any output of node ``name``."""
        if self._consumers is None:
            index = {}
            for n in self.graph_def.node:
                for tensor in n.input:
                    src, port = split_tensor(tensor)
                    if port >= 0:
                        index.setdefault(src, []).append(n)
            self._consumers = index
        return list(self._consumers.get(name, ()))

    def producer(self, tensor):
        name, _ = split_tensor(tensor)
        try:
            return self.node(name)
        except KeyError:
            return None

    def attr(self, node, key, default=None):
        from pipeline.graph.tf_attrs import decode_tf_attr

        return decode_tf_attr(node.attr[key]) if key in node.attr else default

    def const_value(self, node):
        """The numpy value of a Const node, also read through Identity nodes (TF1's ``<name>/read``);
        None for anything else."""
        hops = 0
        while node is not None and node.op == "Identity" and len(node.input) == 1 and hops < 100:
            node = self.producer(node.input[0])
            hops += 1
        if node is None or node.op != "Const":
            return None
        from pipeline.graph.tf_attrs import decode_tf_tensor

        return decode_tf_tensor(node.attr["value"].tensor).array()  # whatever its size (.value stops at 10,000 elements)

    def op_counts(self):
        return Counter(n.op for n in self.graph_def.node)

    def placeholders(self):
        return [n.name for n in self.graph_def.node if n.op in ("Placeholder", "PlaceholderWithDefault")]

    # -------------------------------------------------------------------------- editing

    def changed(self):
        self._consumers = None

    def add_const(self, name, array):
        """A new Const node holding ``array`` (numpy), named ``name`` (made unique)."""
        node = self.graph_def.node.add(name=self.unique(name))
        self.set_const(node, array)
        return node

    def set_const(self, node, array):
        """Turn ``node`` (in place, keeping its name) into a Const holding ``array``."""
        import numpy as np

        from pipeline.graph.proto import DataType

        array = np.ascontiguousarray(array).reshape(np.shape(array))  # ascontiguousarray makes a scalar [1]
        dtype = {"float32": "DT_FLOAT", "float64": "DT_DOUBLE", "int32": "DT_INT32", "int64": "DT_INT64",
                 "float16": "DT_HALF", "uint8": "DT_UINT8", "bool": "DT_BOOL"}[str(array.dtype)]
        node.op = "Const"
        del node.input[:]
        node.attr.clear()
        node.attr["dtype"].type = DataType[dtype]
        tensor = node.attr["value"].tensor
        tensor.dtype = DataType[dtype]
        for d in array.shape:
            tensor.tensor_shape.dim.add(size=int(d))
        tensor.tensor_content = array.astype(array.dtype.newbyteorder("<")).tobytes()
        self.changed()

    def unique(self, name):
        taken = {n.name for n in self.graph_def.node}
        if name not in taken:
            return name
        i = 1
        while "{}_{}".format(name, i) in taken:
            i += 1
        return "{}_{}".format(name, i)

    def rewire(self, old, new):
        """Point every data input reading tensor ``old`` (``name`` means ``name:0``) at ``new``."""
        old_name, old_port = split_tensor(old)
        count = 0
        for n in self.graph_def.node:
            for i, tensor in enumerate(n.input):
                name, port = split_tensor(tensor)
                if name == old_name and port == old_port:
                    n.input[i] = new
                    count += 1
        self.changed()
        return count

    def remove(self, names):
        """Delete nodes (in place: references to the other nodes stay valid), control edges to them and colocation
        with them (a ``_class`` ``loc:@NAME`` entry: TensorFlow refuses to import a graph whose node "expects to be
        colocated with unknown node" — a TF1 tf.cond's Switch on a folded batch norm gamma)."""
        names = set(names)
        nodes = self.graph_def.node
        for i in range(len(nodes) - 1, -1, -1):
            if nodes[i].name in names:
                del nodes[i]
        for n in nodes:
            controls = [t for t in n.input if t.startswith("^") and t[1:] in names]
            for t in controls:
                n.input.remove(t)
            if "_class" in n.attr:
                _drop_colocation(n, names)
        self.changed()

    def prune(self, outputs):
        """Keep only what ``outputs`` need (data and control inputs), in the original order."""
        nodes = self.nodes
        keep, stack = set(), [split_tensor(o)[0] for o in outputs]
        while stack:
            name = stack.pop()
            if name in keep or name not in nodes:
                continue
            keep.add(name)
            stack.extend(split_tensor(t)[0] for t in nodes[name].input)
        dropped = [n for n in nodes if n not in keep]
        self.remove(dropped)
        return dropped

    def serialize(self):
        return self.graph_def.SerializeToString(deterministic=True)

    def save(self, path):
        from pipeline.files import write_bytes

        write_bytes(path, self.serialize())

    def copy(self):
        from pipeline.graph import proto

        clone = proto.GraphDef()
        clone.CopyFrom(self.graph_def)
        return TFGraph(clone)


def view(graph):
    """The TFGraph as a graph view (pipeline.graph.view), for check's recognisers and analyses."""
    from pipeline.graph.tf_reader import frozen_view

    return frozen_view(graph.graph_def, "<rewrite>", "frozen_pb")


def _drop_colocation(node, names):
    """Remove ``loc:@NAME`` entries naming removed nodes from ``node``'s ``_class`` attribute (all gone: the attribute)."""
    values = list(node.attr["_class"].list.s)
    kept = [v for v in values if not (v.startswith(b"loc:@") and v[5:].decode("utf-8", "replace") in names)]
    if len(kept) == len(values):
        return
    if kept:
        del node.attr["_class"].list.s[:]
        node.attr["_class"].list.s.extend(kept)
    else:
        del node.attr["_class"]
