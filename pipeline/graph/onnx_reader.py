"""ONNX models into the graph view, with the ``onnx`` package (imported inside the reader)."""

from pipeline.errors import DeployError
from pipeline.graph.parsing import has_unknown_fields, read_bytes, reason
from pipeline.graph.view import Graph, TensorValue, lazy_node


def onnx_dtype_name(value):
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


def read_onnx(path):
    data = read_bytes(path, "an ONNX model")
    import onnx
    from google.protobuf.message import DecodeError

    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise DeployError("{}: not an ONNX model: the file is truncated or not protobuf ({}); export it again "
                          "(tf2onnx / torch.onnx)".format(path, reason(e)))
    if not model.graph.node:
        if has_unknown_fields(model) or not model.opset_import:
            raise DeployError("{}: not an ONNX model: no graph found (the file is truncated or not ONNX); export "
                              "it again".format(path))
        raise DeployError("{}: ONNX model has no nodes; export it again".format(path))
    return onnx_model_view(model, path)


def onnx_model_view(model, source):
    """The Graph view of an ONNX ModelProto already in memory. ``source``: the file it was read from or
    written to (the checks read the ModelProto itself from it: check/onnx_types.load_model)."""
    opset = None
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            opset = entry.version
    return _onnx_graph(model.graph, str(source), opset)


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
            types[info.name] = onnx_dtype_name(info.type.tensor_type.elem_type)
    initializers = {}
    for t in graph_proto.initializer:
        types[t.name] = onnx_dtype_name(t.data_type)
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

    dtype = onnx_dtype_name(tensor.data_type)
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
