"""read_model(path) -> Graph: a frozen GraphDef, a SavedModel, a TF1 meta graph, ONNX or Keras.

Only ``.keras`` / ``.h5`` import TensorFlow; every other format is read with deploy's own copy
of TensorFlow's protobuf messages (``pipeline.graph.proto``) or the ``onnx`` package.

SavedModels and meta graphs with a signature are viewed from the signature: only the nodes the
signature's outputs need, through data and control inputs and into the functions those nodes
call (see ``_Flattener``). Frozen graphs are viewed whole.
"""

import re
from pathlib import Path

from pipeline.errors import DeployError
from pipeline.graph.view import Graph, TensorValue, decode_node_def_attrs, decode_tf_shape, lazy_node, tf_tensor_types

SUPPORTED = ("a frozen GraphDef (.pb, .pbtxt), a SavedModel directory, a TF1 meta graph (.meta), "
             "an ONNX model (.onnx) or a Keras model (.keras, .h5)")

# Sinks that are not model outputs (frozen graphs and meta graphs without a signature).
_NOT_OUTPUTS = frozenset(["Const", "NoOp", "Assert", "Placeholder", "PlaceholderWithDefault", "SaveV2", "Save",
                          "SaveSlices", "RestoreV2", "Restore", "RestoreSlice", "MergeV2Checkpoints"])
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
    if suffix == ".pb":
        if path.name == "saved_model.pb":
            return _read_saved_model(path.parent, signature)
        return _read_pb(path, signature)
    if suffix == ".pbtxt":
        if path.name == "saved_model.pbtxt":
            return _read_saved_model(path.parent, signature)
        return _read_pbtxt(path, signature)
    if suffix == ".meta":
        return _read_meta(path, signature)
    if suffix == ".onnx":
        return _read_onnx(path)
    if suffix in (".keras", ".h5", ".hdf5"):
        return _read_keras(path)
    raise DeployError("{}: unsupported model file extension {!r}; expected {}".format(
        path, suffix or "(none)", SUPPORTED))


# -- files and parsing ---------------------------------------------------------------------------

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
        flattener = _Flattener(graph_def)
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
        elif node.name not in consumed and node.op not in _NOT_OUTPUTS:
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
    flattener = _Flattener(graph_def)
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


# -- function inlining ---------------------------------------------------------------------------

_CALL_OPS = frozenset(["PartitionedCall", "StatefulPartitionedCall"])
# Control-flow ops: index of the first data input that feeds the functions' argument 0.
_FIRST_ARG_INPUT = {"While": 0, "StatelessWhile": 0, "_While": 0, "If": 1, "StatelessIf": 1, "_If": 1,
                    "Case": 1, "StatelessCase": 1}
# Output argument names of common multi-output ops, in order (each one tensor), to turn a function
# body's "node:arg:index" into a port. Ops not listed: port = index (right for single-output ops).
_OUTPUT_ARGS = {
    "FusedBatchNorm": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"],
    "FusedBatchNormV2": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"],
    "FusedBatchNormV3": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2",
                         "reserve_space_3"],
    "_FusedBatchNormEx": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2",
                          "reserve_space_3"],
    "Switch": ["output_false", "output_true"], "RefSwitch": ["output_false", "output_true"],
    "Merge": ["output", "value_index"], "RefMerge": ["output", "value_index"],
    "TopK": ["values", "indices"], "TopKV2": ["values", "indices"], "Unique": ["y", "idx"],
    "UniqueV2": ["y", "idx"], "UniqueWithCounts": ["y", "idx", "count"],
    "NonMaxSuppressionV4": ["selected_indices", "valid_outputs"],
    "NonMaxSuppressionV5": ["selected_indices", "selected_scores", "valid_outputs"],
    "CombinedNonMaxSuppression": ["nmsed_boxes", "nmsed_scores", "nmsed_classes", "valid_detections"],
    "QuantizeV2": ["output", "output_min", "output_max"], "MaxPoolWithArgmax": ["output", "argmax"],
    "BroadcastGradientArgs": ["r0", "r1"], "Svd": ["s", "u", "v"], "Qr": ["q", "r"],
    "TensorListPopBack": ["output_handle", "tensor"],
    "CTCGreedyDecoder": ["decoded_indices", "decoded_values", "decoded_shape", "log_probability"],
    "SparseSegmentSumGrad": ["output"], "DecodeProtoV2": ["sizes", "values"],
}
_MAX_INLINE_DEPTH = 64


