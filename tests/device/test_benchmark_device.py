"""The benchmark stage with a device: section (transport local, the agent on this test's Python with
ONNX Runtime, no TensorRT): the same request, answer and benchmark.json as the host path; DLA facts."""

import json
import types

import pytest

pytest.importorskip("onnxruntime")

from pipeline.bench.latency import STAT_KEYS  # noqa: E402
from pipeline.device.benchmark import dla_fields  # noqa: E402
from pipeline.progress import Progress  # noqa: E402
from pipeline.stages import StageContext  # noqa: E402
from pipeline.stages.benchmark import benchmark  # noqa: E402

from devicekit import device_cfg, tiny_onnx  # noqa: E402


def _context(tmp_path, model, device):
    opts = types.SimpleNamespace(batch_sizes=[1, 2], warmup=1, iterations=4, duration_s=None, inputs="random",
                                 consistency=False)
    config = types.SimpleNamespace(dataset=None, device=device, stages=types.SimpleNamespace(engine=None))
    return StageContext(name="benchmark", out_dir=tmp_path / "out", inputs={"onnx": model}, options=opts, config=config,
                        target=types.SimpleNamespace(name="jetson_tx2", runtime="tensorrt"), progress=Progress("quiet"))


def test_device_and_host_write_the_same_benchmark_json(tmp_path):
    model = tiny_onnx(tmp_path / "model.onnx")
    benchmark(_context(tmp_path / "board", model, device_cfg(work_dir=str(tmp_path / "w"), power=False)))
    board = json.loads((tmp_path / "board" / "out" / "benchmark.json").read_text())
    benchmark(_context(tmp_path / "host", model, None))
    host = json.loads((tmp_path / "host" / "out" / "benchmark.json").read_text())

    assert set(board) == set(host) == {"schema", "where", "model", "settings", "results"}
    assert board["model"] == host["model"]
    assert board["settings"] == host["settings"]
    for b, h in zip(board["results"], host["results"]):
        assert set(b) == set(h) == set(STAT_KEYS) | {"batch_size", "feed_sha256", "loop"}
        assert b["feed_sha256"] == h["feed_sha256"]  # same seed, same pixels
    assert board["where"]["on_target_device"] is False and host["where"]["on_target_device"] is False
    assert "via the device agent on" in board["where"]["note"] and "not jetson_tx2 numbers" in board["where"]["note"]
    assert host["where"]["note"] == "host CPU numbers via ONNX Runtime; not Jetson numbers"
    assert board["where"]["transport"] == "local" and "fingerprint" in board["where"]
    assert "dla" not in board["where"] and "dla_core" not in board["where"]


def _engine_json(tmp_path, dla):
    path = tmp_path / "engine.json"
    path.write_text(json.dumps({"precision": "fp16", "dla": dla} if dla is not None else {"precision": "fp16"}))
    return path


@pytest.mark.parametrize("runs_on, claims_core", [("dla", True), ("mixed", True), ("gpu", False), ("unknown", False)])
def test_dla_core_only_when_the_engine_runs_there(tmp_path, runs_on, claims_core):
    dla = {"core": 1, "layers_on_dla": 3 if runs_on != "gpu" else 0, "layers_on_gpu": 2, "runs_on": runs_on,
           "source": "engine_inspector"}
    out = dla_fields(_engine_json(tmp_path, dla))
    assert out["dla"] == dla
    assert ("dla_core" in out) is claims_core
    if claims_core:
        assert out["dla_core"] == 1


def test_no_dla_key_no_dla_fields(tmp_path):
    assert dla_fields(_engine_json(tmp_path, None)) == {}
    assert dla_fields(tmp_path / "missing.json") == {}


def test_a_tx2_python_feeds_the_same_pixels(tmp_path):
    """RandomState(seed) gives the same bytes with JetPack 4.6's numpy 1.19.5 on Python 3.6 as here."""
    from pathlib import Path

    from pipeline.device.agent import commands
    from pipeline.device.client import Device

    py36 = Path(__file__).resolve().parents[2] / ".venv36" / "bin" / "python"
    if not py36.exists():
        pytest.skip("no .venv36 (a Python 3.6 with numpy 1.19.5 and onnxruntime 1.10; see .ci/run)")
    model = tiny_onnx(tmp_path / "m.onnx")
    request = {"command": "benchmark", "backend": "onnxruntime", "batch_sizes": [1, 4], "warmup": 0, "iterations": 2}
    device = Device(device_cfg(work_dir=str(tmp_path / "w"), python=str(py36)))
    try:
        board = device.call(dict(request, model=device.transport.send(model)))
    finally:
        device.transport.close()
    try:
        host = commands.benchmark(dict(request, model=str(model), providers=["CPUExecutionProvider"]))
    finally:
        commands.forget_models()
    assert [e["feed_sha256"] for e in board["results"]] == [e["feed_sha256"] for e in host["results"]]
    assert all(e["loop"]["calls"] == 2 for e in board["results"])


