"""The agent's default CUDA binding, libcudart through ctypes (pipeline/device/agent/cudart_ctypes.py), and the
CUDA layer and engine runner on it, against a stand-in libcudart compiled here (tests/device/cudart_standin.py:
the same symbols and C signatures, host memory behind "device" pointers, memcpy copies, clock-timed
events). No GPU, no pycuda, no cuda-python: the real library runs under ``pytest -m cuda``
(tests/device/test_cuda_real.py, route ``libcudart``)."""

import ctypes
import io
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import cudart_standin
import trt_standin
from devicekit import tiny_onnx
from pipeline.device.agent import AgentError, EngineError, commands, cuda as cuda_layer, cudart_ctypes

pytestmark = pytest.mark.skipif(cudart_standin.compiler() is None, reason="no C compiler (gcc) to build the stand-in")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return cudart_standin.build(tmp_path_factory.mktemp("cudart"))


@pytest.fixture
def standin(library, monkeypatch):
    """$DEPLOY_LIBCUDART at the stand-in; its state (ctypes handle on the same loaded library)."""
    monkeypatch.setenv(cudart_ctypes.ENV, str(library))
    monkeypatch.delenv("STANDIN_CUDART_FAIL", raising=False)
    state = ctypes.CDLL(str(library))
    for name in ("standin_live_device", "standin_live_host", "standin_live_streams", "standin_live_events",
                 "standin_bound", "standin_pinned_copies", "standin_async_copies"):
        getattr(state, name).restype = ctypes.c_int
    state.standin_is_device.argtypes = [ctypes.c_void_p]
    yield state
    shared = cuda_layer._SHARED
    if shared is not None:
        shared.close()
    del cudart_ctypes._LOADED[:]  # later tests find their own binding


def _live(state):
    return (state.standin_live_device(), state.standin_live_host(), state.standin_live_streams(),
            state.standin_live_events())


# -- finding the library ---------------------------------------------------------------------------------------

def test_libcudart_is_found_where_jetpack_puts_it(tmp_path, library, monkeypatch):
    """JetPack 4.6 layout: /usr/local/cuda-10.2/targets/aarch64-linux/lib/libcudart.so.10.2 (and the
    /usr/local/cuda/lib64 link); a static libcudart_static.a beside it is never a candidate."""
    monkeypatch.delenv(cudart_ctypes.ENV, raising=False)
    lib = tmp_path / "usr/local/cuda-10.2/targets/aarch64-linux/lib"
    lib.mkdir(parents=True)
    (lib / "libcudart.so.10.2").write_bytes(library.read_bytes())
    (lib / "libcudart_static.a").write_bytes(b"!<arch>\n")
    monkeypatch.setattr(cudart_ctypes, "FOLDERS", (str(tmp_path / "usr/local/cuda/lib64"),
                                                   str(tmp_path / "usr/local/cuda-*/targets/aarch64-linux/lib")))
    found = cudart_ctypes.candidates()
    assert str(lib / "libcudart.so.10.2") in found
    assert not any(p.endswith(".a") for p in found)
    assert found.index("libcudart.so.10.2") < found.index(str(lib / "libcudart.so.10.2"))  # the loader's names first
    assert "libcudart.so.12" in found and "libcudart.so.11.0" in found  # JetPack 6 / JetPack 5 sonames


def test_a_libcudart_the_process_already_loaded_comes_first(library, monkeypatch):
    """TensorRT brings its libcudart in: the agent uses that copy, not another one on disk."""
    ctypes.CDLL(str(library))
    monkeypatch.delenv(cudart_ctypes.ENV, raising=False)
    found = cudart_ctypes.candidates()
    assert str(library) in cudart_ctypes._loaded_in_process()  # (other libcudarts this process loaded may be there)
    assert found.index(str(library)) < found.index(cudart_ctypes.SONAMES[0])  # before the loader's names


