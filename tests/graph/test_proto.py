"""pipeline.graph.proto: deploy's own copy of TensorFlow's graph messages."""

import subprocess
import sys

import numpy as np
import pytest
from google.protobuf import text_format

from pipeline.graph import proto


def _sample_graph_def():
    gd = proto.GraphDef()
    gd.versions.producer = 1882
    x = gd.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = proto.DataType["DT_FLOAT"]
    x.attr["shape"].shape.dim.add(size=-1)
    x.attr["shape"].shape.dim.add(size=3)
    w = gd.node.add(name="w", op="Const")
    w.attr["dtype"].type = proto.DataType["DT_FLOAT"]
    t = w.attr["value"].tensor
    t.dtype = proto.DataType["DT_FLOAT"]
    t.tensor_shape.dim.add(size=3)
    t.float_val.extend([1.0, 2.0, 3.0])
    y = gd.node.add(name="y", op="Mul", input=["x", "w", "^x"], device="/device:CPU:0")
    y.attr["T"].type = proto.DataType["DT_FLOAT"]
    y.attr["strides"].list.i.extend([1, 2, 2, 1])
    y.attr["padding"].s = b"SAME"
    f = gd.library.function.add()
    f.signature.name = "fn"
    f.signature.input_arg.add(name="a", type=proto.DataType["DT_FLOAT"])
    f.signature.output_arg.add(name="out", type=proto.DataType["DT_FLOAT"])
    f.node_def.add(name="n", op="Relu", input=["a"])
    f.ret["out"] = "n:features:0"
    return gd


def test_wire_format_is_tensorflows():
    # NodeDef: name = field 1, op = field 2, input = field 3 (all length-delimited).
    node = proto.NodeDef(name="a", op="B", input=["c"])
    assert node.SerializeToString() == b"\n\x01a\x12\x01B\x1a\x01c"
    # AttrValue: i = field 3 (varint), type = field 6.
    assert proto.AttrValue(i=5).SerializeToString() == b"\x18\x05"
    assert proto.AttrValue(type=proto.DataType["DT_INT64"]).SerializeToString() == b"\x30\x09"
    # TensorShapeProto.dim = field 2, Dim.size = field 1; unknown_rank = field 3.
    assert proto.TensorShapeProto(unknown_rank=True).SerializeToString() == b"\x18\x01"


def test_round_trip_binary_and_text():
    gd = _sample_graph_def()
    again = proto.GraphDef()
    again.ParseFromString(gd.SerializeToString())
    assert again == gd
    text = text_format.MessageToString(gd)
    assert 'op: "Placeholder"' in text and "DT_FLOAT" in text
    parsed = text_format.Parse(text, proto.GraphDef())
    assert parsed == gd


def test_unknown_fields_survive_a_round_trip():
    # Field 7 of NodeDef (experimental_type) is not described here: kept as an unknown field.
    raw = proto.NodeDef(name="a", op="B").SerializeToString() + b"\x3a\x02\x08\x02"
    node = proto.NodeDef()
    node.ParseFromString(raw)
    assert node.name == "a"
    assert node.SerializeToString() == raw


def test_messages_live_in_deploys_own_package():
    assert proto.GraphDef.DESCRIPTOR.full_name == "deploy.tf.GraphDef"
    assert proto.MetaGraphDef.DESCRIPTOR.fields_by_name["signature_def"].number == 5
    assert proto.dtype_name(1) == "float32"
    assert proto.dtype_name(101) == "float32_ref"
    assert proto.dtype_name(19) == "float16"
    assert proto.dtype_name(999) == "dtype_999"


def test_saved_model_messages():
    sm = proto.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    sig = mg.signature_def["serving_default"]
    sig.inputs["x"].name = "x:0"
    sig.inputs["x"].dtype = proto.DataType["DT_FLOAT"]
    sig.outputs["y"].name = "y:0"
    mg.graph_def.CopyFrom(_sample_graph_def())
    again = proto.SavedModel()
    again.ParseFromString(sm.SerializeToString())
    assert again.meta_graphs[0].signature_def["serving_default"].inputs["x"].name == "x:0"
    assert again.meta_graphs[0].graph_def.node[2].op == "Mul"


def test_importing_proto_does_not_import_tensorflow():
    code = "import sys; import pipeline.graph.proto; assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- against TensorFlow's own messages -----------------------------------------------------------

def _tf_message_classes():
    from tensorflow.core.framework import graph_pb2
    from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

    return {"GraphDef": graph_pb2.GraphDef, "SavedModel": saved_model_pb2.SavedModel,
            "MetaGraphDef": meta_graph_pb2.MetaGraphDef}


