"""The engine stage's decisions on the host: its route (onnx, uff, auto from deploy check), the
optimisation profile, why it is pending, and the config errors of a route the target lacks."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.config.schema import EngineOptions
from pipeline.device.engine import profile_for
from pipeline.errors import DeployError
from pipeline.stages.engine import route
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


def test_dla_profile_is_static_for_its_one_batch_size():
    """D5: DLA has no dynamic shapes: min = opt = max, for the benchmark's one batch size."""
    opts = EngineOptions(max_batch_size=8, dla_core=0)
    assert profile_for([("input", [None, 96, 96, 3])], opts, [4]) == {
        "input": {"min": [4, 96, 96, 3], "opt": [4, 96, 96, 3], "max": [4, 96, 96, 3]}}
    assert profile_for([("input", [None, 96, 96, 3])], opts, [])["input"]["min"] == [8, 96, 96, 3]  # no benchmark
    with pytest.raises(DeployError, match=r"a DLA engine has one static batch size, but stages.benchmark.batch_sizes "
                                          r"has \[1, 8\]"):
        profile_for([("input", [None, 96, 96, 3])], opts, [1, 8])


class _Transport:
    work = "/w"

    def __init__(self, tmp_path, log_text=None):
        self.tmp, self.log_text, self.sent = tmp_path, log_text, []

    def send(self, path):
        self.sent.append(Path(path).name)
        return "/w/in/" + Path(path).name

    def fetch(self, remote, local):
        if remote.endswith(".log"):
            if self.log_text is None:
                raise DeployError("no such file")
            Path(local).write_text(self.log_text)
        else:
            Path(local).write_bytes(b"plan")


def _calibration_images(images=32):
    import numpy as np

    from pipeline.device.engine import Calibration

    return Calibration(images=np.zeros((images, 4, 4, 3), np.float32), source="dataset (x)", input="input")


def test_calibration_request_carries_the_batch_and_a_cache_key_with_the_tensorrt_version(tmp_path):
    """D4 (host): the batch the agent calibrates at is the host's choice, sent in the request;
    D14: the calibration cache is per TensorRT version (a JetPack upgrade calibrates again)."""
    from pipeline.device.engine import _calibration, calibration_batch_for

    calibration = _calibration_images()
    inputs = [("input", [None, 4, 4, 3])]
    dynamic = profile_for(inputs, EngineOptions(precision="int8", max_batch_size=16), [1, 16])
    assert calibration_batch_for(dynamic) == 8
    assert calibration_batch_for({"input": {"min": [2, 4, 4, 3], "opt": [2, 4, 4, 3], "max": [2, 4, 4, 3]}}) == 2
    old = _calibration(_Transport(tmp_path), calibration, "/w/in/m.onnx", "8.5.2", 8)
    new = _calibration(_Transport(tmp_path), calibration, "/w/in/m.onnx", "8.6.2", 8)
    assert old["batch_size"] == 8 and old["cache"] != new["cache"] and old["input"] == "input"
    assert _calibration(_Transport(tmp_path), calibration, "/w/in/m.onnx", "8.5.2", 8)["cache"] == old["cache"]
    with pytest.raises(DeployError, match="fewer than one calibration batch"):
        _calibration(_Transport(tmp_path), _calibration_images(4), "/w/in/m.onnx", "8.5.2", 8)


def test_the_stage_calibrates_on_dataset_images_of_the_one_image_input(monkeypatch):
    """The stage turns the config's dataset into calibration images for the model's one NHWC input."""
    import numpy as np

    import pipeline.data.dataset as dataset
    from pipeline.stages.engine import _calibration

    monkeypatch.setattr(dataset, "dataset_samples",
                        lambda config, n, size: (np.zeros((n, size[0], size[1], 3), np.float32), "dataset (x)"))
    ctx = SimpleNamespace(options=EngineOptions(precision="int8", calibration_images=16), config=None)
    found = _calibration(ctx, [("input", [None, 4, 5, 3])])
    assert found.input == "input" and found.images.shape == (16, 4, 5, 3) and found.source == "dataset (x)"
    with pytest.raises(DeployError, match="needs one image input"):
        _calibration(ctx, [("a", [None, 4, 4, 3]), ("b", [None, 4, 4, 3])])
    monkeypatch.setattr(dataset, "dataset_samples", lambda config, n, size: (np.zeros((n, 4, 4, 3)), "random"))
    with pytest.raises(DeployError, match="calibrates on dataset images"):
        _calibration(ctx, [("input", [None, 4, 4, 3])])


