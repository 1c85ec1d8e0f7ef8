"""TensorFlow's graph protobuf messages, defined here without TensorFlow and without protoc.

The messages deploy reads (GraphDef, NodeDef, AttrValue, TensorProto, FunctionDefLibrary,
SavedModel, MetaGraphDef, SignatureDef, ...) are described field by field below with the same
names and field numbers as TensorFlow's ``.proto`` files, built into one FileDescriptorProto
(package ``deploy.tf``, so nothing clashes with TensorFlow's own ``tensorflow.*`` messages when
TensorFlow is imported too), added to a private descriptor pool, and turned into message classes:

    from pipeline.graph import proto
    graph_def = proto.GraphDef()
    graph_def.ParseFromString(data)          # the wire format is TensorFlow's
    text_format.Parse(text, proto.GraphDef(), allow_unknown_field=True)   # so are field names

Fields deploy does not need are left out (e.g. GraphDef.debug_info, NodeDef.experimental_type,
MetaGraphDef.object_graph_def, TensorInfo.composite_tensor): the binary parser keeps them as
unknown fields, so reading and re-serializing loses nothing; the text parser needs
``allow_unknown_field=True`` to skip them.

Importing this module costs a few milliseconds (the classes are built on first import).
"""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "deploy.tf"
FILE_NAME = "deploy/tf/graph.proto"

# tensorflow/core/framework/types.proto (TensorFlow 2.21). Unknown values survive parsing (open enum).
_DATA_TYPES = [
    ("DT_INVALID", 0), ("DT_FLOAT", 1), ("DT_DOUBLE", 2), ("DT_INT32", 3), ("DT_UINT8", 4), ("DT_INT16", 5),
    ("DT_INT8", 6), ("DT_STRING", 7), ("DT_COMPLEX64", 8), ("DT_INT64", 9), ("DT_BOOL", 10), ("DT_QINT8", 11),
    ("DT_QUINT8", 12), ("DT_QINT32", 13), ("DT_BFLOAT16", 14), ("DT_QINT16", 15), ("DT_QUINT16", 16),
    ("DT_UINT16", 17), ("DT_COMPLEX128", 18), ("DT_HALF", 19), ("DT_RESOURCE", 20), ("DT_VARIANT", 21),
    ("DT_UINT32", 22), ("DT_UINT64", 23), ("DT_FLOAT8_E5M2", 24), ("DT_FLOAT8_E4M3FN", 25),
    ("DT_FLOAT8_E4M3FNUZ", 26), ("DT_FLOAT8_E4M3B11FNUZ", 27), ("DT_FLOAT8_E5M2FNUZ", 28), ("DT_INT4", 29),
    ("DT_UINT4", 30), ("DT_INT2", 31), ("DT_UINT2", 32), ("DT_FLOAT4_E2M1FN", 33),
]
_DATA_TYPES += [(name + "_REF", number + 100) for name, number in _DATA_TYPES if number]

# DataType enum value -> TensorFlow's dtype name (what ``tf.dtypes.as_dtype(v).name`` says).
_BASE_NAMES = {
    "DT_FLOAT": "float32", "DT_DOUBLE": "float64", "DT_HALF": "float16", "DT_STRING": "string",
    "DT_INVALID": "invalid",
}
DTYPE_NAMES = {}
for _name, _number in _DATA_TYPES:
    _base = _name[3:-4] if _name.endswith("_REF") else _name[3:]
    _pretty = _BASE_NAMES.get("DT_" + _base, _base.lower())
    DTYPE_NAMES[_number] = _pretty + "_ref" if _name.endswith("_REF") else _pretty
DTYPE_ENUMS = {name: number for number, name in DTYPE_NAMES.items()}

_ENUMS = {
    "DataType": _DATA_TYPES,
    "SaverDef.CheckpointFormatVersion": [("LEGACY", 0), ("V1", 1), ("V2", 2)],
}

