"""The agent's CUDA layer (pipeline/device/agent/cuda.py) and the engine runner on it (trt_runtime.Engine),
against recording stand-ins of pycuda, cuda-python 12 (``cuda.cudart``) and 13 (``cuda.bindings.runtime``
only) and a small TensorRT, installed into sys.modules. No GPU: the stand-ins keep the real stack's
context semantics, as pycuda's pycuda/autoinit.py and pycuda/autoprimaryctx.py, NVIDIA/TensorRT#1133 ("The
resources in different context is isolated"), the cuda-bindings 13.0.0 release notes (``cuda.cudart``
removed) and pycuda's doc/driver.rst (async copies need page-locked memory) give them:

- one thread's context stack (pycuda's push/pop); ``retain_primary_context()`` gives the device's primary
  context, ``make_context()`` / ``pycuda.autoinit`` a new, private one;
- the runtime API (cuda-python, TensorRT) uses the context current on the thread, and binds the primary
  context when none is -- so a TensorRT Runtime made before pycuda's context lives in the primary one;
- resources of different contexts are isolated: TensorRT's execute fails with "invalid resource handle"
  when another context is current or a tensor address is not a live allocation of its context;
- "device" memory is real host memory (ctypes buffers) so copies carry values both ways, and every copy
  records whether its host side is page-locked.

Real-GPU runs of the same layer: tests/device/test_cuda_real.py (pytest -m cuda)."""

import ctypes
import enum
import importlib.abc
import importlib.machinery
import sys
import time
import types

import numpy as np
import pytest


class World:
    """One process's CUDA, as the stand-ins see it."""

    def __init__(self, fail_init=None):
        self.calls = []
        self.stack = []  # the thread's context stack (pycuda push/pop)
        self.primary = "primary"
        self.contexts = 0
        self.memory = {}  # device pointer -> (ctypes buffer, context)
        self.pinned = {}  # host pointer -> ctypes buffer (page-locked)
        self.fail_init = fail_init
        self.total = 1 << 30

    def current(self):
        """The context the runtime API uses: the thread's current one, else it binds the primary context."""
        return self.stack[-1] if self.stack else self.primary

    def driver_current(self):
        """The driver API (pycuda) needs a current context."""
        if not self.stack:
            raise FakeDriverError("invalid device context (no current context)")
        return self.stack[-1]

    def device_alloc(self, nbytes, context):
        buffer = ctypes.create_string_buffer(max(1, int(nbytes)))
        pointer = ctypes.addressof(buffer)
        self.memory[pointer] = (buffer, context)
        self.calls.append(("alloc", nbytes, context))
        return pointer

    def device_free(self, pointer):
        del self.memory[pointer]
        self.calls.append(("free", pointer))

    def host_alloc(self, nbytes):
        buffer = ctypes.create_string_buffer(max(1, int(nbytes)))
        pointer = ctypes.addressof(buffer)
        self.pinned[pointer] = buffer
        self.calls.append(("alloc_host", nbytes))
        return buffer, pointer

    def host_free(self, pointer):
        del self.pinned[pointer]
        self.calls.append(("free_host", pointer))

    def is_pinned(self, address, nbytes):
        return any(p <= address and address + nbytes <= p + len(b) for p, b in self.pinned.items())

    def copy(self, direction, device, host, nbytes):
        if device not in self.memory:
            raise FakeDriverError("invalid argument: {:#x} is not device memory".format(device))
        if self.memory[device][1] != self.current():
            raise FakeDriverError("invalid resource handle: memory of another context")
        self.calls.append((direction, self.is_pinned(host, nbytes)))
        if direction == "htod":
            ctypes.memmove(device, host, nbytes)
        else:
            ctypes.memmove(host, device, nbytes)

    def free_bytes(self):
        return self.total - sum(len(b) for b, _ in self.memory.values())


class FakeDriverError(Exception):
    pass


# -- pycuda ------------------------------------------------------------------------------------------------

