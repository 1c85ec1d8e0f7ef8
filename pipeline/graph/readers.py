"""read_model(path) -> Graph: a frozen GraphDef, a SavedModel, a TF1 meta graph, ONNX or Keras.

Only ``.keras`` / ``.h5`` import TensorFlow; every other format is read with deploy's own copy
of TensorFlow's protobuf messages (``pipeline.graph.proto``) or the ``onnx`` package.

SavedModels and meta graphs with a signature are viewed from the signature: only the nodes the
signature's outputs need, through data and control inputs and into the functions those nodes
call (see ``pipeline.graph.inline``). Frozen graphs are viewed whole.
"""

import re
from pathlib import Path

from pipeline.errors import DeployError
from pipeline.graph.io import NOT_OUTPUTS
from pipeline.graph.inline import Flattener
from pipeline.graph.view import Graph, decode_node_def_attrs, decode_tf_shape, lazy_node, tf_tensor_types

SUPPORTED = ("a frozen GraphDef (.pb, .pbtxt), a SavedModel directory, a TF1 meta graph (.meta), "
             "an ONNX model (.onnx) or a Keras model (.keras, .h5)")

# Sinks that are not model outputs (frozen graphs and meta graphs without a signature).
_VARIABLE_OPS = frozenset(["VarHandleOp", "_VarHandlesOp", "VariableV2", "Variable", "AutoReloadVariable"])
_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.>\-]*\Z")


def read_model(path, signature="serving_default"):
    """Read the model at ``path`` into a Graph (see pipeline.graph.view); DeployError for bad input.

    ``signature`` picks the SavedModel (or meta graph) signature to view (None: serving_default).
    """
    import gc

    # Building a view creates a few objects per node and none of them form cycles: with the cyclic
    # garbage collector on, its repeated full passes over them make big graphs several times slower.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _read_model(Path(path), signature or "serving_default")
    finally:
        if enabled:
            gc.enable()


