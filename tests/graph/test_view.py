"""pipeline.graph.view: the graph IR (attribute decoding, edges, order). No TensorFlow."""

import pickle

import numpy as np
import pytest

from pipeline.graph import UNKNOWN_RANK, AttrPlaceholder, Graph, Node, TensorValue, proto, read_model
from pipeline.graph.tf_attrs import decode_tf_attr, decode_tf_tensor

DT = proto.DataType


def _tensor(dtype, shape, **fields):
    t = proto.TensorProto(dtype=DT[dtype])
    for d in shape:
        t.tensor_shape.dim.add(size=d)
    for key, value in fields.items():
        if key == "tensor_content":
            t.tensor_content = value
        else:
            getattr(t, key).extend(value)
    return t


# -- attributes ----------------------------------------------------------------------------------

def test_scalar_attrs():
    assert decode_tf_attr(proto.AttrValue(i=-3)) == -3
    assert decode_tf_attr(proto.AttrValue(f=0.5)) == 0.5
    assert decode_tf_attr(proto.AttrValue(b=True)) is True
    assert decode_tf_attr(proto.AttrValue(s=b"SAME")) == "SAME"
    assert decode_tf_attr(proto.AttrValue(s=b"\xff\x00")) == b"\xff\x00"  # not text: bytes kept
    assert decode_tf_attr(proto.AttrValue(type=DT["DT_UINT8"])) == "uint8"
    assert decode_tf_attr(proto.AttrValue(type=DT["DT_STRING"])) == "string"
    assert decode_tf_attr(proto.AttrValue(placeholder="T")) == AttrPlaceholder("T")
    assert decode_tf_attr(proto.AttrValue()) is None


def test_list_attrs():
    v = proto.AttrValue()
    v.list.i.extend([1, 2, 2, 1])
    assert decode_tf_attr(v) == [1, 2, 2, 1]
    v = proto.AttrValue()
    v.list.type.extend([DT["DT_FLOAT"], DT["DT_INT64"]])
    assert decode_tf_attr(v) == ["float32", "int64"]
    v = proto.AttrValue()
    v.list.s.extend([b"a", b"b"])
    assert decode_tf_attr(v) == ["a", "b"]
    v = proto.AttrValue()
    v.list.shape.add().dim.add(size=2)
    v.list.shape.add(unknown_rank=True)
    assert decode_tf_attr(v) == [[2], UNKNOWN_RANK]
    v = proto.AttrValue()
    v.list.func.add(name="f1")
    v.list.func.add(name="f2")
    assert decode_tf_attr(v) == ["f1", "f2"]
    v = proto.AttrValue()
    v.list.SetInParent()
    assert decode_tf_attr(v) == []


def test_shape_and_func_attrs():
    v = proto.AttrValue()
    for d in (-1, 224, 224, 3):
        v.shape.dim.add(size=d)
    assert decode_tf_attr(v) == [None, 224, 224, 3]
    v = proto.AttrValue()
    v.shape.unknown_rank = True
    assert decode_tf_attr(v) is UNKNOWN_RANK
    v = proto.AttrValue()
    v.shape.SetInParent()
    assert decode_tf_attr(v) == []  # a scalar: known rank 0
    v = proto.AttrValue()
    v.func.name = "__inference_body_12"
    assert decode_tf_attr(v) == "__inference_body_12"


def test_tensor_values():
    content = np.arange(6, dtype=np.float32).reshape(2, 3)
    tv = decode_tf_tensor(_tensor("DT_FLOAT", [2, 3], tensor_content=content.tobytes()))
    assert (tv.dtype, tv.shape, tv.nbytes) == ("float32", [2, 3], 24)
    np.testing.assert_array_equal(tv.value, content)
    # a splat: one value fills the tensor
    tv = decode_tf_tensor(_tensor("DT_FLOAT", [4], float_val=[0.5]))
    np.testing.assert_array_equal(tv.value, [0.5] * 4)
    # no values at all: zeros
    tv = decode_tf_tensor(_tensor("DT_INT32", [2], int_val=[]))
    np.testing.assert_array_equal(tv.value, [0, 0])
    tv = decode_tf_tensor(_tensor("DT_INT64", [], int64_val=[7]))
    assert tv.shape == [] and tv.value == 7 and tv.nbytes == 8
    tv = decode_tf_tensor(_tensor("DT_HALF", [2], half_val=np.array([1.5, -2], np.float16).view(np.uint16).tolist()))
    np.testing.assert_array_equal(tv.value, np.array([1.5, -2], np.float16))
    tv = decode_tf_tensor(_tensor("DT_BOOL", [2], bool_val=[True, False]))
    assert tv.value.tolist() == [True, False]
    tv = decode_tf_tensor(_tensor("DT_STRING", [2], string_val=[b"ab", b"cde"]))
    assert tv.nbytes == 5 and tv.value.tolist() == [b"ab", b"cde"]
    bf16 = (np.array([1.0, -3.0], np.float32).view(np.uint32) >> 16).astype("<u2")
    tv = decode_tf_tensor(_tensor("DT_BFLOAT16", [2], tensor_content=bf16.tobytes()))
    assert tv.dtype == "bfloat16" and tv.value.tolist() == [1.0, -3.0]


def test_big_tensor_has_no_value():
    big = np.zeros((128, 128), np.float32)
    tv = decode_tf_tensor(_tensor("DT_FLOAT", [128, 128], tensor_content=big.tobytes()))
    assert (tv.dtype, tv.shape, tv.nbytes, tv.value) == ("float32", [128, 128], 65536, None)
    tv = decode_tf_tensor(_tensor("DT_FLOAT", [100, 1000], float_val=[1.0]))  # splat: bytes as dense
    assert tv.nbytes == 400_000 and tv.value is None


