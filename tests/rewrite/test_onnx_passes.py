"""ONNX rewrite passes: each keeps the numbers (ONNX Runtime before/after) and leaves a near miss alone."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from pipeline.errors import DeployError
from pipeline.rewrite import registry
from pipeline.rewrite.passes.onnx import (
    lower_opset,
    onnx_fold_constants,
    onnx_remove_identity,
    replace_nms_with_plugin,
    retype_uint8_input,
)

rng = np.random.default_rng(0)


def make_model(nodes, inputs, outputs, inits=(), opset=13, extra_opsets=()):
    """inputs/outputs: [(name, TensorProto type, shape)]; inits: {name: ndarray}."""
    graph = h.make_graph(
        nodes, "g",
        [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [h.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    opsets = [h.make_opsetid("", opset)] + [h.make_opsetid(d, v) for d, v in extra_opsets]
    model = h.make_model(graph, opset_imports=opsets, ir_version=8)  # ORT 1.31 reads IR <= 13
    onnx.checker.check_model(model, full_check=True)
    return model


def run(model, feeds):
    import onnxruntime

    sess = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def assert_equivalent(before, after, feeds, feeds_after=None):
    """Same output names and values on the same input; graph inputs keep their names."""
    assert [i.name for i in after.graph.input] == [i.name for i in before.graph.input]
    assert [o.name for o in after.graph.output] == [o.name for o in before.graph.output]
    onnx.checker.check_model(after, full_check=True)
    want, got = run(before, feeds), run(after, feeds_after or feeds)
    assert list(got) == list(want)
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6, err_msg=name)


def assert_untouched(apply, model, options=None):
    data = model.SerializeToString()
    out, sites = apply(model, options or {})
    assert sites == []
    assert out.SerializeToString() == data
    assert model.SerializeToString() == data  # not edited in place either


def dims(value_info):
    return value_info.type.tensor_type.shape.dim


def ops(model):
    return [n.op_type for n in model.graph.node]


def test_registry_names_every_pass_with_a_one_line_doc():
    passes = registry("onnx")
    assert list(passes) == ["onnx_fold_constants", "retype_uint8_input", "lower_opset",
                            "replace_nms_with_plugin", "onnx_remove_identity"]
    for name, p in passes.items():
        assert p.func.__name__ == name and p.kind == "onnx"
        assert p.doc and "\n" not in p.doc
    assert [n for n, p in passes.items() if p.changes_behaviour] == ["retype_uint8_input", "replace_nms_with_plugin"]


# ------------------------------------------------------------------------------ onnx_fold_constants


def test_fold_constants_keeps_outputs():
    nodes = [
        h.make_node("Constant", [], ["two"], name="two", value=numpy_helper.from_array(np.float32(2.0))),
        h.make_node("Add", ["a", "b"], ["ab"], name="add_consts"),
        h.make_node("Mul", ["ab", "two"], ["ab2"], name="scale_consts"),
        h.make_node("Shape", ["x"], ["x_shape"], name="shape_of_x"),
        h.make_node("Reshape", ["flat", "x_shape"], ["bias"], name="reshape_consts"),
        h.make_node("Add", ["x", "ab2"], ["t"], name="add_x"),
        h.make_node("Add", ["t", "bias"], ["y"], name="add_bias"),
    ]
    inits = {"a": rng.standard_normal(3).astype(np.float32), "b": rng.standard_normal(3).astype(np.float32),
             "flat": rng.standard_normal(6).astype(np.float32)}
    model = make_model(nodes, [("x", T.FLOAT, [2, 3])], [("y", T.FLOAT, [2, 3])], inits)
    out, sites = onnx_fold_constants(model, {})
    assert set(sites) == {"two", "add_consts", "scale_consts", "shape_of_x", "reshape_consts"}
    assert ops(out) == ["Add", "Add"]
    assert_equivalent(model, out, {"x": rng.standard_normal((2, 3)).astype(np.float32)})


def test_fold_constants_near_miss_nothing_constant():
    nodes = [h.make_node("Mul", ["x", "w"], ["t"], name="mul"), h.make_node("Relu", ["t"], ["y"], name="relu")]
    model = make_model(nodes, [("x", T.FLOAT, ["N", 3])], [("y", T.FLOAT, ["N", 3])],
                       {"w": np.ones(3, np.float32)})
    assert_untouched(onnx_fold_constants, model)


def test_fold_constants_leaves_an_output_computed():
    nodes = [h.make_node("Add", ["a", "a"], ["c"], name="const_out"), h.make_node("Relu", ["x"], ["y"], name="relu")]
    model = make_model(nodes, [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2]), ("c", T.FLOAT, [2])],
                       {"a": np.ones(2, np.float32)})
    assert_untouched(onnx_fold_constants, model)


# ------------------------------------------------------------------------------ retype_uint8_input


def uint8_model():
    nodes = [
        h.make_node("Cast", ["image"], ["image_f"], name="to_float", to=T.FLOAT),
        h.make_node("Mul", ["image_f", "scale"], ["y"], name="scale"),
        h.make_node("Cast", ["image"], ["image_i"], name="to_int32", to=T.INT32),
        h.make_node("ReduceSum", ["image_i"], ["total"], name="sum", keepdims=0),
        h.make_node("Transpose", ["image"], ["chw"], name="hwc_to_chw", perm=[0, 3, 1, 2]),
    ]
    return make_model(nodes, [("image", T.UINT8, ["N", 4, 4, 3])],
                      [("y", T.FLOAT, ["N", 4, 4, 3]), ("total", T.INT32, []), ("chw", T.UINT8, ["N", 3, 4, 4])],
                      {"scale": np.float32(1 / 255)})


def test_retype_uint8_input_keeps_outputs():
    model = uint8_model()
    out, sites = retype_uint8_input(model, {})
    assert sites == ["image", "to_float", "image_to_uint8"]
    inp = out.graph.input[0]
    assert inp.name == "image" and inp.type.tensor_type.elem_type == T.FLOAT
    assert [d.dim_param or d.dim_value for d in dims(inp)] == ["N", 4, 4, 3]
    assert "to_float" not in [n.name for n in out.graph.node]
    cast = next(n for n in out.graph.node if n.name == "to_int32")
    assert list(cast.input) == ["image"]  # int32 holds 0..255: reads the float input directly
    pixels = rng.integers(0, 256, (2, 4, 4, 3), dtype=np.uint8)
    assert_equivalent(model, out, {"image": pixels}, {"image": pixels.astype(np.float32)})


def test_retype_uint8_input_typical_graph_has_no_uint8_left():
    nodes = [h.make_node("Cast", ["image"], ["f"], name="to_float", to=T.FLOAT),
             h.make_node("Sub", ["f", "mean"], ["y"], name="center")]
    model = make_model(nodes, [("image", T.UINT8, [1, 8, 8, 3])], [("y", T.FLOAT, [1, 8, 8, 3])],
                       {"mean": np.float32(127.5)})
    out, sites = retype_uint8_input(model, {})
    assert sites == ["image", "to_float"]
    assert ops(out) == ["Sub"]
    pixels = rng.integers(0, 256, (1, 8, 8, 3), dtype=np.uint8)
    assert_equivalent(model, out, {"image": pixels}, {"image": pixels.astype(np.float32)})


def test_retype_uint8_input_near_miss_float_input():
    nodes = [h.make_node("Cast", ["image"], ["f"], name="to_float", to=T.FLOAT),
             h.make_node("Relu", ["f"], ["y"], name="relu")]
    model = make_model(nodes, [("image", T.FLOAT, [1, 3])], [("y", T.FLOAT, [1, 3])])
    assert_untouched(retype_uint8_input, model)


def test_retype_uint8_input_passed_straight_to_an_output_is_an_error():
    model = make_model([h.make_node("Relu", ["x"], ["y"])], [("image", T.UINT8, [3]), ("x", T.FLOAT, [3])],
                       [("image", T.UINT8, [3]), ("y", T.FLOAT, [3])])
    with pytest.raises(DeployError, match="image"):
        retype_uint8_input(model, {})


# ------------------------------------------------------------------------------ lower_opset


def conv_model(opset):
    """Ops that exist at 13 but are newer at 17: Relu/Add/Reshape 14, BatchNormalization 15, Identity 16;
    at 18 also Pad (no downgrade adapter) and ReduceMean with axes as an input (an adapter) in one step."""
    c = 4
    nodes = [
        h.make_node("Pad", ["x", "pads"], ["padded"], name="pad"),
        h.make_node("Conv", ["padded", "w"], ["conv"], name="conv"),
        h.make_node("BatchNormalization", ["conv", "gamma", "beta", "mean", "var"], ["bn"], name="bn"),
        h.make_node("Relu", ["bn"], ["relu"], name="relu"),
        h.make_node("Add", ["relu", "conv"], ["sum"], name="add"),
        h.make_node("Identity", ["sum"], ["ident"], name="ident"),
        h.make_node("ReduceMean", ["ident"], ["pool"], name="pool", axes=[2, 3], keepdims=0),
        h.make_node("Reshape", ["pool", "shape"], ["flat"], name="reshape"),
        h.make_node("Softmax", ["flat"], ["y"], name="softmax", axis=-1),
    ]
    inits = {"w": rng.standard_normal((c, 3, 3, 3)).astype(np.float32),
             "gamma": rng.random(c).astype(np.float32) + 0.5, "beta": rng.standard_normal(c).astype(np.float32),
             "mean": rng.standard_normal(c).astype(np.float32), "var": rng.random(c).astype(np.float32) + 0.5,
             "shape": np.array([-1, c], np.int64), "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}
    if opset >= 18:  # axes as an input from 18; noop_with_empty_axes=1 as tf2onnx writes it (idle: axes given)
        nodes[6] = h.make_node("ReduceMean", ["ident", "axes"], ["pool"], name="pool", keepdims=0,
                               noop_with_empty_axes=1)
        inits["axes"] = np.array([2, 3], np.int64)
    return make_model(nodes, [("x", T.FLOAT, ["N", 3, 8, 8])], [("y", T.FLOAT, ["N", c])], inits, opset=opset)


@pytest.mark.parametrize("source", [17, 18])
def test_lower_opset_to_13_keeps_outputs(source):
    model = conv_model(source)
    out, sites = lower_opset(model, {"opset": 13})
    assert [(o.domain, o.version) for o in out.opset_import] == [("", 13)]
    assert out.ir_version == 7
    assert {"relu", "add", "bn", "ident", "reshape"} <= set(sites)
    assert ({"pad", "pool"} <= set(sites)) == (source >= 18)
    assert "conv" not in sites and "softmax" not in sites
    assert "noop_with_empty_axes" not in str(out.graph)
    assert_equivalent(model, out, {"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32)})


@pytest.mark.parametrize("source", [11, 13])
def test_lower_opset_near_miss_already_low_enough(source):
    model = make_model([h.make_node("Relu", ["x"], ["y"], name="relu")], [("x", T.FLOAT, [2])],
                       [("y", T.FLOAT, [2])], opset=source)
    assert_untouched(lower_opset, model, {"opset": 13})


def test_lower_opset_op_missing_at_target_is_an_error():
    nodes = [h.make_node("LayerNormalization", ["x", "scale"], ["y"], name="ln"),
             h.make_node("Relu", ["y"], ["z"], name="relu")]
    model = make_model(nodes, [("x", T.FLOAT, [2, 4])], [("z", T.FLOAT, [2, 4])],
                       {"scale": np.ones(4, np.float32)}, opset=17)
    with pytest.raises(DeployError, match=r"no opset-13 version of LayerNormalization \(nodes: ln\)") as e:
        lower_opset(model, {"opset": 13})
    assert "Relu" not in str(e.value)


def test_lower_opset_newer_attribute_is_an_error():
    # Reshape-14 allowzero=1 has no opset-13 form: relabelling is refused by the full checker.
    nodes = [h.make_node("Reshape", ["x", "shape"], ["y"], name="reshape", allowzero=1)]
    model = make_model(nodes, [("x", T.FLOAT, [2, 3])], [("y", T.FLOAT, [3, 2])],
                       {"shape": np.array([3, 2], np.int64)}, opset=14)
    with pytest.raises(DeployError, match="lower_opset.*opset 13"):
        lower_opset(model, {"opset": 13})


def test_lower_opset_needs_a_target():
    with pytest.raises(DeployError, match=r"options\['opset'\]"):
        lower_opset(conv_model(17), {})


# ------------------------------------------------------------------------------ replace_nms_with_plugin


def nms_model(iou_input=False, transposed_scores=False, max_boxes=5):
    nodes = []
    if transposed_scores:
        nodes.append(h.make_node("Transpose", ["scores_bc"], ["scores"], name="to_ncb", perm=[0, 2, 1]))
    nodes += [
        h.make_node("NonMaxSuppression", ["boxes", "scores", "max_boxes", "iou_in" if iou_input else "iou", "score"],
                    ["selected"], name="nms"),
        h.make_node("Gather", ["selected", "col"], ["box_index"], name="box_index", axis=1),
        h.make_node("Squeeze", ["boxes", "zero"], ["boxes_2d"], name="squeeze"),
        h.make_node("Gather", ["boxes_2d", "box_index"], ["picked"], name="picked", axis=0),
        h.make_node("ReduceMax", ["scores"], ["best"], name="best", keepdims=0),
    ]
    inputs = [("boxes", T.FLOAT, [1, 10, 4])]
    inits = {"max_boxes": np.array([max_boxes], np.int64), "iou": np.array([0.5], np.float32),
             "score": np.array([0.25], np.float32), "col": np.array(2, np.int64), "zero": np.array([0], np.int64)}
    if transposed_scores:
        inputs.append(("scores_bc", T.FLOAT, [1, 10, 3]))
    else:
        inputs.append(("scores", T.FLOAT, [1, 3, 10]))
    if iou_input:
        inputs.append(("iou_in", T.FLOAT, [1]))
    return make_model(nodes, inputs, [("picked", T.FLOAT, ["K", 4]), ("best", T.FLOAT, [])], inits)


def test_replace_nms_with_plugin_structure():
    model = nms_model()
    out, sites = replace_nms_with_plugin(model, {})
    assert sites == ["nms"]
    onnx.checker.check_model(out, full_check=True)  # ONNX Runtime cannot run it: no such op
    plugin = [n for n in out.graph.node if n.op_type == "EfficientNMS_TRT"]
    assert len(plugin) == 1 and "NonMaxSuppression" not in ops(out)
    assert plugin[0].domain == "trt.plugins" and ("trt.plugins", 1) in [(o.domain, o.version) for o in out.opset_import]
    attrs = {a.name: h.get_attribute_value(a) for a in plugin[0].attribute}
    assert attrs == {"score_threshold": pytest.approx(0.25), "iou_threshold": pytest.approx(0.5),
                     "max_output_boxes": 5, "background_class": -1, "score_activation": 0, "box_coding": 0,
                     "plugin_version": b"1"}
    assert plugin[0].input[0] == "boxes"
    transpose = next(n for n in out.graph.node if n.output[0] == plugin[0].input[1])
    assert transpose.op_type == "Transpose" and list(transpose.input) == ["scores"]
    assert list(h.get_attribute_value(transpose.attribute[0])) == [0, 2, 1]
    assert [i.name for i in out.graph.input] == ["boxes", "scores"]
    outputs = {o.name: (o.type.tensor_type.elem_type, [d.dim_value or d.dim_param for d in dims(o)])
               for o in out.graph.output}
    assert list(outputs) == ["num_detections", "detection_boxes", "detection_scores", "detection_classes", "best"]
    assert outputs["num_detections"] == (T.INT32, [1, 1])
    assert outputs["detection_boxes"] == (T.FLOAT, [1, 5, 4])
    assert outputs["detection_scores"] == (T.FLOAT, [1, 5])
    assert outputs["detection_classes"] == (T.INT32, [1, 5])
    assert "Gather" not in ops(out)  # the post-processing of selected_indices went with it


def test_replace_nms_with_plugin_options_win_and_transposes_cancel():
    model = nms_model(iou_input=True, transposed_scores=True)
    options = {"iou_threshold": 0.6, "max_output_boxes": 100, "score_activation": 1, "background_class": 0}
    out, sites = replace_nms_with_plugin(model, options)
    onnx.checker.check_model(out, full_check=True)
    plugin = next(n for n in out.graph.node if n.op_type == "EfficientNMS_TRT")
    attrs = {a.name: h.get_attribute_value(a) for a in plugin.attribute}
    assert attrs["iou_threshold"] == pytest.approx(0.6) and attrs["max_output_boxes"] == 100
    assert attrs["score_activation"] == 1 and attrs["background_class"] == 0
    assert list(plugin.input) == ["boxes", "scores_bc"]  # [N,B,C] already: no Transpose pair


def test_replace_nms_with_plugin_run_time_threshold_is_an_error():
    with pytest.raises(DeployError, match=r"nms.*input 3 \(iou_in\).*iou_threshold"):
        replace_nms_with_plugin(nms_model(iou_input=True), {})


def test_replace_nms_with_plugin_zero_boxes_is_an_error():
    with pytest.raises(DeployError, match="max_output_boxes"):
        replace_nms_with_plugin(nms_model(max_boxes=0), {})


@pytest.mark.parametrize("options", [{"box_coding": 2}, {"score_threshold": "high"}])
def test_replace_nms_with_plugin_bad_option_is_an_error(options):
    with pytest.raises(DeployError, match="NonMaxSuppression nms"):
        replace_nms_with_plugin(nms_model(), options)


def test_replace_nms_with_plugin_near_miss_no_nms():
    nodes = [h.make_node("TopK", ["scores", "k"], ["values", "indices"], name="topk", axis=-1)]
    model = make_model(nodes, [("scores", T.FLOAT, [1, 10])],
                       [("values", T.FLOAT, [1, 3]), ("indices", T.INT64, [1, 3])], {"k": np.array([3], np.int64)})
    assert_untouched(replace_nms_with_plugin, model)


# ------------------------------------------------------------------------------ onnx_remove_identity


def test_remove_identity_keeps_outputs():
    nodes = [
        h.make_node("Identity", ["x"], ["a"], name="id_in"),
        h.make_node("Relu", ["a"], ["b"], name="relu"),
        h.make_node("Dropout", ["b", "ratio"], ["c"], name="dropout"),
        h.make_node("Dropout", ["c", "ratio", "no_training"], ["d", "mask"], name="dropout_mask_unused"),
        h.make_node("Neg", ["d"], ["e"], name="neg"),
        h.make_node("Identity", ["e"], ["y"], name="id_out"),
        h.make_node("Identity", ["b"], ["b_copy"], name="id_side"),
        h.make_node("Add", ["b_copy", "y"], ["z"], name="add"),
    ]
    model = make_model(nodes, [("x", T.FLOAT, [2, 3])], [("y", T.FLOAT, [2, 3]), ("z", T.FLOAT, [2, 3])],
                       {"ratio": np.float32(0.5), "no_training": np.array(False)})
    out, sites = onnx_remove_identity(model, {})
    assert sites == ["id_in", "dropout", "dropout_mask_unused", "id_out", "id_side"]
    assert sorted(ops(out)) == ["Add", "Neg", "Relu"]
    assert next(n for n in out.graph.node if n.name == "neg").output[0] == "y"
    assert_equivalent(model, out, {"x": rng.standard_normal((2, 3)).astype(np.float32)})


def test_remove_identity_near_miss_needed_identities_and_training_dropout():
    nodes = [
        h.make_node("Identity", ["x"], ["x_out"], name="input_to_output"),
        h.make_node("Identity", ["w"], ["w_out"], name="initializer_to_output"),
        h.make_node("Dropout", ["x", "ratio", "training"], ["d"], name="training_dropout"),
        h.make_node("Dropout", ["x", "ratio"], ["d2", "mask"], name="mask_used"),
        h.make_node("Relu", ["d"], ["y"], name="relu"),
        h.make_node("Relu", ["d2"], ["y2"], name="relu2"),
    ]
    model = make_model(nodes, [("x", T.FLOAT, [2, 3])],
                       [("x_out", T.FLOAT, [2, 3]), ("w_out", T.FLOAT, [3]), ("y", T.FLOAT, [2, 3]),
                        ("y2", T.FLOAT, [2, 3]), ("mask", T.BOOL, [2, 3])],
                       {"w": np.ones(3, np.float32), "ratio": np.float32(0.5), "training": np.array(True)})
    assert_untouched(onnx_remove_identity, model)


def test_remove_identity_chain_into_two_outputs():
    nodes = [h.make_node("Relu", ["x"], ["t"], name="relu"),
             h.make_node("Identity", ["t"], ["y1"], name="id1"),
             h.make_node("Identity", ["t"], ["y2"], name="id2")]
    model = make_model(nodes, [("x", T.FLOAT, [4])], [("y1", T.FLOAT, [4]), ("y2", T.FLOAT, [4])])
    out, sites = onnx_remove_identity(model, {})
    assert sites == ["id1"]  # y2 must stay a copy of y1: two output names need two tensors
    assert_equivalent(model, out, {"x": rng.standard_normal(4).astype(np.float32)})
