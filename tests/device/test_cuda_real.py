"""The agent's CUDA layer (pipeline/device/agent/cuda.py) on a real NVIDIA GPU, without TensorRT
(``pytest -m cuda``): page-locked and device allocations, copies both ways with their values, streams,
events and their timing, the context in the order the engine uses it, memory given back when a shape set
is released, teardown. Once per binding present: the CUDA runtime library through ctypes (``libcudart``, the
agent's default: found where JetPack and the CUDA toolkit put it, or pip's nvidia-cuda-runtime wheel, or
``$DEPLOY_LIBCUDART``), cuda-python through the agent's own import logic (``cuda.bindings.runtime``,
12.6+/13.x; ``cuda.cudart``, 12.x) and pycuda.

Runs with nothing installed but Python, numpy, pytest and a CUDA binding, straight from a checkout:
it imports only ``pipeline.device.agent.cuda`` (whose packages import the standard library alone).
Where there is no GPU or no binding, every test skips and says why."""

import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # straight from a checkout, however pytest was started
    sys.path.insert(0, str(ROOT))

from pipeline.device.agent import cuda as cuda_layer  # noqa: E402

pytestmark = pytest.mark.cuda

MiB = 1 << 20
ROUTES = ["libcudart", "cuda-python", "cuda-python:cuda.cudart", "pycuda"]


_FOUND = []


def _gpu():
    """(True, what) where an NVIDIA GPU is visible, else (False, why not); asked once."""
    if not _FOUND:
        _FOUND.append(_look_for_gpu())
    return _FOUND[0]