class EngineStandIn(object):
    """The TensorRT Engine's shape (contract item 1): time() without a progress argument, CUDA-event columns."""

    inputs = [("input", [None, 4, 4, 3], "float32")]
    outputs = [("probabilities", [None, 3], "float32")]
    label = {"runtime": "tensorrt", "version": "8.2.1"}

    def __init__(self):
        self.log = []

    def infer(self, feed):
        self.log.append(("infer", feed["input"].shape))
        return {}

    def time(self, feed, warmup, iterations, duration_s=None):
        self.log.append(("time", warmup, iterations))
        return [{"total_ms": 2.0, "h2d_ms": 0.3, "compute_ms": 1.5, "d2h_ms": 0.1}] * iterations

    def loop(self, feed, calls):
        self.log.append(("loop", calls))
        return 0.001 * calls


def test_the_answer_on_tensorrt(monkeypatch):
    from pipeline.bench.report import build
    from pipeline.device.agent import commands

    engine = EngineStandIn()
    monkeypatch.setattr(commands, "_model", lambda request: engine)
    answer = commands.benchmark({"command": "benchmark", "model": "m.engine", "batch_sizes": [1, 4], "warmup": 2,
                                 "iterations": 3})
    assert engine.log == [("infer", (1, 4, 4, 3)), ("time", 2, 3), ("loop", 3),
                          ("infer", (4, 4, 4, 3)), ("time", 2, 3), ("loop", 3)]
    report = build(answer, {}, {"name": "m.engine"}, {})
    r = report["results"][1]
    assert r["p50_ms"] == pytest.approx(2.0) and r["gpu_compute_ms"]["p50"] == pytest.approx(1.5)
    assert r["throughput_ips"] == pytest.approx(4 * 3 / 0.003)
    assert r["phases_mean_ms"] == pytest.approx({"h2d_ms": 0.3, "compute_ms": 1.5, "d2h_ms": 0.1})


class _NoisyEngine(object):
    """A session whose output inside a batch differs from alone by 5e-4: fp16 kernels picked per batch shape."""

    name = "tensorrt"

    def __init__(self, runtime):
        self.inputs = [("input", [None, 4, 4, 3], "float32")]
        self.output_names = ["out"]
        self.label = {"runtime": runtime}

    def run(self, feed):
        x = feed["input"]
        return [x.mean(axis=(1, 2)) * 1e-6 + (5e-4 if len(x) > 1 else 0.0)]  # small outputs: the rtol adds little


def _consistency_context(tmp_path, precision, dla_core=None, engine_file=None):
    opts = types.SimpleNamespace(batch_sizes=[1, 4], consistency=True, consistency_samples=2)
    engine = types.SimpleNamespace(precision=precision, dla_core=dla_core, max_batch_size=4)
    config = types.SimpleNamespace(dataset=None, device=None, stages=types.SimpleNamespace(engine=engine))
    inputs = {"onnx": tmp_path / "m.onnx"}
    if engine_file is not None:
        inputs["engine"] = engine_file
    return StageContext(name="benchmark", out_dir=tmp_path / "out", inputs=inputs, options=opts, config=config,
                        target=types.SimpleNamespace(name="jetson_tx2", runtime="tensorrt"), progress=Progress("quiet"))


def test_consistency_on_an_engine_uses_its_precisions_tolerance(tmp_path):
    from pipeline.stages.benchmark import _consistency

    ctx = _consistency_context(tmp_path, "fp16")
    on_engine = _consistency(ctx, _NoisyEngine("tensorrt"), "m.engine", [1, 4])
    assert on_engine["passed"] and on_engine["tolerance"]["abs"] == 1e-3
    on_onnxruntime = _consistency(ctx, _NoisyEngine("onnxruntime"), "m.onnx", [1, 4])  # fp32 there: 5e-4 is a failure
    assert not on_onnxruntime["passed"] and on_onnxruntime["tolerance"]["abs"] == 1e-5


def test_consistency_is_not_run_on_a_static_dla_engine(tmp_path):
    from pipeline.stages.benchmark import _consistency

    ctx = _consistency_context(tmp_path, "fp16", dla_core=0, engine_file=tmp_path / "m.engine")
    ctx.options.batch_sizes = [4]
    assert _consistency(ctx, _NoisyEngine("tensorrt"), "m.engine", [4]) is None


