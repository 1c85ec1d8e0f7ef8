"""Weights that are not in the graph: a SavedModel's variables, read from its ``variables/`` checkpoint.

A SavedModel's graph holds variable nodes (``VarHandleOp``, TF1 ``VariableV2``), not their values;
the values are in the tensor bundle ``variables/variables.index`` + ``variables.data-*``. Read here
without TensorFlow, as `deploy diff` reads the graph:

- which checkpoint key restores which variable node: the graph's own restore ops say it. TF1's
  saver restores in the graph (``save/RestoreV2`` → ``save/Assign``), a TF2 SavedModel in the
  function its restore op calls (``__inference__traced_restore_N``: ``RestoreV2`` →
  ``AssignVariableOp`` on the function's arguments, which the call binds to the variable nodes);
- the bundle: its index is a LevelDB table (footer → index block → data blocks of
  prefix-compressed keys), each value a BundleEntryProto (dtype, shape, shard, offset, size) of
  bytes in a data shard.

What cannot be read this way (a compressed index, a partitioned variable, no restore op naming a
variable) raises ``Unreadable`` with the reason; the diff then says the weights were not compared.
"""

import os
import struct
from pathlib import Path

VARIABLE_OPS = frozenset(["VarHandleOp", "VariableV2", "Variable", "AutoReloadVariable"])
_ASSIGN_OPS = frozenset(["AssignVariableOp", "Assign"])
_CALL_OPS = frozenset(["StatefulPartitionedCall", "PartitionedCall"])
_TABLE_MAGIC = struct.pack("<Q", 0xDB4775248B80FB57)


class Unreadable(Exception):
    """Why a variable's value could not be read (said in the report, never an error of its own)."""


# what a damaged bundle or object graph raises while it is parsed (the files are untrusted): Unreadable instead
_PARSE_ERRORS = (struct.error, IndexError, ValueError, OverflowError, KeyError, TypeError, UnicodeDecodeError)


def _damage(error):
    """The Unreadable for an exception raised while parsing a damaged file, or None for any other exception."""
    if isinstance(error, Unreadable):
        return error
    if isinstance(error, _PARSE_ERRORS) or type(error).__name__ == "DecodeError":  # protobuf's, not imported here
        return Unreadable("the checkpoint does not parse ({})".format(type(error).__name__))
    return None


class Value:
    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, shape, data  # TF dtype name, [dims], raw bytes

    def strings(self):
        """A string tensor's items: the bundle stores their lengths (varints), a checksum, then the bytes."""
        if any(d < 0 for d in self.shape):
            raise Unreadable("the checkpoint gives a tensor a negative dimension")
        count = 1
        for d in self.shape:
            count *= d
        lengths, pos = [], 0
        for _ in range(count):
            length, pos = _varint(self.data, pos)
            lengths.append(length)
        pos += 4
        items = []
        for length in lengths:
            items.append(self.data[pos:pos + length])
            pos += length
        if self.dtype != "string" or pos != len(self.data):
            raise Unreadable("the checkpoint's object graph does not parse")
        return items

    def array(self):
        """The numpy array, or None for a dtype numpy has no equivalent of (string, bfloat16, ...)."""
        import numpy as np

        try:
            dtype = np.dtype(self.dtype).newbyteorder("<")
        except TypeError:
            return None
        if any(d < 0 for d in self.shape):  # an untrusted index: reshape would take -1 as "the rest"
            return None
        if dtype.kind not in "fiub" or len(self.data) != dtype.itemsize * int(np.prod(self.shape, dtype="int64")):
            return None
        return np.frombuffer(self.data, dtype=dtype).reshape(self.shape)


