"""On a Jetson (or any machine with TensorRT and the CUDA runtime, libcudart, which the agent calls through
ctypes; pycuda / cuda-python are optional): `pytest -m jetson`. Skipped
elsewhere; this project's CI has no board, so these have not run yet (docs/device.md).

Two kinds: TensorRT in this pytest process (JetPack 6: deploy's Python 3.10 is the board's), and
TensorRT through the agent on the board's own interpreter, ``DEPLOY_BOARD_PYTHON`` (default
python3: on JetPack 4.6 and 5 TensorRT's bindings exist only for the system Python 3.6 / 3.8, while
deploy runs on 3.10+), the way ``deploy run`` uses it."""

import os
import shutil

import numpy as np
import pytest

from pipeline.device.agent.trt_engine import tensorrt_version

from devicekit import device_cfg, tiny_onnx

pytestmark = pytest.mark.jetson
in_process = pytest.mark.skipif(tensorrt_version() is None, reason="needs TensorRT's Python bindings here (JetPack 6)")
BOARD_PYTHON = os.environ.get("DEPLOY_BOARD_PYTHON") or shutil.which("python3") or "python3"


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """The agent on the board's Python, skipped where that Python has no TensorRT."""
    from pipeline.device.client import Device

    device = Device(device_cfg(work_dir=str(tmp_path_factory.mktemp("board")), python=BOARD_PYTHON))
    if not device.ping()["has"].get("tensorrt"):
        device.transport.close()
        pytest.skip("{} has no TensorRT bindings (set DEPLOY_BOARD_PYTHON to the board's python3)".format(BOARD_PYTHON))
    yield device
    device.transport.close()


@in_process
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


@in_process
def test_the_probe_knows_this_board(tmp_path):
    from pipeline.device.client import Device

    facts = Device(device_cfg(work_dir=str(tmp_path / "w"))).probe()
    assert facts["tensorrt"] and facts["l4t"] and facts["board"]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_agent_builds_runs_and_times_an_engine_on_the_boards_python(board, tmp_path, precision):
    from pipeline.backends import load_onnx
    from pipeline.backends.device import DeviceSession
    from pipeline.numeric import tolerance

    model = tiny_onnx(tmp_path / "m.onnx", size=32)
    remote = board.transport.send(model)
    engine = "{}/m-{}.engine".format(board.transport.work, precision)
    profile = {"input": {"min": [1, 32, 32, 3], "opt": [4, 32, 32, 3], "max": [8, 32, 32, 3]}}
    built = board.call({"command": "build", "onnx": remote, "engine": engine, "precision": precision,
                        "workspace_mb": 256, "profile": profile}, what="the engine build")
    assert built["engine_bytes"] > 0
    batch = np.random.default_rng(0).uniform(0, 255, (4, 32, 32, 3)).astype(np.float32)
    got = DeviceSession(board, engine, "tensorrt").run({"input": batch})[0]
    atol, rtol = tolerance(precision)
    np.testing.assert_allclose(got, load_onnx(model).run({"input": batch})[0], atol=atol, rtol=rtol)
    answer = board.call({"command": "benchmark", "model": engine, "backend": "tensorrt", "batch_sizes": [1, 4],
                         "warmup": 5, "iterations": 20})
    for r in answer["results"]:
        times = r["times_ms"]
        assert len(times["total_ms"]) == 20 and min(times["compute_ms"]) > 0


def test_the_probe_through_the_agent_knows_this_board(board):
    facts = board.probe()
    assert facts["tensorrt"] and facts["l4t"] and facts["board"]
