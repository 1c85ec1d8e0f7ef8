"""pipeline/check/onnx_rules.py (every node and tensor of an ONNX model against the parser's tables),
the generated onnx_trt tables (scripts/gen_onnx_trt_tables.py) and ONNX batch semantics."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pipeline.check import check_model  # noqa: E402
from pipeline.targets import load_target  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT.parent / "shared" / "reference" / "targets" / "onnx-tensorrt"


def _save(tmp_path, name, nodes, inputs, outputs, inits=(), opset=13):
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                              opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _onnx(report):
    return report.route("onnx")


def _blockers(report):
    return [f for f in _onnx(report).findings if f.severity == "blocker"]


def _kinds(report):
    return sorted({(f.kind, f.op) for f in _blockers(report)}, key=str)


# ------------------------------------------------------------------------------ generated tables


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="no ../shared/reference beside this checkout: run "
                    "scripts/gen_onnx_trt_tables.py --reference <onnx-tensorrt clone> --check")
def test_generated_tables_are_up_to_date():
    res = subprocess.run([sys.executable, "scripts/gen_onnx_trt_tables.py", "--reference", str(REFERENCE), "--check"],
                         cwd=str(ROOT), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_tables_keep_source_commit_and_parser_corrections():
    from pipeline.targets.optables import load_op_table

    t82, t85, t10 = (load_op_table(n) for n in ("onnx_trt_8.2", "onnx_trt_8.5", "onnx_trt_10"))
    assert t82.source_commit == "e9456d57605c883cdf985e634ab483e2c1500bb1"
    assert t85.source_commit.startswith("7583da4c") and t10.source_commit.startswith("96e78110")
    assert "INT32" in t82.io_types and "UINT8" not in t82.io_types and t82.cast_down == {"INT64": "INT32", "FP64": "FP32"}
    assert "UINT8" in t85.io_only_types and "BF16" in t10.io_types and "BF16" not in t82.io_types
    assert t82.is_supported("ScatterElements") and any("native" in n for n in t82.lookup("ScatterElements").notes)
    assert t82.const_inputs("ReduceSum") == {1: "axes"}
    assert any("closest" in n or "10.1" in n for n in t10.unconfirmed)


# ------------------------------------------------------------------------------ types, every tensor


def test_internal_uint8_bf16_string_and_integer_pow(tmp_path):
    x = _vi("x", TensorProto.FLOAT, ["N", 4])
    nodes = [helper.make_node("Cast", ["x"], ["u8"], name="to_u8", to=TensorProto.UINT8),
             helper.make_node("Cast", ["u8"], ["f"], name="back", to=TensorProto.FLOAT),
             helper.make_node("Cast", ["f"], ["i"], name="to_int", to=TensorProto.INT32),
             helper.make_node("Pow", ["i", "two"], ["p"], name="ipow"),
             helper.make_node("Cast", ["p"], ["y"], name="out", to=TensorProto.FLOAT)]
    two = numpy_helper.from_array(np.array(2, "int32"), "two")
    path = _save(tmp_path, "t.onnx", nodes, [x], [_vi("y", TensorProto.FLOAT, ["N", 4])], [two])
    report = check_model(path, load_target("jetson_tx2"))
    causes = " | ".join(f.cause for f in _blockers(report))
    assert "to_u8" in causes and "u8 is UINT8; TensorRT 8.2.1 has no UINT8 tensors" in causes
    assert any(f.cause.startswith("integer Pow: Pow ipow: input 0 i is INT32") and "FP32" in f.fix
               for f in _blockers(report))
    assert not report.deployable
    # 10.x: UINT8 exists, but only as network I/O
    report = check_model(path, load_target("agx_orin"))
    assert any("u8 is UINT8 inside the network" in f.cause for f in _blockers(report))


def test_string_and_sequence_tensors(tmp_path):
    x = _vi("x", TensorProto.FLOAT, [2, 4])
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["seq"], name="pack"),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], name="unpack", axis=0)]
    path = _save(tmp_path, "s.onnx", nodes, [x], [_vi("y", TensorProto.FLOAT, [4, 4])])
    report = check_model(path, load_target("agx_orin"))
    assert any("seq (output of SequenceConstruct) is a sequence value" in f.cause for f in _blockers(report))


def test_int8_only_through_qdq(tmp_path):
    x = _vi("x", TensorProto.FLOAT, ["N", 4])
    s = numpy_helper.from_array(np.array(0.1, "float32"), "s")
    z = numpy_helper.from_array(np.array(0, "int8"), "z")
    qdq = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
           helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")]
    ok = _save(tmp_path, "qdq.onnx", qdq, [x], [_vi("y", TensorProto.FLOAT, ["N", 4])], [s, z])
    assert _blockers(check_model(ok, load_target("agx_orin"))) == []
    cast = [helper.make_node("Cast", ["x"], ["c"], name="to_i8", to=TensorProto.INT8),
            helper.make_node("Cast", ["c"], ["y"], name="back", to=TensorProto.FLOAT)]
    bad = _save(tmp_path, "i8.onnx", cast, [x], [_vi("y", TensorProto.FLOAT, ["N", 4])])
    report = check_model(bad, load_target("agx_orin"))
    assert any("c is INT8 outside QuantizeLinear/DequantizeLinear" in f.cause and f.nodes == ["to_i8"]
               for f in _blockers(report))


def test_int32_input_is_accepted_on_8x(tmp_path):
    """onnx-tensorrt 8.2's convertDtype maps INT32 inputs; ops listing INT32 take them (refused before)."""
    x = _vi("x", TensorProto.INT32, ["N", 4])
    one = numpy_helper.from_array(np.array([1], "int32"), "one")
    nodes = [helper.make_node("Add", ["x", "one"], ["a"], name="add"),
             helper.make_node("Cast", ["a"], ["y"], name="to_float", to=TensorProto.FLOAT)]
    path = _save(tmp_path, "i32.onnx", nodes, [x], [_vi("y", TensorProto.FLOAT, ["N", 4])], [one])
    report = check_model(path, load_target("jetson_tx2"))
    assert _blockers(report) == [] and report.deployable
    # an INT32 input into an op that lists no INT32 (MatMul on 8.2) is still refused, by name
    w = numpy_helper.from_array(np.ones((4, 2), "int32"), "w")
    mm = _save(tmp_path, "mm.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [x],
               [_vi("y", TensorProto.INT32, ["N", 2])], [w])
    report = check_model(mm, load_target("jetson_tx2"))
    assert [f.nodes for f in _blockers(report)] == [["mm"]]
    assert "MatMul mm: input 0 x is INT32; the TensorRT 8.2.1 parser's MatMul takes FP32, FP16" in _blockers(report)[0].cause