def test_a_failed_build_keeps_its_log_in_the_stage_folder(tmp_path):
    """D13 (host): the log of a failed build is fetched into the stage's folder and the error names it."""
    from pipeline.device.engine import _build_keeping_the_log
    from pipeline.errors import EXIT_STAGE_FAILED

    class Failing:
        def call(self, request, what):
            raise DeployError("device local: the engine build: TensorRT built no engine: out of memory",
                              EXIT_STAGE_FAILED)

    log_path = tmp_path / "engine" / "build.log"
    request = {"log": "/w/out/x.log"}
    with pytest.raises(DeployError) as err:
        _build_keeping_the_log(log_path, _Transport(tmp_path, "[E] out of memory\n"), Failing(), request, "the engine build")
    assert (tmp_path / "engine" / "build.log").read_text() == "[E] out of memory\n"
    assert str(err.value).endswith("(build log: {})".format(tmp_path / "engine" / "build.log"))
    assert err.value.code == EXIT_STAGE_FAILED
    with pytest.raises(DeployError) as err:  # no log on the device: the error is unchanged
        _build_keeping_the_log(log_path, _Transport(tmp_path, None), Failing(), {"log": "/w/out/y.log"}, "the engine build")
    assert "build log" not in str(err.value)


class _FakeDevice:
    """A device whose agent 'builds' by answering; its transport fetches a plan and a log."""

    def __init__(self, tmp_path, log_text="[I] built\n"):
        self.transport, self.requests = _Transport(tmp_path, log_text), []
        self.transport.exec = lambda command, what: None

    def check_tensorrt(self, target, warn):
        pass

    def probe(self):
        return {"board": "jetson_tx2", "tensorrt": "8.2.1"}

    def describe(self):
        return "fake"

    def call(self, request, what):
        self.requests.append(request)
        return {"engine_bytes": 4, "build_s": 1.5, "tensorrt_version": "8.2.1", "precision": request["precision"]}


def test_build_takes_values_and_writes_only_where_it_is_told(tmp_path):
    """The library builds from values (device, ONNX path, options, profile) and writes the engine and the
    log at the paths given; the manifest (engine.json) is the stage's to write."""
    from pipeline.device.engine import build, build_uff

    onnx_path = tmp_path / "m.onnx"
    onnx_path.write_bytes(b"onnx")
    device, out = _FakeDevice(tmp_path), tmp_path / "stage"
    profile = profile_for([("input", [None, 4, 4, 3])], EngineOptions(max_batch_size=4), [1, 4])
    result = build(device, onnx_path, EngineOptions(max_batch_size=4), profile, target=load_target("jetson_tx2"),
                   engine_path=out / "model.engine", log_path=out / "build.log")
    assert result.engine.read_bytes() == b"plan" and result.log.read_text() == "[I] built\n"
    assert result.manifest["profile"] == profile and result.manifest["engine_bytes"] == 4 and result.board == "jetson_tx2"
    assert sorted(p.name for p in out.iterdir()) == ["build.log", "model.engine"]
    assert device.requests[0]["engine"].startswith("/w/out/") and "calibration" not in device.requests[0]
    with pytest.raises(DeployError, match="needs calibration images"):
        build(device, onnx_path, EngineOptions(precision="int8"), profile, target=load_target("jetson_tx2"),
              engine_path=out / "model.engine", log_path=out / "build.log")
    uff = build_uff(
        device, onnx_path, "input", [4, 4, 3], ["logits"], EngineOptions(), target=load_target("jetson_tx2"),
        engine_path=out / "u.engine", log_path=out / "u.log")
    assert device.requests[-1]["input_shape"] == [4, 4, 3] and uff.engine.read_bytes() == b"plan"


