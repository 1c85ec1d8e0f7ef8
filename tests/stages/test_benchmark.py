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
from pipeline.stages.benchmark import benchmark, random_feed  # noqa: E402


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
    base = dict(batch_sizes=[1, 4], warmup=2, iterations=5, duration_s=None, inputs="random")
    base.update(kw)
    return types.SimpleNamespace(**base)


def context(tmp_path, onnx_path, opts=None, target=None):
    return StageContext(
        name="benchmark",
        out_dir=tmp_path / "out",
        inputs={"onnx": onnx_path},
        options=opts or options(),
        config=types.SimpleNamespace(dataset=None),
        target=target or types.SimpleNamespace(name="jetson-orin-nano", runtime="tensorrt"),
        progress=Progress("quiet"),
    )


def test_registered():
    st = _REGISTRY["benchmark"]
    assert st.inputs == {"onnx": "convert", "engine": "engine"}
    assert st.optional == ("engine",)  # runs on the ONNX model when the engine stage is pending
    assert st.outputs == {"benchmark": "benchmark.json"}
    assert st.uses == ("target", "dataset", "device")
    assert st.version == 3  # 3: results keep percentiles_ms


def test_benchmark_json(tmp_path):
    path = tiny_model(tmp_path / "model.onnx")
    result = benchmark(context(tmp_path, path))

    report = json.loads((tmp_path / "out" / "benchmark.json").read_text())
    assert set(report) == {"where", "model", "settings", "results"}

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
        assert set(r) == set(STAT_KEYS) | {"batch_size"}
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


def test_random_feed_is_seeded_and_in_range():
    import numpy as np

    inputs = [("x", (None, 4, 4, 3), "float32"), ("ids", (None, 5), "int64")]
    a = random_feed(inputs, 3)
    b = random_feed(inputs, 3)
    assert a["x"].shape == (3, 4, 4, 3) and a["x"].dtype == np.float32
    assert a["ids"].shape == (3, 5) and a["ids"].dtype == np.int64
    assert 0 <= a["x"].min() and a["x"].max() <= 255
    np.testing.assert_array_equal(a["x"], b["x"])