def test_tf2onnx_int32_input(tmp_path):
    """The field's way: a TF graph with an int32 input (token ids) converted by tf2onnx."""
    tf = pytest.importorskip("tensorflow")
    tf2onnx = pytest.importorskip("tf2onnx")
    graph = tf.Graph()
    with graph.as_default():
        ids = tf.compat.v1.placeholder(tf.int32, [None, 8], name="ids")
        table = tf.constant(np.ones((16, 4), "float32"))
        tf.identity(tf.reduce_sum(tf.gather(table, ids + 1), axis=1), name="out")
    model, _ = tf2onnx.convert.from_graph_def(graph.as_graph_def(), input_names=["ids:0"], output_names=["out:0"],
                                              opset=13)
    path = tmp_path / "ids.onnx"
    path.write_bytes(model.SerializeToString())
    report = check_model(path, load_target("jetson_tx2"))
    assert not any(f.kind == "dtype" for f in _blockers(report)), [f.cause for f in _blockers(report)]


# ------------------------------------------------------------------------------ subgraphs


def test_unsupported_op_inside_an_if_branch(tmp_path):
    x = _vi("x", TensorProto.FLOAT, [4])
    then_out, else_out = _vi("t", TensorProto.FLOAT, [4]), _vi("e", TensorProto.FLOAT, [4])
    then_g = helper.make_graph([helper.make_node("Hardmax", ["x"], ["t"], name="Foo", axis=0)], "then", [], [then_out])
    else_g = helper.make_graph([helper.make_node("Relu", ["x"], ["e"], name="Bar")], "else", [], [else_out])
    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [helper.make_node("If", ["cond"], ["y"], name="If_3", then_branch=then_g, else_branch=else_g)]
    path = _save(tmp_path, "if.onnx", nodes, [x], [_vi("y", TensorProto.FLOAT, [4])], [cond])
    report = check_model(path, load_target("jetson_tx2"))
    bad = [f for f in _blockers(report) if f.kind == "unsupported_op"]
    assert [f.nodes for f in bad] == [["If_3/then_branch/Foo"]] and bad[0].op == "Hardmax"
    assert not report.deployable


