"""A serialized TensorRT engine run by the agent: the backend shape of ``runners`` (inputs, outputs,
infer, time, loop, close). Named tensors (set_input_shape, set_tensor_address, execute_async_v3) from
TensorRT 8.5; the binding API (set_binding_shape, execute_async_v2) below (trt_api.md).

CUDA first: the process's primary context (``cuda.shared()``) exists before the Runtime is made, and is
current (``with cuda.active():``) around every sequence of TensorRT and CUDA calls. Host buffers are
page-locked both ways; the buffers of one input-shape set at a time are kept, the previous set's device
and page-locked memory freed when the shape changes. ``close()`` frees them and drops the execution
context, engine and runtime, in that order, while the context is still current.
"""

import atexit
import time as clock
import weakref
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple  # noqa: F401  (type comments: the 3.6 floor)

from .trt_engine import EngineError, checked_version, dims, make_logger

if TYPE_CHECKING:
    import tensorrt as trt  # noqa: F401

_OPEN = weakref.WeakSet()  # type: Any  # engines not closed yet: closed at exit, before any CUDA teardown
_HOOKED = []  # type: List[bool]


def _close_open_engines():
    # type: () -> None
    for engine in list(_OPEN):
        try:
            engine.close()
        except Exception:
            pass


class Engine(object):
    def __init__(self, path, dla_core=None):
        # type: (str, Optional[int]) -> None
        import numpy as np
        import tensorrt as trt

        from .cuda import CudaError, shared

        v = checked_version()
        try:
            self.cuda = shared()  # the primary context, before the first TensorRT object (D1)
        except CudaError as e:
            raise EngineError(str(e))
        if not _HOOKED:  # registered after the CUDA layer started: runs before any of its exit hooks
            atexit.register(_close_open_engines)
            _HOOKED.append(True)
        self.closed = False
        self.lines = []  # type: List[str]
        self._set = None  # type: Optional[Dict[str, Any]]
        self._batch = 1
        with self.cuda.active():
            self.runtime = trt.Runtime(make_logger(self.lines))
            if dla_core is not None:
                self.runtime.DLA_core = int(dla_core)
            with open(path, "rb") as f:
                engine = self.runtime.deserialize_cuda_engine(f.read())
            if engine is None:
                del self.runtime
                self.closed = True
                errors = [line[4:] for line in self.lines if line.startswith("[E]")]
                raise EngineError("TensorRT {} cannot load {} (an engine only loads on the TensorRT version and GPU it "
                                  "was built on; rebuild it: deploy run --force engine): {}".format(
                                      trt.__version__, path, errors[-1] if errors else "no message"))
            self.engine = engine  # type: trt.ICudaEngine
            self.context = engine.create_execution_context()
            if self.context is None:  # TensorRT returns None when it cannot allocate the activations
                del engine, self.engine, self.context, self.runtime
                self.closed = True
                raise EngineError("TensorRT could not create an execution context for {} (out of device memory?): "
                                  "{}".format(path, ([line[4:] for line in self.lines if line.startswith("[E]")] or
                                                     ["no message"])[-1]))
            self.stream = self.cuda.stream()
        _OPEN.add(self)
        # UFF engines have an implicit batch (TensorRT <= 8.x): bindings without the batch dim, execute_async
        self.implicit = bool(getattr(engine, "has_implicit_batch_dimension", False))
        self.named = v >= (8, 5) and not self.implicit
        self.inputs, self.outputs = [], []  # type: Tuple[List[Tuple[str, Any, str]], List[Tuple[str, Any, str]]]
        self.index = {}  # type: Dict[str, int]
        for i, name, is_input, shape, dtype in self._tensors():
            shape = [-1] + list(shape) if self.implicit else list(shape)
            entry = (name, [d if d >= 0 else None for d in shape], np.dtype(trt.nptype(dtype)).name)
            (self.inputs if is_input else self.outputs).append(entry)
            self.index[name] = i
        self.label = {"runtime": "tensorrt", "version": trt.__version__, "cuda": self.cuda.kind,
                      "dla_core": dla_core}

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

    def _open(self):
        # type: () -> None
        if self.closed:
            raise EngineError("the engine was closed")

    def _prepare(self, feed):
        # type: (Dict[str, Any]) -> Dict[str, Any]
        """Input shapes set for this feed; device buffers and page-locked host buffers for every input and
        output, kept while the shapes stay. A new shape set frees the previous one's memory first (D9)."""
        import numpy as np

        self._open()
        key = tuple((name, tuple(np.shape(feed[name]))) for name, _, _ in self.inputs)
        if self._set is not None and self._set["key"] == key:
            return self._set
        cuda = self.cuda
        with cuda.active():
            self._release_set()  # one shape set at a time: device memory is scarce on a Jetson
            context = self.context
            batch = int(key[0][1][0]) if key and key[0][1] else 1
            for name, shape in key:
                if self.implicit:
                    if batch > getattr(self.engine, "max_batch_size"):  # implicit batch: TensorRT <= 8.x
                        raise EngineError("batch {} is above the engine's max batch size {}; rebuild with a larger "
                                          "stages.engine.max_batch_size".format(batch,
                                                                                getattr(self.engine, "max_batch_size")))
                    continue
                ok = context.set_input_shape(name, shape) if self.named else \
                    getattr(context, "set_binding_shape")(self.index[name], shape)  # TensorRT < 8.5
                if ok is False:
                    raise EngineError("input {} of shape {} is outside the engine's optimisation profile; rebuild "
                                      "with a larger stages.engine.max_batch_size".format(name, list(shape)))
            made = {"key": key, "ins": [], "outs": [], "pointers": [0] * (len(self.inputs) + len(self.outputs)),
                    "batch": batch}  # type: Dict[str, Any]
            self._set = made  # filled as it is allocated: a failure half-way frees what was made
            try:
                for name, _, dtype in self.inputs:
                    host = cuda.host_buffer(dict(key)[name], dtype)
                    made["ins"].append((name, host, 0))
                    ptr = cuda.alloc(host.nbytes)
                    made["ins"][-1] = (name, host, ptr)
                    made["pointers"][self.index[name]] = ptr
                for name, declared, dtype in self.outputs:
                    if self.implicit:
                        shape = (batch,) + tuple(declared[1:])
                    else:
                        shape = tuple(dims(context.get_tensor_shape(name))) if self.named else \
                            tuple(getattr(context, "get_binding_shape")(self.index[name]))  # TensorRT < 8.5
                    host = cuda.host_buffer(shape, dtype)
                    made["outs"].append((name, host, 0))
                    ptr = cuda.alloc(host.nbytes)
                    made["outs"][-1] = (name, host, ptr)
                    made["pointers"][self.index[name]] = ptr
                if self.named:
                    for name, _, _ in self.inputs + self.outputs:
                        context.set_tensor_address(name, made["pointers"][self.index[name]])
            except BaseException:
                self._release_set()
                raise
        self._batch = batch
        return made

    def _release_set(self):
        # type: () -> None
        """The current shape set's device and page-locked memory back to CUDA (after pending work)."""
        made, self._set = self._set, None
        if made is None:
            return
        cuda = self.cuda
        with cuda.active():
            cuda.synchronize(self.stream)
            for _, host, ptr in made["ins"] + made["outs"]:
                if ptr:
                    cuda.free(ptr)
                cuda.free_host(host)

    def _load(self, feed, made):
        # type: (Dict[str, Any], Dict[str, Any]) -> None
        """The feed copied into the page-locked input buffers (converted to the engine's dtypes)."""
        for name, host, _ in made["ins"]:
            host[...] = feed[name]

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

    def _run(self, made, events=None):
        # type: (Dict[str, Any], Optional[List[Any]]) -> None
        """One inference queued on the stream: H2D from the pinned inputs, execute, D2H to the pinned outputs
        (``events``: four recorded between the phases). No synchronisation."""
        cuda, stream = self.cuda, self.stream
        if events:
            cuda.record(events[0], stream)
        for _, host, ptr in made["ins"]:
            cuda.copy_to_device(ptr, host, stream)
        if events:
            cuda.record(events[1], stream)
        self._execute(made["pointers"])
        if events:
            cuda.record(events[2], stream)
        for _, host, ptr in made["outs"]:
            cuda.copy_to_host(host, ptr, stream)
        if events:
            cuda.record(events[3], stream)

    def infer(self, feed):
        # type: (Dict[str, Any]) -> Dict[str, Any]
        made = self._prepare(feed)
        with self.cuda.active():
            self._load(feed, made)
            self._run(made)
            self.cuda.synchronize(self.stream)
            return {name: host.copy() for name, host, _ in made["outs"]}

    def time(self, feed, warmup, iterations, duration_s=None):
        # type: (Dict[str, Any], int, int, Optional[float]) -> List[Dict[str, float]]
        """Per call: total_ms = the host's wall time per call (copies, execute, sync: the four event records,
        H2D, execute, D2H and the stream sync, Python included); h2d_ms, compute_ms, d2h_ms from CUDA events
        between the phases (the GPU's split; compute_ms is trtexec's "GPU Compute Time", and their sum is
        what trtexec calls "Latency": an event sum, not a wall time)."""
        made = self._prepare(feed)
        cuda, stream = self.cuda, self.stream
        calls = []  # type: List[Dict[str, float]]
        with cuda.active():
            self._load(feed, made)  # once: every call copies the same pinned buffers
            events = [cuda.event() for _ in range(4)]
            try:
                for _ in range(warmup):
                    self._run(made)
                    cuda.synchronize(stream)
                started = clock.perf_counter()
                while True:
                    t0 = clock.perf_counter()
                    self._run(made, events)
                    cuda.synchronize(stream)
                    total = (clock.perf_counter() - t0) * 1000.0
                    h2d, compute, d2h = (cuda.elapsed_ms(events[i], events[i + 1]) for i in range(3))
                    calls.append({"h2d_ms": h2d, "compute_ms": compute, "d2h_ms": d2h, "total_ms": total})
                    if duration_s is None:
                        if len(calls) >= iterations:
                            break
                    elif clock.perf_counter() - started >= duration_s:
                        break
            finally:
                for event in events:
                    cuda.destroy_event(event)
        return calls

    copies_overlap = False  # one stream: each call's H2D, execute and D2H run in order, never beside another's

    def loop(self, feed, calls):
        # type: (Dict[str, Any], int) -> float
        """Wall seconds of ``calls`` back-to-back inferences (copies included), one sync at the end:
        throughput = batch * calls / seconds. The copies do not overlap compute (one stream; trtexec overlaps
        them by default, ``--exposeDMA`` off), so this is trtexec's Throughput only where copies are cheap
        (unified memory on a Jetson)."""
        made = self._prepare(feed)
        cuda, stream = self.cuda, self.stream
        with cuda.active():
            self._load(feed, made)
            cuda.synchronize(stream)
            started = clock.perf_counter()
            for _ in range(max(0, int(calls))):
                self._run(made)
            cuda.synchronize(stream)
            return clock.perf_counter() - started

    def close(self):
        # type: () -> None
        """Free device and page-locked memory, then drop the execution context, the engine and the runtime
        (in that order) with the CUDA context current; the shared CUDA context stays for the process (D10).
        Idempotent."""
        if self.closed:
            return
        self.closed = True
        _OPEN.discard(self)
        cuda = self.cuda
        if cuda.closed:  # the CUDA layer went first (it freed the memory): only the objects are left
            self._set = None
            del self.context, self.engine, self.runtime
            return
        with cuda.active():
            try:
                self._release_set()
                cuda.destroy_stream(self.stream)
            finally:
                self.stream = None
                del self.context  # TensorRT: execution context, then engine, then runtime
                del self.engine
                del self.runtime