def _look_for_gpu():
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            listed = subprocess.run([smi, "-L"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, timeout=30)
            text = listed.stdout.decode(errors="replace").strip()
            if listed.returncode == 0 and "GPU" in text:
                return True, text.splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
    for node in ("/dev/nvidia0", "/dev/nvhost-ctrl-gpu"):  # desktop driver / Jetson (no nvidia-smi before JP6)
        if os.path.exists(node):
            return True, node
    return False, "no NVIDIA GPU: nvidia-smi -L lists none and neither /dev/nvidia0 nor /dev/nvhost-ctrl-gpu exists"


def _binding_device_count(binding):
    """The binding's own count (a container may see a GPU without nvidia-smi or the /dev nodes)."""
    try:
        if binding == "pycuda":
            import pycuda.driver as driver

            driver.init()
            return int(driver.Device.count())
        cudart = cuda_layer.choose(binding)[1]  # the agent's own lookup (N12: it lives in cuda_binding)
        error, count = cudart.cudaGetDeviceCount()
        return int(count) if int(error) == 0 else 0
    except Exception:
        return 0


@pytest.fixture(params=ROUTES)
def cuda(request, monkeypatch):
    """The agent's Cuda object on one route, closed afterwards; skips with the reason where it cannot run."""
    route = request.param
    binding = route.split(":")[0]
    info = cuda_layer.binding_info(binding)
    if info["binding"] is None:
        found, why = _gpu()
        pytest.skip("{}: {}{}".format(route, info["problem"], "" if found else "; " + why))
    if route == "cuda-python:cuda.cudart":
        _only_cuda_cudart(monkeypatch, info["version"])
    found, why = _gpu()
    if not found and _binding_device_count(binding) < 1:
        pytest.skip(why)
    layer = cuda_layer.Cuda(binding=binding)  # a GPU is there: CUDA failing to start is a failure, not a skip
    if binding == "cuda-python":
        expected = "cuda.cudart" if route.endswith("cuda.cudart") else None
        if expected:
            assert layer.cudart.__name__ == expected
    yield layer
    layer.close()


def _only_cuda_cudart(monkeypatch, version):
    """The agent's fallback route: cuda.bindings.runtime made unimportable, cuda.cudart left (12.x)."""
    try:
        with warnings.catch_warnings():  # 12.8+: "cuda.cudart is deprecated" (FutureWarning), expected here
            warnings.simplefilter("ignore")
            from cuda import cudart  # noqa: F401  (12.6+: a trampoline over cuda.bindings, imported while visible)
    except ImportError:
        pytest.skip("cuda-python {} has no cuda.cudart (13.x removed it): the cuda.bindings.runtime run covers "
                    "this binding".format(version))
    try:
        import cuda.bindings as bindings
    except ImportError:
        pytest.skip("cuda-python {} has no cuda.bindings (before 12.6): the plain cuda-python run already used "
                    "cuda.cudart".format(version))
    monkeypatch.delattr(bindings, "runtime", raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings.runtime", None)


# -- allocations and copies ----------------------------------------------------------------------------------

def test_page_locked_and_device_memory_carry_values_both_ways(cuda):
    with cuda.active():
        stream = cuda.stream()
        source = cuda.host_buffer((1000, 3), np.float32)
        back = cuda.host_buffer((1000, 3), np.float32)
        assert cuda.is_pinned(source) and cuda.is_pinned(back)
        assert source.shape == (1000, 3) and source.dtype == np.float32 and source.flags["C_CONTIGUOUS"]
        source[...] = np.random.RandomState(0).rand(1000, 3)
        back[...] = -1
        device = cuda.alloc(source.nbytes)
        cuda.copy_to_device(device, source, stream)  # async, page-locked
        cuda.copy_to_host(back, device, stream)
        cuda.synchronize(stream)
        np.testing.assert_array_equal(back, source)
        plain = np.arange(3000, dtype=np.float32).reshape(1000, 3)  # synchronous copies of ordinary arrays
        cuda.copy_to_device(device, plain)
        out = np.zeros_like(plain)
        cuda.copy_to_host(out, device)
        np.testing.assert_array_equal(out, plain)
        cuda.free(device)
        cuda.free_host(source)
        cuda.free_host(back)
        cuda.destroy_stream(stream)


def test_two_streams_keep_their_own_order(cuda):
    with cuda.active():
        streams = [cuda.stream(), cuda.stream()]
        assert cuda.handle(streams[0]) != cuda.handle(streams[1])
        hosts = [cuda.host_buffer((1 << 16,), np.int32) for _ in streams]
        backs = [cuda.host_buffer((1 << 16,), np.int32) for _ in streams]
        devices = [cuda.alloc(h.nbytes) for h in hosts]
        for i, (stream, host, back, device) in enumerate(zip(streams, hosts, backs, devices)):
            host[...] = np.arange(host.size, dtype=np.int32) * (i + 1)
            cuda.copy_to_device(device, host, stream)
            cuda.copy_to_host(back, device, stream)
        for i, stream in enumerate(streams):
            cuda.synchronize(stream)
            np.testing.assert_array_equal(backs[i], np.arange(backs[i].size, dtype=np.int32) * (i + 1))
        for device in devices:
            cuda.free(device)
        for array in hosts + backs:
            cuda.free_host(array)
        for stream in streams:
            cuda.destroy_stream(stream)


# -- events ----------------------------------------------------------------------------------------------------

def test_events_time_a_large_copy_plausibly(cuda):
    nbytes = 256 * MiB
    with cuda.active():
        stream = cuda.stream()
        host = cuda.host_buffer((nbytes,), np.uint8)
        host[::4096] = 7
        device = cuda.alloc(nbytes)
        start, end = cuda.event(), cuda.event()
        cuda.copy_to_device(device, host, stream)  # warm the path once
        cuda.synchronize(stream)
        began = time.perf_counter()
        cuda.record(start, stream)
        cuda.copy_to_device(device, host, stream)
        cuda.record(end, stream)
        ms = cuda.elapsed_ms(start, end)
        wall_ms = (time.perf_counter() - began) * 1000.0
        gb_per_s = nbytes / 1e9 / (ms / 1000.0)
        assert ms > 0
        assert ms <= wall_ms * 1.05 + 1.0, (ms, wall_ms)  # events cannot see more time than the host waited
        assert 0.5 <= gb_per_s <= 3000, "a 256 MiB page-locked copy at {:.1f} GB/s ({:.3f} ms)".format(gb_per_s, ms)
        empty = (cuda.event(), cuda.event())
        cuda.record(empty[0], stream)
        cuda.record(empty[1], stream)
        assert 0 <= cuda.elapsed_ms(*empty) < ms
        for event in (start, end) + empty:
            cuda.destroy_event(event)
        cuda.free(device)
        cuda.free_host(host)
        cuda.destroy_stream(stream)


# -- the context, in the engine's order --------------------------------------------------------------------

def _driver_api():
    """cuda-python's driver API module, where installed (to ask which context is current and which is primary)."""
    try:
        from cuda.bindings import driver
        return driver
    except ImportError:
        pass
    try:
        from cuda import cuda as driver  # 12.x before cuda.bindings
        return driver
    except ImportError:
        return None


def _primary_handle(device):
    """The device's primary context as an int, or None where cuda-python's driver API is not installed."""
    driver = _driver_api()
    if driver is None:
        return None
    error, handle = driver.cuDeviceGet(device)
    if int(error):
        return None
    error, context = driver.cuDevicePrimaryCtxRetain(handle)
    driver.cuDevicePrimaryCtxRelease(handle)
    return int(context) if not int(error) else None


def _current(cuda):
    """The context current on this thread as an int (0: none), or None where the binding cannot say."""
    if cuda.kind == "pycuda":
        current = cuda.driver.Context.get_current()
        return int(current.handle) if current is not None else 0
    driver = _driver_api()
    if driver is None:
        return None
    error, context = driver.cuCtxGetCurrent()
    return None if int(error) else int(context)


def test_the_context_is_the_primary_one_made_first_and_pushed_around_calls(cuda):
    """The engine's order: the context first (Cuda()), then, inside active(), allocations, a stream and
    events; nested active() costs nothing; afterwards the thread's context is what it was."""
    before = _current(cuda)
    with cuda.active():
        inside = _current(cuda)
        if cuda.kind == "pycuda":
            assert inside == int(cuda.context.handle) != 0
        primary = _primary_handle(cuda.device)
        if inside is not None and primary is not None:
            assert inside == primary, "the agent's context is not the device's primary context"
        with cuda.active():  # nested: no second push
            pointer = cuda.alloc(MiB)
            stream = cuda.stream()
            event = cuda.event()
            cuda.record(event, stream)
            cuda.synchronize(stream)
            assert _current(cuda) == inside
        assert _current(cuda) == inside
        cuda.free(pointer)
        cuda.destroy_event(event)
        cuda.destroy_stream(stream)
    assert _current(cuda) == before


def test_a_second_layer_on_the_same_process_shares_the_context(cuda):
    """Like the int8 calibrator and the engine: another Cuda object (or the process's shared one) uses the
    same primary context, so memory from one is usable by the other."""
    other = cuda_layer.Cuda(binding=cuda.kind)
    try:
        with cuda.active():
            pointer = cuda.alloc(4096)
            values = np.arange(1024, dtype=np.float32)
            cuda.copy_to_device(pointer, values)
        with other.active():
            out = np.zeros_like(values)
            other.copy_to_host(out, pointer)
        np.testing.assert_array_equal(out, values)
        cuda.free(pointer)
    finally:
        other.close()


# -- release on shape change, teardown -------------------------------------------------------------------------

def _settled_free(cuda):
    with cuda.active():
        return cuda.mem_info()[0]


def test_memory_of_a_released_shape_set_goes_back_to_the_device(cuda):
    """The engine's pattern on a shape change: free the old set (device + page-locked), allocate the next.
    cudaMemGetInfo / cuMemGetInfo must show the memory back, not merely unreferenced."""
    start = _settled_free(cuda)
    tolerance = 64 * MiB
    sizes = [64 * MiB, 512 * MiB] * 5  # batch 1 / batch 8, alternating, as the consistency check does
    with cuda.active():
        held = None
        for size in sizes:
            if held is not None:
                cuda.free(held[0])
                cuda.free_host(held[1])
            held = (cuda.alloc(size), cuda.host_buffer((4 * MiB,), np.uint8))
            used = start - cuda.mem_info()[0]
            assert used >= size - tolerance, "{} MiB allocated but only {} MiB taken".format(size // MiB, used // MiB)
            assert used <= size + tolerance + 8 * MiB, "{} MiB in use while one {} MiB set is held".format(
                used // MiB, size // MiB)
        cuda.free(held[0])
        cuda.free_host(held[1])
    assert abs(_settled_free(cuda) - start) <= tolerance


def test_close_frees_what_is_left_and_twice_is_fine(cuda):
    layer = cuda_layer.Cuda(binding=cuda.kind)
    start = _settled_free(cuda)
    with layer.active():
        layer.alloc(256 * MiB)
        layer.host_buffer((MiB,), np.float32)
    assert start - _settled_free(cuda) >= 200 * MiB
    layer.close()
    layer.close()
    assert abs(_settled_free(cuda) - start) <= 64 * MiB
    with pytest.raises(cuda_layer.CudaError, match="closed"):
        layer.alloc(16)


def test_shared_is_one_object_until_closed(cuda):
    first = cuda_layer.shared()
    try:
        assert cuda_layer.shared() is first
    finally:
        first.close()
    second = cuda_layer.shared()
    assert second is not first
    second.close()