# ------------------------------------------------------------------------------ restrictions


def test_initializer_only_inputs(tmp_path):
    x = _vi("x", TensorProto.FLOAT, ["N", 4, 8])
    k = _vi("k", TensorProto.INT64, [1])
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Slice", ["s", "st", "en"], ["axes"], name="pick"),
             helper.make_node("Unsqueeze", ["x", "axes"], ["u"], name="unsq"),
             helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk")]
    inits = [numpy_helper.from_array(np.array([2], "int64"), "st"), numpy_helper.from_array(np.array([3], "int64"), "en")]
    path = _save(tmp_path, "c.onnx", nodes, [x, k], [_vi("u", TensorProto.FLOAT, None),
                                                     _vi("v", TensorProto.FLOAT, None), _vi("i", TensorProto.INT64, None)],
                 inits)
    report = check_model(path, load_target("jetson_tx2"))
    restr = {f.nodes[0]: f.cause for f in _blockers(report) if f.kind == "restriction"}
    assert "input 1 (axes) is computed by Slice pick, not an initializer" in restr["unsq"]
    assert "input 1 (K) is a graph input" in restr["topk"]
    # a Constant node's output counts as an initializer (the parser's weights)
    nodes = [helper.make_node("Constant", [], ["ax"], name="ax", value=numpy_helper.from_array(np.array([1], "int64"))),
             helper.make_node("Unsqueeze", ["x", "ax"], ["u"], name="unsq")]
    path = _save(tmp_path, "k.onnx", nodes, [x], [_vi("u", TensorProto.FLOAT, None)])
    assert not [f for f in _blockers(check_model(path, load_target("jetson_tx2"))) if f.kind == "restriction"]


def test_pooling_rank_and_maxpool_indices(tmp_path):
    x = _vi("x", TensorProto.FLOAT, ["N", 3, 16])
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "idx"], name="pool", kernel_shape=[2])]
    path = _save(tmp_path, "p.onnx", nodes, [x], [_vi("y", TensorProto.FLOAT, None), _vi("idx", TensorProto.INT64, None)])
    report = check_model(path, load_target("jetson_tx2"))
    causes = [f.cause for f in _blockers(report) if f.kind == "restriction"]
    assert any("has 1 spatial dimension(s) (rank 3)" in c and "2D or 3D only" in c for c in causes)
    assert any("output 1 (Indices) is not produced" in c for c in causes)


def test_min_opset_is_enforced(tmp_path):
    x = _vi("x", TensorProto.FLOAT, ["N", 4])
    path = _save(tmp_path, "o1.onnx", [helper.make_node("Relu", ["x"], ["y"], name="r")], [x],
                 [_vi("y", TensorProto.FLOAT, ["N", 4])], opset=1)
    report = check_model(path, load_target("agx_orin"))
    opset = [f for f in _blockers(report) if f.kind == "opset"]
    assert opset and opset[0].fix.startswith("re-export at opset >= 9")
    assert not report.deployable


def test_scatter_elements_is_native_on_8_2(tmp_path):
    x = _vi("x", TensorProto.FLOAT, [4, 4])
    idx = numpy_helper.from_array(np.zeros((1, 4), "int64"), "idx")
    upd = numpy_helper.from_array(np.ones((1, 4), "float32"), "upd")
    path = _save(tmp_path, "sc.onnx", [helper.make_node("ScatterElements", ["x", "idx", "upd"], ["y"], name="sc")], [x],
                 [_vi("y", TensorProto.FLOAT, [4, 4])], [idx, upd])
    report = check_model(path, load_target("jetson_tx2"))
    assert not [f for f in _onnx(report).findings if f.kind == "plugin"] and report.deployable


def test_inference_failure_is_a_warning(tmp_path):
    x = _vi("x", TensorProto.FLOAT, [2, 3])
    w = numpy_helper.from_array(np.ones((4, 5), "float32"), "w")
    path = _save(tmp_path, "bad.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [x],
                 [_vi("y", TensorProto.FLOAT, None)], [w])
    report = check_model(path, load_target("jetson_tx2"))
    assert any(f.kind == "inference" and f.severity == "warning" for f in _onnx(report).findings)


# ------------------------------------------------------------------------------ batch semantics


