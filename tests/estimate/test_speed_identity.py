"""Issue 30 item 5: the estimate's hot paths made faster without changing a number. Shape lookups skip
tensor_key for a plain name, a conv's attributes are keyed in one map lookup each, a Const's shape is read
before anything else, and the engine layers are built with the cyclic collector paused (its passes over a
200,000-node graph's objects were a tenth of the estimate). Each fast path is checked against the plain
definition it replaces, on graphs read from protobuf bytes the way deploy reads a user's .pb. The layer loop
(each node's input keys worked out once, shapes read by key) is compared, layer by layer and number by number,
with the loop as it was (tests/estimate/layers_reference.py). Since the third session: the shape pass's inline
Const and same-shape cases are checked against _infer_tf node by node, conv/pool attributes are keyed by the
NodeDef's attribute bytes (attr_bytes), and estimate_model keeps one GC pause from the reading to the report."""

import gc
import importlib.util
import json
from pathlib import Path

from pipeline.estimate import estimate_model, layers_of
from pipeline.estimate.layers import _order, engine_layers
from pipeline.estimate.shapes import (_ERRORS, _WINDOW_KEYS, SKIP, Shapes, _infer_tf, _window_attrs, attr_bytes,
                                      const_shape, input_dims, node_attr, tensor_key, tensor_shapes)
from pipeline.graph import read_model
from tests.estimate.graphs import const, conv, conv_bias_relu, op, tf_graph
from tests.estimate.layers_reference import reference_engine_layers


def _frozen(path):
    """input[1,16,16,3] -> Conv2D (SAME, stride 2) -> BiasAdd -> Relu (a control input) -> MaxPool (VALID) on
    relu:0 and a depthwise conv on relu -> ConcatV2 -> Shape/StridedSlice/Pack -> Reshape; a Split's second
    output read by a side branch."""
    import numpy as np

    from pipeline.graph.proto import message_class

    g = message_class("GraphDef")()

    def const(name, array, dtype=1):
        node = g.node.add(name=name, op="Const")
        node.attr["dtype"].type = dtype
        tensor = node.attr["value"].tensor
        tensor.dtype = dtype
        for d in array.shape:
            tensor.tensor_shape.dim.add(size=d)
        tensor.tensor_content = array.tobytes()

    def add(name, op, inputs, **ints):
        node = g.node.add(name=name, op=op, input=inputs)
        node.attr["T"].type = 1
        for key, value in ints.items():
            if isinstance(value, str):
                node.attr[key].s = value.encode()
            elif isinstance(value, list):
                node.attr[key].list.i.extend(value)
            else:
                node.attr[key].i = value
        return node

    x = g.node.add(name="input", op="Placeholder")
    x.attr["dtype"].type = 1
    for d in (1, 16, 16, 3):
        x.attr["shape"].shape.dim.add(size=d)
    const("k", np.ones((3, 3, 3, 8), "float32"))
    add("conv", "Conv2D", ["input", "k"], strides=[1, 2, 2, 1], padding="SAME", data_format="NHWC")
    const("b", np.ones((8,), "float32"))
    add("bias", "BiasAdd", ["conv", "b"])
    add("relu", "Relu", ["bias", "^input"])
    const("axis", np.array(3, "int32"), dtype=3)
    add("split", "Split", ["axis", "relu"], num_split=2)
    add("pool", "MaxPool", ["relu:0"], ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="VALID")
    const("dk", np.ones((3, 3, 8, 1), "float32"))
    add("dw", "DepthwiseConv2dNative", ["relu", "dk"], strides=[1, 1, 1, 1], padding="VALID")
    add("side", "Relu", ["split:1"])  # a second output: its shape is not followed (Split), the same both ways
    const("cat_axis", np.array(3, "int32"), dtype=3)
    add("cat", "ConcatV2", ["pool", "dw:0", "cat_axis"], N=2)
    add("shape", "Shape", ["cat"])
    for name, value in (("begin", 0), ("end", 1), ("step", 1)):
        const(name, np.array([value], "int32"), dtype=3)
    add("batch", "StridedSlice", ["shape", "begin", "end", "step"], shrink_axis_mask=1)
    const("minus1", np.array(-1, "int32"), dtype=3)
    add("pack", "Pack", ["batch", "minus1"], N=2)
    add("flat", "Reshape", ["cat", "pack"])
    add("output", "Identity", ["flat"])
    path.write_bytes(g.SerializeToString())
    return path