class _Scope:
    """The outer graph, or one function body instantiated at one call site, with its walk state."""

    __slots__ = ("prefix", "nodes", "order", "parent", "fdef", "args", "outputs", "control_rets", "stack",
                 "seen", "reached", "calls", "children", "names")

    def __init__(self, prefix, node_defs, parent=None, fdef=None, args=None, stack=()):
        self.prefix = prefix
        self.order = [(nd.name, nd) for nd in node_defs]  # file order
        self.nodes = dict(self.order)
        self.parent = parent
        self.fdef = fdef
        self.args = args or {}  # argument name -> the parent scope's tensor feeding it (or None)
        self.outputs = [fdef.ret.get(arg.name) for arg in fdef.signature.output_arg] if fdef is not None else []
        self.control_rets = list(fdef.control_ret.values()) if fdef is not None else []
        self.stack = stack  # names of the functions being inlined, outermost first
        self.seen = set()  # node names visited by the walk
        self.reached = set()  # node names in the view
        self.calls = {}  # call node name -> its body's scope (None: not a call)
        self.children = {}  # node name -> [scopes of the functions in its attributes]
        self.names = {}  # node name -> flat name (inlined scopes)


class _Flattener:
    """Inline the functions a GraphDef's nodes call into one flat {name: Node} view.

    A call node (PartitionedCall / StatefulPartitionedCall ``f``, or a node whose op is a library
    function) is replaced by its function's body, named ``<call node>/<body node>``: the body's
    arguments are the call's data inputs, the call's outputs are the body's ``ret`` tensors, and
    the call node itself is dropped. Other nodes with function attributes (While ``cond``/``body``,
    If ``then_branch``/``else_branch``, Case ``branches``, dataset ops) stay, and their functions'
    bodies are added after them as ``<node>/<attr>/<body node>`` (``<attr>_<i>`` for a list), the
    arguments mapped to the node's data inputs where the op's convention is known (While: all, If
    and Case: all but the first), else left unconnected. Recursive functions are not inlined.

    ``reach(roots)`` walks back from root nodes through data and control inputs, into the bodies
    of the functions reached nodes call (from their ``ret`` and ``control_ret``); ``emit()``
    returns the reached nodes in file order, a body where its call node was.
    """

    def __init__(self, graph_def):
        self.functions = {f.signature.name: f for f in graph_def.library.function}
        self.outer = _Scope("", graph_def.node)
        self.taken = set(self.outer.nodes)  # flat names in use
        self.entered = set()  # ids of child scopes whose bodies are in the view
        self.func_attrs = {}  # op -> names of its attributes that may hold functions

    # naming

    def flat_name(self, scope, name):
        if scope.parent is None:
            return name
        flat = scope.names.get(name)
        if flat is None:
            flat = base = scope.prefix + name
            i = 1
            while flat in self.taken:
                flat = "{}_{}".format(base, i)
                i += 1
            self.taken.add(flat)
            scope.names[name] = flat
        return flat

    # scopes

    def call_scope(self, scope, nd):
        """The body scope replacing call node ``nd``, or None if it is not a call."""
        op = nd.op
        functions = self.functions
        if op not in functions and op not in _CALL_OPS:
            return None
        name = nd.name
        if name in scope.calls:
            return scope.calls[name]
        child = None
        fname = op if op in functions else nd.attr["f"].func.name if "f" in nd.attr else ""
        if fname in functions and fname not in scope.stack and len(scope.stack) < _MAX_INLINE_DEPTH:
            data = [t for t in nd.input if not t.startswith("^")]
            child = self._new_scope(self.flat_name(scope, name) + "/", functions[fname], scope, data, 0)
        scope.calls[name] = child
        return child

    def func_scopes(self, scope, nd):
        """Child scopes for the functions named in a (non-call) node's attributes."""
        name = nd.name
        children = scope.children.get(name)
        if children is not None:
            return children
        children = []
        found = []
        attr = nd.attr
        for key in self._func_attr_names(nd):
            value = attr[key]
            kind = value.WhichOneof("value")
            if kind == "func":
                found.append((key, value.func.name))
            elif kind == "list" and value.list.func:
                found.extend(("{}_{}".format(key, i), f.name) for i, f in enumerate(value.list.func))
        if found:
            data = [t for t in nd.input if not t.startswith("^")]
            first = _FIRST_ARG_INPUT.get(nd.op)
            for label, fname in sorted(found):
                fdef = self.functions.get(fname)
                if fdef is None or fname in scope.stack or len(scope.stack) >= _MAX_INLINE_DEPTH:
                    continue
                n_args = len(fdef.signature.input_arg)
                skip = first if first is not None else (0 if len(data) == n_args else None)
                prefix = "{}/{}/".format(self.flat_name(scope, name), label)
                children.append(self._new_scope(prefix, fdef, scope, data, skip))
        scope.children[name] = children
        return children

    def _func_attr_names(self, nd):
        """Attributes of ``nd`` that may name functions: func, or lists that are not of another kind.

        An op's attribute types are fixed by its OpDef, so this is worked out once per op.
        """
        op = nd.op
        names = self.func_attrs.get(op)
        if names is None:
            names = []
            for key, value in nd.attr.items():
                kind = value.WhichOneof("value")
                if kind == "func":
                    names.append(key)
                elif kind == "list":
                    lst = value.list
                    if lst.func or not (lst.i or lst.f or lst.s or lst.b or lst.type or lst.shape or lst.tensor):
                        names.append(key)
            self.func_attrs[op] = names
        attr = nd.attr
        return [key for key in names if key in attr]

    def _new_scope(self, prefix, fdef, parent, data_inputs, skip):
        args = {}
        for i, arg in enumerate(fdef.signature.input_arg):
            j = None if skip is None else skip + i
            args[arg.name] = data_inputs[j] if j is not None and j < len(data_inputs) else None
        return _Scope(prefix, fdef.node_def, parent, fdef, args, parent.stack + (fdef.signature.name,))

    # reachability

    def reach(self, roots):
        """Mark everything ``roots`` [(scope, node name)] need, through data, control and functions."""
        work = list(roots)
        pop, push, append = work.pop, self._push, work.append
        has_functions = bool(self.functions)
        while work:
            scope, name = pop()
            seen = scope.seen
            if name in seen:
                continue
            seen.add(name)
            nd = scope.nodes.get(name)
            if nd is None:
                continue
            child = self.call_scope(scope, nd) if has_functions else None
            if child is not None:
                self._enter(child, work)
                work.extend((scope, t[1:]) for t in nd.input if t.startswith("^"))
                continue
            scope.reached.add(name)
            args = scope.args
            for tensor in nd.input:
                if tensor[:1] == "^":
                    append((scope, tensor[1:]))
                elif tensor in args:
                    push(scope, tensor, work)
                else:
                    append((scope, tensor.partition(":")[0]))
            if has_functions:
                for child in self.func_scopes(scope, nd):
                    self._enter(child, work)

    def _enter(self, child, work):
        if id(child) in self.entered:
            return
        self.entered.add(id(child))
        for ref in child.outputs:
            if ref:
                self._push(child, ref, work)
        work.extend((child, name) for name in child.control_rets)

    def _push(self, scope, ref, work):
        while scope.fdef is not None and ref in scope.args:  # a function argument: what feeds it
            ref = scope.args[ref]
            if ref is None:
                return
            scope = scope.parent
        work.append((scope, ref.partition(":")[0]))

    # edges

    def resolve(self, scope, ref):
        """A data input in ``scope``'s syntax -> flat tensor "name" / "name:port", or None (unconnected)."""
        for _ in range(10_000):
            if scope.fdef is not None:
                if ref in scope.args:
                    ref = scope.args[ref]
                    if ref is None:
                        return None
                    scope = scope.parent
                    continue
                parts = ref.split(":")
                name = parts[0]
                nd = scope.nodes.get(name)
                port = _int(parts[-1]) if len(parts) > 1 else 0
                if len(parts) == 3:
                    port = self._port(nd, parts[1], port)
            else:
                name, _, port = ref.partition(":")
                port = _int(port)
                nd = scope.nodes.get(name)
            if nd is not None:
                child = self.call_scope(scope, nd)
                if child is not None:
                    out = child.outputs[port] if port < len(child.outputs) else None
                    if not out:
                        return None
                    scope, ref = child, out
                    continue
            flat = self.flat_name(scope, name) if nd is not None else scope.prefix + name
            return flat if port == 0 else "{}:{}".format(flat, port)
        return None

    def _port(self, nd, out_arg, index):
        if nd is None:
            return index
        if nd.op in self.functions:
            names = [a.name for a in self.functions[nd.op].signature.output_arg]
            return names.index(out_arg) + index if out_arg in names else index
        names = _OUTPUT_ARGS.get(nd.op)
        if names and out_arg in names:
            return names.index(out_arg) + index
        return index

    def control_targets(self, scope, name):
        """Flat node names a control dependency on ``name`` stands for (a call: its body's results)."""
        nd = scope.nodes.get(name)
        child = self.call_scope(scope, nd) if nd is not None else None
        if child is None:
            return [self.flat_name(scope, name) if nd is not None else scope.prefix + name]
        targets = []
        for ref in child.outputs:
            flat = self.resolve(child, ref) if ref else None
            if flat:
                targets.append(flat.partition(":")[0])
        for ret in child.control_rets:
            targets.extend(self.control_targets(child, ret))
        return targets

    # output

    def emit(self):
        nodes = {}
        self._emit(self.outer, nodes)
        return nodes

    def _emit(self, scope, nodes):
        reached, entered = scope.reached, self.entered
        for name, nd in scope.order:
            if name in reached:
                node = self._node(scope, nd, name)
                nodes[node.name] = node
                for child in scope.children.get(name, ()):
                    if id(child) in entered:
                        self._emit(child, nodes)
            else:
                child = scope.calls.get(name)
                if child is not None and id(child) in entered:
                    self._emit(child, nodes)

    def _node(self, scope, nd, name):
        data, control = [], []
        for tensor in nd.input:
            if tensor[:1] == "^":
                for target in self.control_targets(scope, tensor[1:]):
                    if target not in control:
                        control.append(target)
            else:
                flat = self.resolve(scope, tensor)
                if flat is not None:
                    data.append(flat)
        return lazy_node(self.flat_name(scope, name), nd.op, data, control, decode_node_def_attrs, nd, nd.device)