def fake_pycuda(world, autoprimaryctx=True):
    """pycuda.driver + the import-time modules pycuda.autoinit (a new context) and, from pycuda 2021.1,
    pycuda.autoprimaryctx (the primary context), made by a finder so that importing them runs them."""
    package = types.ModuleType("pycuda")
    package.__path__ = []
    package.VERSION_TEXT = "2022.1" if autoprimaryctx else "2020.1"
    driver = types.ModuleType("pycuda.driver")

    class Error(FakeDriverError):
        pass

    class LogicError(Error):
        pass

    class RuntimeError_(Error):
        pass

    RuntimeError_.__name__ = "RuntimeError"
    driver.Error, driver.LogicError, driver.RuntimeError = Error, LogicError, RuntimeError_

    def init():
        world.calls.append(("cuInit",))
        if world.fail_init:
            raise RuntimeError_("cuInit failed: " + world.fail_init)

    class Context:
        def __init__(self, name):
            self.name = name

        def push(self):
            world.stack.append(self.name)
            world.calls.append(("push", self.name))

        @staticmethod
        def pop():
            if not world.stack:
                raise LogicError("cuCtxPopCurrent failed: invalid device context")
            world.calls.append(("pop", world.stack.pop()))

        def detach(self):
            world.calls.append(("detach", self.name))

        @staticmethod
        def get_current():
            return Context(world.stack[-1]) if world.stack else None

    class Device:
        def __init__(self, number):
            self.number = number

        @staticmethod
        def count():
            return 1

        def retain_primary_context(self):
            world.calls.append(("retain_primary_context",))
            return Context(world.primary)

        def make_context(self):
            world.contexts += 1
            context = Context("private-{}".format(world.contexts))
            world.calls.append(("make_context", context.name))
            context.push()
            return context

    class DeviceAllocation:
        def __init__(self, nbytes):
            self.pointer = world.device_alloc(nbytes, world.driver_current())
            self.freed = False

        def __int__(self):
            return self.pointer

        def free(self):
            if not self.freed:
                self.freed = True
                world.device_free(self.pointer)

    class HostAllocation(bytearray):
        """Also the ndarray's buffer: its address is tracked as page-locked."""

        def free(self):
            pointer = np.frombuffer(self, np.uint8).ctypes.data
            if pointer in world.pinned:
                world.host_free(pointer)

    def pagelocked_empty(shape, dtype):
        world.driver_current()
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        host = HostAllocation(max(1, nbytes))
        pointer = np.frombuffer(host, np.uint8).ctypes.data
        world.pinned[pointer] = host
        world.calls.append(("alloc_host", nbytes))
        return np.ndarray(tuple(shape), dtype, buffer=host)

    class Stream:
        def __init__(self):
            world.driver_current()
            self.handle = 7000 + len(world.calls)

        def synchronize(self):
            world.calls.append(("sync",))

    class Event:
        def __init__(self):
            world.driver_current()

        def record(self, stream=None):
            world.calls.append(("record",))

        def synchronize(self):
            pass

        def time_since(self, other):
            return 1.0

    def memcpy_htod(pointer, array):
        world.copy("htod", int(pointer), array.ctypes.data, array.nbytes)

    def memcpy_dtoh(array, pointer):
        world.copy("dtoh", int(pointer), array.ctypes.data, array.nbytes)

    def mem_get_info():
        world.driver_current()
        return world.free_bytes(), world.total

    driver.init, driver.Context, driver.Device = init, Context, Device
    driver.DeviceAllocation, driver.HostAllocation = DeviceAllocation, HostAllocation
    driver.mem_alloc = DeviceAllocation
    driver.pagelocked_empty = pagelocked_empty
    driver.Stream, driver.Event = Stream, Event
    driver.memcpy_htod = memcpy_htod
    driver.memcpy_htod_async = lambda pointer, array, stream=None: memcpy_htod(pointer, array)
    driver.memcpy_dtoh = memcpy_dtoh
    driver.memcpy_dtoh_async = lambda array, pointer, stream=None: memcpy_dtoh(array, pointer)
    driver.mem_get_info = mem_get_info
    package.driver = driver

    def run_autoinit(module):  # pycuda/autoinit.py: make_default_context() = a new context, pushed
        world.calls.append(("import pycuda.autoinit",))
        init()
        module.context = Device(0).make_context()

    def run_autoprimaryctx(module):  # pycuda/autoprimaryctx.py (2021.1+): the primary context, pushed
        world.calls.append(("import pycuda.autoprimaryctx",))
        init()
        module.context = Device(0).retain_primary_context()
        module.context.push()

    runs = {"pycuda.autoinit": run_autoinit}
    if autoprimaryctx:
        runs["pycuda.autoprimaryctx"] = run_autoprimaryctx
    return {"pycuda": package, "pycuda.driver": driver}, runs


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of the stand-ins' import-time modules run their code (as the real ones do)."""

    def __init__(self, runs):
        self.runs = runs
        self.absent = set()  # not installed: "No module named ...", as the real import system says

    def find_spec(self, name, path=None, target=None):
        if name in self.absent:
            raise ModuleNotFoundError("No module named {!r}".format(name), name=name)
        if name in self.runs:
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        self.runs[module.__name__](module)