def test_a_missing_library_is_one_line_naming_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(cudart_ctypes.ENV, str(tmp_path / "nope.so"))
    runtime, problem = cudart_ctypes.load()
    assert runtime is None and cudart_ctypes.ENV in problem and "nope.so" in problem and "\n" not in problem
    kind, _, _, problem = cuda_layer.choose()
    assert kind is None and "nope.so" in problem and "pycuda" in problem  # every route named


def test_the_default_binding_is_libcudart_with_nothing_installed(standin):
    """No pycuda, no cuda-python in this Python: the agent still has CUDA (the library JetPack ships)."""
    info = cuda_layer.binding_info()
    assert info["binding"] == "libcudart" and info["version"] == "10.2" and info["problem"] is None
    assert "libcudart" in info["module"]
    assert standin.standin_bound() in (0, 1)  # looking never starts CUDA (earlier tests may have)


def test_the_real_gpu_test_counts_devices_through_the_agents_lookup(standin):
    """test_cuda_real's fallback device count (for containers without nvidia-smi) asks the binding where the
    lookup lives (review N12: it called a function that was not in that module, and always said 0)."""
    import test_cuda_real

    assert test_cuda_real._binding_device_count("libcudart") == 1


# -- the CUDA layer on it ---------------------------------------------------------------------------------------

def test_the_layer_binds_the_primary_context_and_carries_values(standin):
    before = _live(standin)
    cuda = cuda_layer.Cuda()
    assert cuda.kind == "libcudart" and standin.standin_bound() == 1  # cudaSetDevice + cudaFree(0) at start
    pinned = standin.standin_pinned_copies()
    with cuda.active():
        stream = cuda.stream()
        source = cuda.host_buffer((100, 3), np.float32)
        back = cuda.host_buffer((100, 3), np.float32)
        source[...] = np.random.RandomState(0).rand(100, 3)
        device = cuda.alloc(source.nbytes)
        assert standin.standin_is_device(device) == 1
        cuda.copy_to_device(device, source, stream)
        cuda.copy_to_host(back, device, stream)
        cuda.synchronize(stream)
        np.testing.assert_array_equal(back, source)
        assert standin.standin_pinned_copies() == pinned + 2  # both async copies from page-locked memory
        plain = np.arange(300, dtype=np.float32).reshape(100, 3)
        cuda.copy_to_device(device, plain)
        out = np.zeros_like(plain)
        cuda.copy_to_host(out, device)
        np.testing.assert_array_equal(out, plain)
        free, total = cuda.mem_info()
        assert total == 1 << 30 and free <= total - source.nbytes
        start, end = cuda.event(), cuda.event()
        cuda.record(start, stream)
        cuda.copy_to_device(device, source, stream)
        cuda.record(end, stream)
        assert 0.0 <= cuda.elapsed_ms(start, end) < 1000.0
    assert _live(standin) != before
    cuda.close()
    cuda.close()
    assert _live(standin)[:2] == before[:2]  # device and page-locked memory all back
    with pytest.raises(cuda_layer.CudaError, match="closed"):
        cuda.alloc(16)


def test_cuda_errors_are_named_by_the_runtime(standin):
    cuda = cuda_layer.Cuda()
    with pytest.raises(cuda_layer.CudaError, match=r"cudaErrorInvalidValue \(invalid argument\)"):
        cuda.copy_to_device(12345, np.zeros(4, np.float32))  # not device memory
    with pytest.raises(cuda_layer.CudaError, match="cudaErrorNotReady"):
        cuda.elapsed_ms(cuda.event(), cuda.event())  # never recorded
    cuda.close()


def test_no_device_is_the_video_group_hint(standin, monkeypatch):
    monkeypatch.setenv("STANDIN_CUDART_FAIL", "nodevice")
    with pytest.raises(cuda_layer.CudaError) as caught:
        cuda_layer.Cuda()
    text = str(caught.value)
    assert "CUDA could not start" in text and "cudaErrorNoDevice" in text and "video group" in text
    assert "cuda-python" not in text  # the cuda-python 13 pin hint is for cuda-python only


# -- the engine runner on it (stand-in TensorRT that reads and writes the device addresses) ----------------------

