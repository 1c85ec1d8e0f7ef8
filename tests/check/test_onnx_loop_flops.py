"""Issue 28 item 4 for a model given as an .onnx file: a Loop or Scan body's compute is never left out of a
figure. deploy check counts FLOPs on a TensorFlow graph's TF-TRT route only (pipeline.check.compute), so an
ONNX model's check carries no FLOPs at all (never a too-small one), its latency estimate is "not made"
naming the loop, and the run report's FLOPs row (pipeline.report.model_facts.flops_of) reads unknown.
Guards: the code already did this when they were written. `deploy estimate` of such a model is refused in one line
naming the loop (it printed "0 GFLOPs per image" and a latency: the Loop layer counted as nothing)."""

import json

import numpy as np
import pytest

SEQ, FEATURES = 8, 16


def _loop_model(path):
    """h = x @ W0, then a Loop of 5 iterations (a static trip count) of h = h @ W."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "W"], ["h_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, FEATURES])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, FEATURES])])
    weights = [numpy_helper.from_array(np.eye(FEATURES, dtype=np.float32), name) for name in ("W", "W0")]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W0"], ["h0"]), helper.make_node("Loop", ["trip", "cond", "h0"], ["y"], body=body)],
        "loop", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, FEATURES])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, FEATURES])],
        initializer=weights + [numpy_helper.from_array(np.array(5, np.int64), "trip"),
                               numpy_helper.from_array(np.array(True), "cond")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _scan_model(path):
    """A Scan over SEQ steps of a (1, SEQ, FEATURES) sequence: state = tanh(state + x_t @ W)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "W"], ["xw"]), helper.make_node("Add", ["s_in", "xw"], ["sum"]),
         helper.make_node("Tanh", ["sum"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body", [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [1, FEATURES]),
                 helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [1, FEATURES])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [1, FEATURES]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [1, FEATURES])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "seq"], ["s", "ys"], body=body, num_scan_inputs=1,
                          scan_input_axes=[1], scan_output_axes=[1])],
        "scan", [helper.make_tensor_value_info("seq", TensorProto.FLOAT, [1, SEQ, FEATURES])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, FEATURES]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, [1, SEQ, FEATURES])],
        initializer=[numpy_helper.from_array(np.eye(FEATURES, dtype=np.float32), "W"),
                     numpy_helper.from_array(np.zeros((1, FEATURES), np.float32), "s0")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _checked(path, capsys, monkeypatch):
    from pipeline.cli import main

    monkeypatch.setenv("DEPLOY_CHECK_CACHE", "0")
    code = main(["check", str(path), "--target", "jetson_tx2", "--format", "json", "--quiet"])
    assert code in (0, 2)
    return json.loads(capsys.readouterr().out)


def _no_flops_figure(check, loop_op):
    from pipeline.report.model_facts import flops_of

    assert [r["share"] for r in check["routes"]] == [None, None, None]  # no figure at all, never a small one
    assert check["estimate"]["made"] is False and "({})".format(loop_op) in check["estimate"]["reason"]
    assert flops_of(check) == (None, None)  # the report's FLOPs row: unknown


@pytest.mark.parametrize("build, loop_op", [(_loop_model, "Loop"), (_scan_model, "Scan")])
def test_an_onnx_loop_or_scan_gets_no_flops_figure_and_no_estimate(tmp_path, capsys, monkeypatch, build, loop_op):
    import onnxruntime

    path = build(tmp_path / (loop_op.lower() + ".onnx"))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])  # a real model
    assert session.run(None, {session.get_inputs()[0].name: np.ones(session.get_inputs()[0].shape, np.float32)})
    _no_flops_figure(_checked(path, capsys, monkeypatch), loop_op)
    _estimate_refuses(path, capsys, loop_op)


def _estimate_refuses(path, capsys, loop_op):
    """deploy estimate: exit 1 and one line naming the file and the loop, no figure on stdout."""
    from pipeline.cli import main

    code = main(["estimate", str(path), "--target", "jetson_nano"])
    out, err = capsys.readouterr()
    assert code == 1 and out == "" and err.strip().count("\n") == 0 and "Traceback" not in err
    assert str(path) in err and "loop ({})".format(loop_op) in err and "unroll" in err


@pytest.mark.tf
def test_a_tf2onnx_converted_keras_lstm_gets_no_flops_figure_and_no_estimate(tmp_path, capsys, monkeypatch):
    import onnx

    from pipeline.tf import import_tf

    tf = import_tf()
    import keras
    import tf2onnx

    keras.utils.set_random_seed(0)
    inp = keras.Input((SEQ, 6), batch_size=1, name="seq")
    model = keras.Model(inp, keras.layers.Dense(2)(keras.layers.LSTM(4)(inp)))
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=(tf.TensorSpec((1, SEQ, 6), tf.float32, name="seq"),),
                                          opset=13)
    assert "Loop" in {n.op_type for n in proto.graph.node}  # the cell's MatMuls are in the Loop's body
    path = tmp_path / "lstm.onnx"
    onnx.save(proto, str(path))
    _no_flops_figure(_checked(path, capsys, monkeypatch), "Loop")
    _estimate_refuses(path, capsys, "Loop")
