"""deploy estimate on the command line: JSON checked against its schema, bad input one line."""

import json

import pytest

from pipeline import records
from pipeline.cli import main
from tests.estimate.test_calibrate import onnx_conv_model


@pytest.fixture(autouse=True)
def no_user_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPLOY_ESTIMATE_DIR", str(tmp_path / "none"))


def test_json_per_target_and_batch(tmp_path, capsys):
    model = onnx_conv_model(tmp_path / "m.onnx")
    assert main(["estimate", str(model), "--target", "jetson_nano", "--target", "agx_xavier", "--batch", "1",
                 "--batch", "8", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    records.check(report, "estimate", "stdout")
    assert report["schema"] == "deploy.estimate/1"
    assert [(e["target"], e["batch"]) for e in report["estimates"]] == [
        ("jetson_nano", 1), ("jetson_nano", 8), ("agx_xavier", 1), ("agx_xavier", 8)]
    nano1, nano8 = report["estimates"][:2]
    assert nano1["low_ms"] < nano1["latency_ms"] < nano1["high_ms"] <= 2.5 * nano1["low_ms"] * 1.0001
    assert nano8["latency_ms"] > nano1["latency_ms"]
    assert "conv1" in [x["name"] for x in nano1["top_layers"]] and nano1["power_mode"].startswith("MAXN")


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_text_and_markdown_name_the_layers(tmp_path, capsys, fmt):
    model = onnx_conv_model(tmp_path / "m.onnx")
    assert main(["estimate", str(model), "--target", "orin_nano", "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert "conv1" in out and "MAXN" in out and "DLA" in out


@pytest.mark.parametrize("argv, message", [
    (["estimate", "missing.onnx", "--target", "jetson_nano"], "missing.onnx: no such file"),
    (["estimate", "{model}", "--target", "no_such_board"], "no_such_board"),
    (["estimate", "{model}", "--target", "host_cpu"], "no estimate facts"),
    (["estimate", "{model}", "--target", "jetson_tx2", "--precision", "int8"], "no fast int8"),
    (["estimate", "{model}"], "give --target"),
    (["estimate", "{model}", "--target", "jetson_nano", "--input-shape", "nope=1,3,8,8"], "no such input"),
])
def test_bad_input_is_one_line(tmp_path, capsys, argv, message):
    model = onnx_conv_model(tmp_path / "m.onnx")
    code = main([a.format(model=model) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0 and message in err and "Traceback" not in err


def test_unknown_spatial_shape_names_the_input(tmp_path, capsys):
    import onnx

    path = onnx_conv_model(tmp_path / "m.onnx")
    model = onnx.load(str(path))
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "H"
    onnx.save(model, str(path))
    assert main(["estimate", str(path), "--target", "jetson_nano"]) == 1
    err = capsys.readouterr().err.strip()
    assert "input 'x' has an unknown dimension 2" in err and "--input-shape x=" in err and err.count("\n") == 0
    assert main(["estimate", str(path), "--target", "jetson_nano", "--input-shape", "x=1,3,64,32"]) == 0


def test_a_model_whose_shapes_stop_at_an_op_the_model_does_not_follow_is_sent_to_a_board(tmp_path, capsys):
    """Its input sizes are fixed, so --input-shape (which the message used to advise) would change nothing: the message
    names the op where the shapes stop and what measures such a model; deploy check's estimate line says the same."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="find"),
             helper.make_node("Cast", ["nz"], ["y"], name="cast", to=TensorProto.FLOAT)]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "nz.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    assert main(["estimate", str(path), "--target", "jetson_nano"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("deploy: error: {}: no layer's shape could be followed from the inputs (x): they stop at find "
                   "(NonZero), an op the engine model does not follow; measure it on a board (deploy run, or trtexec on "
                   "its ONNX model)".format(path))
    from pipeline.estimate.summary import check_estimate

    block = check_estimate(path, "jetson_nano")
    assert block["made"] is False and "they stop at find (NonZero)" in block["reason"] and "--input-shape" not in \
        block["reason"]


def test_an_estimate_of_a_model_mostly_not_followed_is_refused_not_printed(tmp_path, capsys):
    """An unrolled LSTM text model: 1 of 248 layers followed, and the estimate printed 0 GFLOPs, 0.008 ms, exit 0. Now:
    more than half of the layers not followed is no estimate, with where the shapes stopped."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("NonZero", ["c"], ["nz"], name="find"),
             helper.make_node("Cast", ["nz"], ["f"], name="cast", to=TensorProto.FLOAT)]
    last = "f"
    for i in range(4):
        nodes.append(helper.make_node("Sqrt", [last], ["s{}".format(i)], name="sqrt{}".format(i)))
        nodes.append(helper.make_node("Neg", ["s{}".format(i)], ["n{}".format(i)], name="neg{}".format(i)))
        last = "n{}".format(i)
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info(last, TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.ones((4, 3, 3, 3), "float32"), "w")])
    path = tmp_path / "mostly.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    assert main(["estimate", str(path), "--target", "jetson_nano"]) == 1
    err = capsys.readouterr().err.strip()
    assert "only 1 of " in err and "layers' shapes could be followed from the inputs (x): they stop at find (NonZero)" \
        in err and err.count("\n") == 0, err