@pytest.fixture(params=["8.2.1", "10.3.0"])
def engine_file(request, standin, tmp_path, monkeypatch):
    """A stand-in engine of devicekit.tiny_onnx, with TensorRT at 8.2.1 (binding API: JetPack 4.6) or
    10.3.0 (named tensors: JetPack 6) importable."""
    trt_standin.write(tmp_path / "trt", request.param)
    if request.param < "8.6":  # TensorRT < 8.6 needs numpy < 1.24 (the agent checks): JetPack 4.6's is 1.19.5
        monkeypatch.setattr(np, "__version__", "1.19.5")
    monkeypatch.syspath_prepend(str(tmp_path / "trt"))
    monkeypatch.delitem(sys.modules, "tensorrt", raising=False)
    onnx_path = tiny_onnx(tmp_path / "m.onnx")
    path = tmp_path / "m.engine"
    path.write_bytes(trt_standin.engine_bytes(onnx_path, max_batch=4))
    yield path, onnx_path
    commands.forget_models()
    sys.modules.pop("tensorrt", None)


def _reference(onnx_path, x):
    from pipeline.backends import load_onnx

    return load_onnx(onnx_path).run({"input": x})[0]


def test_an_engine_runs_times_and_frees_through_libcudart(engine_file, standin):
    from pipeline.device.agent.trt_runtime import Engine

    path, onnx_path = engine_file
    before = _live(standin)
    engine = Engine(str(path))
    assert engine.label["cuda"] == "libcudart"
    x = np.random.RandomState(1).uniform(0, 255, (4, 4, 4, 3)).astype(np.float32)
    got = engine.infer({"input": x})["probabilities"]
    np.testing.assert_allclose(got, _reference(onnx_path, x), rtol=1e-5, atol=1e-7)
    for i in range(4):  # batch consistency: each image alone gives its row (another shape set: the old one freed)
        np.testing.assert_allclose(engine.infer({"input": x[i:i + 1]})["probabilities"][0], got[i], rtol=1e-6)
    assert standin.standin_live_device() - before[0] == 2  # one shape set at a time: input + output
    calls = engine.time({"input": x}, 2, 5)
    assert len(calls) == 5
    for call in calls:
        assert call["total_ms"] >= call["h2d_ms"] + call["compute_ms"] + call["d2h_ms"] - 1e-3
    assert engine.loop({"input": x}, 3) > 0
    engine.close()
    assert _live(standin)[:3] == (before[0], before[1], before[2])  # memory and the stream back; events destroyed
    assert standin.standin_live_events() == before[3]


def test_infer_outside_the_profile_is_a_run_failure_not_an_agent_bug(engine_file, standin):
    """Review N13: TensorRT refusing a shape outside the engine's profile is the engine's answer, not
    "an agent error: please report it"."""
    path, _ = engine_file
    buffer = io.BytesIO()
    np.savez(buffer, input=np.zeros((9, 4, 4, 3), np.float32))  # the profile ends at batch 4
    import base64

    request = {"command": "infer", "model": str(path), "backend": "tensorrt",
               "feed": base64.b64encode(buffer.getvalue()).decode()}
    with pytest.raises(AgentError) as caught:
        commands.dispatch(request)
    assert caught.value.kind == "run-failed"
    assert "outside the engine's optimisation profile" in str(caught.value) and "[9, 4, 4, 3]" in str(caught.value)
    assert issubclass(EngineError, Exception)


def test_the_benchmark_says_the_engines_copies_did_not_overlap(engine_file, standin):
    """Review N11: the throughput loop runs copies and compute in order on one stream (trtexec overlaps them
    by default), and the answer says so; ONNX Runtime has no copies to overlap."""
    path, onnx_path = engine_file
    answer = commands.dispatch({"command": "benchmark", "model": str(path), "backend": "tensorrt", "batch_sizes": [2],
                                "warmup": 1, "iterations": 3})
    assert answer["results"][0]["loop"]["copies_overlap"] is False
    commands.forget_models()
    answer = commands.dispatch({"command": "benchmark", "model": str(onnx_path), "backend": "onnxruntime",
                                "batch_sizes": [2], "warmup": 1, "iterations": 3, "providers": ["CPUExecutionProvider"]})
    assert answer["results"][0]["loop"]["copies_overlap"] is None