def _read_model(path, signature):
    if not path.exists():
        raise DeployError("{}: no such file or directory; expected {}".format(path, SUPPORTED))
    if path.is_dir():
        if (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file():
            return _read_saved_model(path, signature)
        raise DeployError("{}: directory is not a SavedModel (no saved_model.pb in it); pass the SavedModel "
                          "directory, or a model file: {}".format(path, SUPPORTED))
    suffix = path.suffix.lower()
    if path.name in ("saved_model.pb", "saved_model.pbtxt"):
        return _read_saved_model(path.parent, signature)
    if suffix in (".pb", ".pbtxt", ".meta", ".onnx", ".txt", ".graphdef"):
        # protobuf files are told apart by content, so a text GraphDef saved as .pb, an ONNX model
        # named .pb or a binary graph named .pbtxt is read as what it is; a file that is none of
        # them gets the error of the format its name says
        kind = sniff_protobuf(path, expected="onnx" if suffix == ".onnx" else "text" if suffix in (".pbtxt", ".txt")
                              else "binary")
        if kind == "text":
            return _read_pbtxt(path, signature)
        if kind == "onnx":
            from pipeline.graph.onnx_reader import read_onnx

            return read_onnx(path)
        return _read_meta(path, signature) if suffix == ".meta" else _read_pb(path, signature)
    if suffix in (".keras", ".h5", ".hdf5"):
        from pipeline.graph.keras_reader import read_keras

        return read_keras(path)
    raise DeployError("{}: unsupported model file extension {!r}; expected {}".format(
        path, suffix or "(none)", SUPPORTED))


# -- files and parsing ---------------------------------------------------------------------------

_TEXT_START = re.compile(rb"\s*(#[^\n]*\n\s*)*(node|versions|library|meta_graphs|graph_def|meta_info_def|"
                         rb"saved_model_schema_version|signature_def|collection_def|saver_def)\s*[{:]")


def sniff_protobuf(path, expected):
    """What a protobuf model file holds, by content: "text" (protobuf text format: a GraphDef,
    SavedModel or meta graph), "onnx" (an ONNX model) or "binary" (TensorFlow's binary protobuf).
    ``expected``: what the file's name says; content only overrules it when it clearly is another
    format (so a broken file gets the message of the format its name says, and a big binary
    GraphDef is not parsed twice)."""
    try:
        with open(str(path), "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return expected
    if _TEXT_START.match(head):
        return "text"
    if expected == "binary":
        return "onnx" if head[:1] == b"\x08" and _is_onnx(path.read_bytes()) else "binary"
    data = path.read_bytes()  # a .onnx or .pbtxt file that is not text: which binary is it?
    if _is_onnx(data):
        return "onnx"
    return "binary" if _is_tf_binary(data) else expected


def _is_tf_binary(data):
    from pipeline.graph import proto

    for cls in (proto.GraphDef, proto.MetaGraphDef, proto.SavedModel):
        msg, _ = _parse_binary(cls, data)
        if msg is None:
            continue
        graphs = [msg] if cls is proto.GraphDef else [msg.graph_def] if cls is proto.MetaGraphDef else \
            [m.graph_def for m in msg.meta_graphs]
        if any(_looks_like_graph(g) for g in graphs):
            return True
    return False


def _is_onnx(data):
    """An ONNX ModelProto with an opset and at least one node (a GraphDef's bytes parse as an empty one)."""
    if data[:1] != b"\x08":  # ModelProto starts with ir_version (field 1, varint) as onnx writes it
        return False
    try:
        import onnx
    except ImportError:
        return False
    model, _ = _parse_binary(onnx.ModelProto, data)
    return model is not None and bool(model.opset_import) and bool(model.graph.node) and \
        all(isinstance(n.op_type, str) and _OP_NAME.match(n.op_type) for n in model.graph.node[:3])

def _read_bytes(path, what):
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DeployError("{}: cannot read {}: {}".format(path, what, e.strerror or e))
    if not data:
        raise DeployError("{}: file is empty; expected {}".format(path, what))
    return data


def _parse_binary(cls, data):
    """(message, None) or (None, a short reason)."""
    from google.protobuf.message import DecodeError

    msg = cls()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        return None, _reason(e)
    return msg, None


def _parse_text(cls, text):
    from google.protobuf import text_format

    msg = cls()
    try:
        text_format.Parse(text, msg, allow_unknown_field=True)
    except text_format.ParseError as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        where = re.match(r"(\d+):(\d+) : (?:'.*': )?(.*)", text)
        if where:
            return None, _reason("line {} column {}: {}".format(where.group(1), where.group(2), where.group(3)))
        return None, _reason(e)
    return msg, None


def _reason(error):
    """A parse error as a short phrase for a one-line message."""
    text = (str(error).strip().splitlines() or [""])[0]
    text = re.sub(r"^Error parsing message( with type '[^']*')?:?\s*", "", text)
    text = text or "parse error"
    text = text[:1].lower() + text[1:]
    return text if len(text) <= 100 else text[:97] + "..."


def _has_unknown_fields(msg):
    try:
        from google.protobuf import unknown_fields

        return len(unknown_fields.UnknownFieldSet(msg)) > 0
    except Exception:  # older protobuf: cannot tell
        return False


def _looks_like_graph(graph_def):
    """Nodes with names and op names: tells a real GraphDef from other bytes that happen to parse."""
    nodes = graph_def.node
    if not nodes:
        return False
    for i in {0, len(nodes) // 2, len(nodes) - 1}:
        node = nodes[i]
        if not node.name or not _OP_NAME.match(node.op):
            return False
    return True


def _read_pb(path, signature):
    from pipeline.graph import proto

    data = _read_bytes(path, "a frozen GraphDef")
    graph_def, error = _parse_binary(proto.GraphDef, data)
    if graph_def is not None and _looks_like_graph(graph_def):
        return _frozen_view(graph_def, path, "frozen_pb")
    saved_model, _ = _parse_binary(proto.SavedModel, data)
    if saved_model is not None and any(_looks_like_graph(m.graph_def) for m in saved_model.meta_graphs):
        return _saved_model_view(saved_model, path.parent, path, signature)
    meta_graph, _ = _parse_binary(proto.MetaGraphDef, data)
    if meta_graph is not None and _looks_like_graph(meta_graph.graph_def):
        return _meta_graph_view(meta_graph, path, signature)
    if graph_def is not None and not graph_def.node and not _has_unknown_fields(graph_def):
        raise DeployError("{}: GraphDef has no nodes; export the model's graph again".format(path))
    raise DeployError("{}: not a TensorFlow GraphDef: the file is truncated or not protobuf ({}); expected a "
                      "frozen graph saved with tf.io.write_graph(..., as_text=False)".format(
                          path, error or "no nodes found"))


def _read_pbtxt(path, signature):
    from pipeline.graph import proto

    data = _read_bytes(path, "a text GraphDef")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise DeployError("{}: not a text GraphDef (the file is not UTF-8 text); a binary GraphDef must be "
                          "named .pb".format(path))
    graph_def, error = _parse_text(proto.GraphDef, text)
    if graph_def is not None and graph_def.node:
        return _frozen_view(graph_def, path, "pbtxt")
    if re.search(r"^\s*meta_graphs\s*[:{]", text, re.M):
        saved_model, _ = _parse_text(proto.SavedModel, text)
        if saved_model is not None and any(m.graph_def.node for m in saved_model.meta_graphs):
            return _saved_model_view(saved_model, path.parent, path, signature)
    if re.search(r"^\s*graph_def\s*[:{]", text, re.M):
        meta_graph, _ = _parse_text(proto.MetaGraphDef, text)
        if meta_graph is not None and meta_graph.graph_def.node:
            return _meta_graph_view(meta_graph, path, signature, fmt="pbtxt")
    if graph_def is not None:
        raise DeployError("{}: GraphDef has no nodes; expected a graph in protobuf text format "
                          "(node {{ name: ... op: ... }})".format(path))
    raise DeployError("{}: not a text GraphDef ({}); expected a graph in protobuf text format, as written by "
                      "tf.io.write_graph(..., as_text=True)".format(path, error))


def _read_meta(path, signature):
    from pipeline.graph import proto

    data = _read_bytes(path, "a TF1 meta graph")
    meta_graph, error = _parse_binary(proto.MetaGraphDef, data)
    if meta_graph is None or not _looks_like_graph(meta_graph.graph_def):
        if meta_graph is not None and not meta_graph.graph_def.node and not _has_unknown_fields(meta_graph):
            raise DeployError("{}: meta graph has no nodes; save the graph again with tf.compat.v1.train.Saver"
                              .format(path))
        raise DeployError("{}: not a TF1 meta graph: the file is truncated or not protobuf ({}); expected the .meta "
                          "file tf.compat.v1.train.Saver writes".format(path, error or "no graph found"))
    return _meta_graph_view(meta_graph, path, signature)


def _read_saved_model(directory, signature):
    from pipeline.graph import proto

    pb = directory / "saved_model.pb"
    if pb.is_file():
        data = _read_bytes(pb, "a SavedModel")
        saved_model, error = _parse_binary(proto.SavedModel, data)
        source = pb
    else:
        source = directory / "saved_model.pbtxt"
        data = _read_bytes(source, "a SavedModel")
        try:
            saved_model, error = _parse_text(proto.SavedModel, data.decode("utf-8"))
        except UnicodeDecodeError:
            saved_model, error = None, "not UTF-8 text"
    if saved_model is None or not saved_model.meta_graphs:
        raise DeployError("{}: not a SavedModel: the file is truncated or not protobuf ({}); copy the SavedModel "
                          "directory again".format(source, error or "no meta graphs"))
    return _saved_model_view(saved_model, directory, source, signature)


# -- TensorFlow views ----------------------------------------------------------------------------

def _frozen_view(graph_def, path, fmt, not_output_prefix=None):
    """The whole graph: inputs = Placeholders, outputs = sinks (Const/NoOp/Assert/Save/Restore excluded)."""
    if graph_def.library.function:
        flattener = Flattener(graph_def)
        flattener.reach([(flattener.outer, name) for name in flattener.outer.nodes])
        nodes = flattener.emit()
        consumed = set()
        for node in nodes.values():
            consumed.update(tensor.partition(":")[0] for tensor in node.inputs)
            consumed.update(node.control_inputs)
    else:
        nodes, consumed = _plain_nodes(graph_def)
    inputs, outputs, shapes = [], [], {}
    for node in nodes.values():
        if node.op == "Placeholder":
            inputs.append(node.name + ":0")
            shapes[node.name + ":0"] = node.attrs.get("shape")
        elif node.name not in consumed and node.op not in NOT_OUTPUTS:
            if not_output_prefix and node.name.startswith(not_output_prefix):
                continue
            outputs.append(node.name + ":0")
    graph = Graph(kind="tensorflow", nodes=nodes, inputs=inputs, outputs=outputs, source=str(path), format=fmt,
                  input_shapes=shapes)
    _lazy_tensor_types(graph, {})
    return graph


def _plain_nodes(graph_def):
    """GraphDef nodes -> ({name: Node}, names of consumed nodes), no functions to inline.

    The hot loop for big graphs (about 3 us a node): one pass, no attribute decoded.
    """
    nodes, consumed = {}, set()
    consume = consumed.add
    decode = decode_node_def_attrs
    for nd in graph_def.node:
        data, control = [], []
        for tensor in nd.input:
            if tensor[:1] == "^":
                tensor = tensor[1:]
                control.append(tensor)
                consume(tensor)
            else:
                if tensor[-2:] == ":0":
                    tensor = tensor[:-2]
                data.append(tensor)
                consume(tensor.partition(":")[0])
        name = nd.name
        nodes[name] = lazy_node(name, nd.op, data, control, decode, nd, nd.device)
    return nodes, consumed


def _lazy_tensor_types(graph, known):
    """Graph.tensor_types computed on first access: dtypes from attributes, then ``known`` on top."""
    del graph.__dict__["tensor_types"]

    def compute(g):
        types = tf_tensor_types(g)
        types.update(known)
        return types

    graph.__dict__["_tensor_types_source"] = compute


def _pick_meta_graph(saved_model, source):
    metas = list(saved_model.meta_graphs)
    serve = [m for m in metas if "serve" in m.meta_info_def.tags]
    if serve:
        return serve[0]
    if len(metas) == 1:
        return metas[0]
    tags = "; ".join(",".join(m.meta_info_def.tags) or "(no tags)" for m in metas)
    raise DeployError("{}: SavedModel has no meta graph tagged 'serve' (tag sets: {}); export it with "
                      "tags=['serve']".format(source, tags))


def _signatures(meta_graph):
    return sorted(k for k in meta_graph.signature_def if not k.startswith("__"))


def _saved_model_view(saved_model, directory, source, signature):
    meta_graph = _pick_meta_graph(saved_model, source)
    names = _signatures(meta_graph)
    if signature not in meta_graph.signature_def:
        if not names:
            raise DeployError("{}: SavedModel has no signatures; export it with a serving signature "
                              "(tf.saved_model.save(..., signatures=...))".format(source))
        raise DeployError("{}: SavedModel has no signature {!r}; available: {}; pick one of them".format(
            source, signature, ", ".join(names)))
    if _has_variables(meta_graph.graph_def) and not (Path(directory) / "variables" / "variables.index").is_file():
        raise DeployError("SavedModel {} has no variables (variables/variables.index missing); copy the whole "
                          "SavedModel directory".format(directory))
    return _signature_view(meta_graph, signature, str(directory), "saved_model")


def _meta_graph_view(meta_graph, path, signature, fmt="meta_graph"):
    names = _signatures(meta_graph)
    if signature in meta_graph.signature_def:
        return _signature_view(meta_graph, signature, str(path), fmt)
    if names:
        raise DeployError("{}: meta graph has no signature {!r}; available: {}; pick one of them".format(
            path, signature, ", ".join(names)))
    # A TF1 checkpoint meta graph has no signatures: view it whole, the saver's nodes not outputs.
    saver_scope = None
    for tensor in (meta_graph.saver_def.save_tensor_name, meta_graph.saver_def.restore_op_name):
        if "/" in tensor:
            saver_scope = tensor.split("/", 1)[0] + "/"
            break
    return _frozen_view(meta_graph.graph_def, path, fmt, not_output_prefix=saver_scope)


def _has_variables(graph_def):
    ops = _VARIABLE_OPS
    if any(nd.op in ops for nd in graph_def.node):
        return True
    return any(nd.op in ops for f in graph_def.library.function for nd in f.node_def)


def _tensor_info_name(info):
    if info.name:
        return info.name
    if info.HasField("coo_sparse"):
        return info.coo_sparse.values_tensor_name
    return ""


def _signature_view(meta_graph, signature, source, fmt):
    from pipeline.graph.proto import dtype_name

    sig = meta_graph.signature_def[signature]
    # Tensors by name (a composite tensor's TensorInfo, which has none, is left out).
    in_infos = [(key, sig.inputs[key]) for key in sorted(sig.inputs) if _tensor_info_name(sig.inputs[key])]
    out_infos = [(key, sig.outputs[key]) for key in sorted(sig.outputs) if _tensor_info_name(sig.outputs[key])]
    known = {}
    input_shapes, output_shapes = {}, {}
    for key, info in in_infos:
        name = _tensor_name(_tensor_info_name(info))
        if info.dtype:
            known[name] = dtype_name(info.dtype)
        input_shapes[name] = decode_tf_shape(info.tensor_shape) if info.HasField("tensor_shape") else None
    graph = _pruned_view(meta_graph.graph_def, [_tensor_info_name(i) for _, i in in_infos],
                         [_tensor_info_name(i) for _, i in out_infos], source, fmt)
    for (key, info), name in zip(out_infos, graph.outputs):
        if info.dtype:
            known[name] = dtype_name(info.dtype)
        output_shapes[name] = decode_tf_shape(info.tensor_shape) if info.HasField("tensor_shape") else None
    graph.input_shapes = input_shapes
    graph.output_shapes = output_shapes
    graph.signature = {"name": signature, "inputs": dict(zip([k for k, _ in in_infos], graph.inputs)),
                       "outputs": dict(zip([k for k, _ in out_infos], graph.outputs))}
    _lazy_tensor_types(graph, known)
    return graph


def _tensor_name(name):
    return name if ":" in name else name + ":0"


def _pruned_view(graph_def, input_names, output_names, source, fmt):
    """Nodes reachable from ``output_names`` (plus the input nodes), functions inlined."""
    flattener = Flattener(graph_def)
    outer = flattener.outer
    roots = []
    for tensor in list(output_names) + list(input_names):
        if tensor:
            roots.append((outer, tensor.lstrip("^").partition(":")[0]))
    flattener.reach(roots)
    nodes = flattener.emit()
    outputs = []
    for tensor in output_names:
        resolved = flattener.resolve(outer, tensor) if tensor else None
        outputs.append(_tensor_name(resolved or tensor))
    inputs = [_tensor_name(t) for t in input_names if t]
    return Graph(kind="tensorflow", nodes=nodes, inputs=inputs, outputs=outputs, source=source, format=fmt)