def _walk(descriptor, seen):
    if descriptor.full_name in seen:
        return
    seen[descriptor.full_name] = descriptor
    for field in descriptor.fields:
        if field.message_type is not None:
            _walk(field.message_type, seen)


@pytest.mark.tf
def test_every_field_matches_tensorflows_descriptor():
    from pipeline.tf import import_tf

    import_tf()
    mine, theirs = {}, {}
    for name, cls in _tf_message_classes().items():
        _walk(proto.message_class(name).DESCRIPTOR, mine)
        _walk(cls.DESCRIPTOR, theirs)
    checked = 0
    for full_name, descriptor in mine.items():
        tf_name = "tensorflow." + full_name[len("deploy.tf."):]
        assert tf_name in theirs, full_name
        tf_desc = theirs[tf_name]
        for field in descriptor.fields:
            tf_field = tf_desc.fields_by_number.get(field.number)
            assert tf_field is not None, "{}.{}".format(full_name, field.name)
            assert tf_field.name == field.name, "{}.{}".format(full_name, field.name)
            assert tf_field.type == field.type, "{}.{}".format(full_name, field.name)
            assert tf_field.is_repeated == field.is_repeated, "{}.{}".format(full_name, field.name)
            for kind in ("message_type", "enum_type"):
                a, b = getattr(field, kind), getattr(tf_field, kind)
                assert (a is None) == (b is None)
                if a is not None:
                    assert a.full_name.split(".", 2)[-1] == b.full_name.split(".", 1)[-1], field.full_name
            assert (field.containing_oneof is None) == (tf_field.containing_oneof is None), field.full_name
            checked += 1
    assert checked > 150
    from tensorflow.core.framework import types_pb2

    tf_values = {v.name: v.number for v in types_pb2.DataType.DESCRIPTOR.values}
    assert proto.DataType == tf_values


@pytest.mark.tf
def test_dtype_names_are_tensorflows():
    from pipeline.tf import import_tf

    tf = import_tf()
    for number, name in proto.DTYPE_NAMES.items():
        if number:
            assert tf.dtypes.as_dtype(number).name == name


@pytest.mark.tf
def test_tensorflow_graph_round_trips_through_deploys_messages():
    from pipeline.tf import import_tf

    tf = import_tf()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 3], name="x")
        w = tf.constant(np.random.default_rng(0).normal(size=(3, 3, 3, 4)).astype("float32"), name="w")
        y = tf.nn.conv2d(x, w, strides=2, padding="SAME", name="conv")
        a, b = tf.split(y, 2, axis=3, name="split")
        tf.identity(a * b, name="out")
    tf_gd = graph.as_graph_def()
    mine = proto.GraphDef()
    mine.ParseFromString(tf_gd.SerializeToString())
    assert [n.name for n in mine.node] == [n.name for n in tf_gd.node]
    back = type(tf_gd)()
    back.ParseFromString(mine.SerializeToString())
    assert back == tf_gd
    # text: TensorFlow's text format parses with deploy's classes
    text = text_format.MessageToString(tf_gd)
    parsed = text_format.Parse(text, proto.GraphDef(), allow_unknown_field=True)
    back = type(tf_gd)()
    back.ParseFromString(parsed.SerializeToString())
    assert back == tf_gd


@pytest.mark.tf
def test_saved_model_round_trips_and_coexists_with_tensorflow(tmp_path):
    from pipeline.tf import import_tf

    tf = import_tf()

    class M(tf.Module):
        def __init__(self):
            self.v = tf.Variable([1.0, 2.0])

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
        def serve(self, x):
            return {"y": x * self.v}

    m = M()
    tf.saved_model.save(m, str(tmp_path), signatures={"serving_default": m.serve})
    data = (tmp_path / "saved_model.pb").read_bytes()
    from tensorflow.core.protobuf import saved_model_pb2

    theirs = saved_model_pb2.SavedModel()
    theirs.ParseFromString(data)
    mine = proto.SavedModel()
    mine.ParseFromString(data)
    assert len(mine.meta_graphs) == len(theirs.meta_graphs)
    assert set(mine.meta_graphs[0].signature_def) == set(theirs.meta_graphs[0].signature_def)
    assert [f.signature.name for f in mine.meta_graphs[0].graph_def.library.function] == \
        [f.signature.name for f in theirs.meta_graphs[0].graph_def.library.function]
    again = saved_model_pb2.SavedModel()
    again.ParseFromString(mine.SerializeToString())  # skipped fields (object_graph_def) kept as unknown
    assert again == theirs
