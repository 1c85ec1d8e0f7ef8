"""The benchmark stage on a tiny ONNX model built here (onnx + onnxruntime, no TensorFlow)."""

import json
import types

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from pipeline.bench.latency import STAT_KEYS  # noqa: E402
from pipeline.errors import DeployError  # noqa: E402
from pipeline.progress import Progress  # noqa: E402
from pipeline.backends import load_onnx  # noqa: E402
from pipeline.stages import StageContext, _REGISTRY  # noqa: E402
from pipeline.stages.benchmark import benchmark  # noqa: E402


def tiny_model(path, batch="N", size=8, dtype=None):
    """x[batch,size,size,3] -> Relu -> ReduceMean over H,W -> y[batch,3]."""
    from onnx import TensorProto, helper

    dtype = dtype or TensorProto.FLOAT
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("ReduceMean", ["r"], ["y"], axes=[1, 2], keepdims=0),
        ],
        "tiny",
        [helper.make_tensor_value_info("x", dtype, [batch, size, size, 3])],
        [helper.make_tensor_value_info("y", dtype, [batch, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def options(**kw):
    base = dict(batch_sizes=[1, 4], warmup=2, iterations=5, duration_s=None, inputs="random", consistency=False)
    base.update(kw)
    return types.SimpleNamespace(**base)


def context(tmp_path, onnx_path, opts=None, target=None):
    return StageContext(
        name="benchmark",
        out_dir=tmp_path / "out",
        inputs={"onnx": onnx_path},
        options=opts or options(),
        config=types.SimpleNamespace(dataset=None, device=None),
        target=target or types.SimpleNamespace(name="jetson-orin-nano", runtime="tensorrt"),
        progress=Progress("quiet"),
    )


def test_registered():
    st = _REGISTRY["benchmark"]
    # engine.json is a declared input (the DLA placement), never found by path beside the engine
    assert st.inputs == {"onnx": "convert", "engine": "engine", "engine_manifest": "engine"}
    assert st.optional == ("engine", "engine_manifest")  # runs on the ONNX model when the engine stage is pending
    assert st.outputs == {"benchmark": "benchmark.json"}
    assert st.uses == ("target", "dataset", "device")
    assert st.version == 5  # 4: throughput from a back-to-back loop, feed digests; 5: engine.json declared


def test_benchmark_json(tmp_path):
    path = tiny_model(tmp_path / "model.onnx")
    result = benchmark(context(tmp_path, path))

    report = json.loads((tmp_path / "out" / "benchmark.json").read_text())
    assert set(report) == {"schema", "where", "model", "settings", "results"} and report["schema"] == "deploy.benchmark/1"

    where = report["where"]
    assert where["runtime"] == "onnxruntime"
    assert where["provider"] == "CPUExecutionProvider"
    assert where["version"]
    assert where["target"] == "jetson-orin-nano"
    assert where["on_target_device"] is False  # host numbers, even for a TensorRT target
    assert "not Jetson numbers" in where["note"]
    assert {"node", "machine", "cpu_count"} <= set(where["host"])
    assert where["host"]["cpu_count"] >= 1

    import hashlib

    assert report["model"]["name"] == "model.onnx"
    assert report["model"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert report["model"]["inputs"] == [{"name": "x", "shape": [None, 8, 8, 3], "dtype": "float32"}]

    settings = report["settings"]
    assert settings["inputs"] == "random"
    assert settings["batch_sizes"] == [1, 4]
    assert settings["warmup"] == 2 and settings["iterations"] == 5 and settings["duration_s"] is None

    assert [r["batch_size"] for r in report["results"]] == [1, 4]
    for r in report["results"]:
        assert set(r) == set(STAT_KEYS) | {"batch_size", "feed_sha256", "loop"}
        assert r["iterations"] == 5
        assert 0 < r["min_ms"] <= r["p50_ms"] <= r["p90_ms"] <= r["p95_ms"] <= r["p99_ms"] <= r["max_ms"]
        assert r["min_ms"] <= r["mean_ms"] <= r["max_ms"]
        assert r["std_ms"] >= 0
        assert r["throughput_ips"] > 0

    assert result["where"] == "host_cpu/onnxruntime"
    assert result["on_target_device"] is False
    assert set(result["p50_ms"]) == {"1", "4"}
    assert set(result["throughput_ips"]) == {"1", "4"}
    json.dumps(result)  # the runner stores it in manifest.json


def test_json_is_sorted_and_indented(tmp_path):
    path = tiny_model(tmp_path / "model.onnx")
    benchmark(context(tmp_path, path, options(batch_sizes=[2])))
    text = (tmp_path / "out" / "benchmark.json").read_text()
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True) + "\n"


def test_duration_mode(tmp_path):
    path = tiny_model(tmp_path / "model.onnx")
    benchmark(context(tmp_path, path, options(batch_sizes=[1], iterations=1, duration_s=0.05)))
    report = json.loads((tmp_path / "out" / "benchmark.json").read_text())
    assert report["settings"]["mode"] == "duration"
    assert report["results"][0]["iterations"] > 1


def test_onnxruntime_target_is_still_host(tmp_path):
    path = tiny_model(tmp_path / "model.onnx")
    target = types.SimpleNamespace(name="jetson-nano-ort", runtime="onnxruntime")
    benchmark(context(tmp_path, path, options(batch_sizes=[1]), target=target))
    where = json.loads((tmp_path / "out" / "benchmark.json").read_text())["where"]
    assert where["on_target_device"] is False
    assert where["note"]


def test_fixed_batch_rejects_other_batch_sizes(tmp_path):
    path = tiny_model(tmp_path / "fixed.onnx", batch=1)
    with pytest.raises(DeployError) as err:
        benchmark(context(tmp_path, path, options(batch_sizes=[1, 8])))
    msg = str(err.value)
    assert "stages.benchmark.batch_sizes" in msg
    assert "fixed batch dim of 1" in msg and "8" in msg
    assert "\n" not in msg
    assert not (tmp_path / "out" / "benchmark.json").exists()  # checked before measuring


def test_fixed_batch_matching_size_runs(tmp_path):
    path = tiny_model(tmp_path / "fixed.onnx", batch=1)
    result = benchmark(context(tmp_path, path, options(batch_sizes=[1])))
    assert set(result["p50_ms"]) == {"1"}


def test_dynamic_spatial_dims_are_a_clear_error(tmp_path):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "H", "W", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "H", "W", 3])],
    )
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    with pytest.raises(DeployError, match="dynamic non-batch dims"):
        benchmark(context(tmp_path, path))