# -- cuda-python -------------------------------------------------------------------------------------------

def fake_cudart(world, name):
    cudart = types.ModuleType(name)

    class cudaError_t(enum.IntEnum):
        cudaSuccess = 0
        cudaErrorInvalidValue = 1
        cudaErrorInsufficientDriver = 35
        cudaErrorNoDevice = 100
        cudaErrorInvalidResourceHandle = 400

    ok = cudaError_t.cudaSuccess
    cudart.cudaError_t = cudaError_t
    cudart.cudaMemcpyKind = types.SimpleNamespace(cudaMemcpyHostToDevice=1, cudaMemcpyDeviceToHost=2)
    streams = []

    def guarded(function):
        def call(*args):
            try:
                return function(*args)
            except FakeDriverError as e:
                world.calls.append(("cuda error", str(e)))
                return (cudaError_t.cudaErrorInvalidResourceHandle,) + ((None,) if function.__name__ in (
                    "cudaMalloc", "cudaMallocHost", "cudaStreamCreate", "cudaEventCreate") else ())
        call.__name__ = function.__name__
        setattr(cudart, function.__name__, call)
        return call

    @guarded
    def cudaSetDevice(device):
        world.calls.append(("cudaSetDevice", device))
        if world.fail_init:
            return (cudaError_t.cudaErrorNoDevice,)
        return (ok,)

    @guarded
    def cudaFree(pointer):
        if pointer == 0:
            world.calls.append(("cudaFree(0)", world.current()))
            return (ok,)
        world.device_free(int(pointer))
        return (ok,)

    @guarded
    def cudaMalloc(nbytes):
        return ok, world.device_alloc(nbytes, world.current())

    @guarded
    def cudaMallocHost(nbytes):
        return ok, world.host_alloc(nbytes)[1]

    @guarded
    def cudaFreeHost(pointer):
        world.host_free(int(pointer))
        return (ok,)

    @guarded
    def cudaMemcpy(dst, src, nbytes, kind):
        if kind == 1:
            world.copy("htod", int(dst), int(src), nbytes)
        else:
            world.copy("dtoh", int(src), int(dst), nbytes)
        return (ok,)

    @guarded
    def cudaMemcpyAsync(dst, src, nbytes, kind, stream):
        return cudaMemcpy(dst, src, nbytes, kind)

    @guarded
    def cudaStreamCreate():
        streams.append(object())
        return ok, 9000 + len(streams)

    @guarded
    def cudaStreamDestroy(stream):
        world.calls.append(("cudaStreamDestroy",))
        return (ok,)

    @guarded
    def cudaStreamSynchronize(stream):
        world.calls.append(("sync",))
        return (ok,)

    @guarded
    def cudaEventCreate():
        return ok, object()

    @guarded
    def cudaEventRecord(event, stream):
        world.calls.append(("record",))
        return (ok,)

    @guarded
    def cudaEventSynchronize(event):
        return (ok,)

    @guarded
    def cudaEventElapsedTime(start, end):
        return ok, 1.0

    @guarded
    def cudaEventDestroy(event):
        return (ok,)

    @guarded
    def cudaMemGetInfo():
        return ok, world.free_bytes(), world.total

    @guarded
    def cudaGetErrorString(error):
        return ok, b"stand-in error " + str(int(error)).encode()

    return cudart


