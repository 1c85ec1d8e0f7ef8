"""A stand-in ``tensorrt`` package that *runs* an engine through real memory, for the agent's engine path
without a GPU: ``write(folder, version)`` makes ``folder/tensorrt/__init__.py`` (valid Python 3.6, numpy
1.19), ``engine_bytes(onnx_path, max_batch)`` the engine file it loads.

Its engine is the tiny classifier of ``devicekit.tiny_onnx`` (mean over H and W, MatMul, Softmax) with that
model's weights. ``execute`` reads the input from the *device address* the agent set (ctypes, so the input
must really have been copied there: with the stand-in libcudart of ``cudart_standin`` device memory is host
memory) and writes the output to the output's device address (so the agent's copy back is what the test
sees). The API per version is TensorRT's (trt_api.md; NVIDIA/TensorRT python/src/infer/pyCore.cpp): the
binding API (``num_bindings``, ``set_binding_shape``, ``execute_async_v2``) below 8.5, named tensors
(``set_input_shape``, ``set_tensor_address``, ``execute_async_v3``) from 8.5; a shape outside the engine's
profile is refused (``False``, as TensorRT does), a null address fails the execute.
"""

import base64
import json
from pathlib import Path

MAGIC = b"STANDIN-ENGINE\n"

SOURCE = r'''
"""Stand-in TensorRT (tests/device/trt_standin.py)."""
import base64
import ctypes
import json

import numpy as np

__version__ = "@VERSION@"
_V = tuple(int(x) for x in __version__.split(".")[:2])
MAGIC = b"STANDIN-ENGINE\n"
float32 = "float32"


def nptype(dtype):
    return np.float32


class TensorIOMode(object):
    INPUT = "input"
    OUTPUT = "output"


class ILogger(object):
    class Severity(object):
        pass

    def __init__(self):
        pass


class Logger(ILogger):
    INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = range(5)


class Runtime(object):
    def __init__(self, logger):
        self.logger = logger
        self.DLA_core = -1

    def deserialize_cuda_engine(self, data):
        if not data.startswith(MAGIC):
            self.logger.log(Logger.ERROR, "stand-in: not an engine")
            return None
        return _Engine(json.loads(data[len(MAGIC):].decode()), self.logger)


class _Engine(object):
    has_implicit_batch_dimension = False

    def __init__(self, spec, logger):
        self.spec = spec
        self.logger = logger
        self.names = [spec["input"], spec["output"]]
        self.weights = np.frombuffer(base64.b64decode(spec["weights"]), dtype=np.float32).reshape(spec["w_shape"])

    def create_execution_context(self):
        return _Context(self)

    def _shape(self, i):
        return tuple([-1] + self.spec["input_shape"]) if i == 0 else (-1, self.weights.shape[1])

    # named tensors (8.5+)
    @property
    def num_io_tensors(self):
        _need((8, 5), "num_io_tensors")
        return 2

    def get_tensor_name(self, i):
        _need((8, 5), "get_tensor_name")
        return self.names[i]

    def get_tensor_mode(self, name):
        return TensorIOMode.INPUT if name == self.names[0] else TensorIOMode.OUTPUT

    def get_tensor_shape(self, name):
        return self._shape(self.names.index(name))

    def get_tensor_dtype(self, name):
        return float32

    # bindings (< 10)
    @property
    def num_bindings(self):
        _gone((10, 0), "num_bindings")
        return 2

    def get_binding_name(self, i):
        return self.names[i]

    def binding_is_input(self, i):
        return i == 0

    def get_binding_shape(self, i):
        _gone((10, 0), "get_binding_shape")
        return self._shape(i)

    def get_binding_dtype(self, i):
        return float32


def _need(version, name):
    if _V < version:
        raise AttributeError("'tensorrt' {} has no {}".format(__version__, name))


def _gone(version, name):
    if _V >= version:
        raise AttributeError("'tensorrt' {} has no {}".format(__version__, name))


class _Context(object):
    def __init__(self, engine):
        self.engine = engine
        self.batch = None
        self.addresses = {}

    def set_input_shape(self, name, shape):
        _need((8, 5), "set_input_shape")
        return self._set(shape)

    def set_binding_shape(self, index, shape):
        _gone((10, 0), "set_binding_shape")
        return self._set(shape)

    def _set(self, shape):
        shape = [int(d) for d in shape]
        if shape[1:] != self.engine.spec["input_shape"] or not 1 <= shape[0] <= self.engine.spec["max_batch"]:
            self.engine.logger.log(Logger.ERROR, "stand-in: shape {} outside the profile".format(shape))
            return False
        self.batch = shape[0]
        return True

    def get_tensor_shape(self, name):
        return (self.batch,) + tuple(self.engine._shape(self.engine.names.index(name))[1:])

    def get_binding_shape(self, index):
        return self.get_tensor_shape(self.engine.names[index])

    def set_tensor_address(self, name, pointer):
        self.addresses[name] = int(pointer)
        return True

    def execute_async_v3(self, stream):
        _need((8, 5), "execute_async_v3")
        return self._run([self.addresses.get(n, 0) for n in self.engine.names])

    def execute_async_v2(self, bindings, stream):
        _gone((10, 0), "execute_async_v2")
        return self._run([int(b) for b in bindings])

    def _run(self, pointers):
        if self.batch is None or not all(pointers):
            self.engine.logger.log(Logger.ERROR, "stand-in: no shape or a null address")
            return False
        shape = [self.batch] + self.engine.spec["input_shape"]
        count = int(np.prod(shape))
        x = np.frombuffer((ctypes.c_float * count).from_address(pointers[0]), dtype=np.float32).reshape(shape)
        logits = x.mean(axis=(1, 2)).dot(self.engine.weights)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        y = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        ctypes.memmove(pointers[1], y.ctypes.data, y.nbytes)
        return True
'''


def write(folder, version="8.2.1"):
    """``folder/tensorrt/__init__.py``: the stand-in at TensorRT ``version``; returns ``folder``."""
    package = Path(folder) / "tensorrt"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(SOURCE.replace("@VERSION@", version))
    return Path(folder)


def engine_bytes(onnx_path, max_batch=8):
    """An engine file for the stand-in: ``devicekit.tiny_onnx``'s weights and shapes, batch 1..max_batch."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(onnx_path))
    weights = numpy_helper.to_array(model.graph.initializer[0]).astype(np.float32)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim][1:]
    spec = {"input": model.graph.input[0].name, "output": model.graph.output[0].name, "input_shape": dims,
            "weights": base64.b64encode(weights.tobytes()).decode(), "w_shape": list(weights.shape),
            "max_batch": max_batch}
    return MAGIC + json.dumps(spec).encode()