class SavedModelVariables:
    """The values of a SavedModel's variables by the graph's variable node names, read on first use."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self._keys = self._bundle = None
        self._error = None

    def value(self, name):
        """The Value of variable node ``name``; Unreadable when it cannot be read."""
        self._open()
        key = self._keys.get(name)
        if key is None:
            raise Unreadable("no restore op of the SavedModel names the checkpoint key of variable {}".format(name))
        try:
            return self._bundle.read(key)
        except Exception as e:  # noqa: BLE001 - a damaged file's parse error is Unreadable; anything else is raised
            damage = _damage(e)
            if damage is None:
                raise
            raise damage from None

    def _open(self):
        if self._error is not None:
            raise Unreadable(self._error)
        if self._bundle is not None:
            return
        try:
            meta_graph, raw = _meta_graph(self.directory)
            self._bundle = Bundle(self.directory / "variables" / "variables")
            self._keys = restore_keys(meta_graph)
            if raw is not None:  # a TF2 SavedModel: the object graph binds what restore_keys did not
                for name, key in object_graph_keys(meta_graph, raw, self._bundle).items():
                    self._keys.setdefault(name, key)
        except Exception as e:  # noqa: BLE001 - see value()
            damage = _damage(e)
            if damage is None:
                raise
            self._error = str(damage)
            raise damage from None


def _meta_graph(directory):
    """The meta graph deploy's reader views (tagged serve, else the only one) and its bytes (None from a .pbtxt)."""
    from pipeline.graph import proto

    saved_model = proto.SavedModel()
    pb, text = directory / "saved_model.pb", directory / "saved_model.pbtxt"
    data = None
    try:
        if pb.is_file():
            data = pb.read_bytes()
            saved_model.ParseFromString(data)
        else:
            from google.protobuf import text_format

            text_format.Parse(text.read_text(), saved_model, allow_unknown_field=True)
    except Exception as e:  # the reader read it already; anything here is unexpected
        raise Unreadable("saved_model.pb could not be read again ({})".format(type(e).__name__))
    metas = saved_model.meta_graphs
    if not metas:
        raise Unreadable("the SavedModel has no meta graph")
    index = next((k for k, m in enumerate(metas) if "serve" in m.meta_info_def.tags), 0)
    return metas[index], _fields(data)[2][index] if data is not None else None


def variable_change(a, b, i, j):
    """(value change or None, None) for matched variable nodes A[i] and B[j] (DiffGraphs), or
    (None, why their values were not compared)."""
    from pipeline.graph.diff.report import array_change

    for g in (a, b):
        if g.weights is None:
            return None, "{} holds variables, not their values (not a SavedModel)".format(g.source)
    try:
        va, vb = a.weights.value(a.names[i]), b.weights.value(b.names[j])
    except Unreadable as e:
        return None, "SavedModel variables: {}".format(e)
    if (va.dtype, va.shape, va.data) == (vb.dtype, vb.shape, vb.data):
        return None, None
    xa, xb = va.array(), vb.array()
    if xa is None or xb is None:  # no numpy dtype (strings, bfloat16): their bytes differ
        change = {"a": a.names[i], "b": b.names[j], "max_abs_diff": None, "shape": {"a": va.shape, "b": vb.shape}}
    else:
        change = array_change(a.names[i], b.names[j], xa, xb)
    if change:
        change["variable"] = True
    return change, None


# ---------------------------------------------------------------------------- which key restores which variable


def _split(tensor):
    """"save/RestoreV2:3" and, in a function, "RestoreV2:tensors:3" -> (node name, output index)."""
    parts = tensor.split(":")
    return parts[0], int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 0


def _through_identity(nodes, tensor):
    name, port = _split(tensor)
    for _ in range(100):
        node = nodes.get(name)
        if node is None or node.op != "Identity" or not node.input:
            break
        name, port = _split(node.input[0])
    return name, port