def fake_cuda_python(world, major, version=None):
    """12.x: ``cuda.cudart`` (12.0-12.5: no cuda.bindings); 13.x: ``cuda.bindings.runtime`` only."""
    package = types.ModuleType("cuda")
    package.__path__ = []
    package.__version__ = version or "{}.0.0".format(major)
    modules = {"cuda": package}
    if major == 12:
        package.cudart = modules["cuda.cudart"] = fake_cudart(world, "cuda.cudart")
        modules["cuda.bindings"] = None  # import of cuda.bindings fails (ImportError), as before 12.6
    elif major == 13:
        bindings = types.ModuleType("cuda.bindings")
        bindings.__path__ = []
        bindings.__version__ = package.__version__
        bindings.runtime = modules["cuda.bindings.runtime"] = fake_cudart(world, "cuda.bindings.runtime")
        package.bindings = modules["cuda.bindings"] = bindings
        modules["cuda.cudart"] = None  # removed in 13.0
    else:  # a cuda package with neither
        modules["cuda.cudart"] = None
        modules["cuda.bindings"] = None
    return modules


# -- TensorRT ----------------------------------------------------------------------------------------------

def fake_tensorrt(world, sleep_s=0.0):
    """TensorRT 10.3's named-tensor runtime: input [-1, 4] float32 -> output [-1, 2] = (sum, max) per row.
    Its CUDA work happens in the context current when the Runtime was made (the primary one if none was)."""
    trt = types.ModuleType("tensorrt")
    trt.__version__ = "10.3.0"
    trt.float32 = "DataType.FLOAT"
    trt.TensorIOMode = types.SimpleNamespace(INPUT="INPUT", OUTPUT="OUTPUT")
    trt.nptype = lambda dtype: np.float32

    class Logger:
        INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = range(5)

    class ILogger:
        def __init__(self):
            pass

    trt.Logger, trt.ILogger = Logger, ILogger

    def where():
        return world.current()

    class ExecutionContext:
        def __init__(self, engine):
            self.engine, self.shapes, self.addresses = engine, {}, {}
            world.calls.append(("trt.create_execution_context", where()))

        def set_input_shape(self, name, shape):
            self.shapes[name] = tuple(shape)
            return 0 < shape[0] <= 8

        def get_tensor_shape(self, name):
            return (self.shapes["input"][0], 2)

        def set_tensor_address(self, name, pointer):
            self.addresses[name] = int(pointer)

        def execute_async_v3(self, handle):
            context = self.engine.context
            problem = None
            if world.current() != context:
                problem = "Cuda Runtime (invalid resource handle): current context {} is not the engine's {}".format(
                    world.current(), context)
            for name, pointer in sorted(self.addresses.items()):
                if pointer not in world.memory:
                    problem = problem or "Cuda Runtime (illegal address): {} at {:#x} is not allocated".format(
                        name, pointer)
                elif world.memory[pointer][1] != context:
                    problem = problem or "Cuda Runtime (invalid resource handle): {} is another context's".format(
                        name)
            if problem:
                self.engine.logger.log(Logger.ERROR, problem)
                world.calls.append(("execute failed", problem))
                return False
            batch = self.shapes["input"][0]
            x = np.ctypeslib.as_array((ctypes.c_float * (batch * 4)).from_address(self.addresses["input"]))
            y = np.ctypeslib.as_array((ctypes.c_float * (batch * 2)).from_address(self.addresses["output"]))
            rows = x.reshape(batch, 4)
            y[:] = np.stack([rows.sum(axis=1), rows.max(axis=1)], axis=1).ravel()
            world.calls.append(("execute", batch))
            if sleep_s:
                time.sleep(sleep_s)
            return True

        def __del__(self):
            world.calls.append(("trt.~ExecutionContext", where(), len(world.memory), tuple(world.stack)))

    class Engine:
        num_io_tensors = 2

        def __init__(self, logger, context):
            self.logger, self.context = logger, context

        def get_tensor_name(self, i):
            return ["input", "output"][i]

        def get_tensor_mode(self, name):
            return trt.TensorIOMode.INPUT if name == "input" else trt.TensorIOMode.OUTPUT

        def get_tensor_shape(self, name):
            return (-1, 4) if name == "input" else (-1, 2)

        def get_tensor_dtype(self, name):
            return trt.float32

        def create_execution_context(self):
            return ExecutionContext(self)

        def __del__(self):
            world.calls.append(("trt.~Engine", where(), None, tuple(world.stack)))

    class Runtime:
        def __init__(self, logger):
            self.logger = logger
            self.context = where()  # "Init CUDA": the current context, else the primary one
            world.calls.append(("trt.Runtime", self.context))

        def deserialize_cuda_engine(self, data):
            world.calls.append(("trt.deserialize_cuda_engine", where()))
            return Engine(self.logger, self.context)

        def __del__(self):
            world.calls.append(("trt.~Runtime", where(), None, tuple(world.stack)))

    trt.Runtime = Runtime
    return trt