def _int(text):
    try:
        return int(text) if text else 0
    except ValueError:
        return 0


# -- ONNX ----------------------------------------------------------------------------------------

def _onnx_dtype_name(value):
    import onnx

    try:
        name = onnx.TensorProto.DataType.Name(value).lower()
    except ValueError:
        return "dtype_{}".format(value)
    special = {"float": "float32", "double": "float64", "undefined": "undefined"}
    if name in special:
        return special[name]
    if name.startswith(("float8", "float6", "float4")) and len(name) > 6:
        return name[:6] + "_" + name[6:]
    return name


def _read_onnx(path):
    data = _read_bytes(path, "an ONNX model")
    import onnx
    from google.protobuf.message import DecodeError

    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise DeployError("{}: not an ONNX model: the file is truncated or not protobuf ({}); export it again "
                          "(tf2onnx / torch.onnx)".format(path, _reason(e)))
    if not model.graph.node:
        if _has_unknown_fields(model) or not model.opset_import:
            raise DeployError("{}: not an ONNX model: no graph found (the file is truncated or not ONNX); export "
                              "it again".format(path))
        raise DeployError("{}: ONNX model has no nodes; export it again".format(path))
    opset = None
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            opset = entry.version
    return _onnx_graph(model.graph, str(path), opset)