# -- nodes read from a file: lazy attributes ------------------------------------------------------

def _write_graph(tmp_path, nodes, name="g.pb"):
    gd = proto.GraphDef()
    for spec in nodes:
        nd = gd.node.add(name=spec[0], op=spec[1], input=spec[2] if len(spec) > 2 else [])
        for key, value in (spec[3] if len(spec) > 3 else {}).items():
            nd.attr[key].CopyFrom(value)
    path = tmp_path / name
    path.write_bytes(gd.SerializeToString())
    return path


def test_attrs_are_decoded_on_first_access(tmp_path):
    path = _write_graph(tmp_path, [("x", "Placeholder", [], {"dtype": proto.AttrValue(type=1)}),
                                   ("y", "Relu", ["x"], {"T": proto.AttrValue(type=1)})])
    graph = read_model(path)
    node = graph.nodes["y"]
    assert "attrs" not in node.__dict__
    assert graph.tensor_types == {"x:0": "float32", "y:0": "float32"}
    assert "attrs" not in node.__dict__  # tensor_types reads the protobuf, decodes nothing
    assert node.attrs == {"T": "float32"}
    assert "attrs" in node.__dict__
    assert node == Node("y", "Relu", ["x"], [], {"T": "float32"})
    clone = pickle.loads(pickle.dumps(graph.nodes["x"]))
    assert clone.attrs == {"dtype": "float32"} and clone.name == "x"


# -- edges and order -----------------------------------------------------------------------------

def _tf_graph(specs):
    nodes = {}
    for name, op, inputs in specs:
        data = [i for i in inputs if not i.startswith("^")]
        control = [i[1:] for i in inputs if i.startswith("^")]
        nodes[name] = Node(name, op, data, control, {})
    return Graph(kind="tensorflow", nodes=nodes, inputs=[], outputs=[])


def test_consumers_and_producer():
    g = _tf_graph([("x", "Placeholder", []), ("s", "Split", ["x"]), ("a", "Add", ["s", "s:1"]),
                   ("b", "Relu", ["s:1", "^a"]), ("c", "Mul", ["a", "x"])])
    assert [n.name for n in g.consumers("s")] == ["a", "b"]  # once per consumer, any port
    assert [n.name for n in g.consumers("x")] == ["s", "c"]
    assert [n.name for n in g.consumers("a")] == ["c"]  # control edges are not data consumers
    assert g.consumers("c") == []
    assert g.producer("s:1").name == "s"
    assert g.producer("x").name == "x"
    assert g.producer("nope:0") is None
    g.nodes["d"] = Node("d", "Neg", ["c"], [], {})
    assert g.consumers("c") == []  # cached ...
    g.invalidate()
    assert [n.name for n in g.consumers("c")] == ["d"]  # ... until invalidated


def test_topological_order_keeps_file_order_when_possible():
    g = _tf_graph([("x", "Placeholder", []), ("a", "Relu", ["x"]), ("b", "Neg", ["a"])])
    assert [n.name for n in g.topological_order()] == ["x", "a", "b"]
    g = _tf_graph([("b", "Neg", ["a", "^c"]), ("a", "Relu", ["x"]), ("x", "Placeholder", []),
                   ("c", "NoOp", [])])
    order = [n.name for n in g.topological_order()]
    assert order.index("x") < order.index("a") < order.index("b") and order.index("c") < order.index("b")
    assert sorted(order) == ["a", "b", "c", "x"]


def test_topological_order_with_a_tf1_loop():
    g = _tf_graph([("x", "Placeholder", []), ("enter", "Enter", ["x"]), ("merge", "Merge", ["enter", "next"]),
                   ("add", "Add", ["merge"]), ("next", "NextIteration", ["add"]), ("exit", "Exit", ["merge"])])
    order = [n.name for n in g.topological_order()]
    assert sorted(order) == sorted(g.nodes)
    assert order.index("x") < order.index("enter") < order.index("merge") < order.index("add")


def test_onnx_edges_use_value_names():
    nodes = {
        "conv": Node("conv", "Conv", ["x", "w", ""], [], {}, outputs=["conv:0"]),
        "relu": Node("relu", "Relu", ["conv:0"], [], {}, outputs=["y"]),
        "add": Node("add", "Add", ["conv:0", "y"], [], {}, outputs=["z"]),
    }
    g = Graph(kind="onnx", nodes=nodes, inputs=["x"], outputs=["z"])
    assert [n.name for n in g.consumers("conv")] == ["relu", "add"]
    assert g.producer("y").name == "relu"
    assert g.producer("x") is None and g.producer("w") is None
    assert [n.name for n in g.topological_order()] == ["conv", "relu", "add"]


def test_tensor_value_equality():
    a = TensorValue("float32", [2], 8, np.array([1, 2], np.float32))
    assert a == TensorValue("float32", [2], 8, np.array([1, 2], np.float32))
    assert a != TensorValue("float32", [2], 8, np.array([1, 3], np.float32))
    assert TensorValue("float32", [9999, 9], 1, None) == TensorValue("float32", [9999, 9], 1, None)


@pytest.mark.parametrize("kind", ["tensorflow", "onnx"])
def test_empty_graph(kind):
    g = Graph(kind=kind, nodes={}, inputs=[], outputs=[])
    assert g.topological_order() == [] and g.consumers("x") == [] and g.producer("x") is None