# -- fixtures ----------------------------------------------------------------------------------------------

BINDINGS = ["pycuda", "pycuda-2020.1", "cuda-python-12", "cuda-python-13"]


@pytest.fixture
def stack(monkeypatch):
    """stack(binding) -> World: the stand-ins installed (and nothing real of pycuda/cuda/tensorrt visible).
    A second call in the same test starts a fresh process-like state."""
    from pipeline.device.agent import cuda as cuda_module
    from pipeline.device.agent import trt_runtime

    finder = _Finder({})
    monkeypatch.setattr(sys, "meta_path", [finder] + sys.meta_path)
    open_engines = getattr(trt_runtime, "_OPEN", None)

    from pipeline.device.agent import cudart_ctypes

    # the default binding (libcudart through ctypes) is absent here, whatever the machine has: the stand-ins run
    monkeypatch.setattr(cudart_ctypes, "load", lambda: (None, "no libcudart (stand-ins only)"))

    def install(binding, fail_init=None, sleep_s=0.0):
        for name in [n for n in sys.modules if n.split(".")[0] in ("pycuda", "cuda", "tensorrt")]:
            monkeypatch.delitem(sys.modules, name)
        monkeypatch.setattr(cuda_module, "_SHARED", None, raising=False)
        world = World(fail_init=fail_init)
        modules, runs = {"pycuda": None, "cuda": None}, {}
        if binding.startswith("pycuda"):
            pycuda_modules, runs = fake_pycuda(world, autoprimaryctx=binding == "pycuda")
            modules.update(pycuda_modules)
        elif binding.startswith("cuda-python"):
            modules.update(fake_cuda_python(world, int(binding.rsplit("-", 1)[1])))
        elif binding == "cuda-neither":
            modules.update(fake_cuda_python(world, 0, version="13.0.1"))
        finder.absent = {name for name, module in modules.items() if module is None}
        for name, module in modules.items():
            if module is not None:
                monkeypatch.setitem(sys.modules, name, module)
        finder.runs = runs
        monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt(world, sleep_s=sleep_s))
        return world

    yield install
    if open_engines is not None:
        for engine in list(open_engines):
            engine.close()


def _engine(tmp_path):
    from pipeline.device.agent.trt_runtime import Engine

    path = tmp_path / "model.engine"
    path.write_bytes(b"plan")
    return Engine(str(path))


def _names(world):
    return [c[0] for c in world.calls]


def _feed(batch, seed=0):
    return {"input": np.random.RandomState(seed).rand(batch, 4).astype(np.float32)}


def _expected(feed):
    x = feed["input"]
    return np.stack([x.sum(axis=1), x.max(axis=1)], axis=1)


# -- D1: one context, the primary one, before TensorRT ----------------------------------------------------

