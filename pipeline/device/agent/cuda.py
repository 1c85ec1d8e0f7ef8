"""The few CUDA calls the agent needs (device and page-locked memory, copies, a stream, events), through
the CUDA runtime library JetPack ships (``libcudart`` via ctypes, ``cudart_ctypes``: the default, nothing to
install), or the optional pycuda (JetPack 4/5 containers and TensorRT's 8.x samples) or NVIDIA's cuda-python
(TensorRT's samples from 8.6): 12.x as ``cuda.cudart``, 13.x as ``cuda.bindings.runtime``. libcudart and
cuda-python share one code path (the ctypes binding has cuda-python's call shapes).
Imported only for a TensorRT build with int8 calibration or an engine run.

One CUDA context per process, the device's *primary* context -- the one TensorRT (the CUDA runtime API)
uses -- made before any TensorRT object: ``shared()``. libcudart and cuda-python: ``cudaSetDevice`` +
``cudaFree(0)``, the runtime API's own primary context. pycuda: ``pycuda.autoprimaryctx`` (pycuda >=
2021.1) or ``Device(0).retain_primary_context()`` + push on older pycuda; never ``pycuda.autoinit``,
whose context is a second, private one (TensorRT's engine then fails with "invalid resource handle").
``with cuda.active():`` makes the context current around a sequence of calls (every method also does
it for itself); the runtime API (libcudart, cuda-python) binds the primary context on its own.

``binding_info()`` (``cuda_binding``) says which binding would be used, its version and what is wrong,
without starting CUDA (the probe calls it).
"""

import ctypes
import threading
from typing import Any, Dict, List, Optional, Tuple  # noqa: F401  (type comments: the 3.6 floor)

from .cuda_binding import FIX_CUDA_PYTHON, CudaError, binding_info, choose  # noqa: F401  (CudaError, binding_info: this module's API too)

_NOT_STARTED = ("CUDA could not start on this machine: {}; is the user in the video group (sudo usermod -aG video "
                "$USER, then log in again)? does nvidia-smi/tegrastats see a GPU?")