def test_missing_model(tmp_path):
    with pytest.raises(DeployError, match="does not exist"):
        benchmark(context(tmp_path, tmp_path / "nope.onnx"))


def test_onnx_directory_artifact(tmp_path):
    d = tmp_path / "convert"
    d.mkdir()
    tiny_model(d / "model.onnx")
    benchmark(context(tmp_path, d, options(batch_sizes=[1])))
    assert json.loads((tmp_path / "out" / "benchmark.json").read_text())["model"]["name"] == "model.onnx"


# --- pipeline.backends -------------------------------------------------------------------


def test_load_onnx_session(tmp_path):
    import numpy as np

    s = load_onnx(tiny_model(tmp_path / "model.onnx"))
    assert s.inputs == [("x", (None, 8, 8, 3), "float32")]
    assert s.outputs == [("y", (None, 3), "float32")]
    assert s.provider == "CPUExecutionProvider"
    assert s.label["runtime"] == "onnxruntime"
    assert s.label["provider"] == "CPUExecutionProvider"
    x = np.full((2, 8, 8, 3), -1.0, np.float32)
    x[..., 0] = 2.0
    (y,) = s.run({"x": x})
    assert y.shape == (2, 3)
    np.testing.assert_allclose(y, [[2.0, 0.0, 0.0]] * 2)


