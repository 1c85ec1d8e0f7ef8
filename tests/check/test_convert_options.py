"""`deploy check --no-convert` / `--convert-timeout SECONDS`, and when the check stage of `deploy run`
asks tf2onnx (issue 20 point 2): a predicted YES goes on to the convert stage (tf2onnx runs once),
a predicted NO is asked of tf2onnx before it stops the run."""

import json
import types

import pytest

from conftest import deploy
from pipeline.check import convert_probe

pytestmark = [pytest.mark.tf]


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    import field_graphs

    d = tmp_path_factory.mktemp("convert_options")
    return {"flatten": field_graphs.keras_flatten_tf1(d / "flatten.pb"),
            "lstm": field_graphs.lstm_dynamic(d / "lstm.pb")}


def _onnx(obj):
    return next(r for r in obj["routes"] if r["route"] == "onnx")


def test_no_convert_predicts_and_says_so(graphs, cli):
    r = cli("check", graphs["flatten"], "--target", "jetson_tx2", "--format", "json", "--no-convert",
            env={"DEPLOY_CHECK_CONVERT": "1"})
    assert r.returncode == 0, r.stderr
    onnx = _onnx(json.loads(r.stdout))
    assert onnx["basis"] == "predicted" and onnx["convert_seconds"] is None
    text = cli("check", graphs["flatten"], "--target", "jetson_tx2", "--no-convert").stdout
    assert "onnx route: predicted, tf2onnx not run" in text


def test_no_convert_for_every_model_of_a_zoo(graphs, cli):
    r = cli("check", graphs["flatten"], graphs["lstm"], "--target", "jetson_tx2", "--format", "json",
            "--no-convert", env={"DEPLOY_CHECK_CONVERT": "1"})
    entries = json.loads(r.stdout)
    assert [_onnx(e)["basis"] for e in entries] == ["predicted", "predicted"]
    assert [e["verdict"] for e in entries] == ["YES", "NO"]  # the dynamic LSTM: stricter than tf2onnx


@pytest.mark.slow
def test_convert_timeout_bounds_the_tf2onnx_subprocess(graphs):
    r = deploy("check", graphs["flatten"], "--target", "jetson_tx2", "--format", "json", "--convert-timeout", "0.01",
               env={"DEPLOY_CHECK_CONVERT": "1", "DEPLOY_CHECK_CONVERT_TIMEOUT": "600"})
    onnx = _onnx(json.loads(r.stdout))
    # the flag wins over the environment; the prediction stands, saying why tf2onnx did not answer
    assert onnx["basis"] == "predicted"
    assert "tf2onnx did not finish within 0.01 s" in onnx["note"]


def test_convert_timeout_must_be_positive(graphs, cli):
    r = cli("check", graphs["flatten"], "--target", "jetson_tx2", "--convert-timeout", "0")
    assert r.returncode != 0 and "--convert-timeout: 0.0 must be above 0" in r.stderr


def test_check_model_convert_timeout_reaches_convert(graphs, monkeypatch):
    from pipeline.check import check_model
    from pipeline.targets import load_target

    seen = []
    monkeypatch.setattr(convert_probe, "available", lambda: True)
    monkeypatch.setattr(convert_probe, "convert", lambda path, opset, timeout=None: seen.append(timeout) or
                        convert_probe.Conversion("timeout", "stub", opset))
    report = check_model(graphs["flatten"], load_target("jetson_tx2"), convert_timeout=7.5)
    assert seen == [7.5] and report.route("onnx").basis == "predicted"


# ------------------------------------------------------------------------------ the check stage of deploy run


def _ctx(tmp_path, path):
    from pipeline.stages import StageContext
    from pipeline.targets import load_target

    return StageContext(
        name="check", out_dir=tmp_path, inputs={"frozen_graph": path},
        options=types.SimpleNamespace(routes=None, on_blockers="fail"),
        config=types.SimpleNamespace(stages=types.SimpleNamespace(rewrite=None)),
        target=load_target("jetson_tx2"), progress=types.SimpleNamespace(log=lambda *a, **k: None))


def test_stage_yes_is_predicted_and_tf2onnx_runs_once_in_the_convert_stage(graphs, tmp_path, monkeypatch):
    from pipeline.stages.check import check as check_stage

    def refuse(*args, **kwargs):
        raise AssertionError("the check stage must not convert a predicted YES: the convert stage does")

    monkeypatch.setattr(convert_probe, "available", lambda: True)
    monkeypatch.setattr(convert_probe, "convert", refuse)
    result = check_stage(_ctx(tmp_path, graphs["flatten"]))
    assert result["deployable"] is True and result["onnx_basis"] == "predicted"
    assert result["summary"].endswith("; onnx route predicted, tf2onnx not run (the convert stage runs it next)")
    saved = json.loads((tmp_path / "check.json").read_text())
    assert _onnx(saved)["basis"] == "predicted"


@pytest.mark.slow
def test_stage_asks_tf2onnx_before_stopping_the_run_on_a_predicted_no(graphs, tmp_path):
    """The dynamic LSTM: the prediction (no TensorArray handlers) says NO, tf2onnx's loop rewriter
    converts it: the run is not stopped on the stricter prediction."""
    from pipeline.stages.check import check as check_stage

    if not convert_probe.available():
        pytest.skip("needs tf2onnx")
    result = check_stage(_ctx(tmp_path, graphs["lstm"]))
    assert result["deployable"] is True and result["onnx_basis"] == "converted"
    assert "judged on tf2onnx's real output" in result["summary"]
    assert _onnx(json.loads((tmp_path / "check.json").read_text()))["basis"] == "converted"


# ------------------------------------------------------------------------------ a zoo converts together


@pytest.mark.slow
def test_a_zoo_converts_its_frozen_graphs(tmp_path):
    """Every frozen graph of a zoo is judged on tf2onnx's real output (how many workers convert them:
    tests/check/test_zoo.py); --no-convert predicts them all."""
    import field_graphs
    from pipeline.check import zoo
    from pipeline.targets import load_target

    if not convert_probe.available():
        pytest.skip("needs tf2onnx")
    paths = [field_graphs.keras_flatten_tf1(tmp_path / "a.pb"), field_graphs.batch_mean(tmp_path / "b.pb")]
    entries = zoo.check_models([str(p) for p in paths], load_target("jetson_tx2"))
    assert [e.report.route("onnx").basis for e in entries] == ["converted", "converted"]
    assert [e.verdict for e in entries] == ["YES", "NO"]
    entries = zoo.check_models([str(p) for p in paths], load_target("agx_orin"), convert=False)
    assert [e.report.route("onnx").basis for e in entries] == ["predicted", "predicted"]