class Cuda(object):
    """The CUDA calls, on the device's primary context. ``binding``: "libcudart", "pycuda" or "cuda-python"
    to force one (the real-GPU tests run each); None picks libcudart first, then pycuda, then cuda-python."""

    def __init__(self, binding=None, device=0):
        # type: (Optional[str], int) -> None
        kind, module, version, problem = choose(binding)
        if kind is None:
            raise CudaError(problem or "no CUDA binding")
        self.kind = kind  # type: str
        self.version = version
        self.device = int(device)
        self.closed = False
        self._local = threading.local()
        self._device_memory = {}  # type: Dict[int, Any]  # pointer -> pycuda DeviceAllocation / nbytes
        self._pinned = {}  # type: Dict[int, Any]  # id(array) -> (array, pycuda HostAllocation | pointer)
        self._pushed = False  # this object pushed the primary context once (pycuda without autoprimaryctx)
        self.context = None  # type: Any
        if kind == "pycuda":
            self.driver = module
            self._start_pycuda()
        else:
            self.cudart = module
            self._start_cudart()

    # -- start ---------------------------------------------------------------------------------------------

    def _start_pycuda(self):
        # type: () -> None
        try:
            try:
                import pycuda.autoprimaryctx as auto  # pycuda >= 2021.1: retains the primary context, pushes it
                self.context = auto.context
                return
            except ImportError as e:  # pycuda < 2021.1: the same by hand
                if getattr(e, "name", None) != "pycuda.autoprimaryctx":
                    raise
            driver = self.driver
            driver.init()
            device = driver.Device(self.device)
            if not hasattr(device, "retain_primary_context"):
                raise CudaError("pycuda {} cannot use the device's primary context (Device.retain_primary_context "
                                "came in pycuda 2020.1, pycuda.autoprimaryctx in 2021.1): pip3 install "
                                "'pycuda>=2021.1'".format(self.version or "(version unknown)"))
            self.context = device.retain_primary_context()
            self.context.push()
            self._pushed = True
        except CudaError:
            raise
        except Exception as e:  # pycuda._driver.Error from cuInit, RuntimeError from make_default_context, ...
            raise CudaError(_NOT_STARTED.format("{}: {}".format(type(e).__name__, " ".join(str(e).split()))))

    def _start_cudart(self):
        # type: () -> None
        try:
            self._check(self.cudart.cudaSetDevice(self.device) + (None,))
            self._check(self.cudart.cudaFree(0) + (None,))  # binds the primary context now, before TensorRT
        except CudaError as e:
            hint = ""
            if self.kind == "cuda-python" and self.version and self.version.split(".")[0].isdigit() and \
                    int(self.version.split(".")[0]) >= 13:
                hint = " (cuda-python {} is built for CUDA 13; on JetPack 6 / CUDA 12: {})".format(
                    self.version, FIX_CUDA_PYTHON)
            elif self.kind == "libcudart" and "InsufficientDriver" in str(e):
                hint = " (no NVIDIA driver, or one older than this CUDA runtime {}: {})".format(
                    self.version, getattr(self.cudart, "path", "libcudart"))
            raise CudaError(_NOT_STARTED.format(str(e)) + hint)
        except Exception as e:
            raise CudaError(_NOT_STARTED.format("{}: {}".format(type(e).__name__, e)))

    # -- the context ---------------------------------------------------------------------------------------

    def active(self):
        # type: () -> Any
        """``with cuda.active():`` the primary context is current on this thread (pushed at the outermost
        level, popped when it ends; nested uses cost nothing)."""
        return _Active(self)

    def _enter(self):
        # type: () -> None
        if self.closed:
            raise CudaError("the CUDA layer was closed")
        depth = getattr(self._local, "depth", 0)
        if depth == 0 and self.kind == "pycuda":
            self.context.push()
        self._local.depth = depth + 1

    def _exit(self):
        # type: () -> None
        depth = getattr(self._local, "depth", 0) - 1
        self._local.depth = max(0, depth)
        if depth == 0 and self.kind == "pycuda":
            self.driver.Context.pop()

    def _check(self, result):
        # type: (Any) -> Any
        """cuda-python returns (error, value...): raise on an error, return the value(s)."""
        error = result[0]
        if int(error) != 0:
            name = getattr(error, "name", None)
            if not name and hasattr(self.cudart, "cudaGetErrorName"):  # libcudart: a bare int
                try:
                    named = self.cudart.cudaGetErrorName(error)[1]
                    name = named.decode() if isinstance(named, bytes) else str(named)
                except Exception:
                    pass
            name = name or str(int(error))
            try:
                described = self.cudart.cudaGetErrorString(error)
                text = described[1] if isinstance(described, tuple) else described
                text = text.decode() if isinstance(text, bytes) else str(text)
                name = "{} ({})".format(name, text)
            except Exception:
                pass
            raise CudaError("CUDA error {}".format(name))
        return result[1] if len(result) == 2 else result[1:]

    # -- memory --------------------------------------------------------------------------------------------

    def alloc(self, nbytes):
        # type: (int) -> int
        with self.active():
            if self.kind == "pycuda":
                memory = self.driver.mem_alloc(max(1, int(nbytes)))
                pointer = int(memory)
                self._device_memory[pointer] = memory
                return pointer
            pointer = int(self._check(self.cudart.cudaMalloc(max(1, int(nbytes)))))
            self._device_memory[pointer] = int(nbytes)
            return pointer

    def free(self, pointer):
        # type: (int) -> None
        """Device memory back to CUDA now (DeviceAllocation.free / cudaFree), not when Python collects it."""
        memory = self._device_memory.pop(int(pointer), None)
        if memory is None:
            return
        with self.active():
            if self.kind == "pycuda":
                memory.free()
            else:
                self._check(self.cudart.cudaFree(int(pointer)) + (None,))

    def host_buffer(self, shape, dtype):
        # type: (Any, Any) -> Any
        """A page-locked numpy array (pagelocked_empty / cudaMallocHost): async copies need it, and pageable
        memory takes a slower, synchronising copy path."""
        import numpy as np

        shape = tuple(int(d) for d in shape)
        dtype = np.dtype(dtype)
        with self.active():
            if self.kind == "pycuda":
                array = self.driver.pagelocked_empty(shape, dtype)
                self._pinned[id(array)] = (array, getattr(array, "base", None))
                return array
            count = int(np.prod(shape)) if shape else 1
            nbytes = max(1, count * dtype.itemsize)
            pointer = int(self._check(self.cudart.cudaMallocHost(nbytes)))
            raw = (ctypes.c_byte * nbytes).from_address(pointer)
            array = np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)
            self._pinned[id(array)] = (array, pointer)
            return array

    def is_pinned(self, array):
        # type: (Any) -> bool
        return id(array) in self._pinned

    def free_host(self, array):
        # type: (Any) -> None
        """Page-locked memory back now (HostAllocation.free / cudaFreeHost); the array must not be used again."""
        entry = self._pinned.pop(id(array), None)
        if entry is None:
            return
        _, handle = entry
        with self.active():
            if self.kind == "pycuda":
                if handle is not None and hasattr(handle, "free"):
                    handle.free()
            else:
                self._check(self.cudart.cudaFreeHost(handle) + (None,))

    def free_all(self):
        # type: () -> None
        for pointer in list(self._device_memory):
            self.free(pointer)
        for array, _ in list(self._pinned.values()):
            self.free_host(array)

    def mem_info(self):
        # type: () -> Tuple[int, int]
        """(free, total) bytes of device memory (cuMemGetInfo / cudaMemGetInfo)."""
        with self.active():
            if self.kind == "pycuda":
                free, total = self.driver.mem_get_info()
            else:
                free, total = self._check(self.cudart.cudaMemGetInfo())
        return int(free), int(total)

    # -- copies, streams, events ---------------------------------------------------------------------------

    def stream(self):
        # type: () -> Any
        with self.active():
            if self.kind == "pycuda":
                return self.driver.Stream()
            return self._check(self.cudart.cudaStreamCreate())

    def destroy_stream(self, stream):
        # type: (Any) -> None
        if stream is None or self.kind == "pycuda":  # pycuda: freed with the object (inside active())
            return
        with self.active():
            self._check(self.cudart.cudaStreamDestroy(stream) + (None,))

    def handle(self, stream):
        # type: (Any) -> int
        return int(stream.handle) if self.kind == "pycuda" else int(stream)

    def copy_to_device(self, pointer, array, stream=None):
        # type: (int, Any, Any) -> None
        import numpy as np

        array = np.ascontiguousarray(array)
        with self.active():
            if self.kind == "pycuda":
                if stream is None:
                    self.driver.memcpy_htod(pointer, array)
                else:
                    self.driver.memcpy_htod_async(pointer, array, stream)
                return
            kind = self.cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
            if stream is None:
                self._check(self.cudart.cudaMemcpy(pointer, array.ctypes.data, array.nbytes, kind) + (None,))
            else:
                self._check(self.cudart.cudaMemcpyAsync(pointer, array.ctypes.data, array.nbytes, kind, stream) +
                            (None,))

    def copy_to_host(self, array, pointer, stream=None):
        # type: (Any, int, Any) -> None
        with self.active():
            if self.kind == "pycuda":
                if stream is None:
                    self.driver.memcpy_dtoh(array, pointer)
                else:
                    self.driver.memcpy_dtoh_async(array, pointer, stream)
                return
            kind = self.cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
            if stream is None:
                self._check(self.cudart.cudaMemcpy(array.ctypes.data, pointer, array.nbytes, kind) + (None,))
            else:
                self._check(self.cudart.cudaMemcpyAsync(array.ctypes.data, pointer, array.nbytes, kind, stream) +
                            (None,))

    def event(self):
        # type: () -> Any
        with self.active():
            if self.kind == "pycuda":
                return self.driver.Event()
            return self._check(self.cudart.cudaEventCreate())

    def destroy_event(self, event):
        # type: (Any) -> None
        if event is None or self.kind == "pycuda":
            return
        with self.active():
            self._check(self.cudart.cudaEventDestroy(event) + (None,))

    def record(self, event, stream):
        # type: (Any, Any) -> None
        with self.active():
            if self.kind == "pycuda":
                event.record(stream)
            else:
                self._check(self.cudart.cudaEventRecord(event, stream) + (None,))

    def elapsed_ms(self, start, end):
        # type: (Any, Any) -> float
        """Milliseconds between two recorded events (waits for ``end``)."""
        with self.active():
            if self.kind == "pycuda":
                end.synchronize()
                return float(end.time_since(start))
            self._check(self.cudart.cudaEventSynchronize(end) + (None,))
            return float(self._check(self.cudart.cudaEventElapsedTime(start, end)))

    def synchronize(self, stream):
        # type: (Any) -> None
        with self.active():
            if self.kind == "pycuda":
                stream.synchronize()
            else:
                self._check(self.cudart.cudaStreamSynchronize(stream) + (None,))

    # -- teardown ------------------------------------------------------------------------------------------

    def close(self):
        # type: () -> None
        """Free what is still allocated, then let go of the context (idempotent). The primary context itself
        stays with the CUDA runtime (TensorRT holds it too); nothing is destroyed under TensorRT's feet."""
        if self.closed:
            return
        try:
            self.free_all()
        finally:
            self.closed = True
            if self.kind == "pycuda" and self._pushed:
                self._pushed = False
                try:  # while it is current: pycuda's detach then releases it without pushing it again
                    self.context.detach()  # cuDevicePrimaryCtxRelease: the retain of _start_pycuda
                except Exception:
                    pass
                try:
                    self.driver.Context.pop()  # the push of _start_pycuda
                except Exception:
                    pass
            self.context = None
            global _SHARED
            with _LOCK:
                if _SHARED is self:
                    _SHARED = None


class _Active(object):
    def __init__(self, cuda):
        # type: (Cuda) -> None
        self.cuda = cuda

    def __enter__(self):
        # type: () -> Cuda
        self.cuda._enter()
        return self.cuda

    def __exit__(self, *exc):
        # type: (*Any) -> None
        self.cuda._exit()


_SHARED = None  # type: Optional[Cuda]
_LOCK = threading.Lock()


def shared():
    # type: () -> Cuda
    """The process's one Cuda object (made on first use: call it before creating any TensorRT object).
    trt_runtime.Engine and trt_engine's int8 calibrator both use it."""
    global _SHARED
    with _LOCK:
        if _SHARED is None or _SHARED.closed:
            _SHARED = Cuda()
        return _SHARED
