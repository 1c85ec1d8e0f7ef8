"""TensorFlow's formats as graph views: frozen GraphDefs (.pb, .pbtxt), TF1 meta graphs, SavedModels.

Read with deploy's own copy of TensorFlow's protobuf messages (``pipeline.graph.proto``): no
TensorFlow is imported. SavedModels and meta graphs with a signature are viewed from the signature:
only the nodes the signature's outputs need, through data and control inputs and into the functions
those nodes call (``pipeline.graph.inline``). Frozen graphs are viewed whole (``frozen_view``).
"""

import re
from pathlib import Path

from pipeline.errors import DeployError
from pipeline.graph.inline import Flattener
from pipeline.graph.io import NOT_OUTPUTS
from pipeline.graph.parsing import (has_unknown_fields, looks_like_graph, parse_binary, parse_text,
                                    read_bytes)
from pipeline.graph.tf_attrs import decode_node_def_attrs, decode_tf_shape, tf_tensor_types
from pipeline.graph.view import Graph, Node

_VARIABLE_OPS = frozenset(["VarHandleOp", "_VarHandlesOp", "VariableV2", "Variable", "AutoReloadVariable"])


def read_pb(path, signature):
    from pipeline.graph import proto

    data = read_bytes(path, "a frozen GraphDef")
    graph_def, error = parse_binary(proto.GraphDef, data)
    if graph_def is not None and looks_like_graph(graph_def):
        return frozen_view(graph_def, path, "frozen_pb")
    saved_model, _ = parse_binary(proto.SavedModel, data)
    if saved_model is not None and any(looks_like_graph(m.graph_def) for m in saved_model.meta_graphs):
        return _saved_model_view(saved_model, path.parent, path, signature)
    meta_graph, _ = parse_binary(proto.MetaGraphDef, data)
    if meta_graph is not None and looks_like_graph(meta_graph.graph_def):
        return _meta_graph_view(meta_graph, path, signature)
    if graph_def is not None and not graph_def.node and not has_unknown_fields(graph_def):
        raise DeployError("{}: GraphDef has no nodes; export the model's graph again".format(path))
    raise DeployError("{}: not a TensorFlow GraphDef: the file is truncated or not protobuf ({}); expected a "
                      "frozen graph saved with tf.io.write_graph(..., as_text=False)".format(
                          path, error or "no nodes found"))


def read_pbtxt(path, signature):
    from pipeline.graph import proto

    data = read_bytes(path, "a text GraphDef")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise DeployError("{}: not a text GraphDef (the file is not UTF-8 text); a binary GraphDef must be "
                          "named .pb".format(path))
    graph_def, error = parse_text(proto.GraphDef, text)
    if graph_def is not None and graph_def.node:
        return frozen_view(graph_def, path, "pbtxt")
    if re.search(r"^\s*meta_graphs\s*[:{]", text, re.M):
        saved_model, _ = parse_text(proto.SavedModel, text)
        if saved_model is not None and any(m.graph_def.node for m in saved_model.meta_graphs):
            return _saved_model_view(saved_model, path.parent, path, signature)
    if re.search(r"^\s*graph_def\s*[:{]", text, re.M):
        meta_graph, _ = parse_text(proto.MetaGraphDef, text)
        if meta_graph is not None and meta_graph.graph_def.node:
            return _meta_graph_view(meta_graph, path, signature, fmt="pbtxt")
    if graph_def is not None:
        raise DeployError("{}: GraphDef has no nodes; expected a graph in protobuf text format "
                          "(node {{ name: ... op: ... }})".format(path))
    raise DeployError("{}: not a text GraphDef ({}); expected a graph in protobuf text format, as written by "
                      "tf.io.write_graph(..., as_text=True)".format(path, error))


def read_meta(path, signature):
    from pipeline.graph import proto

    data = read_bytes(path, "a TF1 meta graph")
    meta_graph, error = parse_binary(proto.MetaGraphDef, data)
    if meta_graph is None or not looks_like_graph(meta_graph.graph_def):
        if meta_graph is not None and not meta_graph.graph_def.node and not has_unknown_fields(meta_graph):
            raise DeployError("{}: meta graph has no nodes; save the graph again with tf.compat.v1.train.Saver"
                              .format(path))
        raise DeployError("{}: not a TF1 meta graph: the file is truncated or not protobuf ({}); expected the .meta "
                          "file tf.compat.v1.train.Saver writes".format(path, error or "no graph found"))
    return _meta_graph_view(meta_graph, path, signature)


def read_saved_model(directory, signature):
    from pipeline.graph import proto

    pb = directory / "saved_model.pb"
    if pb.exists():  # a FIFO or a device by this name is refused by read_bytes, by name
        data = read_bytes(pb, "a SavedModel")
        saved_model, error = parse_binary(proto.SavedModel, data)
        source = pb
    else:
        source = directory / "saved_model.pbtxt"
        data = read_bytes(source, "a SavedModel")
        try:
            saved_model, error = parse_text(proto.SavedModel, data.decode("utf-8"))
        except UnicodeDecodeError:
            saved_model, error = None, "not UTF-8 text"
    if saved_model is None or not saved_model.meta_graphs:
        raise DeployError("{}: not a SavedModel: the file is truncated or not protobuf ({}); copy the SavedModel "
                          "directory again".format(source, error or "no meta graphs"))
    return _saved_model_view(saved_model, directory, source, signature)