# Messages: name -> fields (number, name, type[, oneof]). A type is a scalar ("string", "int64",
# ...), a message or enum of this file (dotted for nested), prefixed "repeated " when repeated, or
# "map<K,V>". Nested messages are spelled "Outer.Inner". Field numbers are TensorFlow's.
_MESSAGES = {
    # tensorflow/core/framework/graph.proto
    "GraphDef": [(1, "node", "repeated NodeDef"), (4, "versions", "VersionDef"), (3, "version", "int32"),
                 (2, "library", "FunctionDefLibrary")],  # 5 debug_info: skipped
    # tensorflow/core/framework/versions.proto
    "VersionDef": [(1, "producer", "int32"), (2, "min_consumer", "int32"), (3, "bad_consumers", "repeated int32")],
    # tensorflow/core/framework/node_def.proto
    "NodeDef": [(1, "name", "string"), (2, "op", "string"), (3, "input", "repeated string"), (4, "device", "string"),
                (5, "attr", "map<string,AttrValue>"),
                (6, "experimental_debug_info", "NodeDef.ExperimentalDebugInfo")],  # 7 experimental_type: skipped
    "NodeDef.ExperimentalDebugInfo": [(1, "original_node_names", "repeated string"),
                                      (2, "original_func_names", "repeated string")],
    # tensorflow/core/framework/attr_value.proto
    "AttrValue": [(2, "s", "bytes", "value"), (3, "i", "int64", "value"), (4, "f", "float", "value"),
                  (5, "b", "bool", "value"), (6, "type", "DataType", "value"), (7, "shape", "TensorShapeProto", "value"),
                  (8, "tensor", "TensorProto", "value"), (1, "list", "AttrValue.ListValue", "value"),
                  (10, "func", "NameAttrList", "value"), (9, "placeholder", "string", "value")],
    "AttrValue.ListValue": [(2, "s", "repeated bytes"), (3, "i", "repeated int64"), (4, "f", "repeated float"),
                            (5, "b", "repeated bool"), (6, "type", "repeated DataType"),
                            (7, "shape", "repeated TensorShapeProto"), (8, "tensor", "repeated TensorProto"),
                            (9, "func", "repeated NameAttrList")],
    "NameAttrList": [(1, "name", "string"), (2, "attr", "map<string,AttrValue>")],
    # tensorflow/core/framework/tensor.proto
    "TensorProto": [(1, "dtype", "DataType"), (2, "tensor_shape", "TensorShapeProto"), (3, "version_number", "int32"),
                    (4, "tensor_content", "bytes"), (13, "half_val", "repeated int32"),
                    (5, "float_val", "repeated float"), (6, "double_val", "repeated double"),
                    (7, "int_val", "repeated int32"), (8, "string_val", "repeated bytes"),
                    (9, "scomplex_val", "repeated float"), (10, "int64_val", "repeated int64"),
                    (11, "bool_val", "repeated bool"), (12, "dcomplex_val", "repeated double"),
                    (14, "resource_handle_val", "repeated ResourceHandleProto"),
                    (15, "variant_val", "repeated VariantTensorDataProto"),
                    (16, "uint32_val", "repeated uint32"), (17, "uint64_val", "repeated uint64"),
                    (18, "float8_val", "bytes")],
    "VariantTensorDataProto": [(1, "type_name", "string"), (2, "metadata", "bytes"),
                               (3, "tensors", "repeated TensorProto")],
    # tensorflow/core/framework/resource_handle.proto
    "ResourceHandleProto": [(1, "device", "string"), (2, "container", "string"), (3, "name", "string"),
                            (4, "hash_code", "uint64"), (5, "maybe_type_name", "string"),
                            (6, "dtypes_and_shapes", "repeated ResourceHandleProto.DtypeAndShape")],
    "ResourceHandleProto.DtypeAndShape": [(1, "dtype", "DataType"), (2, "shape", "TensorShapeProto")],
    # tensorflow/core/framework/tensor_shape.proto
    "TensorShapeProto": [(2, "dim", "repeated TensorShapeProto.Dim"), (3, "unknown_rank", "bool")],
    "TensorShapeProto.Dim": [(1, "size", "int64"), (2, "name", "string")],
    # tensorflow/core/framework/function.proto
    "FunctionDefLibrary": [(1, "function", "repeated FunctionDef"), (2, "gradient", "repeated GradientDef"),
                           (3, "registered_gradients", "repeated RegisteredGradient")],
    "FunctionDef": [(1, "signature", "OpDef"), (5, "attr", "map<string,AttrValue>"),
                    (7, "arg_attr", "map<uint32,FunctionDef.ArgAttrs>"),
                    (8, "resource_arg_unique_id", "map<uint32,uint32>"),
                    (3, "node_def", "repeated NodeDef"), (4, "ret", "map<string,string>"),
                    (6, "control_ret", "map<string,string>")],
    "FunctionDef.ArgAttrs": [(1, "attr", "map<string,AttrValue>")],
    "GradientDef": [(1, "function_name", "string"), (2, "gradient_func", "string")],
    "RegisteredGradient": [(1, "gradient_func", "string"), (2, "registered_op_type", "string")],
    # tensorflow/core/framework/op_def.proto
    "OpDef": [(1, "name", "string"), (2, "input_arg", "repeated OpDef.ArgDef"),
              (3, "output_arg", "repeated OpDef.ArgDef"), (20, "control_output", "repeated string"),
              (4, "attr", "repeated OpDef.AttrDef"), (8, "deprecation", "OpDeprecation"), (5, "summary", "string"),
              (6, "description", "string"), (18, "is_commutative", "bool"), (16, "is_aggregate", "bool"),
              (17, "is_stateful", "bool"), (19, "allows_uninitialized_input", "bool"),
              (21, "is_distributed_communication", "bool")],
    "OpDef.ArgDef": [(1, "name", "string"), (2, "description", "string"), (3, "type", "DataType"),
                     (4, "type_attr", "string"), (5, "number_attr", "string"), (6, "type_list_attr", "string"),
                     (7, "handle_data", "repeated ResourceHandleProto.DtypeAndShape"),
                     (16, "is_ref", "bool")],  # 17 experimental_full_type: skipped
    "OpDef.AttrDef": [(1, "name", "string"), (2, "type", "string"), (3, "default_value", "AttrValue"),
                      (4, "description", "string"), (5, "has_minimum", "bool"), (6, "minimum", "int64"),
                      (7, "allowed_values", "AttrValue")],
    "OpDeprecation": [(1, "version", "int32"), (2, "explanation", "string")],
    "OpList": [(1, "op", "repeated OpDef")],
    # tensorflow/core/protobuf/saved_model.proto
    "SavedModel": [(1, "saved_model_schema_version", "int64"), (2, "meta_graphs", "repeated MetaGraphDef")],
    # tensorflow/core/protobuf/meta_graph.proto
    "MetaGraphDef": [(1, "meta_info_def", "MetaGraphDef.MetaInfoDef"), (2, "graph_def", "GraphDef"),
                     (3, "saver_def", "SaverDef"), (4, "collection_def", "map<string,CollectionDef>"),
                     (5, "signature_def", "map<string,SignatureDef>"),
                     (6, "asset_file_def", "repeated AssetFileDef")],  # 7 object_graph_def: skipped
    "MetaGraphDef.MetaInfoDef": [(1, "meta_graph_version", "string"), (2, "stripped_op_list", "OpList"),
                                 (4, "tags", "repeated string"),  # 3 any_info: skipped
                                 (5, "tensorflow_version", "string"), (6, "tensorflow_git_version", "string"),
                                 (7, "stripped_default_attrs", "bool"),
                                 (8, "function_aliases", "map<string,string>")],
    "CollectionDef": [(1, "node_list", "CollectionDef.NodeList", "kind"),
                      (2, "bytes_list", "CollectionDef.BytesList", "kind"),
                      (3, "int64_list", "CollectionDef.Int64List", "kind"),
                      (4, "float_list", "CollectionDef.FloatList", "kind")],  # 5 any_list: skipped
    "CollectionDef.NodeList": [(1, "value", "repeated string")],
    "CollectionDef.BytesList": [(1, "value", "repeated bytes")],
    "CollectionDef.Int64List": [(1, "value", "repeated int64")],
    "CollectionDef.FloatList": [(1, "value", "repeated float")],
    "TensorInfo": [(1, "name", "string", "encoding"), (4, "coo_sparse", "TensorInfo.CooSparse", "encoding"),
                   (2, "dtype", "DataType"), (3, "tensor_shape", "TensorShapeProto")],  # 5 composite_tensor: skipped
    "TensorInfo.CooSparse": [(1, "values_tensor_name", "string"), (2, "indices_tensor_name", "string"),
                             (3, "dense_shape_tensor_name", "string")],
    "SignatureDef": [(1, "inputs", "map<string,TensorInfo>"), (2, "outputs", "map<string,TensorInfo>"),
                     (3, "method_name", "string"), (4, "defaults", "map<string,TensorProto>")],
    "AssetFileDef": [(1, "tensor_info", "TensorInfo"), (2, "filename", "string")],
    # tensorflow/core/protobuf/saver.proto
    "SaverDef": [(1, "filename_tensor_name", "string"), (2, "save_tensor_name", "string"),
                 (3, "restore_op_name", "string"), (4, "max_to_keep", "int32"), (5, "sharded", "bool"),
                 (6, "keep_checkpoint_every_n_hours", "float"), (7, "version", "SaverDef.CheckpointFormatVersion")],
}

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64,
    "int32": _F.TYPE_INT32, "uint32": _F.TYPE_UINT32, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
}


