"""The engine stage's decisions on the host: its route (onnx, uff, auto from deploy check), the
optimisation profile, why it is pending, and the config errors of a route the target lacks."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.config.schema import EngineOptions
from pipeline.device.engine import profile_for, route
from pipeline.errors import DeployError
from pipeline.targets import load_target

from conftest import ROOT, deploy
from devicekit import device_cfg


def _ctx(fmt=None, report=None, target="jetson_tx2", device=None, engine=None):
    convert = None if fmt is None else SimpleNamespace(format=fmt)
    stages = SimpleNamespace(convert=convert, engine=engine or EngineOptions(), benchmark=None)
    inputs = {"report": report} if report else {}
    return SimpleNamespace(config=SimpleNamespace(stages=stages, device=device), inputs=inputs,
                           target=load_target(target), progress=SimpleNamespace(log=lambda m: None))


def test_route_follows_the_config_and_auto_follows_check(tmp_path):
    assert route(_ctx()) == "onnx" and route(_ctx("onnx")) == "onnx" and route(_ctx("uff")) == "uff"
    report = tmp_path / "check.json"
    report.write_text(json.dumps({"recommended": {"route": "uff"}}))
    assert route(_ctx("auto", report)) == "uff"
    report.write_text(json.dumps({"recommended": {"route": "tftrt"}}))
    assert route(_ctx("auto", report)) == "onnx"  # TF-TRT is not an engine route
    assert route(_ctx("auto")) == "onnx"  # no check ran
    report.write_text(json.dumps({"recommended": {"route": "uff"}}))
    assert route(_ctx("auto", report, target="orin_nano")) == "onnx"  # Orin (TensorRT 10) has no UFF


def test_profile_covers_batch_1_to_max_tuned_for_the_largest_benchmark_batch():
    opts = EngineOptions(max_batch_size=8)
    assert profile_for([("input", [None, 96, 96, 3])], opts, [1, 4]) == {
        "input": {"min": [1, 96, 96, 3], "opt": [4, 96, 96, 3], "max": [8, 96, 96, 3]}}
    assert profile_for([("input", [2, 96, 96, 3])], opts, [2])["input"]["max"] == [2, 96, 96, 3]
    with pytest.raises(DeployError, match="raise max_batch_size"):
        profile_for([("input", [None, 96, 96, 3])], opts, [1, 16])
    with pytest.raises(DeployError, match="dynamic non-batch dims"):
        profile_for([("input", [None, None, None, 3])], opts, [1])


def test_why_the_engine_is_pending(tmp_path):
    from pipeline.stages.engine import _pending

    assert "add a device: section" in _pending(_ctx())
    assert "no engine to build" in _pending(_ctx(device=device_cfg(backend="onnxruntime")))
    reason = _pending(_ctx(device=device_cfg(work_dir=str(tmp_path / "w"))))
    assert reason.startswith("TensorRT is not on this machine (device.transport: local)")
    assert "has no TensorRT" in _pending(_ctx(target="host_cpu"))


def test_uff_on_a_target_without_uff_is_a_config_error(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("extends: {}\ntarget: orin_nano\nstages:\n  convert:\n    format: uff\n".format(
        ROOT / "configs" / "jetson_tx2.yaml"))
    res = deploy("validate", config)
    assert res.returncode == 1 and "stages.convert.format: uff: orin_nano has no UFF route" in res.stdout + res.stderr
    ok = tmp_path / "ok.yaml"
    ok.write_text("extends: {}\nstages:\n  convert:\n    format: uff\n".format(ROOT / "configs" / "jetson_tx2.yaml"))
    assert deploy("validate", ok).returncode == 0


def test_device_backend_tensorrt_without_tensorrt_is_an_error(tmp_path):
    from pipeline.device.client import Device
    from pipeline.device.errors import DeviceError

    device = Device(device_cfg(work_dir=str(tmp_path / "w"), backend="tensorrt"))
    with pytest.raises(DeviceError, match="device.backend is tensorrt but TensorRT's Python bindings are not on"):
        device.backend()
    assert Path(tmp_path / "w").is_dir()
