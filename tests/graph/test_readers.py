"""pipeline.graph.readers.read_model on every format, good and bad.

The tests without a ``tf`` mark build their models with deploy's own protobuf classes or
onnx.helper; the ``tf`` ones build real graphs with TensorFlow and check read_model sees what
TensorFlow's own parser sees.
"""

import collections
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

from pipeline.errors import DeployError
from pipeline.graph import UNKNOWN_RANK, Graph, proto, read_model

DT = proto.DataType
ROOT = Path(__file__).resolve().parents[2]


# -- building graphs without TensorFlow ----------------------------------------------------------

def _attr(value):
    """Python -> AttrValue: int, float, bool, bytes/str, ("type", name), ("shape", dims), ("func", name)."""
    if isinstance(value, proto.AttrValue):
        return value
    a = proto.AttrValue()
    if isinstance(value, tuple) and value[0] == "type":
        a.type = DT[value[1]]
    elif isinstance(value, tuple) and value[0] == "shape":
        a.shape.SetInParent()
        if value[1] is None:
            a.shape.unknown_rank = True
        else:
            for d in value[1]:
                a.shape.dim.add(size=-1 if d is None else d)
    elif isinstance(value, tuple) and value[0] == "func":
        a.func.name = value[1]
    elif isinstance(value, tuple) and value[0] == "tensor":
        a.tensor.CopyFrom(value[1])
    elif isinstance(value, bool):
        a.b = value
    elif isinstance(value, int):
        a.i = value
    elif isinstance(value, float):
        a.f = value
    elif isinstance(value, (str, bytes)):
        a.s = value.encode() if isinstance(value, str) else value
    elif isinstance(value, list):
        a.list.i.extend(value)
    return a


def _add(container, name, op, inputs=(), device="", **attrs):
    nd = container.add(name=name, op=op, input=list(inputs), device=device)
    for key, value in attrs.items():
        nd.attr[key].CopyFrom(_attr(value))
    return nd


def _float_tensor(values, shape):
    t = proto.TensorProto(dtype=DT["DT_FLOAT"])
    for d in shape:
        t.tensor_shape.dim.add(size=d)
    t.tensor_content = np.asarray(values, np.float32).tobytes()
    return ("tensor", t)


def _function(library, name, inputs, outputs, nodes, ret, control_ret=None):
    """inputs/outputs: [(arg name, dtype)]; nodes: [(name, op, inputs, attrs)]; ret: {out arg: "node:arg:i"}."""
    f = library.function.add()
    f.signature.name = name
    for arg, dtype in inputs:
        f.signature.input_arg.add(name=arg, type=DT[dtype])
    for arg, dtype in outputs:
        f.signature.output_arg.add(name=arg, type=DT[dtype])
    for spec in nodes:
        _add(f.node_def, spec[0], spec[1], spec[2], **(spec[3] if len(spec) > 3 else {}))
    for key, value in ret.items():
        f.ret[key] = value
    for key, value in (control_ret or {}).items():
        f.control_ret[key] = value
        f.signature.control_output.append(key)
    return f


def _frozen_graph_def():
    gd = proto.GraphDef()
    _add(gd.node, "input", "Placeholder", dtype=("type", "DT_FLOAT"), shape=("shape", [None, 4]))
    _add(gd.node, "flag", "PlaceholderWithDefault", ["flag/default"], dtype=("type", "DT_BOOL"))
    _add(gd.node, "flag/default", "Const", dtype=("type", "DT_BOOL"))
    _add(gd.node, "w", "Const", dtype=("type", "DT_FLOAT"), value=_float_tensor(np.eye(4), [4, 4]))
    _add(gd.node, "mm", "MatMul", ["input:0", "w"], device="/device:CPU:0", T=("type", "DT_FLOAT"),
         transpose_a=False)
    _add(gd.node, "split", "Split", ["split/dim", "mm"], T=("type", "DT_FLOAT"), num_split=2)
    _add(gd.node, "split/dim", "Const", dtype=("type", "DT_INT32"))
    _add(gd.node, "check", "Assert", ["flag"])
    _add(gd.node, "out_a", "Relu", ["split:1", "^check"], T=("type", "DT_FLOAT"))
    _add(gd.node, "out_b", "Identity", ["split:0"], T=("type", "DT_FLOAT"))
    _add(gd.node, "init", "NoOp", ["^w"])
    return gd


def _write(path, message, text=False):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if text:
        path.write_text(text_format.MessageToString(message))
    else:
        path.write_bytes(message.SerializeToString())
    return path


# -- frozen GraphDefs ----------------------------------------------------------------------------

def test_frozen_pb(tmp_path):
    graph = read_model(_write(tmp_path / "frozen.pb", _frozen_graph_def()))
    assert isinstance(graph, Graph)
    assert (graph.kind, graph.format, graph.source, graph.opset) == (
        "tensorflow", "frozen_pb", str(tmp_path / "frozen.pb"), None)
    assert list(graph.nodes) == ["input", "flag", "flag/default", "w", "mm", "split", "split/dim", "check",
                                 "out_a", "out_b", "init"]
    mm = graph.nodes["mm"]
    assert (mm.op, mm.inputs, mm.control_inputs, mm.device, mm.domain) == (
        "MatMul", ["input", "w"], [], "/device:CPU:0", "")
    assert mm.attrs == {"T": "float32", "transpose_a": False}
    assert graph.nodes["out_a"].inputs == ["split:1"]
    assert graph.nodes["out_a"].control_inputs == ["check"]
    assert graph.inputs == ["input:0"]  # PlaceholderWithDefault is not an input
    assert graph.outputs == ["out_a:0", "out_b:0"]  # Assert / NoOp are not outputs
    assert graph.input_shapes == {"input:0": [None, 4]}
    w = graph.nodes["w"].attrs["value"]
    assert (w.dtype, w.shape, w.nbytes) == ("float32", [4, 4], 64)
    np.testing.assert_array_equal(w.value, np.eye(4))
    assert graph.tensor_types["mm:0"] == "float32" and graph.tensor_types["flag:0"] == "bool"
    assert [n.name for n in graph.consumers("split")] == ["out_a", "out_b"]
    assert graph.producer("split:1").op == "Split"
    order = [n.name for n in graph.topological_order()]
    assert order.index("split/dim") < order.index("split") and order.index("check") < order.index("out_a")