def _assignments(node_defs):
    """{the name an assign writes to (a variable node, or a function argument): checkpoint key} for
    the restore ops among ``node_defs`` (one graph or one function body)."""
    nodes = {n.name: n for n in node_defs}
    keys = {}  # RestoreV2 node -> its tensor_names
    for n in node_defs:
        if n.op == "RestoreV2" and len(n.input) > 1:
            names = nodes.get(_through_identity(nodes, n.input[1])[0])
            if names is not None and names.op == "Const":
                keys[n.name] = [s.decode("utf-8", "replace") for s in names.attr["value"].tensor.string_val]
    out = {}
    if not keys:
        return out
    for n in node_defs:
        if n.op in _ASSIGN_OPS and len(n.input) > 1:
            source, port = _through_identity(nodes, n.input[1])
            if source in keys and port < len(keys[source]):
                out.setdefault(_through_identity(nodes, n.input[0])[0], keys[source][port])
    return out


def restore_keys(meta_graph):
    """{variable node name in the graph: checkpoint key}, from the graph's restore ops (TF1's saver)
    and the functions its calls run (a TF2 SavedModel's traced restore function)."""
    graph_def = meta_graph.graph_def
    outer = {n.name: n for n in graph_def.node}
    result = {}

    def bind(tensor, key):
        name = _through_identity(outer, tensor)[0]
        if name in outer and outer[name].op in VARIABLE_OPS:
            result.setdefault(name, key)

    for name, key in _assignments(graph_def.node).items():
        bind(name, key)
    callers = {}
    for n in graph_def.node:
        if n.op in _CALL_OPS and "f" in n.attr:
            callers.setdefault(n.attr["f"].func.name, []).append(n)
    for function in graph_def.library.function:
        calls = callers.get(function.signature.name)
        assigned = _assignments(function.node_def) if calls else None
        if not assigned:
            continue
        args = {a.name: k for k, a in enumerate(function.signature.input_arg)}
        for call in calls:
            data = [t for t in call.input if not t.startswith("^")]
            for arg, key in assigned.items():
                if arg in args and args[arg] < len(data):
                    bind(data[args[arg]], key)
    return result


def object_graph_keys(meta_graph, raw_meta_graph, bundle):
    """{variable node name: checkpoint key} through a TF2 SavedModel's object graph: a call of a
    concrete function passes its captured variables last, in the order of the function's
    ``bound_inputs`` (object ids); the checkpoint's object graph (same ids) names each object's
    VARIABLE_VALUE key. (tf.saved_model.save's serving signature reads variables no restore op writes.)"""
    saved_objects = _fields(_fields(raw_meta_graph).get(7, [b""])[0])  # MetaGraphDef.object_graph_def
    bound = {}
    for entry in saved_objects.get(2, []):  # concrete_functions: {name: SavedConcreteFunction}
        entry = _fields(entry)
        bound[entry.get(1, [b""])[0].decode("utf-8", "replace")] = _ints(_fields(entry.get(2, [b""])[0]).get(2, []))
    calls = [n for n in meta_graph.graph_def.node if n.op in _CALL_OPS and bound.get(n.attr["f"].func.name)]
    if not calls:
        return {}
    keys = {}  # object id -> checkpoint key
    checkpoint_objects = _fields(bundle.read("_CHECKPOINTABLE_OBJECT_GRAPH").strings()[0])
    for node_id, node in enumerate(checkpoint_objects.get(1, [])):
        for attribute in _fields(node).get(2, []):
            attribute = _fields(attribute)
            if attribute.get(1, [b""])[0] == b"VARIABLE_VALUE" and 3 in attribute:
                keys[node_id] = attribute[3][0].decode("utf-8", "replace")
    outer = {n.name: n for n in meta_graph.graph_def.node}
    result = {}
    for call in calls:
        ids = bound[call.attr["f"].func.name]
        data = [t for t in call.input if not t.startswith("^")]
        for tensor, node_id in zip(data[len(data) - len(ids):], ids):
            name = _through_identity(outer, tensor)[0]
            if node_id in keys and name in outer and outer[name].op in VARIABLE_OPS:
                result.setdefault(name, keys[node_id])
    return result


def _ints(values):
    """A repeated int field's values, packed or not."""
    out = []
    for value in values:
        if isinstance(value, bytes):
            pos = 0
            while pos < len(value):
                number, pos = _varint(value, pos)
                out.append(number)
        else:
            out.append(value)
    return out