@pytest.mark.parametrize("binding", BINDINGS)
def test_the_cuda_context_comes_before_tensorrt_and_is_the_primary_one(stack, tmp_path, binding):
    world = stack(binding)
    engine = _engine(tmp_path)
    names = _names(world)
    started = [i for i, c in enumerate(world.calls)
               if c[0] in ("retain_primary_context", "cudaFree(0)", "make_context")]
    assert started and started[0] < names.index("trt.Runtime"), names
    assert "import pycuda.autoinit" not in names and "make_context" not in names  # no private context
    assert all(c[1] == world.primary for c in world.calls if c[0].startswith("trt.") and len(c) > 1), world.calls
    out = engine.infer(_feed(2))
    np.testing.assert_allclose(out["output"], _expected(_feed(2)), rtol=1e-6)
    assert "execute failed" not in _names(world)
    assert world.calls[names.index("trt.Runtime")][1] == world.primary
    engine.close()


def test_pycuda_2021_1_and_later_use_autoprimaryctx(stack, tmp_path):
    world = stack("pycuda")
    _engine(tmp_path).close()
    names = _names(world)
    assert names.index("import pycuda.autoprimaryctx") < names.index("retain_primary_context") < \
        names.index("trt.Runtime")


def test_older_pycuda_retains_the_primary_context_itself(stack, tmp_path):
    world = stack("pycuda-2020.1")  # no pycuda.autoprimaryctx (pycuda < 2021.1: JetPack 4.6's 2020.1)
    _engine(tmp_path).close()
    names = _names(world)
    assert "import pycuda.autoprimaryctx" not in names
    assert names.index("cuInit") < names.index("retain_primary_context") < names.index("trt.Runtime")


@pytest.mark.parametrize("binding", ["pycuda", "pycuda-2020.1"])
def test_every_engine_call_runs_with_the_context_pushed_and_leaves_the_stack_as_it_found_it(stack, tmp_path,
                                                                                          binding):
    world = stack(binding)
    engine = _engine(tmp_path)
    before = list(world.stack)
    world.stack[:] = []  # another thread / a library popped everything: the engine pushes what it needs
    engine.infer(_feed(1))
    engine.time(_feed(1), warmup=1, iterations=2)
    engine.loop(_feed(1), 3)
    assert world.stack == []
    assert "execute failed" not in _names(world)
    world.stack[:] = before
    engine.close()


def test_a_private_pycuda_context_breaks_the_engine_as_on_a_board(stack, tmp_path):
    """The stand-in fails the way the review's sources say the real stack does (NVIDIA/TensorRT#1133,
    ultralytics#9092): an engine made in the primary context, run with pycuda.autoinit's context current."""
    world = stack("pycuda")
    import pycuda.autoinit  # noqa: F401  (a new, private context, pushed)
    import pycuda.driver as driver

    trt = sys.modules["tensorrt"]
    world.stack[:] = []

    class Logger(trt.ILogger):
        def log(self, severity, message):
            pass

    runtime = trt.Runtime(Logger())
    engine = runtime.deserialize_cuda_engine(b"plan")
    context = engine.create_execution_context()
    world.stack.append("private-1")
    memory = driver.mem_alloc(64)
    context.set_input_shape("input", (1, 4))
    context.set_tensor_address("input", int(memory))
    context.set_tensor_address("output", int(driver.mem_alloc(32)))
    assert context.execute_async_v3(0) is False
    assert "invalid resource handle" in world.calls[-1][1]


def test_shared_is_one_cuda_object_per_process_used_by_every_engine(stack, tmp_path):
    from pipeline.device.agent import cuda as cuda_module

    stack("cuda-python-12")
    first = cuda_module.shared()
    assert cuda_module.shared() is first
    a, b = _engine(tmp_path), _engine(tmp_path)
    assert a.cuda is first and b.cuda is first
    a.close()
    b.close()


# -- D2: cuda-python 12 and 13, and a cuda package with neither --------------------------------------------

@pytest.mark.parametrize("binding,module", [("cuda-python-12", "cuda.cudart"),
                                            ("cuda-python-13", "cuda.bindings.runtime")])