def test_pbtxt_reads_like_pb(tmp_path):
    gd = _frozen_graph_def()
    from_pb = read_model(_write(tmp_path / "g.pb", gd))
    from_text = read_model(_write(tmp_path / "g.pbtxt", gd, text=True))
    assert from_text.format == "pbtxt"
    assert from_text.nodes == from_pb.nodes
    assert (from_text.inputs, from_text.outputs) == (from_pb.inputs, from_pb.outputs)


def test_pbtxt_with_fields_deploy_does_not_describe(tmp_path):
    text = _text_of(_frozen_graph_def()) + "debug_info { files: \"a.py\" }\n"
    text = text.replace('op: "Relu"', 'op: "Relu"\n  experimental_type { type_id: TFT_PRODUCT args { type_id: TFT_TENSOR } }')
    (tmp_path / "g.pbtxt").write_text(text)
    graph = read_model(tmp_path / "g.pbtxt")
    assert graph.nodes["out_a"].op == "Relu"


def _text_of(message):
    return text_format.MessageToString(message)


def test_unknown_rank_and_unknown_dims(tmp_path):
    gd = proto.GraphDef()
    _add(gd.node, "a", "Placeholder", dtype=("type", "DT_UINT8"), shape=("shape", None))
    _add(gd.node, "b", "Placeholder", dtype=("type", "DT_STRING"), shape=("shape", []))
    _add(gd.node, "c", "Pack", ["a", "b"])
    graph = read_model(_write(tmp_path / "g.pb", gd))
    assert graph.input_shapes == {"a:0": UNKNOWN_RANK, "b:0": []}
    assert graph.nodes["a"].attrs["shape"] is UNKNOWN_RANK
    assert graph.tensor_types == {"a:0": "uint8", "b:0": "string"}


def test_frozen_graph_with_functions_is_inlined(tmp_path):
    gd = proto.GraphDef()
    _add(gd.node, "x", "Placeholder", dtype=("type", "DT_FLOAT"))
    call = _add(gd.node, "call", "StatefulPartitionedCall", ["x", "x"])
    call.attr["f"].func.name = "body"
    _add(gd.node, "out", "Identity", ["call:1"])
    _function(gd.library, "body", [("a", "DT_FLOAT"), ("b", "DT_FLOAT")], [("s", "DT_FLOAT"), ("t", "DT_FLOAT")],
              [("add", "AddV2", ["a", "b"]), ("neg", "Neg", ["add:z:0"])],
              {"s": "add:z:0", "t": "neg:y:0"})
    graph = read_model(_write(tmp_path / "g.pb", gd))
    assert list(graph.nodes) == ["x", "call/add", "call/neg", "out"]
    assert graph.nodes["call/add"].inputs == ["x", "x"]
    assert graph.nodes["out"].inputs == ["call/neg"]
    assert graph.outputs == ["out:0"]


def test_html_saved_as_pbtxt_and_pb(tmp_path):
    html = "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head></html>\n"
    for name in ("model.pbtxt", "model.pb"):
        (tmp_path / name).write_text(html)
        with pytest.raises(DeployError) as e:
            read_model(tmp_path / name)
        assert str(tmp_path / name) in str(e.value) and "\n" not in str(e.value)


