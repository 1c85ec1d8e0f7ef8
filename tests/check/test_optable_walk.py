"""The check against onnx-tensorrt's op tables, op by op and dtype by dtype (tests/check/optable_walk.py):
no false YES on any TensorRT target, and every NO where the table says yes rests on a restriction,
a parser rule or a documented type rule (issue 26 item 5)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pipeline.check import check_model  # noqa: E402
from pipeline.targets import load_target  # noqa: E402

import optable_walk  # noqa: E402  (tests/check is on sys.path: rootdir-relative test modules)

# one target per onnx table (8.2, 8.5, 10.x); the other targets share these tables and opsets
WALKED = ("jetson_tx2", "agx_xavier", "agx_orin")


def _blockers(path, target):
    report = check_model(path, load_target(target), convert=False)
    route = report.route("onnx")
    return [f for f in route.findings if f.severity == "blocker"] + list(route.accepted_but_wrong)


def _save(tmp_path, name, nodes, inputs, outputs, inits=(), opset=13):
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                              opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("target", WALKED)
def test_no_false_yes_and_every_no_explained(tmp_path, target):
    cases = optable_walk.walk(target, tmp_path)
    figures = optable_walk.figures(cases)
    assert figures["checks"] > 800  # the walk built its models (every listed op, every schema type)
    assert figures["false_yes_cases"] == []
    assert figures["unexplained_cases"] == []


def test_uint8_network_input_only_into_ops_that_list_it(tmp_path):
    """8.5 and 10.x have UINT8 as a network input type, but Add's row lists no UINT8 (was a false YES)."""
    x = helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 4])
    one = numpy_helper.from_array(np.ones([1], "uint8"), "one")
    add = _save(tmp_path, "add.onnx", [helper.make_node("Add", ["x", "one"], ["y"], name="add")], [x],
                [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 4])], [one])
    for target in ("agx_xavier", "agx_orin"):
        found = _blockers(add, target)
        assert any(f.kind == "dtype" and f.nodes == ["add"] and "input 0 x is UINT8; the TensorRT" in f.cause and "parser's Add takes FP32, FP16" in f.cause
                   for f in found), [f.cause for f in found]
    cast = _save(tmp_path, "cast.onnx", [helper.make_node("Cast", ["x"], ["y"], name="to_float", to=TensorProto.FLOAT)],
                 [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    for target in ("agx_xavier", "agx_orin"):
        assert _blockers(cast, target) == []  # Cast's row lists UINT8: the way a uint8 image goes in


def test_uint8_quantization_is_refused(tmp_path):
    """QuantizeLinear to UINT8: no release's DequantizeLinear row lists UINT8 (was a false YES on 8.5 and 10.x)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    s = numpy_helper.from_array(np.array(0.1, "float32"), "s")
    for qtype, zero, expect_ok in ((TensorProto.UINT8, np.uint8(0), False), (TensorProto.INT8, np.int8(0), True)):
        z = numpy_helper.from_array(np.array(zero), "z")
        nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
                 helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")]
        path = _save(tmp_path, "q{}.onnx".format(qtype), nodes, [x],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [s, z])
        for target in ("jetson_tx2", "agx_xavier", "agx_orin"):
            found = _blockers(path, target)
            if expect_ok:
                assert found == [], (target, [f.cause for f in found])
            else:
                assert any(f.op == "QuantizeLinear" and "q is UINT8" in f.cause and "quantizes to" in f.cause
                           for f in found), (target, [f.cause for f in found])
                assert any(f.op == "DequantizeLinear" for f in found), (target, [f.cause for f in found])


def test_walk_truth_follows_the_table():
    """The walk's truth is the table row (cast-down applied), not the checker."""
    import onnx.defs

    from pipeline.targets.optables import load_op_table

    t85 = load_op_table("onnx_trt_8.5")
    add = onnx.defs.get_schema("Add", 17, "")
    assert optable_walk.truth(t85, "Add", {"T": "int64"}, add)  # INT64 -> INT32 on 8.x, INT32 listed
    assert not optable_walk.truth(t85, "Add", {"T": "uint8"}, add)
    q = onnx.defs.get_schema("QuantizeLinear", 17, "")
    assert optable_walk.truth(t85, "QuantizeLinear", {"T1": "float", "T2": "int8"}, q)
    assert not optable_walk.truth(t85, "QuantizeLinear", {"T1": "float", "T2": "uint8"}, q)