def test_cuda_python_12_and_13_both_work(stack, tmp_path, binding, module):
    from pipeline.device.agent import cuda as cuda_module

    stack(binding)
    cuda = cuda_module.Cuda()
    assert cuda.kind == "cuda-python" and cuda.cudart is sys.modules[module]
    info = cuda_module.binding_info()
    assert info["binding"] == "cuda-python" and info["problem"] is None and info["module"] == module
    assert info["version"] == binding.rsplit("-", 1)[1] + ".0.0"
    engine = _engine(tmp_path)
    np.testing.assert_allclose(engine.infer(_feed(3))["output"], _expected(_feed(3)), rtol=1e-6)
    engine.close()


def test_a_cuda_package_without_either_runtime_module_names_its_version_and_the_fix(stack, tmp_path,
                                                                                  monkeypatch):
    from pipeline.device.agent import cuda as cuda_module

    world = stack("cuda-neither")
    with pytest.raises(cuda_module.CudaError) as caught:
        cuda_module.Cuda()
    message = str(caught.value)
    assert "cuda-python 13.0.1 is installed" in message, message
    assert "pip3 install 'cuda-python<13'" in message and "JetPack 6" in message
    assert "not installed" not in message
    info = cuda_module.binding_info()
    assert info == {"binding": None, "version": "13.0.1", "problem": info["problem"], "module": None}
    assert "pip3 install 'cuda-python<13'" in info["problem"]
    assert not any(c[0] in ("cudaSetDevice", "cuInit") for c in world.calls)  # binding_info starts nothing


def test_the_version_comes_from_the_installed_distribution_when_the_package_has_none(stack, tmp_path,
                                                                                   monkeypatch):
    from pipeline.device.agent import cuda as cuda_module

    stack("cuda-neither")
    del sys.modules["cuda"].__version__
    info = tmp_path / "site" / "cuda_python-13.0.2.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cuda-python\nVersion: 13.0.2\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert cuda_module.binding_info()["version"] == "13.0.2"
    with pytest.raises(cuda_module.CudaError, match=r"cuda-python 13\.0\.2 is installed"):
        cuda_module.Cuda()


def test_binding_info_creates_no_context(stack):
    from pipeline.device.agent import cuda as cuda_module

    world = stack("pycuda")
    assert cuda_module.binding_info() == {"binding": "pycuda", "version": "2022.1", "problem": None,
                                          "module": "pycuda.driver"}
    assert world.calls == [] and world.stack == []
    world = stack("cuda-python-13")
    assert cuda_module.binding_info() == {"binding": "cuda-python", "version": "13.0.0", "problem": None,
                                          "module": "cuda.bindings.runtime"}
    assert world.calls == []
    stack("none")
    info = cuda_module.binding_info()
    assert info["binding"] is None
    assert "no libcudart" in info["problem"] and "pycuda and cuda-python are not installed" in info["problem"]


# -- D7: page-locked buffers both ways, wall-clock latency, a back-to-back loop ----------------------------

@pytest.mark.parametrize("binding", BINDINGS)
def test_every_copy_uses_page_locked_host_memory_both_ways(stack, tmp_path, binding):
    world = stack(binding)
    engine = _engine(tmp_path)
    for batch in (1, 4):
        feed = _feed(batch, seed=batch)
        np.testing.assert_allclose(engine.infer(feed)["output"], _expected(feed), rtol=1e-6)
        engine.time(feed, warmup=1, iterations=3)
    copies = [c for c in world.calls if c[0] in ("htod", "dtoh")]
    assert {c[0] for c in copies} == {"htod", "dtoh"}
    assert all(pinned for _, pinned in copies), copies
    mark = len(world.calls)
    engine.loop(_feed(4), 4)
    copies = [c for c in world.calls[mark:] if c[0] in ("htod", "dtoh")]
    assert len(copies) == 8 and all(pinned for _, pinned in copies), copies
    engine.close()


