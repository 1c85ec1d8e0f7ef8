"""The few CUDA calls the agent needs (device memory, copies, a stream, events), through pycuda where the
board has it (JetPack 4/5 containers and TensorRT's 8.x samples) or NVIDIA's cuda-python (TensorRT's
samples from 8.6, JetPack 6). Imported only for a TensorRT build with int8 calibration or an engine run.
"""

from typing import Any, List  # noqa: F401  (type comments: the 3.6 floor)


class CudaError(Exception):
    pass


class Cuda(object):
    def __init__(self):
        # type: () -> None
        self._keep = []  # type: List[Any]
        try:
            import pycuda.autoinit  # noqa: F401  (creates the context)
            import pycuda.driver as driver

            self.kind, self.driver = "pycuda", driver
            return
        except ImportError:
            pass
        try:
            from cuda import cudart
        except ImportError:
            raise CudaError("neither pycuda nor cuda-python is installed for this Python: pip3 install pycuda "
                            "(JetPack 4/5) or cuda-python (JetPack 6)")
        self.kind, self.cudart = "cuda-python", cudart

    def _check(self, result):
        # type: (Any) -> Any
        """cuda-python returns (error, value...): raise on an error, return the value(s)."""
        error = result[0]
        if int(error) != 0:
            raise CudaError("CUDA error {}".format(error))
        return result[1] if len(result) == 2 else result[1:]

    def alloc(self, nbytes):
        # type: (int) -> int
        if self.kind == "pycuda":
            memory = self.driver.mem_alloc(max(1, int(nbytes)))
            self._keep.append(memory)
            return int(memory)
        return int(self._check(self.cudart.cudaMalloc(max(1, int(nbytes)))))

    def free_all(self):
        # type: () -> None
        if self.kind == "pycuda":
            for memory in self._keep:
                memory.free()
        self._keep = []

    def stream(self):
        # type: () -> Any
        if self.kind == "pycuda":
            return self.driver.Stream()
        return self._check(self.cudart.cudaStreamCreate())

    def handle(self, stream):
        # type: (Any) -> int
        return int(stream.handle) if self.kind == "pycuda" else int(stream)

    def host_buffer(self, shape, dtype):
        # type: (Any, Any) -> Any
        """Page-locked host memory where pycuda can make it (async copies need it), else a numpy array."""
        import numpy as np

        if self.kind == "pycuda":
            return self.driver.pagelocked_empty(tuple(shape), dtype)
        return np.empty(tuple(shape), dtype)

    def copy_to_device(self, pointer, array, stream=None):
        # type: (int, Any, Any) -> None
        import numpy as np

        array = np.ascontiguousarray(array)
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
            self._check(self.cudart.cudaMemcpyAsync(pointer, array.ctypes.data, array.nbytes, kind, stream) + (None,))

    def copy_to_host(self, array, pointer, stream):
        # type: (Any, int, Any) -> None
        if self.kind == "pycuda":
            self.driver.memcpy_dtoh_async(array, pointer, stream)
            return
        kind = self.cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        self._check(self.cudart.cudaMemcpyAsync(array.ctypes.data, pointer, array.nbytes, kind, stream) + (None,))

    def event(self):
        # type: () -> Any
        if self.kind == "pycuda":
            return self.driver.Event()
        return self._check(self.cudart.cudaEventCreate())

    def record(self, event, stream):
        # type: (Any, Any) -> None
        if self.kind == "pycuda":
            event.record(stream)
        else:
            self._check(self.cudart.cudaEventRecord(event, stream) + (None,))

    def elapsed_ms(self, start, end):
        # type: (Any, Any) -> float
        """Milliseconds between two recorded events (waits for ``end``)."""
        if self.kind == "pycuda":
            end.synchronize()
            return float(end.time_since(start))
        self._check(self.cudart.cudaEventSynchronize(end) + (None,))
        return float(self._check(self.cudart.cudaEventElapsedTime(start, end)))

    def synchronize(self, stream):
        # type: (Any) -> None
        if self.kind == "pycuda":
            stream.synchronize()
        else:
            self._check(self.cudart.cudaStreamSynchronize(stream) + (None,))
