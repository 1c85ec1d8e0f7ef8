"""Issue 20, points 1, 3 and 4: the onnx route of a frozen TF graph judged on tf2onnx's real output
(in a subprocess, after the convert stage's screening), batch semantics from data flow, and a YES
only from routes deploy run can take."""

import typing

import pytest

from pipeline.check import check_model, convert_probe
from pipeline.check.findings import RUNNABLE_ROUTES
from pipeline.targets import load_target


def tx2():
    return load_target("jetson_tx2")


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    import field_graphs

    d = tmp_path_factory.mktemp("ask")
    return {
        "keras_dropout": field_graphs.keras_dropout_training(d / "keras_dropout.pb"),
        "keep_prob": field_graphs.tf115_dropout(d / "keep_prob.pb", placeholder_rate=True),
        "flatten": field_graphs.keras_flatten_tf1(d / "flatten.pb"),
        "batch_mean": field_graphs.batch_mean(d / "batch_mean.pb"),
        "string": field_graphs.string_input(d / "string.pb"),
    }


@pytest.mark.tf
@pytest.mark.slow
def test_keras_training_dropout_is_no_on_the_real_conversion(graphs):
    report = check_model(graphs["keras_dropout"], tx2())
    onnx = report.route("onnx")
    assert onnx.basis == "converted" and onnx.convert_seconds > 0 and onnx.converter["tf2onnx"]
    assert report.verdict("onnx") == "NO" and not report.deployable
    blocker = next(f for f in onnx.findings if f.op == "StatelessRandomUniformV2")
    assert "dropout left in training mode" in blocker.cause and "stays a TensorFlow op in the ONNX model" in blocker.cause
    assert blocker.rewrite == "strip_dropout"
    data = report.to_dict()["routes"]
    assert next(r for r in data if r["route"] == "onnx")["basis"] == "converted"


@pytest.mark.tf
@pytest.mark.slow
def test_placeholder_keep_prob_is_no_and_tf2onnx_says_why(graphs):
    report = check_model(graphs["keep_prob"], tx2())
    onnx = report.route("onnx")
    assert onnx.basis == "converted" and report.verdict("onnx") == "NO"
    wrong = onnx.accepted_but_wrong[0]
    assert "RandomUniformLike" in wrong.op and "fed by placeholder rate" in wrong.cause
    assert "does not have a constant ratio and cannot be replaced" in wrong.cause


@pytest.mark.tf
@pytest.mark.slow
def test_a_model_checked_twice_is_converted_once(graphs, monkeypatch):
    check_model(graphs["keep_prob"], tx2())
    calls = []
    monkeypatch.setattr("subprocess.run", lambda *a, **k: calls.append(a))
    again = check_model(graphs["keep_prob"], tx2())
    assert calls == [] and again.route("onnx").basis == "converted"


@pytest.mark.tf
def test_without_the_converter_it_is_the_labelled_prediction(graphs, monkeypatch, cli):
    monkeypatch.setenv(convert_probe.CONVERT_ENV, "0")
    report = check_model(graphs["keep_prob"], tx2())
    onnx = report.route("onnx")
    assert onnx.basis == "predicted" and onnx.basis_label.startswith("predicted, tf2onnx not run")
    assert report.verdict("onnx") == "NO"  # the prediction models tf2onnx's rewriter: a fed rate stays random
    res = cli("check", graphs["keep_prob"], "--target", "jetson_tx2", "--route", "onnx")
    assert "predicted, tf2onnx not run" in res.stdout


@pytest.mark.tf
@pytest.mark.slow
def test_a_graph_that_acts_outside_itself_is_not_converted(tmp_path):
    from pipeline.tf import import_tf

    tf = import_tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 4], name="input")
        write = tf.io.write_file(str(tmp_path / "leak.txt"), tf.strings.as_string(x[0, 0]), name="leak")
        with tf.control_dependencies([write]):
            tf.identity(x * 2.0, name="output")
    path = tmp_path / "leak.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    report = check_model(path, tx2())
    onnx = report.route("onnx")
    assert onnx.basis == "predicted" and "WriteFile" in onnx.note and "--trust-model" in onnx.note
    assert not (tmp_path / "leak.txt").exists()


@pytest.mark.tf
def test_keras_flatten_frozen_in_tf1_is_yes(graphs):
    from pipeline.check.batch_flow import batch_axes
    from pipeline.graph.readers import read_model

    report = check_model(graphs["flatten"], tx2(), convert=False)
    assert report.verdict("onnx") == "YES" and report.deployable
    assert not [f for f in report.findings if f.kind == "batch_dependent"]
    carry, flagged = batch_axes(read_model(graphs["flatten"]))
    assert flagged == [] and "flatten/Prod" not in carry and "flatten/Shape" not in carry
    assert carry["flatten/Reshape"] == (0, 2)
    # a reduction over the batch-carrying axis still is batch-dependent
    report = check_model(graphs["batch_mean"], tx2(), convert=False)
    assert [f.nodes for f in report.findings if f.kind == "batch_dependent"] == [["batch_mean"]]
    assert report.verdict("onnx") == "NO"


@pytest.mark.tf
def test_a_string_decoder_only_tftrt_takes_is_no(graphs, cli):
    report = check_model(graphs["string"], tx2(), convert=False)
    assert report.verdict("tftrt") == "YES"  # DecodeJpeg would stay in TensorFlow
    assert not report.deployable and report.recommended.route in RUNNABLE_ROUTES
    data = report.to_dict()
    assert data["verdict"] == "NO" and {r["route"]: r["runnable"] for r in data["routes"]}["tftrt"] is False
    res = cli("check", graphs["string"], "--target", "jetson_tx2")
    assert res.returncode == 2
    assert "TF-TRT (information, never the verdict): YES — TensorRT would run" in res.stdout
    assert "the device needs TensorFlow with TF-TRT" in res.stdout


def test_runnable_routes_are_the_convert_stage_formats():
    from pipeline.config.schema import ConvertOptions

    formats = typing.get_args(ConvertOptions.model_fields["format"].annotation)
    assert set(RUNNABLE_ROUTES) == set(formats) - {"auto"}
