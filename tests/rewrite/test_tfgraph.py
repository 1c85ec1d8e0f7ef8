"""TFGraph.load reads a frozen graph file once; anything else (or a file that does not parse as one) goes
through graph.readers.read_model for its one-line error. No TensorFlow: pipeline.graph.proto GraphDefs."""

from pathlib import Path

import numpy as np
import pytest

import pipeline.graph.readers as readers
from pipeline.errors import DeployError
from pipeline.graph import proto
from pipeline.rewrite.tfgraph import TFGraph


def _graph_def():
    graph_def = proto.GraphDef()
    x = graph_def.node.add(name="input", op="Placeholder")
    x.attr["dtype"].type = 1
    graph_def.node.add(name="output", op="Relu", input=["input"]).attr["T"].type = 1
    return graph_def


@pytest.fixture
def reads(monkeypatch):
    """Counts: files read whole (Path.read_bytes), read_model calls."""
    counts = {"read_bytes": 0, "read_model": 0}
    read_bytes, read_model = Path.read_bytes, readers.read_model

    def counted_read_bytes(self):
        counts["read_bytes"] += 1
        return read_bytes(self)

    def counted_read_model(*args, **kw):
        counts["read_model"] += 1
        return read_model(*args, **kw)

    monkeypatch.setattr(Path, "read_bytes", counted_read_bytes)
    monkeypatch.setattr(readers, "read_model", counted_read_model)
    return counts


@pytest.mark.parametrize("name, text", [("frozen.pb", False), ("frozen.pbtxt", True), ("text_named.pb", True)])
def test_a_frozen_graph_is_read_once(tmp_path, reads, name, text):
    from google.protobuf import text_format

    path = tmp_path / name
    if text:
        path.write_text(text_format.MessageToString(_graph_def()))
    else:
        path.write_bytes(_graph_def().SerializeToString())
    graph = TFGraph.load(path)
    assert graph.graph_def == _graph_def()
    assert reads == {"read_bytes": 1, "read_model": 0}


@pytest.mark.parametrize("name, content, message", [
    ("empty.pb", b"", "file is empty; expected a frozen GraphDef"),
    ("garbage.pb", b"\xff\xff\xff\xff", "not a TensorFlow GraphDef"),
    ("missing.pb", None, "no such file or directory"),
    ("model.meta", b"", "file is empty; expected a TF1 meta graph"),
])
def test_anything_else_gets_read_models_error(tmp_path, reads, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DeployError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TFGraph.load(path)
    assert reads["read_model"] == 1


def test_a_meta_graph_is_refused(tmp_path, reads):
    meta_graph = proto.MetaGraphDef()
    meta_graph.graph_def.CopyFrom(_graph_def())
    path = tmp_path / "model.meta"
    path.write_bytes(meta_graph.SerializeToString())
    with pytest.raises(DeployError, match=r"is a meta graph \(a training checkpoint's graph\); deploy rewrite takes"):
        TFGraph.load(path)
    assert reads["read_model"] == 1


def test_an_onnx_model_named_pb_is_refused(tmp_path):
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "model.pb"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    with pytest.raises(DeployError, match=r"is an ONNX model \(rename it to .onnx to rewrite it as one\)"):
        TFGraph.load(path)


def test_a_function_library_is_refused(tmp_path):
    graph_def = _graph_def()
    graph_def.library.function.add().signature.name = "f"
    path = tmp_path / "lib.pb"
    path.write_bytes(graph_def.SerializeToString())
    with pytest.raises(DeployError, match="the graph has a function library"):
        TFGraph.load(path)


@pytest.mark.parametrize("value", [np.array(-1, dtype=np.int32), np.int32(7), np.array([2, 3], dtype=np.int32)])
def test_set_const_keeps_the_shape_it_is_given(value):
    """A scalar stays a scalar (numpy's ascontiguousarray alone makes it [1]: a Reshape fed [-1] where
    it read -1 changes rank downstream); the value reads back the same."""
    graph = TFGraph(_graph_def())
    node = graph.node("output")
    graph.set_const(node, value)
    back = graph.const_value(node)
    assert back.shape == np.shape(value) and back.dtype == np.int32
    assert np.array_equal(back, value)