def _set_type(field, type_name):
    if type_name in _SCALARS:
        field.type = _SCALARS[type_name]
    elif type_name in _ENUMS:
        field.type = _F.TYPE_ENUM
        field.type_name = ".{}.{}".format(PACKAGE, type_name)
    elif type_name in _MESSAGES:
        field.type = _F.TYPE_MESSAGE
        field.type_name = ".{}.{}".format(PACKAGE, type_name)
    else:
        raise ValueError("unknown type {!r} in pipeline.graph.proto".format(type_name))


def _entry_name(field_name):
    return "".join(part[:1].upper() + part[1:] for part in field_name.split("_")) + "Entry"


def _build_message(name, fields, out):
    out.name = name.rsplit(".", 1)[-1]
    oneofs = []
    for spec in fields:
        number, field_name, type_spec = spec[:3]
        field = out.field.add(number=number, name=field_name, json_name=_json_name(field_name))
        field.label = _F.LABEL_OPTIONAL
        if type_spec.startswith("map<"):
            key_type, value_type = type_spec[4:-1].split(",")
            entry = out.nested_type.add(name=_entry_name(field_name))
            entry.options.map_entry = True
            for n, (entry_field, entry_type) in enumerate((("key", key_type), ("value", value_type)), 1):
                f = entry.field.add(number=n, name=entry_field, json_name=entry_field, label=_F.LABEL_OPTIONAL)
                _set_type(f, entry_type)
            field.label = _F.LABEL_REPEATED
            field.type = _F.TYPE_MESSAGE
            field.type_name = ".{}.{}.{}".format(PACKAGE, name, entry.name)
            continue
        if type_spec.startswith("repeated "):
            field.label = _F.LABEL_REPEATED
            type_spec = type_spec[len("repeated "):]
        _set_type(field, type_spec)
        if len(spec) > 3:
            if spec[3] not in oneofs:
                oneofs.append(spec[3])
                out.oneof_decl.add(name=spec[3])
            field.oneof_index = oneofs.index(spec[3])