def test_load_onnx_errors(tmp_path):
    with pytest.raises(DeployError, match="does not exist"):
        load_onnx(tmp_path / "missing.onnx")
    with pytest.raises(DeployError, match="directory"):
        load_onnx(tmp_path)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a protobuf")
    with pytest.raises(DeployError, match="ONNX Runtime cannot load") as err:
        load_onnx(bad)
    assert "\n" not in str(err.value)
    with pytest.raises(DeployError, match="no provider"):
        load_onnx(tiny_model(tmp_path / "m.onnx"), providers=["NoSuchExecutionProvider"])


def _agent_feed(inputs, batch_size, seed=0, images=None):
    import numpy as np

    from pipeline.device.agent.commands import _feed

    model = types.SimpleNamespace(inputs=inputs)
    return _feed(np, model, batch_size, images, seed, 0.0, 255.0)


def test_random_feed_is_seeded_and_in_range():
    import numpy as np

    inputs = [("x", (None, 4, 4, 3), "float32"), ("ids", (None, 5), "int64")]
    a, used = _agent_feed(inputs, 3)
    b, _ = _agent_feed(inputs, 3)
    assert used == "random"
    assert a["x"].shape == (3, 4, 4, 3) and a["x"].dtype == np.float32
    assert a["ids"].shape == (3, 5) and a["ids"].dtype == np.int64
    assert 0 <= a["x"].min() and a["x"].max() <= 255
    np.testing.assert_array_equal(a["x"], b["x"])
    # the one generator: RandomState(seed), the same call on the host and on a board (Python 3.6 + numpy)
    rng = np.random.RandomState(0)
    np.testing.assert_array_equal(a["x"], rng.uniform(0.0, 255.0, size=(3, 4, 4, 3)).astype(np.float32))


def test_dataset_images_fill_the_batch():
    import numpy as np

    images = np.arange(2 * 4 * 4 * 3, dtype=np.float32).reshape(2, 4, 4, 3)
    feed, used = _agent_feed([("x", (None, 4, 4, 3), "float32")], 5, images=images)
    assert used == "dataset"
    np.testing.assert_array_equal(feed["x"], images[[0, 1, 0, 1, 0]])


# --- one benchmark: the agent's runners in process -------------------------------------------


def test_feed_digest_is_the_seeded_feed(tmp_path):
    """benchmark.json records the sha256 of the bytes fed per batch size: RandomState(seed) pixels, the same
    on a board (tests/device/test_power.py runs the same request through the transport)."""
    import hashlib

    import numpy as np

    benchmark(context(tmp_path, tiny_model(tmp_path / "model.onnx")))
    report = json.loads((tmp_path / "out" / "benchmark.json").read_text())
    assert report["settings"]["seed"] == 0 and report["settings"]["input_range"] == [0.0, 255.0]
    for r in report["results"]:
        pixels = np.random.RandomState(0).uniform(0.0, 255.0, size=(r["batch_size"], 8, 8, 3)).astype(np.float32)
        assert r["feed_sha256"] == hashlib.sha256(pixels.tobytes()).hexdigest()


def test_throughput_is_the_back_to_back_loop(tmp_path):
    benchmark(context(tmp_path, tiny_model(tmp_path / "model.onnx"), options(iterations=7)))
    for r in json.loads((tmp_path / "out" / "benchmark.json").read_text())["results"]:
        loop = r["loop"]
        assert loop["calls"] == 7 and loop["seconds"] > 0
        assert r["throughput_ips"] == pytest.approx(r["batch_size"] * loop["calls"] / loop["seconds"])
        assert "gpu_compute_ms" not in r and "phases_mean_ms" not in r  # ONNX Runtime: wall time only