def test_reduce_over_all_axes_of_a_non_batch_tensor_is_not_batch_dependent(tmp_path):
    x = _vi("x", TensorProto.FLOAT, ["N", 4])
    w = numpy_helper.from_array(np.ones((4, 4), "float32"), "w")
    nodes = [helper.make_node("ReduceSum", ["w"], ["total"], name="wsum", keepdims=0),
             helper.make_node("Div", ["x", "total"], ["d"], name="norm"),
             # Keras Flatten through tf2onnx: Shape -> Slice -> ReduceProd -> Concat -> Reshape
             helper.make_node("Shape", ["d"], ["s"], name="shape"),
             helper.make_node("Slice", ["s", "one", "end"], ["tail"], name="tail"),
             helper.make_node("ReduceProd", ["tail"], ["p"], name="prod", keepdims=1),
             helper.make_node("Concat", ["minus1", "p"], ["newshape"], name="pack", axis=0),
             helper.make_node("Reshape", ["d", "newshape"], ["y"], name="flatten"),
             helper.make_node("ReduceMean", ["y"], ["m"], name="rowmean", axes=[1], keepdims=1)]
    inits = [w, numpy_helper.from_array(np.array([1], "int64"), "one"),
             numpy_helper.from_array(np.array([2], "int64"), "end"), numpy_helper.from_array(np.array([-1], "int64"), "minus1")]
    path = _save(tmp_path, "b.onnx", nodes, [x], [_vi("m", TensorProto.FLOAT, None)], inits)
    report = check_model(path, load_target("agx_orin"))
    assert _onnx(report).accepted_but_wrong == [] and not [f for f in report.findings if f.batch_dependent]
    # the same reduction over the batch-carrying tensor is batch-dependent
    nodes[-1] = helper.make_node("ReduceMean", ["y"], ["m"], name="rowmean", axes=[0], keepdims=1)
    path = _save(tmp_path, "b0.onnx", nodes, [x], [_vi("m", TensorProto.FLOAT, None)], inits)
    wrong = _onnx(check_model(path, load_target("agx_orin"))).accepted_but_wrong
    assert [f.nodes for f in wrong] == [["rowmean"]]


def test_batch_follows_transpose(tmp_path):
    """After Transpose(perm=[1,0]) the batch is axis 1: reducing axis 0 is per sample, axis 1 is not."""
    x = _vi("x", TensorProto.FLOAT, ["N", 4])
    nodes = [helper.make_node("Transpose", ["x"], ["t"], name="t", perm=[1, 0]),
             helper.make_node("ReduceMax", ["t"], ["a"], name="over_features", axes=[0], keepdims=1),
             helper.make_node("ReduceMax", ["t"], ["b"], name="over_batch", axes=[-1], keepdims=1)]
    path = _save(tmp_path, "t.onnx", nodes, [x], [_vi("a", TensorProto.FLOAT, None), _vi("b", TensorProto.FLOAT, None)])
    from pipeline.check.onnx_batch import batch_reductions

    assert batch_reductions(onnx.load(str(path))) == [("over_batch", "ReduceMax", 1)]


def test_bf16_internal_refused_on_8x_allowed_on_10x(tmp_path):
    """An internal BF16 tensor (Cast to bfloat16 -> Relu -> Cast back, opset 13): the 8.2 parser has no
    mapping for BF16 (every node producing one is refused, by name); TensorRT 10 has BF16 tensors."""
    x = _vi("x", TensorProto.FLOAT, ["N", 4])
    nodes = [helper.make_node("Cast", ["x"], ["b"], name="to_bf16", to=TensorProto.BFLOAT16),
             helper.make_node("Relu", ["b"], ["r"], name="relu"),
             helper.make_node("Cast", ["r"], ["y"], name="back", to=TensorProto.FLOAT)]
    path = _save(tmp_path, "bf16.onnx", nodes, [x], [_vi("y", TensorProto.FLOAT, ["N", 4])])
    report = check_model(path, load_target("jetson_tx2"))
    assert [(f.kind, f.op, f.nodes) for f in _blockers(report)] == [
        ("dtype", "Cast", ["to_bf16"]), ("dtype", "Relu", ["relu"])]
    assert _blockers(report)[0].cause == "Cast to_bf16: b is BF16; TensorRT 8.2.1 has no BF16 tensors"
    assert not report.deployable
    report = check_model(path, load_target("agx_orin"))
    assert _blockers(report) == [] and report.verdict("onnx") == "YES"