@pytest.mark.parametrize("binding", ["pycuda", "cuda-python-13"])
def test_latency_is_the_wall_clock_of_one_call_and_the_loop_syncs_once(stack, tmp_path, binding):
    world = stack(binding, sleep_s=0.02)  # the engine takes 20 ms of host time; events say 1 ms a phase
    engine = _engine(tmp_path)
    calls = engine.time(_feed(2), warmup=1, iterations=3)
    assert len(calls) == 3
    for call in calls:
        assert call["h2d_ms"] == call["compute_ms"] == call["d2h_ms"] == 1.0
        assert call["total_ms"] >= 20.0  # wall clock, not the sum of the events (3 ms)
    mark = len(world.calls)
    seconds = engine.loop(_feed(2), 5)
    during = _names(world)[mark:]
    assert seconds >= 5 * 0.02
    assert during.count("execute") == 5 and during.count("sync") <= 2  # one sync after the loop (+ one before)
    assert during[-1] == "sync" or during[-2:] == ["sync", "pop"]
    engine.close()


# -- D9: memory of the previous shape set is freed --------------------------------------------------------

@pytest.mark.parametrize("binding", BINDINGS)
def test_alternating_batch_sizes_keep_a_bounded_number_of_allocations(stack, tmp_path, binding):
    world = stack(binding)
    engine = _engine(tmp_path)
    live = []
    for i in range(10):
        batch = 1 if i % 2 == 0 else 8
        feed = _feed(batch, seed=i)
        np.testing.assert_allclose(engine.infer(feed)["output"], _expected(feed), rtol=1e-6)
        live.append((len(world.memory), len(world.pinned)))
    assert max(d for d, _ in live) <= 2 and max(p for _, p in live) <= 2, live  # input + output, one shape set
    assert _names(world).count("free") >= 9 * 2
    engine.close()
    assert world.memory == {} and world.pinned == {}


# -- D10: close() ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("binding", BINDINGS)
def test_close_frees_memory_then_drops_context_engine_runtime_with_the_cuda_context_current(stack, tmp_path,
                                                                                          binding):
    world = stack(binding)
    engine = _engine(tmp_path)
    engine.infer(_feed(2))
    mark = len(world.calls)
    engine.close()
    engine.close()  # idempotent
    tail = world.calls[mark:]
    names = [c[0] for c in tail]
    order = [names.index(n) for n in ("trt.~ExecutionContext", "trt.~Engine", "trt.~Runtime")]
    assert order == sorted(order), names
    assert names.index("free") < order[0] and names.index("free_host") < order[0]
    assert tail[order[0]][2] == 0  # no device memory left when the execution context goes
    for i in order:
        assert tail[i][1] == world.primary  # destroyed while the primary context is current
        if binding.startswith("pycuda"):  # and pushed on the thread (the driver API needs it current)
            assert tail[i][3][-1:] == (world.primary,), tail[i]
    assert world.memory == {} and world.pinned == {}
    with pytest.raises(Exception, match="closed"):
        engine.infer(_feed(2))


def test_close_of_the_cuda_layer_frees_what_is_left_and_is_idempotent(stack):
    from pipeline.device.agent import cuda as cuda_module

    world = stack("pycuda-2020.1")
    cuda = cuda_module.shared()
    cuda.alloc(100)
    cuda.host_buffer((4,), "float32")
    cuda.close()
    cuda.close()
    assert world.memory == {} and world.pinned == {}
    assert world.stack == []  # the push of the retained primary context is undone
    assert cuda_module.shared() is not cuda


# -- D11: CUDA that cannot start ----------------------------------------------------------------------------

@pytest.mark.parametrize("binding", ["pycuda", "pycuda-2020.1", "cuda-python-12"])
def test_cuda_that_cannot_start_is_a_cuda_error_naming_the_likely_causes(stack, tmp_path, binding):
    from pipeline.device.agent import cuda as cuda_module
    from pipeline.device.agent.trt_engine import EngineError

    world = stack(binding, fail_init="no CUDA-capable device is detected")
    with pytest.raises(cuda_module.CudaError) as caught:
        cuda_module.Cuda()
    message = str(caught.value)
    assert message.startswith("CUDA could not start on this machine")
    assert "video group" in message and "nvidia-smi" in message
    with pytest.raises(EngineError, match="CUDA could not start on this machine"):
        _engine(tmp_path)
    assert "trt.Runtime" not in _names(world)  # nothing of TensorRT was made