def _onnx(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2]),
         helper.make_node("Relu", ["c"], ["r"], name="relu"),
         helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Flatten", ["p"], ["y"], name="flat")], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])],
        [numpy_helper.from_array(np.ones((4, 3, 3, 3), "float32"), "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


def _every_tensor(graph):
    names = set()
    for node in graph.nodes.values():
        names.update(t for t in node.inputs if t)
        names.update(node.outputs or [node.name])
        names.add(node.name)
        names.update("^" + c for c in getattr(node, "control_inputs", None) or ())
    return sorted(names | set(graph.inputs) | set(graph.outputs))


def test_shape_lookups_are_tensor_key_s_on_every_tensor(tmp_path):
    for path in (_frozen(tmp_path / "m.pb"), _onnx(tmp_path / "m.onnx")):
        graph = read_model(path)
        shapes = tensor_shapes(graph, _order(graph))
        names = _every_tensor(graph)
        assert any(":" in n for n in names) or graph.kind == "onnx"
        for name in names + ["input:0", "split:1", "^relu", "dw:0", ""]:
            key = tensor_key(graph, name) if name else None
            assert shapes.of(name) == (shapes.dims.get(key) if name else None), name
            assert shapes.value(name) == (shapes.ints.get(key) if name else None), name
        known = {name: shapes.of(name) for name in ("conv", "pool", "dw", "cat", "flat")} if graph.kind != "onnx" \
            else {name: shapes.of(name) for name in ("c", "p", "y")}
        if graph.kind != "onnx":  # the shapes themselves, worked by hand
            assert known == {"conv": [1, 8, 8, 8], "pool": [1, 6, 6, 8], "dw": [1, 6, 6, 8], "cat": [1, 6, 6, 16],
                             "flat": [1, 576]}
            assert shapes.value("batch") == [1] and shapes.value("pack") == [1, -1]
        else:
            assert known == {"c": [1, 4, 8, 8], "p": [1, 4, 4, 4], "y": [1, 64]}


def test_window_attributes_are_what_decoding_each_attribute_gives(tmp_path):
    graph = read_model(_frozen(tmp_path / "m.pb"))
    cache = {}
    windows = [n for n in graph.nodes.values() if n.op in ("Conv2D", "DepthwiseConv2dNative", "MaxPool")]
    assert len(windows) == 3
    for _ in range(2):  # the second pass answers from the cache
        for node in windows:
            decoded = tuple(v.decode() if isinstance(v, bytes) else v for v in (node_attr(node, k) for k in _WINDOW_KEYS))
            assert _window_attrs(node, cache) == decoded, node.name
    assert len(cache) == 3  # three distinct sets: one entry each


def test_engine_layers_are_built_with_the_collector_paused_and_it_is_on_after(tmp_path, monkeypatch):
    import pipeline.estimate.layers as layers_module

    seen = []

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return engine_layers(*args, **kwargs)

    monkeypatch.setattr(layers_module, "engine_layers", spy)
    assert gc.isenabled()
    graph, layers = layers_of(_frozen(tmp_path / "m.pb"))
    assert seen == [False] and gc.isenabled()
    assert [layer.to_dict() for layer in layers] == [layer.to_dict() for layer in engine_layers(graph, None, "fp16")]


def _blocks(tmp_path):
    """scripts/bench/graph_read.py's frozen CNN (the 200,000-node benchmark's graph), 502 nodes of it."""
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("graph_read", root / "scripts" / "bench" / "graph_read.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_frozen(tmp_path / "blocks.pb", 502)
    return tmp_path / "blocks.pb"


def _onnx_optional_input(path):
    """An ONNX Clip with its min left out (an empty input name), a Gemm, an Add of two activations."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="gemm", transB=1),
         helper.make_node("Clip", ["g", "", "hi"], ["c"], name="clip"),
         helper.make_node("Add", ["c", "g"], ["y"], name="add")], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(np.ones((4, 8), "float32"), "w"), numpy_helper.from_array(np.ones(4, "float32"), "b"),
         numpy_helper.from_array(np.array(6.0, "float32"), "hi")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


def _ir_graphs():
    """Graphs in deploy's own IR that reach each branch of the loop: a residual Add, an Add of one tensor twice
    (the same string object, and two equal strings), ports and control marks in data inputs, an Identity
    between a conv and its bias, a constant sub-graph (folded), a MatMul, an empty input, a tensor read twice."""
    same = "a/Relu"
    equal = "".join(["a/", "Relu"])
    yield tf_graph(conv_bias_relu("a", "x", 3, 8) + conv("b", "a/Relu", 8, 8) + [
        op("add", "AddV2", ["b", "a/Relu"]), op("relu", "Relu", ["add"]), op("add2", "AddV2", ["relu", "a/Relu"])],
        ["add2"])
    yield tf_graph(conv_bias_relu("a", "x", 3, 8) + [op("twice", "AddV2", [same, same]), op("r", "Relu", ["twice"])],
                   ["r"])
    yield tf_graph(conv_bias_relu("a", "x", 3, 8) + [op("twice", "AddV2", [same, equal]), op("r", "Relu", ["twice"])],
                   ["r"])
    sig = "sg"  # a point-wise layer read twice by a Mul: the same string object fuses, two equal strings do not
    yield tf_graph([op("sg", "Sigmoid", ["x"]), op("m", "Mul", [sig, sig]), op("t", "Tanh", ["m"])], ["t"])
    yield tf_graph([op("sg", "Sigmoid", ["x"]), op("m", "Mul", [sig, "".join(["s", "g"])]), op("t", "Tanh", ["m"])],
                   ["t"])
    yield tf_graph(conv("c", "x:0", 3, 8) + [
        op("id", "Identity", ["c:0"]), const("bias", [8]), op("ba", "BiasAdd", ["id", "bias"]),
        op("s", "Sigmoid", ["^x", "ba"]), const("g", [8]), const("v", [8]), op("gv", "Mul", ["g", "v"]),
        op("scaled", "Mul", ["s", "gv"]), op("e", "Exp", ["scaled", ""]), op("side", "Relu", ["c"]),
        op("neg", "Neg", ["g", ""]), op("sum", "AddV2", ["side", "neg"])], ["e", "sum"])  # neg: an empty input, kept
    yield tf_graph([op("flat", "Reshape", ["x", "shape"]), const("shape", [2]), const("w", [192, 10]),
                    op("mm", "MatMul", ["flat", "w"]), op("mm2", "MatMul", ["mm", "mm:0"], transpose_b=True)],
                   ["mm2"])


def _layers_json(layers):
    return json.dumps([layer.to_dict() for layer in layers] + [[layer.per_batch for layer in layers]],
                      sort_keys=True)


def test_the_layer_loop_gives_what_the_loop_before_it_gave(tmp_path):
    graphs = [read_model(path) for path in (_frozen(tmp_path / "m.pb"), _onnx(tmp_path / "m.onnx"), _blocks(tmp_path),
                                            _onnx_optional_input(tmp_path / "opt.onnx"))] + list(_ir_graphs())
    twice, equal = (engine_layers(g, None, "fp32") for g in graphs[7:9])
    assert [layer.ops for layer in twice] == [["Sigmoid", "Mul", "Tanh"]]
    assert [layer.ops for layer in equal] == [["Sigmoid"], ["Mul", "Tanh"]]
    counted = 0
    for graph in graphs:
        for precision in ("fp32", "fp16", "int8"):
            new = _layers_json(engine_layers(graph, None, precision))
            old = _layers_json(reference_engine_layers(graph, None, precision))
            assert new == old, (graph.source, precision)
        counted += len(engine_layers(graph, None, "fp32"))
    blocks = engine_layers(graphs[2], None, "fp32")
    assert len(blocks) == 100 and all(layer.ops == ["Conv2D", "BiasAdd", "Relu"] for layer in blocks)
    assert counted > 120
    batch = engine_layers(graphs[0], {"input:0": [4, 16, 16, 3]}, "fp16")
    assert _layers_json(batch) == _layers_json(reference_engine_layers(graphs[0], {"input:0": [4, 16, 16, 3]}, "fp16"))


def _node_def(name, op, inputs=(), device="", **attrs):
    from pipeline.graph.proto import message_class

    node = message_class("NodeDef")(name=name, op=op, input=list(inputs), device=device)
    for key, value in attrs.items():
        if isinstance(value, str):
            node.attr[key].s = value.encode()
        elif isinstance(value, list):
            node.attr[key].list.i.extend(value)
        else:
            node.attr[key].type = value
    return node


def test_attr_bytes_are_equal_exactly_when_the_attributes_are():
    window = dict(T=1, strides=[1, 2, 2, 1], padding="SAME", data_format="NHWC")
    base = attr_bytes(_node_def("conv", "Conv2D", ["x", "k"], **window))
    long_name = "block/" * 40 + "conv"  # over 127 bytes: a two-byte length
    same = [_node_def(long_name, "Conv2D", ["x:1", "^c", "k"] + ["y%d" % i for i in range(50)], **window),
            _node_def("c2", "Conv2D", ["x"], device="/device:GPU:0", **dict(reversed(list(window.items()))))]
    assert all(attr_bytes(node) == base for node in same)
    other = [dict(window, padding="VALID"), dict(window, strides=[1, 1, 1, 1]), dict(window, T=19),
             dict(window, dilations=[1, 2, 2, 1]), {k: v for k, v in window.items() if k != "data_format"}]
    assert len({attr_bytes(_node_def("conv", "Conv2D", ["x", "k"], **attrs)) for attrs in other} | {base}) == 6
    assert attr_bytes(_node_def("n", "NoOp")) == b""


def test_the_shape_pass_gives_what_infer_tf_gives_node_by_node(tmp_path):
    """The inline Const and same-shape cases against _infer_tf's own on every node; a pool with no attribute
    at all (attr_bytes b"") after a scalar Const (serialized shape b""): their caches are not one."""
    import numpy as np

    from pipeline.graph.proto import message_class

    g = message_class("GraphDef")()
    x = g.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = 1
    for d in (1, 8, 8, 4):
        x.attr["shape"].shape.dim.add(size=d)
    scalar = g.node.add(name="scalar", op="Const")
    scalar.attr["value"].tensor.dtype = 3
    scalar.attr["value"].tensor.tensor_content = np.array(2, "int32").tobytes()
    g.node.add(name="pool", op="MaxPool", input=["x"])
    g.node.add(name="not_a_tensor", op="Const").attr["value"].s = b"text"
    invalid = g.node.add(name="invalid", op="Const")  # DT_INVALID: dims, no dtype
    invalid.attr["value"].tensor.tensor_shape.dim.add(size=3)
    g.node.add(name="relu", op="Relu", input=["pool"])
    g.node.add(name="cast", op="Cast", input=["scalar"])
    g.node.add(name="id", op="Identity", input=["relu:0"])
    path = tmp_path / "m.pb"
    path.write_bytes(g.SerializeToString())
    graphs = [read_model(path), read_model(_frozen(tmp_path / "f.pb")), read_model(_blocks(tmp_path))] + \
        list(_ir_graphs())
    for graph in graphs:
        order = _order(graph)
        shapes = tensor_shapes(graph, order)
        reference = Shapes(graph)
        reference.dims.update(input_dims(graph))
        for node in order:
            if node.op not in SKIP:
                try:
                    _infer_tf(reference, node)
                except _ERRORS:
                    pass
        assert (shapes.dims, shapes.ints) == (reference.dims, reference.ints), graph.source
    shapes = tensor_shapes(graphs[0], _order(graphs[0]))
    assert shapes.dims["pool"] == [1, 8, 8, 4] and shapes.dims["scalar"] == [] and shapes.ints["cast"] == [2]
    assert "not_a_tensor" not in shapes.dims and shapes.dims["invalid"] == [3]
    assert const_shape(graphs[0].nodes["not_a_tensor"], {}) == (None, None)
    assert const_shape(graphs[0].nodes["invalid"], {}) == ([3], None)
    assert const_shape(graphs[0].nodes["scalar"], {}) == ([], "int32")


def test_estimate_model_keeps_one_gc_pause_and_can_leave_the_graph_to_the_end(tmp_path, monkeypatch):
    import pipeline.estimate as estimate_module
    import pipeline.files as files
    import pipeline.graph.frames as frames

    seen = []
    loop_ops, estimate_layers = frames.loop_ops, estimate_module.estimate_layers
    monkeypatch.setattr(frames, "loop_ops", lambda graph: seen.append(("loops", gc.isenabled())) or loop_ops(graph))
    monkeypatch.setattr(estimate_module, "estimate_layers",
                        lambda *a, **k: seen.append(("estimate", gc.isenabled())) or estimate_layers(*a, **k))
    monkeypatch.setattr(files, "_OUTLIVE", [])
    path = _blocks(tmp_path)
    assert gc.isenabled()
    report = estimate_model(path, ["jetson_nano"])
    assert seen == [("loops", False), ("estimate", False)] and gc.isenabled() and not files.outlived()
    try:
        kept = estimate_model(path, ["jetson_nano"], outlive=True)
        assert not gc.isenabled() and files.outlived()  # left for the process's end, as deploy check's outlive
    finally:
        gc.enable()
    assert json.dumps(kept, sort_keys=True) == json.dumps(report, sort_keys=True)