class _DlaEngineStandIn(EngineStandIn):
    """TensorRT's runner as the agent labels it: with the DLA core the request asked for."""

    label = {"runtime": "tensorrt", "version": "10.3.0", "dla_core": 0}


class _Board(object):
    """A device whose agent answers in this process (commands.dispatch) with a TensorRT engine stand-in."""

    def __init__(self):
        self.transport = types.SimpleNamespace(send=str)
        self.closed = False

    def backend(self):
        return "tensorrt"

    def describe(self):
        return "orin:22"

    def call(self, request, timeout=None, what=None):
        from pipeline.device.agent import commands

        return commands.dispatch(request)

    def probe(self):
        return {"kind": "jetson", "board": "jetson_agx_orin", "tensorrt": "10.3.0", "clocks_locked": True}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True


def _where(tmp_path, monkeypatch, dla, beside_the_engine=None):
    """benchmark.json's where from the benchmark stage on a TensorRT board stand-in whose agent labels its run with
    the requested DLA core 0; engine.json (its ``dla``: ``dla``) comes in as the engine stage's declared output,
    from a folder of its own; ``beside_the_engine``: another engine.json's dla next to the engine file."""
    from pipeline.device import client
    from pipeline.device.agent import commands
    from pipeline.stages import benchmark as stage

    engine_file, manifest = tmp_path / "engine" / "model.engine", tmp_path / "declared" / "engine.json"
    engine_file.parent.mkdir()
    manifest.parent.mkdir()
    engine_file.write_bytes(b"plan")
    for path, placement in ((manifest, dla), (engine_file.with_name("engine.json"), beside_the_engine)):
        if path == manifest or placement is not None:
            path.write_text(json.dumps(dict({"precision": "fp16", "dla_core": 0}, **({"dla": placement} if placement
                                                                                     else {}))))
    board = _Board()
    monkeypatch.setattr(client, "open_device", lambda config, progress=None: board)
    monkeypatch.setattr(commands, "_model", lambda request: _DlaEngineStandIn())
    monkeypatch.setattr(stage, "_accuracy", lambda ctx, session: None)
    monkeypatch.setattr(stage, "_static_batch", lambda ctx: None)
    ctx = _context(tmp_path, tiny_onnx(tmp_path / "model.onnx"), device_cfg(work_dir=str(tmp_path / "w"), power=False))
    ctx.config.stages.engine = types.SimpleNamespace(dla_core=0, precision="fp16", max_batch_size=2)
    ctx.inputs.update(engine=engine_file, engine_manifest=manifest)
    ctx.target = types.SimpleNamespace(name="jetson_agx_orin", runtime="tensorrt")
    stage.benchmark(ctx)
    assert board.closed  # the stage closes the device it opened
    return json.loads((tmp_path / "out" / "benchmark.json").read_text())["where"]


def _placement(runs_on):
    return {"core": 0, "layers_on_dla": 0 if runs_on in ("gpu", "unknown") else 5, "layers_on_gpu": 3,
            "runs_on": runs_on, "source": "inspector"}


@pytest.mark.parametrize("runs_on, placement_core", [("gpu", None), ("unknown", None), (None, None), ("dla", 0),
                                                     ("mixed", 0)])
def test_benchmark_json_names_a_dla_core_only_from_the_engines_placement(tmp_path, monkeypatch, runs_on,
                                                                         placement_core):
    """N3: the agent's label carries the requested core; benchmark.json's where.dla_core comes from engine.json's
    placement only, never for an engine that runs on the GPU, whose placement is unknown, or that has none."""
    where = _where(tmp_path, monkeypatch, None if runs_on is None else _placement(runs_on))
    assert where.get("dla_core") == placement_core
    assert where.get("dla", {}).get("runs_on") == runs_on


def test_the_placement_is_read_from_the_declared_engine_json_not_beside_the_engine(tmp_path, monkeypatch):
    """Rooms: engine.json reaches the benchmark as the engine stage's declared output (ctx.inputs), not by a path
    next to the engine file."""
    where = _where(tmp_path, monkeypatch, _placement("gpu"), beside_the_engine=_placement("dla"))
    assert where["dla"]["runs_on"] == "gpu" and "dla_core" not in where


def test_the_stages_declare_what_passes_between_them():
    from pipeline.stages import pipeline_order, registry

    stages = registry()
    assert stages["engine"].outputs == {"engine": "model.engine", "engine_manifest": "engine.json",
                                        "build_log": "build.log"}
    assert stages["benchmark"].inputs["engine_manifest"] == "engine"
    assert set(stages["benchmark"].optional) == {"engine", "engine_manifest"}  # a pending engine: ONNX Runtime runs
    order = pipeline_order()
    assert order.index("engine") < order.index("benchmark")