def _random_bytes(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


BAD_INPUTS = {
    "missing.pb": (None, "no such file or directory"),
    "empty.pb": (b"", "file is empty"),
    "empty.pbtxt": (b"", "file is empty"),
    "empty.onnx": (b"", "file is empty"),
    "empty.meta": (b"", "file is empty"),
    "truncated.pb": ("truncated", "truncated or not protobuf"),
    "random.pb": (_random_bytes(4096, 1), "truncated or not protobuf"),
    "random2.pb": (_random_bytes(333, 2), "truncated or not protobuf"),
    "binary.pbtxt": (_random_bytes(300, 3) + b"\xff\xfe", "not UTF-8 text"),
    "garbage.pbtxt": (b"this is not { a graph", "not a text GraphDef"),
    "nonodes.pb": (proto.GraphDef(versions=proto.VersionDef(producer=27)).SerializeToString(), "has no nodes"),
    "nonodes.pbtxt": (b"versions { producer: 27 }\n", "has no nodes"),
    "random.meta": (_random_bytes(2000, 4), "not a TF1 meta graph"),
    "random.onnx": (_random_bytes(2000, 5), "not an ONNX model"),
    "model.tflite": (b"TFL3....", "unsupported model file extension '.tflite'"),
    "model": (b"abc", "unsupported model file extension '(none)'"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_naming_the_file(tmp_path, name):
    data, expected = BAD_INPUTS[name]
    path = tmp_path / name
    if data == "truncated":
        whole = _frozen_graph_def().SerializeToString()
        data = whole[:len(whole) * 2 // 3]
    if data is not None:
        path.write_bytes(data)
    with pytest.raises(DeployError) as e:
        read_model(path)
    message = str(e.value)
    assert str(path) in message and "\n" not in message
    assert expected in message


def test_directory_that_is_not_a_saved_model(tmp_path):
    (tmp_path / "variables").mkdir()
    with pytest.raises(DeployError, match="directory is not a SavedModel") as e:
        read_model(tmp_path)
    assert str(tmp_path) in str(e.value)


def test_unsupported_extension_lists_the_supported_ones(tmp_path):
    (tmp_path / "m.pt").write_bytes(b"x")
    with pytest.raises(DeployError) as e:
        read_model(tmp_path / "m.pt")
    for ext in (".pb", ".pbtxt", ".meta", ".onnx", ".keras", ".h5", "SavedModel"):
        assert ext in str(e.value)


# -- SavedModels (built without TensorFlow) ------------------------------------------------------

def _saved_model_graph():
    """A TF2-style SavedModel graph: serving_default and train signatures, each a call chain."""
    gd = proto.GraphDef()
    _add(gd.node, "w", "VarHandleOp", dtype=("type", "DT_FLOAT"), shape=("shape", [4, 4]), shared_name="w")
    _add(gd.node, "step", "VarHandleOp", dtype=("type", "DT_INT64"), shape=("shape", []), shared_name="step")
    _add(gd.node, "serving_default_x", "Placeholder", dtype=("type", "DT_FLOAT"), shape=("shape", [None, 4]))
    _add(gd.node, "train_x", "Placeholder", dtype=("type", "DT_FLOAT"), shape=("shape", [None, 4]))
    serve = _add(gd.node, "StatefulPartitionedCall", "StatefulPartitionedCall", ["serving_default_x", "w"])
    serve.attr["f"].func.name = "__inference_signature_wrapper_10"
    train = _add(gd.node, "StatefulPartitionedCall_1", "StatefulPartitionedCall", ["train_x", "w", "step"])
    train.attr["f"].func.name = "__inference_train_20"
    _add(gd.node, "saver_filename", "Placeholder", dtype=("type", "DT_STRING"))
    _add(gd.node, "StatefulPartitionedCall_2", "StatefulPartitionedCall", ["saver_filename", "w", "step"],
         f=("func", "__inference_saver_30"))
    _function(gd.library, "__inference_signature_wrapper_10", [("x", "DT_FLOAT"), ("unknown", "DT_RESOURCE")],
              [("identity", "DT_FLOAT"), ("identity_1", "DT_INT32")],
              [("PartitionedCall", "StatefulPartitionedCall", ["x", "unknown"],
                {"f": ("func", "__inference_serve_11")}),
               ("Identity", "Identity", ["PartitionedCall:output:0", "^NoOp"]),
               ("Identity_1", "Identity", ["PartitionedCall:output:1", "^NoOp"]),
               ("NoOp", "NoOp", ["^PartitionedCall"])],
              {"identity": "Identity:output:0", "identity_1": "Identity_1:output:0"})
    _function(gd.library, "__inference_serve_11", [("x", "DT_FLOAT"), ("readvariableop_resource", "DT_RESOURCE")],
              [("identity", "DT_FLOAT"), ("identity_1", "DT_INT32")],
              [("ReadVariableOp", "ReadVariableOp", ["readvariableop_resource"], {"dtype": ("type", "DT_FLOAT")}),
               ("MatMul", "MatMul", ["x", "ReadVariableOp:value:0"], {"T": ("type", "DT_FLOAT")}),
               ("Unique", "Unique", ["MatMul:product:0"], {"T": ("type", "DT_FLOAT")}),
               ("Relu", "Relu", ["Unique:y:0"]),
               ("unused", "Sqrt", ["x"]),  # feeds nothing: TensorFlow prunes it, so does the view
               ("Identity", "Identity", ["Relu:activations:0"]),
               ("Identity_1", "Identity", ["Unique:idx:0"])],
              {"identity": "Identity:output:0", "identity_1": "Identity_1:output:0"})
    _function(gd.library, "__inference_train_20",
              [("x", "DT_FLOAT"), ("w", "DT_RESOURCE"), ("step", "DT_RESOURCE")], [("loss", "DT_FLOAT")],
              [("Mean", "Mean", ["x"]),
               ("ApplyGradientDescent", "ResourceApplyGradientDescent", ["w", "Mean:output:0"]),
               ("AssignAdd", "AssignAddVariableOp", ["step"]),
               ("Identity", "Identity", ["Mean:output:0", "^ApplyGradientDescent", "^AssignAdd"])],
              {"loss": "Identity:output:0"})
    _function(gd.library, "__inference_saver_30", [("f", "DT_STRING"), ("a", "DT_RESOURCE"), ("b", "DT_RESOURCE")],
              [("out", "DT_STRING")], [("SaveV2", "SaveV2", ["f"]), ("Identity", "Identity", ["f", "^SaveV2"])],
              {"out": "Identity:output:0"})
    return gd


def _saved_model(directory, graph_def, signatures, variables=True, tags=("serve",)):
    """Write saved_model.pb (+ variables/variables.index); signatures: {key: ({in: tensor}, {out: tensor})}."""
    sm = proto.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.extend(tags)
    mg.graph_def.CopyFrom(graph_def)
    for key, (inputs, outputs) in signatures.items():
        sig = mg.signature_def[key]
        for k, tensor in inputs.items():
            sig.inputs[k].name = tensor
            sig.inputs[k].dtype = DT["DT_FLOAT"]
            sig.inputs[k].tensor_shape.dim.add(size=-1)
            sig.inputs[k].tensor_shape.dim.add(size=4)
        for k, tensor in outputs.items():
            sig.outputs[k].name = tensor
            sig.outputs[k].dtype = DT["DT_FLOAT"]
        sig.method_name = "tensorflow/serving/predict"
    init = mg.signature_def["__saved_model_init_op"]
    init.outputs["__saved_model_init_op"].name = "NoOp"
    directory = Path(directory)
    _write(directory / "saved_model.pb", sm)
    if variables:
        (directory / "variables").mkdir(exist_ok=True)
        (directory / "variables" / "variables.index").write_bytes(b"index")
        (directory / "variables" / "variables.data-00000-of-00001").write_bytes(b"data")
    return directory


SIGNATURES = {
    "serving_default": ({"x": "serving_default_x:0"},
                        {"y": "StatefulPartitionedCall:0", "ids": "StatefulPartitionedCall:1"}),
    "train": ({"x": "train_x:0"}, {"loss": "StatefulPartitionedCall_1:0"}),
}


def test_saved_model_view_is_the_signature_only(tmp_path):
    directory = _saved_model(tmp_path / "sm", _saved_model_graph(), SIGNATURES)
    graph = read_model(directory)
    assert (graph.kind, graph.format, graph.source) == ("tensorflow", "saved_model", str(directory))
    p = "StatefulPartitionedCall/PartitionedCall/"
    assert list(graph.nodes) == [
        "w", "serving_default_x",
        p + "ReadVariableOp", p + "MatMul", p + "Unique", p + "Relu", p + "Identity", p + "Identity_1",
        "StatefulPartitionedCall/Identity", "StatefulPartitionedCall/Identity_1", "StatefulPartitionedCall/NoOp",
    ]
    ops = {n.op for n in graph.nodes.values()}
    assert not ops & {"ResourceApplyGradientDescent", "AssignAddVariableOp", "SaveV2", "StatefulPartitionedCall",
                      "Sqrt"}
    assert "step" not in graph.nodes and "train_x" not in graph.nodes
    # arguments become the call's inputs; outputs of a call become the body's results
    assert graph.nodes[p + "ReadVariableOp"].inputs == ["w"]
    assert graph.nodes[p + "MatMul"].inputs == ["serving_default_x", p + "ReadVariableOp"]
    assert graph.nodes[p + "Identity_1"].inputs == [p + "Unique:1"]  # "Unique:idx:0" is port 1
    assert graph.nodes["StatefulPartitionedCall/Identity"].inputs == [p + "Identity"]
    assert graph.nodes["StatefulPartitionedCall/Identity"].control_inputs == ["StatefulPartitionedCall/NoOp"]
    # a control dependency on a call stands for the body's results
    assert graph.nodes["StatefulPartitionedCall/NoOp"].control_inputs == [p + "Identity", p + "Identity_1"]
    assert graph.inputs == ["serving_default_x:0"]
    assert graph.outputs == ["StatefulPartitionedCall/Identity_1:0", "StatefulPartitionedCall/Identity:0"]
    assert graph.signature == {"name": "serving_default", "inputs": {"x": "serving_default_x:0"},
                               "outputs": {"ids": "StatefulPartitionedCall/Identity_1:0",
                                           "y": "StatefulPartitionedCall/Identity:0"}}
    assert graph.input_shapes == {"serving_default_x:0": [None, 4]}
    assert graph.tensor_types["serving_default_x:0"] == "float32"
    assert graph.tensor_types["w:0"] == "resource"
    assert [n.name for n in graph.consumers("w")] == [p + "ReadVariableOp"]


def test_saved_model_other_signature_and_saved_model_pb_path(tmp_path):
    directory = _saved_model(tmp_path / "sm", _saved_model_graph(), SIGNATURES)
    graph = read_model(directory / "saved_model.pb", signature="train")
    ops = collections.Counter(n.op for n in graph.nodes.values())
    assert ops["ResourceApplyGradientDescent"] == 1 and ops["AssignAddVariableOp"] == 1
    assert "MatMul" not in ops
    assert graph.outputs == ["StatefulPartitionedCall_1/Identity:0"]
    assert graph.nodes["StatefulPartitionedCall_1/Identity"].control_inputs == [
        "StatefulPartitionedCall_1/ApplyGradientDescent", "StatefulPartitionedCall_1/AssignAdd"]


def test_saved_model_missing_signature_lists_the_available_ones(tmp_path):
    directory = _saved_model(tmp_path / "sm", _saved_model_graph(), SIGNATURES)
    with pytest.raises(DeployError) as e:
        read_model(directory, signature="predict")
    assert str(e.value) == "{}: SavedModel has no signature 'predict'; available: serving_default, train; " \
        "pick one of them".format(directory / "saved_model.pb")


def test_saved_model_without_variables(tmp_path):
    directory = _saved_model(tmp_path / "sm", _saved_model_graph(), SIGNATURES, variables=False)
    with pytest.raises(DeployError) as e:
        read_model(directory)
    assert str(e.value) == "SavedModel {} has no variables (variables/variables.index missing); copy the whole " \
        "SavedModel directory".format(directory)


def test_saved_model_without_variables_needs_no_index(tmp_path):
    gd = proto.GraphDef()
    _add(gd.node, "x", "Placeholder", dtype=("type", "DT_FLOAT"))
    _add(gd.node, "y", "Relu", ["x"])
    directory = _saved_model(tmp_path / "sm", gd, {"serving_default": ({"x": "x:0"}, {"y": "y:0"})},
                             variables=False)
    graph = read_model(directory)
    assert list(graph.nodes) == ["x", "y"] and graph.outputs == ["y:0"]


def test_saved_model_picks_the_serve_meta_graph(tmp_path):
    sm = proto.SavedModel()
    for tags, op in ((["train"], "Neg"), (["serve", "gpu"], "Relu")):
        mg = sm.meta_graphs.add()
        mg.meta_info_def.tags.extend(tags)
        _add(mg.graph_def.node, "x", "Placeholder")
        _add(mg.graph_def.node, "y", op, ["x"])
        mg.signature_def["serving_default"].inputs["x"].name = "x:0"
        mg.signature_def["serving_default"].outputs["y"].name = "y:0"
    _write(tmp_path / "saved_model.pb", sm)
    assert read_model(tmp_path).nodes["y"].op == "Relu"
    del sm.meta_graphs[1]
    sm.meta_graphs[0].meta_info_def.ClearField("tags")
    _write(tmp_path / "saved_model.pb", sm)
    assert read_model(tmp_path).nodes["y"].op == "Neg"  # the only one


def test_saved_model_control_flow_functions_are_inlined(tmp_path):
    gd = proto.GraphDef()
    _add(gd.node, "x", "Placeholder", dtype=("type", "DT_FLOAT"))
    _add(gd.node, "i0", "Const", dtype=("type", "DT_INT32"))
    _add(gd.node, "while", "StatelessWhile", ["i0", "x"], cond=("func", "cond_1"), body=("func", "body_2"))
    _add(gd.node, "pred", "Const", dtype=("type", "DT_BOOL"))
    _add(gd.node, "if", "StatelessIf", ["pred", "while:1"], then_branch=("func", "then_3"),
         else_branch=("func", "else_4"))
    _add(gd.node, "out", "Identity", ["if"])
    _function(gd.library, "cond_1", [("i", "DT_INT32"), ("v", "DT_FLOAT")], [("ok", "DT_BOOL")],
              [("limit", "Const", []), ("Less", "Less", ["i", "limit:output:0"])], {"ok": "Less:z:0"})
    _function(gd.library, "body_2", [("i", "DT_INT32"), ("v", "DT_FLOAT")], [("i2", "DT_INT32"), ("v2", "DT_FLOAT")],
              [("one", "Const", []), ("add", "AddV2", ["i", "one:output:0"]), ("sq", "Square", ["v"])],
              {"i2": "add:z:0", "v2": "sq:y:0"})
    _function(gd.library, "then_3", [("v", "DT_FLOAT")], [("r", "DT_FLOAT")],
              [("relu", "Relu", ["v"])], {"r": "relu:activations:0"})
    _function(gd.library, "else_4", [("v", "DT_FLOAT")], [("r", "DT_FLOAT")],
              [("tanh", "Tanh", ["v"])], {"r": "tanh:y:0"})
    directory = _saved_model(tmp_path / "sm", gd, {"serving_default": ({"x": "x:0"}, {"y": "out:0"})})
    graph = read_model(directory)
    assert list(graph.nodes) == [
        "x", "i0", "while", "while/body/one", "while/body/add", "while/body/sq", "while/cond/limit",
        "while/cond/Less", "pred", "if", "if/else_branch/tanh", "if/then_branch/relu", "out"]
    assert graph.nodes["while/body/sq"].inputs == ["x"]  # While: argument i is input i
    assert graph.nodes["while/cond/Less"].inputs == ["i0", "while/cond/limit"]
    assert graph.nodes["if/then_branch/relu"].inputs == ["while:1"]  # If: argument i is input i + 1
    assert graph.nodes["while"].attrs["body"] == "body_2"


def test_nested_and_recursive_functions(tmp_path):
    gd = proto.GraphDef()
    _add(gd.node, "x", "Placeholder")
    _add(gd.node, "outer", "outer_fn", ["x"])  # a node whose op is a library function
    _add(gd.node, "y", "Identity", ["outer"])
    _function(gd.library, "outer_fn", [("a", "DT_FLOAT")], [("r", "DT_FLOAT")],
              [("inner", "PartitionedCall", ["a"], {"f": ("func", "inner_fn")})], {"r": "inner:output:0"})
    _function(gd.library, "inner_fn", [("a", "DT_FLOAT")], [("r", "DT_FLOAT")],
              [("abs", "Abs", ["a"]), ("again", "inner_fn", ["abs:y:0"])], {"r": "again:r:0"})
    directory = _saved_model(tmp_path / "sm", gd, {"serving_default": ({"x": "x:0"}, {"y": "y:0"})})
    graph = read_model(directory)
    # inner_fn calls itself: inlined once, the recursive call kept as a node
    assert list(graph.nodes) == ["x", "outer/inner/abs", "outer/inner/again", "y"]
    assert graph.nodes["outer/inner/abs"].inputs == ["x"]
    assert graph.nodes["outer/inner/again"].op == "inner_fn"
    assert graph.nodes["y"].inputs == ["outer/inner/again"]


def test_saved_model_in_text_format(tmp_path):
    directory = _saved_model(tmp_path / "sm", _saved_model_graph(), SIGNATURES)
    sm = proto.SavedModel()
    sm.ParseFromString((directory / "saved_model.pb").read_bytes())
    (directory / "saved_model.pb").unlink()
    (directory / "saved_model.pbtxt").write_text(_text_of(sm))
    graph = read_model(directory, signature=None)  # None: serving_default
    assert graph.format == "saved_model"
    assert graph.nodes == read_model(_saved_model(tmp_path / "sm2", _saved_model_graph(), SIGNATURES)).nodes


def test_saved_model_without_signatures(tmp_path):
    directory = _saved_model(tmp_path / "sm", _frozen_graph_def(), {})
    with pytest.raises(DeployError, match="SavedModel has no signatures"):
        read_model(directory)


def test_truncated_saved_model(tmp_path):
    directory = _saved_model(tmp_path / "sm", _saved_model_graph(), SIGNATURES)
    data = (directory / "saved_model.pb").read_bytes()
    (directory / "saved_model.pb").write_bytes(data[:len(data) // 2])
    with pytest.raises(DeployError, match="not a SavedModel: the file is truncated or not protobuf"):
        read_model(directory)


# -- TF1 meta graphs (built without TensorFlow) --------------------------------------------------

def _meta_graph():
    mg = proto.MetaGraphDef()
    mg.meta_info_def.tags.append("serve")
    gd = mg.graph_def
    _add(gd.node, "x", "Placeholder", dtype=("type", "DT_FLOAT"))
    _add(gd.node, "w", "VariableV2", dtype=("type", "DT_FLOAT"), shape=("shape", [4]))
    _add(gd.node, "w/read", "Identity", ["w"])
    _add(gd.node, "y", "Mul", ["x", "w/read"])
    _add(gd.node, "train/update", "ApplyGradientDescent", ["w", "y"])
    _add(gd.node, "save/filename", "Placeholder", dtype=("type", "DT_STRING"))
    _add(gd.node, "save/SaveV2", "SaveV2", ["save/filename"])
    _add(gd.node, "save/control_dependency", "Identity", ["save/filename", "^save/SaveV2"])
    _add(gd.node, "save/RestoreV2", "RestoreV2", ["save/filename"])
    _add(gd.node, "save/Assign", "Assign", ["w", "save/RestoreV2"])
    _add(gd.node, "save/restore_all", "NoOp", ["^save/Assign"])
    mg.saver_def.filename_tensor_name = "save/filename:0"
    mg.saver_def.save_tensor_name = "save/control_dependency:0"
    mg.saver_def.restore_op_name = "save/restore_all"
    mg.collection_def["trainable_variables"].bytes_list.value.append(b"\n\x03w:0")
    return mg


def test_meta_graph_without_signatures_is_viewed_whole(tmp_path):
    graph = read_model(_write(tmp_path / "model.ckpt.meta", _meta_graph()))
    assert graph.format == "meta_graph"
    assert len(graph.nodes) == 11
    assert graph.inputs == ["x:0", "save/filename:0"]
    assert graph.outputs == ["train/update:0"]  # the saver's nodes are not outputs


def test_meta_graph_with_signature(tmp_path):
    mg = _meta_graph()
    mg.signature_def["serving_default"].inputs["x"].name = "x:0"
    mg.signature_def["serving_default"].outputs["y"].name = "y:0"
    path = _write(tmp_path / "model.meta", mg)
    graph = read_model(path)
    assert list(graph.nodes) == ["x", "w", "w/read", "y"]
    with pytest.raises(DeployError, match="available: serving_default"):
        read_model(path, signature="other")


def test_meta_graph_or_saved_model_named_pb(tmp_path):
    graph = read_model(_write(tmp_path / "graph.pb", _meta_graph()))
    assert graph.format == "meta_graph" and len(graph.nodes) == 11
    _saved_model(tmp_path / "sm", _saved_model_graph(), SIGNATURES)
    (tmp_path / "sm" / "saved_model.pb").rename(tmp_path / "sm" / "exported.pb")
    graph = read_model(tmp_path / "sm" / "exported.pb")
    assert graph.format == "saved_model" and graph.inputs == ["serving_default_x:0"]


# -- ONNX ----------------------------------------------------------------------------------------

def _onnx_model(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    then_graph = helper.make_graph([helper.make_node("Relu", ["conv_out"], ["t"], name="then_relu")], "then", [],
                                   [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    else_graph = helper.make_graph([helper.make_node("Neg", ["conv_out"], ["e"])], "else", [],
                                   [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    nodes = [
        helper.make_node("Conv", ["input", "W"], ["conv_out"], name="conv1", pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["conv_out"], ["relu_out"]),  # no name
        helper.make_node("Resize", ["relu_out", "", "scales"], ["up"], name="resize", mode="nearest"),
        helper.make_node("ReduceMax", ["up"], ["flag_f"], name="reduce", keepdims=0),
        helper.make_node("Cast", ["flag_f"], ["flag"], name="cast", to=TensorProto.BOOL),
        helper.make_node("If", ["flag"], ["branch"], name="if", then_branch=then_graph, else_branch=else_graph),
        helper.make_node("MyPlugin", ["up"], ["plugin_out"], domain="com.example.trt", alpha=0.5),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 8, 8]),
         helper.make_tensor_value_info("W", TensorProto.FLOAT, [4, 3, 3, 3])],  # an initializer listed as input
        [helper.make_tensor_value_info("plugin_out", TensorProto.FLOAT, ["N", 4, 16, 16]),
         helper.make_tensor_value_info("branch", TensorProto.FLOAT, None)],
        initializer=[w, scales],
        value_info=[helper.make_tensor_value_info("relu_out", TensorProto.FLOAT16, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("com.example.trt", 1)])
    onnx.save(model, str(path))
    return path


def test_onnx(tmp_path):
    graph = read_model(_onnx_model(tmp_path / "model.onnx"))
    assert (graph.kind, graph.format, graph.opset) == ("onnx", "onnx", 13)
    assert list(graph.nodes) == ["conv1", "Relu_1", "resize", "reduce", "cast", "if", "MyPlugin_6"]
    assert graph.inputs == ["input"]  # W is an initializer
    assert graph.outputs == ["plugin_out", "branch"]
    assert graph.input_shapes == {"input": ["N", 3, 8, 8]}
    assert graph.output_shapes["plugin_out"] == ["N", 4, 16, 16]
    assert graph.tensor_types["W"] == "float32" and graph.tensor_types["relu_out"] == "float16"
    conv = graph.nodes["conv1"]
    assert (conv.op, conv.inputs, conv.outputs, conv.domain) == ("Conv", ["input", "W"], ["conv_out"], "")
    assert conv.attrs == {"pads": [1, 1, 1, 1], "strides": [1, 1]}
    assert graph.nodes["resize"].inputs == ["relu_out", "", "scales"]  # an omitted optional input keeps its place
    assert graph.nodes["resize"].attrs["mode"] == "nearest"
    assert graph.nodes["cast"].attrs["to"] == 9
    plugin = graph.nodes["MyPlugin_6"]
    assert (plugin.domain, plugin.attrs) == ("com.example.trt", {"alpha": 0.5})
    then_branch = graph.nodes["if"].attrs["then_branch"]
    assert isinstance(then_branch, Graph) and list(then_branch.nodes) == ["then_relu"]
    assert graph.initializers["scales"].value.tolist() == [1, 1, 2, 2]
    assert graph.initializers["W"].nbytes == 4 * 27 * 4
    assert [n.name for n in graph.consumers("Relu_1")] == ["resize"]
    assert graph.producer("up").name == "resize"
    assert [n.name for n in graph.topological_order()] == list(graph.nodes)


def test_onnx_without_nodes(tmp_path):
    import onnx
    from onnx import helper

    model = helper.make_model(helper.make_graph([], "g", [], []), opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    with pytest.raises(DeployError, match="ONNX model has no nodes"):
        read_model(tmp_path / "m.onnx")


# -- no TensorFlow -------------------------------------------------------------------------------

def test_reading_does_not_import_tensorflow(tmp_path):
    paths = [
        _write(tmp_path / "g.pb", _frozen_graph_def()),
        _write(tmp_path / "g.pbtxt", _frozen_graph_def(), text=True),
        _onnx_model(tmp_path / "m.onnx"),
        _saved_model(tmp_path / "sm", _saved_model_graph(), SIGNATURES),
        _write(tmp_path / "m.meta", _meta_graph()),
    ]
    code = (
        "import sys\n"
        "from pipeline.graph import read_model\n"
        "for path in sys.argv[1:]:\n"
        "    g = read_model(path)\n"
        "    assert g.nodes and g.outputs, path\n"
        "    [n.attrs for n in g.nodes.values()]\n"
        "    g.tensor_types\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n"
        "assert 'keras' not in sys.modules, 'keras was imported'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, *map(str, paths)], cwd=str(ROOT), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


# -- against TensorFlow --------------------------------------------------------------------------

def _tf():
    from pipeline.tf import import_tf

    return import_tf()


def _tf_attr(tf, value):
    """What TensorFlow's Operation.get_attr returns -> the view's decoding."""
    from tensorflow.core.framework import attr_value_pb2, tensor_pb2, tensor_shape_pb2

    if isinstance(value, tf.dtypes.DType):
        return value.name
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    if isinstance(value, tensor_shape_pb2.TensorShapeProto):
        return None if value.unknown_rank else [d.size if d.size >= 0 else None for d in value.dim]
    if isinstance(value, tensor_pb2.TensorProto):
        return tf.make_ndarray(value)
    if isinstance(value, attr_value_pb2.NameAttrList):
        return value.name
    if isinstance(value, list):
        return [_tf_attr(tf, v) for v in value]
    return value


def _assert_attrs_match(tf, node, op, node_def=None):
    """node.attrs == what TensorFlow says of ``op`` (``node_def``: TF's parse, for attrs import drops)."""
    node_def = node_def or op.node_def
    assert set(node.attrs) == set(node_def.attr), node.name
    for key in node.attrs:
        if key not in op.node_def.attr:  # e.g. _output_shapes, which import_meta_graph drops
            shapes = [None if s.unknown_rank else [d.size if d.size >= 0 else None for d in s.dim]
                      for s in node_def.attr[key].list.shape]
            assert key == "_output_shapes" and node.attrs[key] == shapes, (node.name, key)
            continue
        expected = _tf_attr(tf, op.get_attr(key))
        got = node.attrs[key]
        if isinstance(expected, np.ndarray):
            assert got.dtype == tf.dtypes.as_dtype(op.get_attr(key).dtype).name
            assert got.shape == list(expected.shape), (node.name, key)
            if got.value is not None:
                np.testing.assert_array_equal(got.value, expected)
            else:
                assert expected.size > 10_000
            assert got.nbytes == (sum(len(s) for s in expected.flat) if expected.dtype == object else expected.nbytes)
        else:
            assert got == expected, (node.name, key, got, expected)


def _tf1_graph(tf):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 16, 16, 3], name="image")
        training = tf.compat.v1.placeholder_with_default(False, [], name="training")
        rng = np.random.default_rng(0)
        with tf.device("/device:CPU:0"):
            w = tf.constant(rng.normal(size=(3, 3, 3, 8)).astype(np.float32), name="conv/w")
            y = tf.nn.conv2d(x, w, strides=[1, 2, 2, 1], padding="SAME", name="conv/Conv2D")
        y = tf.nn.bias_add(y, tf.constant(np.arange(8, dtype=np.float32)), name="conv/BiasAdd")
        y, _, _ = tf.compat.v1.nn.fused_batch_norm(y, tf.ones([8]), tf.zeros([8]), tf.zeros([8]), tf.ones([8]),
                                                   is_training=False, name="bn")
        y = tf.nn.relu6(y)
        a, b = tf.split(y, 2, axis=3, name="split")
        y = tf.concat([b, a], axis=3, name="concat")
        big = tf.constant(rng.normal(size=(512, 40)).astype(np.float32), name="dense/w")  # > 1e4 elements
        flat = tf.reshape(y, [-1, 512], name="flatten")
        logits = tf.matmul(flat, big, name="dense/MatMul")
        values, indices = tf.math.top_k(logits, k=3, name="topk")
        with tf.control_dependencies([tf.debugging.assert_non_negative(indices, name="check")]):
            tf.identity(values, name="scores")
        tf.cast(indices, tf.int64, name="classes")
        tf.strings.join([tf.constant(["a", "b"]), tf.constant("!")], name="labels")
        tf.cast(tf.where(training, 1.0, 0.5), tf.float16, name="half")
        tf.strided_slice(logits, [0, 1], [-1, 3], [1, 1], begin_mask=1, shrink_axis_mask=2, name="slice")
    return graph


@pytest.mark.tf
@pytest.mark.parametrize("as_text", [False, True])
def test_tf1_frozen_graph_matches_tensorflow(tmp_path, as_text):
    tf = _tf()
    graph = _tf1_graph(tf)
    name = "frozen.pbtxt" if as_text else "frozen.pb"
    tf.io.write_graph(graph.as_graph_def(), str(tmp_path), name, as_text=as_text)
    view = read_model(tmp_path / name)
    # TensorFlow's own parser of the same file
    graph_def = tf.compat.v1.GraphDef()
    data = (tmp_path / name).read_bytes()
    if as_text:
        text_format.Parse(data.decode(), graph_def)
    else:
        graph_def.ParseFromString(data)
    reference = tf.Graph()
    with reference.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    ops = reference.get_operations()
    assert list(view.nodes) == [op.name for op in ops]
    for op in ops:
        node = view.nodes[op.name]
        assert node.op == op.type
        assert node.device == op.node_def.device
        expected_inputs = [t.name[:-2] if t.name.endswith(":0") else t.name for t in op.inputs]
        assert node.inputs == expected_inputs, op.name
        assert node.control_inputs == [c.name for c in op.control_inputs], op.name
        _assert_attrs_match(tf, node, op)
    sinks = [op.name + ":0" for op in ops
             if not any(op in c.control_inputs or any(t.op is op for t in c.inputs) for c in ops)
             and op.type not in ("Const", "NoOp", "Assert", "Placeholder", "PlaceholderWithDefault")]
    assert view.outputs == sinks
    assert view.inputs == ["image:0"]
    assert view.input_shapes == {"image:0": [None, 16, 16, 3]}
    assert view.nodes["dense/w"].attrs["value"].value is None  # 20480 elements: no array
    assert view.tensor_types["classes:0"] == "int64" and view.tensor_types["half:0"] == "float16"


def _oracle_ops(tf_graph_def, roots):
    """Ops a signature runs, from TensorFlow's own parse: outer nodes walked back from ``roots``,
    call nodes replaced by their function bodies (whole), bodies of If/While functions added."""
    library = {f.signature.name: f for f in tf_graph_def.library.function}
    counter = collections.Counter()

    def visit(nd):
        if nd.op in ("StatefulPartitionedCall", "PartitionedCall") and nd.attr["f"].func.name in library:
            for body_node in library[nd.attr["f"].func.name].node_def:
                visit(body_node)
            return
        counter[nd.op] += 1
        for value in nd.attr.values():
            names = [value.func.name] if value.HasField("func") else [f.name for f in value.list.func]
            for name in names:
                for body_node in (library[name].node_def if name in library else []):
                    visit(body_node)

    nodes = {nd.name: nd for nd in tf_graph_def.node}
    stack, seen = list(roots), set()
    while stack:
        name = stack.pop().lstrip("^").split(":")[0]
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        visit(nodes[name])
        stack.extend(nodes[name].input)
    return counter


@pytest.mark.tf
def test_tf2_saved_model_matches_tensorflow_without_training_ops(tmp_path):
    tf = _tf()

    class Model(tf.Module):
        def __init__(self):
            self.w = tf.Variable(np.ones((3, 3), np.float32), name="w")
            self.steps = tf.Variable(0, dtype=tf.int64, name="steps")

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
        def serve(self, x):
            def body(i, acc):
                return i + 1, tf.matmul(acc, self.w)

            _, y = tf.while_loop(lambda i, acc: i < 2, body, [tf.constant(0), x])
            y = tf.cond(tf.reduce_sum(y) > 0, lambda: tf.nn.relu(y), lambda: tf.nn.sigmoid(y))
            return {"y": tf.nn.softmax(y)}

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
        def train(self, x):
            self.w.assign_sub(tf.fill([3, 3], 0.01) * tf.reduce_mean(x))
            self.steps.assign_add(1)
            return {"bucket": tf.raw_ops.Bucketize(input=tf.reduce_sum(x, axis=1), boundaries=[0.0, 1.0])}

    model = Model()
    directory = tmp_path / "saved_model"
    tf.saved_model.save(model, str(directory), signatures={"serving_default": model.serve, "train": model.train})
    view = read_model(directory)

    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((directory / "saved_model.pb").read_bytes())
    meta = saved.meta_graphs[0]
    sig = meta.signature_def["serving_default"]
    expected = _oracle_ops(meta.graph_def, [t.name for t in sig.outputs.values()] +
                           [t.name for t in sig.inputs.values()])
    assert collections.Counter(n.op for n in view.nodes.values()) == expected
    ops = {n.op for n in view.nodes.values()}
    assert {"MatMul", "Softmax", "Relu", "Sigmoid", "ReadVariableOp"} <= ops and ops & {"While", "StatelessWhile"}
    assert not ops & {"Bucketize", "AssignSubVariableOp", "AssignAddVariableOp", "Fill", "StatefulPartitionedCall",
                      "PartitionedCall", "SaveV2", "RestoreV2"}
    assert view.inputs == [sig.inputs["x"].name]
    assert len(view.outputs) == 1 and view.producer(view.outputs[0]).op in ("Identity", "Softmax")
    assert view.input_shapes == {sig.inputs["x"].name: [None, 3]}
    # every node of the view is in TensorFlow's graph or a function body, with the same attributes
    from pipeline.graph.tf_attrs import decode_node_def_attrs

    bodies = {}
    for f in meta.graph_def.library.function:
        for nd in f.node_def:
            bodies.setdefault(nd.name, []).append(nd)
    for nd in meta.graph_def.node:
        bodies.setdefault(nd.name, []).append(nd)
    for node in view.nodes.values():
        candidates = [nd for suffix in _suffixes(node.name) for nd in bodies.get(suffix, []) if nd.op == node.op]
        assert candidates, node.name
        mine = [decode_node_def_attrs(_as_deploy(nd)) for nd in candidates]
        assert node.attrs in mine, node.name
    train = read_model(directory, signature="train")
    assert {"Bucketize", "AssignSubVariableOp", "AssignAddVariableOp"} <= {n.op for n in train.nodes.values()}
    assert "Softmax" not in {n.op for n in train.nodes.values()}


def _suffixes(name):
    parts = name.split("/")
    return ["/".join(parts[i:]) for i in range(len(parts))]


def _as_deploy(tf_node_def):
    nd = proto.NodeDef()
    nd.ParseFromString(tf_node_def.SerializeToString())
    return nd


@pytest.mark.tf
def test_saved_model_copied_without_variables(tmp_path):
    tf = _tf()
    module = tf.Module()
    module.v = tf.Variable([1.0, 2.0])
    module.f = tf.function(lambda x: x * module.v, input_signature=[tf.TensorSpec([2], tf.float32)])
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures={"serving_default": module.f})
    read_model(tmp_path / "sm")
    import shutil

    shutil.rmtree(tmp_path / "sm" / "variables")
    with pytest.raises(DeployError, match=r"variables/variables.index missing\); copy the whole SavedModel"):
        read_model(tmp_path / "sm")


@pytest.mark.tf
def test_tf1_meta_graph_matches_tensorflow(tmp_path):
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        w = tf.compat.v1.get_variable("w", [4, 2], initializer=tf.compat.v1.ones_initializer())
        logits = tf.matmul(x, w, name="logits")
        loss = tf.reduce_mean(tf.square(logits), name="loss")
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(train_op, {x: np.ones((2, 4), np.float32)})
            saver.save(sess, str(tmp_path / "model.ckpt"))
    meta = tmp_path / "model.ckpt.meta"
    view = read_model(meta)
    assert view.format == "meta_graph"
    reference = tf.Graph()
    with reference.as_default():
        tf.compat.v1.train.import_meta_graph(str(meta))
    ops = reference.get_operations()
    assert list(view.nodes) == [op.name for op in ops]
    meta_graph = tf.compat.v1.MetaGraphDef()
    meta_graph.ParseFromString(meta.read_bytes())
    node_defs = {nd.name: nd for nd in meta_graph.graph_def.node}
    assert any("_output_shapes" in nd.attr for nd in node_defs.values())
    for op in ops:
        node = view.nodes[op.name]
        assert node.op == op.type
        assert node.inputs == [t.name[:-2] if t.name.endswith(":0") else t.name for t in op.inputs]
        assert node.control_inputs == [c.name for c in op.control_inputs]
        _assert_attrs_match(tf, node, op, node_defs[op.name])
    assert "x:0" in view.inputs
    assert not any(o.startswith("save/") for o in view.outputs)
    assert "loss:0" in view.outputs


@pytest.mark.tf
def test_keras_model(tmp_path):
    tf = _tf()
    import keras

    inputs = keras.Input((8, 8, 3), name="image")
    y = keras.layers.Conv2D(4, 3, padding="same", name="conv")(inputs)
    y = keras.layers.BatchNormalization(name="bn")(y)
    y = keras.layers.ReLU()(y)
    y = keras.layers.GlobalAveragePooling2D()(y)
    y = keras.layers.Dropout(0.5)(y)
    outputs = keras.layers.Dense(3, activation="softmax", name="head")(y)
    model = keras.Model(inputs, outputs)
    model.save(tmp_path / "model.keras")
    view = read_model(tmp_path / "model.keras")
    assert (view.kind, view.format) == ("tensorflow", "keras")
    assert len(view.inputs) == 1 and len(view.outputs) == 1
    assert view.input_shapes[view.inputs[0]] == [None, 8, 8, 3]
    assert view.output_shapes[view.outputs[0]] == [None, 3]
    ops = collections.Counter(n.op for n in view.nodes.values())
    assert ops["Conv2D"] == 1 and ops["Softmax"] == 1
    model.save(tmp_path / "model.h5")
    h5 = read_model(tmp_path / "model.h5")
    assert h5.format == "keras" and collections.Counter(n.op for n in h5.nodes.values()) == ops
    assert not {"RandomUniform", "StatelessRandomUniformV2", "StatefulPartitionedCall"} & set(ops)  # no dropout
    # the same ops TensorFlow's own graph of the traced call has, frozen (variables as constants)
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    fn = tf.function(lambda x: model(x, training=False))
    concrete = convert_variables_to_constants_v2(fn.get_concrete_function(tf.TensorSpec([None, 8, 8, 3], tf.float32)))
    assert "ReadVariableOp" not in ops
    reference = collections.Counter(op.type for op in concrete.graph.get_operations()
                                    if op.type not in ("StatefulPartitionedCall", "PartitionedCall"))
    assert ops == reference
    (tmp_path / "broken.keras").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(DeployError, match="not a .keras file: not a zip archive, so truncated or another format"):
        read_model(tmp_path / "broken.keras")


@pytest.mark.tf
def test_deploy_proto_and_tensorflow_in_one_process(tmp_path):
    tf = _tf()
    graph = _tf1_graph(tf)
    tf.io.write_graph(graph.as_graph_def(), str(tmp_path), "g.pb", as_text=False)
    assert len(read_model(tmp_path / "g.pb").nodes) == len(graph.get_operations())
    assert os.path.exists(tmp_path / "g.pb")