def test_string_tensor_anywhere_refused(tmp_path):
    """A STRING tensor is refused on every TensorRT version wherever it is: a graph input, an internal
    Cast to string, and one inside an If branch."""
    x = _vi("x", TensorProto.FLOAT, ["N", 4])
    cond = _vi("c", TensorProto.BOOL, [])
    branch = helper.make_graph([helper.make_node("Cast", ["x"], ["bs"], name="in_branch", to=TensorProto.STRING),
                                helper.make_node("Cast", ["bs"], ["bo"], name="branch_back", to=TensorProto.FLOAT)],
                               "then", [], [_vi("bo", TensorProto.FLOAT, ["N", 4])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["eo"], name="keep")], "else", [],
                              [_vi("eo", TensorProto.FLOAT, ["N", 4])])
    nodes = [helper.make_node("Cast", ["x"], ["s"], name="to_str", to=TensorProto.STRING),
             helper.make_node("Cast", ["s"], ["f"], name="back", to=TensorProto.FLOAT),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch, else_branch=other)]
    path = _save(tmp_path, "str.onnx", nodes, [x, cond], [_vi("y", TensorProto.FLOAT, ["N", 4]),
                                                          _vi("f", TensorProto.FLOAT, ["N", 4])])
    names = _save(tmp_path, "names.onnx", [helper.make_node("Identity", ["t"], ["n"], name="pass")],
                  [_vi("t", TensorProto.STRING, [4])], [_vi("n", TensorProto.STRING, [4])])
    for target in ("jetson_tx2", "agx_orin"):
        report = check_model(path, load_target(target))
        strings = [f for f in _blockers(report) if "STRING" in f.cause]
        assert sorted(n for f in strings for n in f.nodes) == ["if/then_branch/in_branch", "to_str"]
        assert all("no TensorRT version has string tensors" in f.cause for f in strings)
        assert not report.deployable
        report = check_model(names, load_target(target))
        assert any(f.nodes == ["t"] and f.cause.startswith("input t is STRING;") for f in _blockers(report))
        assert any(f.nodes == ["pass"] and "n is a STRING tensor" in f.cause for f in _blockers(report))


def test_batch_shape_rules_are_a_table_of_real_onnx_ops():
    """onnx_batch dispatches its shape rules from a table (op type -> rule): every key is an ONNX op
    (a misspelt key would silently fall back to the element-wise rule)."""
    import onnx.defs

    from pipeline.check import onnx_batch

    known = {s.name for s in onnx.defs.get_all_schemas_with_history()}
    assert set(onnx_batch._RULES) <= known, set(onnx_batch._RULES) - known
    assert {"ReduceMean", "ArgMax", "Softmax", "Transpose", "Reshape", "Gather", "MatMul", "Gemm"} <= set(onnx_batch._RULES)


def test_nms_whose_output_the_8_2_parser_pads_is_accepted_but_wrong_there_only(tmp_path):
    """TensorRT 8.2's parser pads NonMaxSuppression's output to [max_output_boxes_per_class, 3] (its operators.md);
    what reads it (the Gather of the boxes) sees padding rows that ONNX and TensorFlow do not return: NO on the TX2,
    with the plugin route as the fix; 8.5 on import it with its data-dependent shape."""
    from pipeline.targets import load_target

    inits = [numpy_helper.from_array(np.array([10], "int64"), "max"), numpy_helper.from_array(
        np.array([0.5], "float32"), "iou"), numpy_helper.from_array(np.array([0.1], "float32"), "score")]
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "score"], ["sel"], name="nms")]
    path = _save(tmp_path, "nms.onnx", nodes, [_vi("boxes", TensorProto.FLOAT, [1, 100, 4]),
                                              _vi("scores", TensorProto.FLOAT, [1, 1, 100])],
                 [_vi("sel", TensorProto.INT64, ["n", 3])], inits)
    tx2 = check_model(path, load_target("jetson_tx2"))
    wrong = _onnx(tx2).accepted_but_wrong
    assert [(f.kind, f.op, f.nodes) for f in wrong] == [("accepted_but_wrong", "NonMaxSuppression", ["nms"])]
    assert "pads its output to a fixed [max_output_boxes_per_class, 3]" in wrong[0].cause
    assert "--pass replace_nms_with_plugin" in wrong[0].fix and not tx2.deployable
    nx = check_model(path, load_target("xavier_nx"))
    assert not _onnx(nx).accepted_but_wrong and nx.deployable