# ---------------------------------------------------------------------------- the tensor bundle


def _varint(data, pos):
    result = shift = 0
    while True:
        if pos >= len(data):
            raise Unreadable("the checkpoint index is truncated")
        if shift > 63:  # protobuf and LevelDB varints are at most 10 bytes; a longer run would grow without end
            raise Unreadable("the checkpoint index holds an entry deploy cannot parse")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data):
    """A protobuf message's fields by number, without its schema: {number: [int or bytes, ...]}."""
    fields, pos = {}, 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, kind = tag >> 3, tag & 7
        if kind == 0:
            value, pos = _varint(data, pos)
        elif kind == 1:
            value, pos = struct.unpack_from("<Q", data, pos)[0], pos + 8
        elif kind == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        elif kind == 5:
            value, pos = struct.unpack_from("<I", data, pos)[0], pos + 4
        else:
            raise Unreadable("the checkpoint index holds an entry deploy cannot parse")
        fields.setdefault(number, []).append(value)
    return fields


def _block(data, offset, size):
    """(key, value) of one LevelDB table block (keys share prefixes with the entry before)."""
    if offset + size + 5 > len(data):
        raise Unreadable("the checkpoint index is truncated")
    if data[offset + size] != 0:
        raise Unreadable("the checkpoint index is compressed")
    block = data[offset:offset + size]
    restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
    end, pos, key = len(block) - 4 - 4 * restarts, 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        fresh, pos = _varint(block, pos)
        length, pos = _varint(block, pos)
        key = key[:shared] + block[pos:pos + fresh]
        pos += fresh
        yield key, block[pos:pos + length]
        pos += length


class Bundle:
    """A TensorFlow tensor bundle (checkpoint V2) at ``prefix``: ``prefix.index`` + ``prefix.data-*``."""

    def __init__(self, prefix):
        self.prefix = str(prefix)
        index = Path(self.prefix + ".index")
        if not index.is_file():
            raise Unreadable("{} is missing".format(index))
        data = index.read_bytes()
        if len(data) < 48 or data[-8:] != _TABLE_MAGIC:
            raise Unreadable("{} is not a checkpoint index".format(index))
        footer, pos = data[-48:], 0
        for _ in range(2):  # the metaindex handle, then the index block's
            offset, pos = _varint(footer, pos)
            size, pos = _varint(footer, pos)
        self.entries = {}
        for _, handle in _block(data, offset, size):
            block_offset, at = _varint(handle, 0)
            block_size, _ = _varint(handle, at)
            self.entries.update(_block(data, block_offset, block_size))
        header = _fields(self.entries.get(b"", b""))
        self.shards = header.get(1, [1])[0]
        if header.get(2, [0])[0]:
            raise Unreadable("the checkpoint is big-endian")

    def read(self, key):
        from pipeline.graph import proto

        entry = self.entries.get(key.encode())
        if entry is None:
            raise Unreadable("the checkpoint has no {}".format(key))
        fields = _fields(entry)
        if 7 in fields:
            raise Unreadable("{} is a partitioned variable".format(key))
        shape = proto.TensorShapeProto()
        shape.ParseFromString(fields.get(2, [b""])[0])
        shard, offset, size = (fields.get(n, [0])[0] for n in (3, 4, 5))
        path = "{}.data-{:05d}-of-{:05d}".format(self.prefix, shard, self.shards)
        try:
            with open(path, "rb") as f:
                if offset + size > os.fstat(f.fileno()).st_size:  # a damaged index must not make read() allocate it
                    raise Unreadable("{} is truncated".format(path))
                f.seek(offset)
                data = f.read(size)
        except OSError as e:
            raise Unreadable("{}: {}".format(path, e.strerror or e))
        if len(data) != size:
            raise Unreadable("{} is truncated".format(path))
        return Value(proto.dtype_name(fields.get(1, [0])[0]), [d.size for d in shape.dim], data)
