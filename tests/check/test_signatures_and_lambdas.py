"""Issue 20 point 7 in the check's report: a SavedModel's signatures (report.model["signatures"], and
the lines under the first line of the text report when there are several; a tf.Example string
signature named as such), and a Keras Lambda layer deploy did not load with its own cause and fix.
Models built the way the field builds them: tf.saved_model.save with two signatures, Keras .keras
and .h5 files with a Lambda layer (as tests/graph/test_signatures.py and test_keras_lambda.py)."""

import json

import pytest

from pipeline.check import check_model
from pipeline.check.findings import Finding
from pipeline.check.report import format_json, format_markdown, format_text
from pipeline.targets import load_target

pytestmark = pytest.mark.tf


def tx2():
    return load_target("jetson_tx2")


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    from pipeline.tf import import_tf

    tf = import_tf()
    import numpy as np

    root = tmp_path_factory.mktemp("check_signatures")
    module = tf.Module()
    module.w = tf.Variable(np.ones((4, 2), "float32"))

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def predict(x):
        return {"y": tf.matmul(x, module.w)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def parse_and_predict(examples):
        features = tf.io.parse_example(examples, {"x": tf.io.FixedLenFeature([4], tf.float32)})
        return {"y": tf.matmul(features["x"], module.w)}

    module.predict, module.parse_and_predict = predict, parse_and_predict
    tf.saved_model.save(module, str(root / "two"), signatures={"serving_default": predict,
                                                               "from_examples": parse_and_predict})
    tf.saved_model.save(module, str(root / "one"), signatures={"serving_default": predict})
    return root


def test_two_signatures_in_json_and_under_the_first_text_line(saved_models):
    report = check_model(saved_models / "two", tx2(), convert=False)
    sigs = json.loads(format_json(report))["model"]["signatures"]
    assert sorted(sigs) == ["from_examples", "serving_default"]
    [examples] = sigs["from_examples"]["inputs"]
    assert (examples["key"], examples["dtype"], examples["kind"]) == ("examples", "string", "tf.Example")
    lines = format_text(report).splitlines()
    assert lines[1:3] == [
        "  signature from_examples (predict): examples string [?] (serialized tf.Example protos, parsed in the graph)",
        "  signature serving_default (predict): x float32 [?, 4]",
    ]
    assert "- signature from_examples (predict): examples string [?] (serialized tf.Example" in format_markdown(report)


def test_the_tf_example_signature_checked_by_name(saved_models):
    report = check_model(saved_models / "two", tx2(), signature="from_examples", convert=False)
    assert report.model["inputs"][0]["dtype"] == "string"
    assert "(serialized tf.Example protos, parsed in the graph)" in format_text(report).splitlines()[1]


def test_one_signature_no_extra_lines_and_other_formats_null(saved_models, tmp_path):
    report = check_model(saved_models / "one", tx2(), convert=False)
    assert list(report.model["signatures"]) == ["serving_default"]
    assert not format_text(report).splitlines()[1].startswith("  signature")
    import fixtures

    onnx_report = check_model(fixtures.onnx_model(tmp_path / "m.onnx"), tx2())
    assert json.loads(format_json(onnx_report))["model"]["signatures"] is None


# ------------------------------------------------------------------------------ Keras Lambda layers


@pytest.fixture(scope="module")
def lambda_models(tmp_path_factory):
    import keras

    folder = tmp_path_factory.mktemp("check_lambda")
    scale = eval("lambda t: t * 2.0 + 1.0")  # a lambda, as the field writes it (its code is pickled)
    inputs = keras.Input((8, 8, 3), name="input")
    x = keras.layers.Conv2D(4, 3, name="conv")(inputs)
    x = keras.layers.Lambda(scale, name="scale")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(x))
    model.save(str(folder / "model.keras"))
    model.save(str(folder / "model.h5"))
    return folder


@pytest.mark.parametrize("name", ["model.keras", "model.h5"])
def test_lambda_gets_its_own_cause_and_fix_on_every_route(lambda_models, name):
    report = check_model(lambda_models / name, tx2(), convert=False)
    assert not report.deployable
    named = [(r.route, f) for r in report.routes for f in r.findings if any("keras_lambda_not_run" in n for n in f.nodes)]
    named += [("all", f) for f in report.findings if any("keras_lambda_not_run" in n for n in f.nodes)]
    assert sorted(route for route, _ in named) == ["all", "onnx", "tftrt", "uff"]
    for route, f in named:
        assert f.op == "PyFunc" and len(f.nodes) == 1
        assert f.cause.startswith("Keras Lambda layer ") and "scale" in f.cause.split(":")[0]
        assert "cannot be translated without trusting it (not loaded, never run)" in f.cause
        assert f.fix == ("replace the Lambda with standard layers, or pass --trust-model if you trust the file "
                         "(it is then loaded and its real ops checked)")
        assert f.rewrite is None  # no pass removes a Lambda in the middle of the model
    severities = {route: f.severity for route, f in named}
    assert severities == {"uff": "blocker", "onnx": "blocker", "tftrt": "info", "all": "warning"}
    every = next(f for route, f in named if route == "all")
    assert every.kind == "acts_outside_graph" and "--trust-model" in every.cause
    assert "no conversion for PyFunc" not in format_text(report)


def test_a_finding_on_a_lambda_and_another_node_is_split(lambda_models):
    from pipeline.check.findings import RouteResult
    from pipeline.check.keras_lambda import explain_lambdas, lambda_layers
    from pipeline.graph import read_model

    graph = read_model(lambda_models / "model.keras")
    [(stand_in, layer)] = lambda_layers(graph).items()
    assert stand_in.endswith("/keras_lambda_not_run") and "scale" in layer
    other = Finding("blocker", "uff", "unsupported_op", "PyFunc", ["py/other", stand_in], "no conversion for PyFunc",
                    "replace PyFunc")
    result = RouteResult("uff", "uff_trt8", "", findings=[other])
    every = []
    explain_lambdas(graph, [result], every)
    assert [f.nodes for f in result.findings] == [["py/other"], [stand_in]]
    assert result.findings[0].cause == "no conversion for PyFunc"
    assert result.findings[1].cause.startswith("Keras Lambda layer ") and result.findings[1].severity == "blocker"
