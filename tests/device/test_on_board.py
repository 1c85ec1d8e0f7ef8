"""On a Jetson (or any machine with TensorRT and pycuda / cuda-python): `pytest -m jetson`. Skipped
elsewhere; this project's CI has no board, so these have not run yet (docs/device.md)."""

import numpy as np
import pytest

from pipeline.device.agent.trt_engine import tensorrt_version

from devicekit import device_cfg, tiny_onnx

pytestmark = [
    pytest.mark.jetson,
    pytest.mark.skipif(tensorrt_version() is None, reason="needs TensorRT's Python bindings (a Jetson)"),
]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_build_run_and_time_an_engine(tmp_path, precision):
    from pipeline.backends import load_onnx
    from pipeline.device.agent.trt_engine import build_onnx
    from pipeline.device.agent.trt_runtime import Engine
    from pipeline.numeric import tolerance

    model = tiny_onnx(tmp_path / "m.onnx", size=32)
    profile = {"input": {"min": [1, 32, 32, 3], "opt": [4, 32, 32, 3], "max": [8, 32, 32, 3]}}
    result = build_onnx(str(model), str(tmp_path / "m.engine"), precision, 256, profile,
                        timing_cache=str(tmp_path / "timing.cache"), log_path=str(tmp_path / "build.log"))
    assert result["engine_bytes"] > 0 and (tmp_path / "timing.cache").exists()
    engine = Engine(str(tmp_path / "m.engine"))
    batch = np.random.default_rng(0).uniform(0, 255, (4, 32, 32, 3)).astype(np.float32)
    got = engine.infer({"input": batch})["probabilities"]
    want = load_onnx(model).run({"input": batch})[0]
    atol, rtol = tolerance(precision)
    np.testing.assert_allclose(got, want, atol=atol, rtol=rtol)
    calls = engine.time({"input": batch}, warmup=5, iterations=20)
    assert len(calls) == 20 and all(c["compute_ms"] > 0 and c["total_ms"] >= c["compute_ms"] for c in calls)


def test_the_probe_knows_this_board(tmp_path):
    from pipeline.device.client import Device

    facts = Device(device_cfg(work_dir=str(tmp_path / "w"))).probe()
    assert facts["tensorrt"] and facts["l4t"] and facts["board"]