class RecordingProgress(Progress):
    def __init__(self):
        Progress.__init__(self, "quiet")
        self.bars, self.lines = [], []

    def bar(self, total=None, desc="", unit="it"):
        bar = types.SimpleNamespace(total=total, desc=desc, updates=[], closed=False)
        bar.update = bar.updates.append
        bar.close = lambda: setattr(bar, "closed", True)
        self.bars.append(bar)
        return bar

    def log(self, message):
        self.lines.append(message)


def test_host_keeps_its_progress_bar_and_lines(tmp_path):
    progress = RecordingProgress()
    ctx = context(tmp_path, tiny_model(tmp_path / "model.onnx"), options(iterations=30))
    ctx.progress = progress
    benchmark(ctx)
    assert [(b.desc, b.total, sum(b.updates), b.closed) for b in progress.bars] == [
        ("benchmark b1", 30, 30, True), ("benchmark b4", 30, 30, True)]
    batch_lines = [line for line in progress.lines if line.startswith("benchmark: batch")]
    assert len(batch_lines) == 2 and all("img/s" in line and "host_cpu/onnxruntime" in line for line in batch_lines)


def test_a_failing_first_call_is_one_line(tmp_path):
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np

    from pipeline.errors import StageFailed

    # reshape to a fixed [1, 192]: fine at batch 1, a runtime error at batch 4
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"])], "fixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 8, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 192])],
        [numpy_helper.from_array(np.array([1, 192], dtype=np.int64), "s")])
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    with pytest.raises(StageFailed) as err:
        benchmark(context(tmp_path, path))
    assert str(err.value).startswith("benchmark: bad.onnx failed at batch size 4: ")
    assert "\n" not in str(err.value)


def test_non_numeric_input_is_a_clear_error(tmp_path):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "strings",
        [helper.make_tensor_value_info("x", TensorProto.STRING, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, ["N", 2])])
    path = tmp_path / "str.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    with pytest.raises(DeployError, match="only numeric inputs are supported"):
        benchmark(context(tmp_path, path))


def test_on_target_device_is_one_rule():
    from pipeline.bench.report import on_target_device

    tx2 = types.SimpleNamespace(name="jetson_tx2", runtime="tensorrt")
    trt = {"runtime": "tensorrt"}
    assert on_target_device(trt, tx2, "jetson_tx2") is True
    assert on_target_device(trt, tx2, None) is False  # the host: no board
    assert on_target_device(trt, tx2, "jetson_nano") is False
    assert on_target_device({"runtime": "onnxruntime"}, tx2, "jetson_tx2") is False
    assert on_target_device(trt, types.SimpleNamespace(name="jetson_tx2", runtime="onnxruntime"), "jetson_tx2") is False


def test_gpu_compute_is_a_separate_figure():
    """On TensorRT: latency from total_ms (wall time of one call), GPU compute from compute_ms (CUDA events)."""
    from pipeline.bench.report import result

    entry = {"batch_size": 2, "feed_sha256": "x", "loop": {"calls": 4, "seconds": 0.01},
             "times_ms": {"total_ms": [2.0, 2.0, 4.0, 2.0], "compute_ms": [1.0, 1.0, 1.0, 3.0],
                          "h2d_ms": [0.2] * 4, "d2h_ms": [0.1] * 4}}
    r = result(entry)
    assert r["p50_ms"] == pytest.approx(2.0) and r["mean_ms"] == pytest.approx(2.5)
    assert r["gpu_compute_ms"]["p50"] == pytest.approx(1.0) and r["gpu_compute_ms"]["mean"] == pytest.approx(1.5)
    assert r["phases_mean_ms"] == pytest.approx({"h2d_ms": 0.2, "compute_ms": 1.5, "d2h_ms": 0.1})
    assert r["throughput_ips"] == pytest.approx(2 * 4 / 0.01)  # the loop, not 8 images / sum(total_ms)
