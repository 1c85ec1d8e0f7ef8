"""A serialized TensorRT engine run by the agent: the backend shape of ``runners`` (inputs, outputs,
infer, time), with every call split by CUDA events into host-to-device copy, compute and device-to-host
copy on one stream. Named tensors (set_input_shape, set_tensor_address, execute_async_v3) from TensorRT
8.5; the binding API (set_binding_shape, execute_async_v2) below (trt_api.md).
"""

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple  # noqa: F401  (type comments: the 3.6 floor)

from .trt_engine import EngineError, checked_version, dims, make_logger

if TYPE_CHECKING:
    import tensorrt as trt  # noqa: F401


class Engine(object):
    def __init__(self, path, dla_core=None):
        # type: (str, Optional[int]) -> None
        import numpy as np
        import tensorrt as trt

        from .cuda import Cuda, CudaError

        v = checked_version()
        self.lines = []  # type: List[str]
        self.runtime = trt.Runtime(make_logger(self.lines))
        if dla_core is not None:
            self.runtime.DLA_core = int(dla_core)
        with open(path, "rb") as f:
            engine = self.runtime.deserialize_cuda_engine(f.read())
        if engine is None:
            errors = [line[4:] for line in self.lines if line.startswith("[E]")]
            raise EngineError("TensorRT {} cannot load {} (an engine only loads on the TensorRT version and GPU it was "
                              "built on; rebuild it: deploy run --force engine): {}".format(
                                  trt.__version__, path, errors[-1] if errors else "no message"))
        self.engine = engine  # type: trt.ICudaEngine
        self.context = engine.create_execution_context()
        # UFF engines have an implicit batch (TensorRT <= 8.x): bindings without the batch dim, execute_async
        self.implicit = bool(getattr(engine, "has_implicit_batch_dimension", False))
        self.named = v >= (8, 5) and not self.implicit
        try:
            self.cuda = Cuda()
        except CudaError as e:
            raise EngineError(str(e))
        self.stream = self.cuda.stream()
        self.inputs, self.outputs = [], []  # type: Tuple[List[Tuple[str, Any, str]], List[Tuple[str, Any, str]]]
        self.index = {}  # type: Dict[str, int]
        for i, name, is_input, shape, dtype in self._tensors():
            shape = [-1] + list(shape) if self.implicit else list(shape)
            entry = (name, [d if d >= 0 else None for d in shape], np.dtype(trt.nptype(dtype)).name)
            (self.inputs if is_input else self.outputs).append(entry)
            self.index[name] = i
        self.label = {"runtime": "tensorrt", "version": trt.__version__, "cuda": self.cuda.kind,
                      "dla_core": dla_core}
        self._buffers = {}  # type: Dict[Any, Any]
        self._batch = 1

    def _tensors(self):
        # type: () -> List[Tuple[int, str, bool, Any, Any]]
        import tensorrt as trt

        engine = self.engine
        found = []  # type: List[Tuple[int, str, bool, Any, Any]]
        if self.named:
            for i in range(engine.num_io_tensors):
                name = engine.get_tensor_name(i)
                found.append((i, name, engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT,
                              dims(engine.get_tensor_shape(name)), engine.get_tensor_dtype(name)))
        else:  # the binding API: TensorRT < 8.5 (deprecated in 8.5, removed in 10.0)
            for i in range(getattr(engine, "num_bindings")):
                found.append((i, getattr(engine, "get_binding_name")(i), getattr(engine, "binding_is_input")(i),
                              tuple(getattr(engine, "get_binding_shape")(i)), getattr(engine, "get_binding_dtype")(i)))
        return found

    def _prepare(self, feed):
        # type: (Dict[str, Any]) -> Tuple[List[Tuple[int, Any]], List[Tuple[str, Any, int]], List[int]]
        """Input shapes set for this feed; device buffers and host outputs (reused while shapes stay)."""
        import numpy as np

        key = tuple((name, tuple(np.shape(feed[name]))) for name, _, _ in self.inputs)
        if key in self._buffers:
            return self._buffers[key]
        context = self.context
        batch = int(key[0][1][0]) if key and key[0][1] else 1
        for name, shape in key:
            if self.implicit:
                if batch > getattr(self.engine, "max_batch_size"):  # implicit batch: TensorRT <= 8.x
                    raise EngineError("batch {} is above the engine's max batch size {}; rebuild with a larger "
                                      "stages.engine.max_batch_size".format(batch, getattr(self.engine, "max_batch_size")))
                continue
            ok = context.set_input_shape(name, shape) if self.named else \
                getattr(context, "set_binding_shape")(self.index[name], shape)  # TensorRT < 8.5
            if ok is False:
                raise EngineError("input {} of shape {} is outside the engine's optimisation profile; rebuild with a "
                                  "larger stages.engine.max_batch_size".format(name, list(shape)))
        pointers = [0] * (len(self.inputs) + len(self.outputs))
        ins = []
        for name, _, dtype in self.inputs:
            size = int(np.prod(dict(key)[name])) * np.dtype(dtype).itemsize
            ptr = self.cuda.alloc(size)
            pointers[self.index[name]] = ptr
            ins.append((self.index[name], ptr))
        outs = []
        for name, declared, dtype in self.outputs:
            if self.implicit:
                shape = (batch,) + tuple(declared[1:])
            else:
                shape = tuple(dims(context.get_tensor_shape(name))) if self.named else \
                    tuple(getattr(context, "get_binding_shape")(self.index[name]))  # TensorRT < 8.5
            host = self.cuda.host_buffer(shape, dtype)
            ptr = self.cuda.alloc(host.nbytes)
            pointers[self.index[name]] = ptr
            outs.append((name, host, ptr))
        if self.named:
            for name, _, _ in self.inputs + self.outputs:
                context.set_tensor_address(name, pointers[self.index[name]])
        self._buffers = {key: (ins, outs, pointers)}  # one shape set at a time: device memory is scarce on a Jetson
        self._batch = batch
        return self._buffers[key]

    def _execute(self, pointers):
        # type: (List[int]) -> None
        handle = self.cuda.handle(self.stream)
        if self.implicit:  # execute_async(batch_size, ...): implicit batch, TensorRT <= 8.x
            ok = getattr(self.context, "execute_async")(self._batch, pointers, handle)
        elif self.named:
            ok = self.context.execute_async_v3(handle)
        else:
            ok = getattr(self.context, "execute_async_v2")(pointers, handle)  # TensorRT < 8.5
        if not ok:
            raise EngineError("TensorRT failed to execute the engine: {}".format(
                ([line[4:] for line in self.lines if line.startswith("[E]")] or ["no message"])[-1]))

    def _feed_order(self, feed, ins):
        # type: (Dict[str, Any], List[Tuple[int, Any]]) -> List[Tuple[int, Any]]
        names = {self.index[name]: name for name, _, _ in self.inputs}
        return [(ptr, feed[names[i]]) for i, ptr in ins]

    def infer(self, feed):
        # type: (Dict[str, Any]) -> Dict[str, Any]
        ins, outs, pointers = self._prepare(feed)
        for ptr, array in self._feed_order(feed, ins):
            self.cuda.copy_to_device(ptr, array, self.stream)
        self._execute(pointers)
        for _, host, ptr in outs:
            self.cuda.copy_to_host(host, ptr, self.stream)
        self.cuda.synchronize(self.stream)
        return {name: host.copy() for name, host, _ in outs}

    def time(self, feed, warmup, iterations, duration_s=None):
        # type: (Dict[str, Any], int, int, Optional[float]) -> List[Dict[str, float]]
        """Per call: h2d_ms, compute_ms, d2h_ms (CUDA events between the phases) and total_ms."""
        import time as clock

        ins, outs, pointers = self._prepare(feed)
        copies = self._feed_order(feed, ins)
        cuda, stream = self.cuda, self.stream
        events = [cuda.event() for _ in range(4)]
        for _ in range(warmup):
            self.infer(feed)
        calls = []
        started = clock.perf_counter()
        while True:
            cuda.record(events[0], stream)
            for ptr, array in copies:
                cuda.copy_to_device(ptr, array, stream)
            cuda.record(events[1], stream)
            self._execute(pointers)
            cuda.record(events[2], stream)
            for _, host, ptr in outs:
                cuda.copy_to_host(host, ptr, stream)
            cuda.record(events[3], stream)
            h2d, compute, d2h = (cuda.elapsed_ms(events[i], events[i + 1]) for i in range(3))
            calls.append({"h2d_ms": h2d, "compute_ms": compute, "d2h_ms": d2h, "total_ms": h2d + compute + d2h})
            if duration_s is None:
                if len(calls) >= iterations:
                    break
            elif clock.perf_counter() - started >= duration_s:
                break
        return calls