def _json_name(field_name):
    head, *rest = field_name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def file_descriptor_proto():
    """The FileDescriptorProto of deploy's copy of TensorFlow's graph messages (a fresh object)."""
    fdp = descriptor_pb2.FileDescriptorProto(name=FILE_NAME, package=PACKAGE, syntax="proto3")
    built = {}
    for name in sorted(_MESSAGES, key=lambda n: n.count(".")):  # parents before nested messages
        parent, _, _ = name.rpartition(".")
        container = built[parent].nested_type if parent else fdp.message_type
        built[name] = container.add()
        _build_message(name, _MESSAGES[name], built[name])
    for name, values in _ENUMS.items():
        parent, _, short = name.rpartition(".")
        enum = (built[parent].enum_type if parent else fdp.enum_type).add(name=short)
        for value_name, number in values:
            enum.value.add(name=value_name, number=number)
    return fdp


POOL = descriptor_pool.DescriptorPool()
POOL.Add(file_descriptor_proto())


def message_class(name):
    """The message class for ``name`` ("GraphDef", "AttrValue.ListValue", ...) from the private pool."""
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName("{}.{}".format(PACKAGE, name)))


GraphDef = message_class("GraphDef")
NodeDef = message_class("NodeDef")
AttrValue = message_class("AttrValue")
NameAttrList = message_class("NameAttrList")
TensorProto = message_class("TensorProto")
TensorShapeProto = message_class("TensorShapeProto")
VersionDef = message_class("VersionDef")
FunctionDefLibrary = message_class("FunctionDefLibrary")
FunctionDef = message_class("FunctionDef")
GradientDef = message_class("GradientDef")
OpDef = message_class("OpDef")
SavedModel = message_class("SavedModel")
MetaGraphDef = message_class("MetaGraphDef")
SignatureDef = message_class("SignatureDef")
TensorInfo = message_class("TensorInfo")
CollectionDef = message_class("CollectionDef")
SaverDef = message_class("SaverDef")

# The DataType enum values by name (DT_FLOAT = 1, ...), for building graphs in tests and tools.
DataType = {name: number for name, number in _DATA_TYPES}


def dtype_name(enum_value):
    """TensorFlow's dtype name for a DataType value: 1 -> "float32"; unknown values -> "dtype_<n>"."""
    return DTYPE_NAMES.get(enum_value) or "dtype_{}".format(enum_value)