def test_the_work_folder_is_made_whatever_characters_its_path_has(tmp_path, monkeypatch):
    """N9: a work_dir with a space, quotes and $(…) gets its out/ and cache/ folders made (mkdir quoted), so
    the agent's engine and log have somewhere to go; nothing in the path runs."""
    from pipeline.device.engine import build, build_uff
    from pipeline.device.transport import LocalTransport

    monkeypatch.chdir(tmp_path)  # where an unquoted $(touch pwned) would land
    work = tmp_path / "my work 'q' $(touch pwned)"
    transport = LocalTransport(device_cfg(work_dir=str(work)))

    class Agent(_FakeDevice):
        def call(self, request, what):  # what the agent does: write the engine and the log where it is told
            Path(request["engine"]).write_bytes(b"plan")
            Path(request["log"]).write_text("[I] built\n")
            return super().call(request, what)

    device = Agent(tmp_path)
    device.transport = transport
    onnx_path = tmp_path / "m.onnx"
    onnx_path.write_bytes(b"onnx")
    opts = EngineOptions(max_batch_size=4)
    profile = profile_for([("input", [None, 4, 4, 3])], opts, [1, 4])
    result = build(device, onnx_path, opts, profile, target=load_target("jetson_tx2"),
                   engine_path=tmp_path / "stage" / "model.engine", log_path=tmp_path / "stage" / "build.log")
    assert result.engine.read_bytes() == b"plan" and (work / "out").is_dir() and (work / "cache").is_dir()
    uff = build_uff(device, onnx_path, "input", [4, 4, 3], ["logits"], EngineOptions(), target=load_target("jetson_tx2"),
                    engine_path=tmp_path / "stage" / "u.engine", log_path=tmp_path / "stage" / "u.log")
    assert uff.engine.read_bytes() == b"plan"
    assert not list(tmp_path.glob("**/pwned"))


@pytest.mark.parametrize("log_text", ["[I] built\n", None])
def test_the_stage_writes_its_declared_outputs_and_closes_its_device(tmp_path, monkeypatch, log_text):
    """Rooms: engine.json and build.log are declared outputs, so the runner hashes, caches and hands them on; a
    device that kept no log gives a build.log saying so. The stage opens the device it was given by the config and
    closes it when it ends (no module-level registry of open devices)."""
    from pipeline.device import client
    from pipeline.progress import Progress
    from pipeline.stages import StageContext, registry
    from pipeline.stages.engine import engine

    from devicekit import tiny_onnx

    class Board(_FakeDevice):
        closed = False

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            Board.closed = True

    board = Board(tmp_path, log_text)
    monkeypatch.setattr(client, "open_device", lambda config, progress=None: board)
    stages = SimpleNamespace(convert=None, engine=EngineOptions(max_batch_size=4),
                             benchmark=SimpleNamespace(batch_sizes=[1, 4]))
    out = tmp_path / "engine"
    out.mkdir()
    ctx = StageContext(name="engine", out_dir=out, inputs={"onnx": tiny_onnx(tmp_path / "m.onnx")},
                       options=stages.engine, config=SimpleNamespace(stages=stages, device=device_cfg()),
                       target=load_target("jetson_tx2"), progress=Progress("quiet"))
    engine(ctx)
    declared = registry()["engine"].outputs
    assert sorted(p.name for p in out.iterdir()) == sorted(declared.values())
    assert json.loads((out / "engine.json").read_text())["profile"]["input"]["max"] == [4, 4, 4, 3]
    log = (out / "build.log").read_text()
    assert log == "[I] built\n" if log_text else "returned no build log" in log
    assert Board.closed
