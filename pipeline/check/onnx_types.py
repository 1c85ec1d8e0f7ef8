"""What an ONNX model says of its values: type names, one graph's scope (types, ranks, shapes,
initializers, producers, and the scopes around an If/Loop/Scan body), schema lookups, shape/type
inference (cached) and model loading (cached). The ONNX rules (onnx_rules, onnx_dtypes) and the
batch semantics (onnx_batch) read models through these.
"""

STANDARD = ("", "ai.onnx")  # the default ONNX domain, both spellings


# ------------------------------------------------------------------------------ types


def type_name(elem_type):
    """TYPES-style name of an ONNX elem_type: FLOAT -> FP32, FLOAT8E4M3FN -> FP8, STRING -> STRING."""
    import onnx

    try:
        name = onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return "TYPE_{}".format(elem_type)
    special = {"FLOAT": "FP32", "DOUBLE": "FP64", "FLOAT16": "FP16", "BFLOAT16": "BF16"}
    if name in special:
        return special[name]
    if name.startswith("FLOAT8"):
        return "FP8"
    if name.startswith("FLOAT4"):
        return "FP4"
    return name


def value_kind(type_proto):
    """('tensor', elem_type, rank or None) | ('sequence'|'optional'|'map'|'sparse', None, None) | None."""
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        t = type_proto.tensor_type
        rank = len(t.shape.dim) if t.HasField("shape") else None
        return ("tensor", t.elem_type or None, rank)
    if which == "sequence_type":
        return ("sequence", None, None)
    if which == "optional_type":
        return ("optional", None, None)
    if which == "map_type":
        return ("map", None, None)
    if which == "sparse_tensor_type":
        return ("sparse", type_proto.sparse_tensor_type.elem_type or None, None)
    return None


class Scope:
    """What one graph (and the graphs around it) knows of its values."""

    def __init__(self, graph, outer=None):
        self.outer = outer
        self.values = {}
        self.dims = {}
        self.initializers = set()
        self.constants = set()  # outputs of Constant nodes
        self.producers = {}
        for info in list(graph.input) + list(graph.output) + list(graph.value_info):
            kind = value_kind(info.type)
            if kind is not None and (info.name not in self.values or self.values[info.name][1] is None):
                self.values[info.name] = kind
                if kind[0] == "tensor" and info.type.tensor_type.HasField("shape"):
                    self.dims[info.name] = [d.dim_value if d.HasField("dim_value") else d.dim_param or None
                                            for d in info.type.tensor_type.shape.dim]
        for t in graph.initializer:
            self.initializers.add(t.name)
            self.values[t.name] = ("tensor", t.data_type, len(t.dims))
            self.dims[t.name] = list(t.dims)
        for t in graph.sparse_initializer:
            self.initializers.add(t.values.name)
        for node in graph.node:
            for out in node.output:
                if out:
                    self.producers[out] = node
            if node.op_type == "Constant" and node.domain in STANDARD:
                self.constants.update(o for o in node.output if o)

    def kind(self, name):
        scope = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            scope = scope.outer
        return None

    def rank(self, name):
        kind = self.kind(name)
        return kind[2] if kind is not None and kind[0] == "tensor" else None

    def shape(self, name):
        scope = self
        while scope is not None:
            if name in scope.dims:
                return scope.dims[name]
            scope = scope.outer
        return None

    def is_weights(self, name):
        """An initializer or a Constant node's output (the parser's weights), here or around."""
        scope = self
        while scope is not None:
            if name in scope.initializers or name in scope.constants:
                return True
            if name in scope.producers or name in scope.values:
                return False
            scope = scope.outer
        return False

    def producer(self, name):
        scope = self
        while scope is not None:
            if name in scope.producers:
                return scope.producers[name]
            scope = scope.outer
        return None


def schema_of(op, domain, opset):
    import onnx.defs

    try:
        return onnx.defs.get_schema(op, opset, domain or "")
    except Exception:  # noqa: BLE001 - unknown op / domain: no schema
        return None


def formal_param(params, index):
    """The schema parameter actual input/output ``index`` binds to (variadic last parameter repeats)."""
    if not params:
        return None
    if index < len(params):
        return params[index]
    last = params[-1]
    import onnx.defs

    return last if last.option == onnx.defs.OpSchema.FormalParameterOption.Variadic else None


def data_type_var(schema, op):
    """The schema type variable the table's per-op types describe."""
    if schema is None:
        return None
    for params in (schema.inputs, schema.outputs):
        if params and not params[0].type_str.startswith("tensor(") and not params[0].type_str.startswith("seq("):
            return params[0].type_str
    return None

_INFERRED = {}


def infer(model):
    """(model with inferred types, None) or (model, why inference failed); the last result is cached."""
    key = id(model)
    hit = _INFERRED.get(key)
    if hit is not None and hit[0] is model:
        return hit[1], hit[2]
    import onnx

    try:  # strict: an inconsistent model (shapes that cannot meet) is reported, not silently half-typed
        result, problem = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True), None
    except Exception as e:  # noqa: BLE001 - inference raises many kinds; the check goes on without it
        text = str(e).strip().splitlines()
        problem = "{}: {}".format(type(e).__name__, text[-1][:200] if text else "")
        try:
            result = onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception:  # noqa: BLE001
            result = model
    _INFERRED.clear()
    _INFERRED[key] = (model, result, problem)
    return result, problem


def default_opset(model):
    opset = None
    for entry in model.opset_import:
        if entry.domain in STANDARD:
            opset = entry.version
    return opset

def node_names(graph):
    """The names deploy's graph view gives the nodes (an unnamed node: <op>_<index>), in order."""
    names = []
    seen = set()
    for index, node in enumerate(graph.node):
        name = node.name or "{}_{}".format(node.op_type, index)
        if name in seen:
            name = "{}_{}".format(name, index)
        seen.add(name)
        names.append(name)
    return names


def attr(node, name, default=None):
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


_LOADED = {}


def load_model(path):
    """The ModelProto at ``path`` (no external data), cached per (path, mtime, size); None when it cannot be read."""
    import os

    try:
        stat = os.stat(str(path))
    except (OSError, TypeError, ValueError):
        return None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _LOADED:
        import onnx

        try:
            model = onnx.load(str(path), load_external_data=False)
        except Exception:  # noqa: BLE001 - not a readable ONNX file: the reader reports that
            model = None
        _LOADED.clear()
        _LOADED[key] = model
    return _LOADED[key]
