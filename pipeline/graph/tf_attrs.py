"""TensorFlow attributes, tensors and dtypes decoded into the graph view's plain values.

    decode_node_def_attrs(node_def)  # {name: value} for Node.attrs (called on first access)
    decode_tf_attr(attr_value)       # one AttrValue; decode_tf_shape, decode_tf_tensor likewise
    tf_tensor_types(graph)           # {"node:port": "float32"} from the nodes' dtype attributes

What each kind becomes is in ``decode_tf_attr``'s doc. No TensorFlow is imported.
"""

from pipeline.graph.view import SMALL_TENSOR_ELEMENTS, UNKNOWN_RANK, AttrPlaceholder, TensorValue


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