def _onnx_graph(graph_proto, source, opset):
    initializer_names = {t.name for t in graph_proto.initializer}
    nodes = {}
    for index, nd in enumerate(graph_proto.node):
        name = nd.name or "{}_{}".format(nd.op_type, index)
        if name in nodes:
            name = "{}_{}".format(name, index)
        nodes[name] = lazy_node(name, nd.op_type, list(nd.input), [], _onnx_attr_decoder(source, opset),
                                nd.attribute, domain=nd.domain, outputs=list(nd.output))
    types, input_shapes, output_shapes = {}, {}, {}
    for info in list(graph_proto.input) + list(graph_proto.output) + list(graph_proto.value_info):
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            types[info.name] = _onnx_dtype_name(info.type.tensor_type.elem_type)
    initializers = {}
    for t in graph_proto.initializer:
        types[t.name] = _onnx_dtype_name(t.data_type)
        initializers[t.name] = _onnx_tensor(t)
    inputs = [i.name for i in graph_proto.input if i.name not in initializer_names]
    for info in graph_proto.input:
        if info.name not in initializer_names:
            input_shapes[info.name] = _onnx_dims(info)
    for info in graph_proto.output:
        output_shapes[info.name] = _onnx_dims(info)
    return Graph(kind="onnx", nodes=nodes, inputs=inputs, outputs=[o.name for o in graph_proto.output],
                 source=source, format="onnx", opset=opset, tensor_types=types, input_shapes=input_shapes,
                 output_shapes=output_shapes, initializers=initializers)


def _onnx_dims(info):
    tensor_type = info.type.tensor_type
    if not info.type.HasField("tensor_type") or not tensor_type.HasField("shape"):
        return None
    dims = []
    for d in tensor_type.shape.dim:
        kind = d.WhichOneof("value")
        dims.append(d.dim_value if kind == "dim_value" else d.dim_param if kind == "dim_param" else None)
    return dims