def frozen_view(graph_def, path, fmt, not_output_prefix=None):
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
    lazy_tensor_types(graph, {})
    return graph


def _plain_nodes(graph_def):
    """GraphDef nodes -> ({name: Node}, names of consumed nodes), no functions to inline.

    The hot loop for big graphs (about 2 us a node, most of it protobuf's field access): one pass,
    no attribute decoded, a node's inputs looked at one by one only when one has a port or is a
    control input, and ``lazy_node`` inlined.
    """
    nodes, consumed = {}, set()
    consume, consume_all = consumed.add, consumed.update
    decode = decode_node_def_attrs
    new = Node.__new__
    for nd in graph_def.node:
        data = list(nd.input)
        control = []
        if data:
            joined = "".join(data)
            if ":" in joined or "^" in joined:
                data = []
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
            else:
                consume_all(data)
        name = nd.name
        node = nodes[name] = new(Node)  # lazy_node(name, nd.op, data, control, decode, nd, nd.device)
        node.__dict__ = {"name": name, "op": nd.op, "inputs": data, "control_inputs": control, "device": nd.device,
                         "domain": "", "outputs": [], "_attr_source": (decode, nd)}
    return nodes, consumed


def lazy_tensor_types(graph, known):
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
    return frozen_view(meta_graph.graph_def, path, fmt, not_output_prefix=saver_scope)


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
    graph = pruned_view(meta_graph.graph_def, [_tensor_info_name(i) for _, i in in_infos],
                         [_tensor_info_name(i) for _, i in out_infos], source, fmt)
    for (key, info), name in zip(out_infos, graph.outputs):
        if info.dtype:
            known[name] = dtype_name(info.dtype)
        output_shapes[name] = decode_tf_shape(info.tensor_shape) if info.HasField("tensor_shape") else None
    graph.input_shapes = input_shapes
    graph.output_shapes = output_shapes
    graph.signature = {"name": signature, "inputs": dict(zip([k for k, _ in in_infos], graph.inputs)),
                       "outputs": dict(zip([k for k, _ in out_infos], graph.outputs))}
    graph.signatures = signature_inputs(meta_graph)  # every signature's inputs, not only the one viewed
    lazy_tensor_types(graph, known)
    return graph


_PARSE_EXAMPLE_OPS = frozenset(["ParseExample", "ParseExampleV2", "ParseSingleExample", "ParseSequenceExample",
                                "ParseSequenceExampleV2", "ParseSingleSequenceExample"])
_EXAMPLE_METHODS = ("tensorflow/serving/classify", "tensorflow/serving/regress")
TF_EXAMPLE = "tf.Example"  # the kind of a string input that carries serialized tf.Example protos


def signature_inputs(meta_graph):
    """Every signature of a SavedModel / meta graph (sorted, ``__`` internal ones left out):
    {name: {"method": method_name, "inputs": [{"key", "tensor", "dtype", "shape", "kind"}]}}.
    ``kind`` is "tf.Example" for a string input that carries serialized tf.Example protos (a
    classify / regress signature, or a string input of a graph that parses examples), else
    "tensor". Shapes as in ``graph.input_shapes`` (None for an unknown rank)."""
    from pipeline.graph.proto import dtype_name

    parses = None
    result = {}
    for name in _signatures(meta_graph):
        sig = meta_graph.signature_def[name]
        inputs = []
        for key in sorted(sig.inputs):
            info = sig.inputs[key]
            dtype = dtype_name(info.dtype) if info.dtype else None
            kind = "tensor"
            if dtype == "string":
                if parses is None:
                    graph_def = meta_graph.graph_def
                    parses = any(nd.op in _PARSE_EXAMPLE_OPS for nd in graph_def.node) or any(
                        nd.op in _PARSE_EXAMPLE_OPS for f in graph_def.library.function for nd in f.node_def)
                if sig.method_name in _EXAMPLE_METHODS or parses:
                    kind = TF_EXAMPLE
            inputs.append({"key": key, "tensor": _tensor_info_name(info), "dtype": dtype,
                           "shape": decode_tf_shape(info.tensor_shape) if info.HasField("tensor_shape") else None,
                           "kind": kind})
        result[name] = {"method": sig.method_name, "inputs": inputs}
    return result


def describe_signatures(signatures):
    """One line per signature: its inputs, a tf.Example input named as such."""
    lines = []
    for name, sig in signatures.items():
        parts = []
        for i in sig["inputs"]:
            shape = "?" if i["shape"] is None else "[" + ", ".join("?" if d is None else str(d) for d in i["shape"]) + "]"
            text = "{} {} {}".format(i["key"], i["dtype"] or "?", shape)
            if i["kind"] == TF_EXAMPLE:
                text += " (serialized tf.Example protos, parsed in the graph)"
            parts.append(text)
        method = sig["method"].rsplit("/", 1)[-1] if sig["method"] else "?"
        lines.append("signature {} ({}): {}".format(name, method, "; ".join(parts) if parts else "no inputs"))
    return lines


def _tensor_name(name):
    return name if ":" in name else name + ":0"


def pruned_view(graph_def, input_names, output_names, source, fmt):
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