def test_a_real_libcudart_on_this_machine_loads_with_every_call(monkeypatch):
    """Where a CUDA toolkit or JetPack put a real libcudart (this is not the stand-in): every symbol the binding
    declares is there with the C signature it expects, its version reads, its error names come back, and
    without a usable GPU the layer stops with CUDA's own error in one line. ``pytest -m cuda`` runs the rest
    on a GPU (tests/device/test_cuda_real.py, route libcudart)."""
    monkeypatch.delenv(cudart_ctypes.ENV, raising=False)
    monkeypatch.setattr(cudart_ctypes, "_loaded_in_process", lambda: [])  # not the stand-in earlier tests loaded
    del cudart_ctypes._LOADED[:]
    runtime, problem = cudart_ctypes.load()
    try:
        if runtime is None or os.path.basename(runtime.path).startswith("standin") or "cudart" not in runtime.path:
            pytest.skip("no real libcudart here: {}".format(problem))
        if runtime.path.startswith(str(Path(cudart_standin.__file__).parent)) or "pytest" in runtime.path:
            pytest.skip("only the stand-in is loaded in this process")
        assert runtime.version() and runtime.version().split(".")[0].isdigit()
        assert runtime.cudaGetErrorName(100) == (0, b"cudaErrorNoDevice")
        error, count = runtime.cudaGetDeviceCount()
        if error == 0 and count > 0:
            pytest.skip("a GPU is visible: tests/device/test_cuda_real.py (pytest -m cuda) exercises it")
        with pytest.raises(cuda_layer.CudaError, match=r"CUDA could not start on this machine: CUDA error cudaError\w+ \("):
            cuda_layer.Cuda(binding="libcudart")
    finally:
        del cudart_ctypes._LOADED[:]


def test_a_libcudart_newer_than_the_driver_gives_way_to_one_that_matches(tmp_path, monkeypatch):
    """A workstation with a CUDA 13 toolkit and a CUDA 12 driver: libcudart.so.13 cannot start there, the
    CUDA 12 runtime of TensorRT's wheels can. The lookup skips the one the driver is too old for."""
    monkeypatch.delenv(cudart_ctypes.ENV, raising=False)
    monkeypatch.setattr(cudart_ctypes, "_loaded_in_process", lambda: [])
    monkeypatch.setattr(cudart_ctypes, "SONAMES", ())  # only the folders below
    folder = tmp_path / "usr/local/cuda-13.0/lib"
    cudart_standin.build(folder, "libcudart.so.13", version=13000)
    wheel = tmp_path / "site" / "nvidia" / "cuda_runtime" / "lib"
    cudart_standin.build(wheel, "libcudart.so.12", version=12060)
    monkeypatch.setattr(cudart_ctypes, "FOLDERS", (str(tmp_path / "usr/local/cuda-*/lib"),))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("STANDIN_CUDART_DRIVER", "12020")  # the driver says CUDA 12.2
    del cudart_ctypes._LOADED[:]
    try:
        found = cudart_ctypes.candidates()
        assert found.index(str(folder / "libcudart.so.13")) < found.index(str(wheel / "libcudart.so.12"))
        runtime, _ = cudart_ctypes.load()
        assert runtime.path == str(wheel / "libcudart.so.12") and runtime.version() == "12.6"
        monkeypatch.setenv("STANDIN_CUDART_DRIVER", "13000")
        del cudart_ctypes._LOADED[:]
        assert cudart_ctypes.load()[0].path == str(folder / "libcudart.so.13")
        monkeypatch.setenv("STANDIN_CUDART_DRIVER", "11040")  # older than both: nothing, and why
        del cudart_ctypes._LOADED[:]
        runtime, problem = cudart_ctypes.load()
        assert runtime is None and "CUDA 12.6 needs a newer driver than this machine's (CUDA 11.4)" in problem
    finally:
        del cudart_ctypes._LOADED[:]