def _onnx_tensor(tensor):
    from pipeline.graph.view import SMALL_TENSOR_ELEMENTS

    dtype = _onnx_dtype_name(tensor.data_type)
    shape = list(tensor.dims)
    count = 1
    for d in shape:
        count *= max(d, 0)
    value, itemsize = None, 0
    try:
        import onnx
        from onnx import numpy_helper

        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        external = tensor.data_location == onnx.TensorProto.EXTERNAL
        if count <= SMALL_TENSOR_ELEMENTS and not external:
            value = numpy_helper.to_array(tensor)
    except Exception:  # an exotic dtype or a malformed tensor: no value
        value = None
    if dtype == "string":
        nbytes = sum(len(s) for s in tensor.string_data)
    else:
        nbytes = count * itemsize
    return TensorValue(dtype, shape, nbytes, value)


def _onnx_attr_decoder(source, opset):
    def decode(attributes):
        return {a.name: _onnx_attr(a, source, opset) for a in attributes}

    return decode


def _onnx_attr(attr, source, opset):
    import onnx

    A = onnx.AttributeProto
    kind = attr.type
    if kind == A.INT:
        return attr.i
    if kind == A.FLOAT:
        return attr.f
    if kind == A.STRING:
        try:
            return attr.s.decode("utf-8")
        except UnicodeDecodeError:
            return attr.s
    if kind == A.INTS:
        return list(attr.ints)
    if kind == A.FLOATS:
        return list(attr.floats)
    if kind == A.STRINGS:
        return [s.decode("utf-8", "replace") for s in attr.strings]
    if kind == A.TENSOR:
        return _onnx_tensor(attr.t)
    if kind == A.TENSORS:
        return [_onnx_tensor(t) for t in attr.tensors]
    if kind == A.GRAPH:
        return _onnx_graph(attr.g, source, opset)
    if kind == A.GRAPHS:
        return [_onnx_graph(g, source, opset) for g in attr.graphs]
    if kind == A.TYPE_PROTO:
        return str(attr.tp)
    return None


# -- Keras (TensorFlow) --------------------------------------------------------------------------

def _read_keras(path):
    """Load with Keras, trace ``model(x, training=False)`` as a concrete function and freeze it
    (variables to constants, as deploy's export and freeze stages do), then view that graph.

    The view is pruned from the traced outputs and inlined like a SavedModel's.
    """
    if path.stat().st_size == 0:
        raise DeployError("{}: file is empty; expected a Keras model saved with model.save()".format(path))
    from pipeline.tf import import_tf

    try:
        tf = import_tf()
        import keras
    except ImportError as e:
        raise DeployError("{}: reading a Keras model needs TensorFlow ({}); install deploy[tf], or pass the "
                          "exported SavedModel or frozen .pb".format(path, e))
    from pipeline.graph import proto

    try:
        model = keras.models.load_model(str(path), compile=False)
    except Exception as e:  # keras raises many types for a bad file
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise DeployError("{}: cannot load as a Keras model ({}); save it again with model.save()".format(path, first))
    try:
        model_inputs = list(model.inputs)
    except (AttributeError, ValueError):
        model_inputs = []
    if not model_inputs:
        raise DeployError("{}: the Keras model has no defined inputs (a subclassed model that was never built); "
                          "save a functional or Sequential model".format(path))
    specs = [tf.TensorSpec(t.shape, t.dtype, name=re.sub(r"[^A-Za-z0-9_.\-/]", "_", t.name.split(":")[0]))
             for t in model_inputs]

    @tf.function
    def call(*xs):
        return model(xs[0] if len(xs) == 1 else list(xs), training=False)

    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = convert_variables_to_constants_v2(call.get_concrete_function(*specs))
    graph_def = proto.GraphDef()
    graph_def.ParseFromString(concrete.graph.as_graph_def().SerializeToString())
    input_names = [t.name for t in concrete.inputs[:len(specs)]]
    output_names = [t.name for t in concrete.outputs]
    graph = _pruned_view(graph_def, input_names, output_names, str(path), "keras")
    known = {}
    for tensor, spec in zip(concrete.inputs[:len(specs)], specs):
        known[tensor.name] = spec.dtype.name
        graph.input_shapes[tensor.name] = list(spec.shape) if spec.shape.rank is not None else None
    for name, tensor in zip(graph.outputs, concrete.outputs):
        known[name] = tensor.dtype.name
        graph.output_shapes[name] = list(tensor.shape) if tensor.shape.rank is not None else None
    _lazy_tensor_types(graph, known)
    return graph
