"""The build's version branches, against a recording stand-in of TensorRT's Python API made from the
facts in shared/reference/device/trt_api.md: each version has exactly the calls that table gives it
(8.2: max_workspace_size, no memory pools; 8.5: memory pools; 10.x: no EXPLICIT_BATCH needed, no
max_workspace_size, no build_engine) and raises AttributeError for the rest, like the real bindings.
This checks which branch runs on which version; the calls themselves are type-checked against the real
stubs (test_trt_types.py) and run only on a board (pytest -m jetson)."""

import sys
import types

import numpy
import pytest

from devicekit import tiny_onnx


def fake_tensorrt(version, fast_fp16=True, fast_int8=False, build_fails=False):
    v = tuple(int(x) for x in version.split(".")[:2])
    calls = []
    trt = types.ModuleType("tensorrt")
    trt.__version__ = version
    trt.calls = calls

    class Logger:
        INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = range(5)

    class ILogger:
        def __init__(self):
            pass

    trt.Logger, trt.ILogger = Logger, ILogger
    trt.NetworkDefinitionCreationFlag = types.SimpleNamespace(EXPLICIT_BATCH=0)
    trt.BuilderFlag = types.SimpleNamespace(FP16="FP16", INT8="INT8", GPU_FALLBACK="GPU_FALLBACK")
    trt.DeviceType = types.SimpleNamespace(DLA="DLA", GPU="GPU")
    if v >= (8, 4):
        trt.MemoryPoolType = types.SimpleNamespace(WORKSPACE="WORKSPACE")
    trt.Dims = lambda shape: tuple(shape)

    class Tensor:
        def __init__(self, name, shape):
            self.name, self.shape, self.dtype = name, shape, "DataType.FLOAT"

    class Network:
        num_layers, num_inputs, num_outputs = 0, 1, 1

        def __init__(self, flags):
            calls.append(("create_network", flags))

        def get_input(self, i):
            return Tensor("input", (-1, 4, 4, 3))

        def get_output(self, i):
            return Tensor("probabilities", (-1, 3))

    class TimingCache:
        def serialize(self):
            return b"timing"

    class Config:
        def __setattr__(self, name, value):
            if name == "max_workspace_size" and v >= (10, 0):
                raise AttributeError("'IBuilderConfig' object has no attribute 'max_workspace_size'")
            calls.append(("set", name, value))
            object.__setattr__(self, name, value)

        def set_flag(self, flag):
            calls.append(("set_flag", flag))

        def add_optimization_profile(self, profile):
            calls.append(("add_optimization_profile", profile.shapes))

        def create_timing_cache(self, data):
            return TimingCache()

        def set_timing_cache(self, cache, ignore_mismatch):
            return True

        def get_timing_cache(self):
            return TimingCache()

    if v >= (8, 4):
        Config.set_memory_pool_limit = lambda self, pool, size: calls.append(("set_memory_pool_limit", pool, size))

    class Profile:
        def __init__(self):
            self.shapes = {}

        def set_shape(self, name, lo, opt, hi):
            self.shapes[name] = (lo, opt, hi)

    class Builder:
        platform_has_fast_fp16, platform_has_fast_int8, num_DLA_cores = fast_fp16, fast_int8, 0

        def __init__(self, logger):
            self.logger = logger

        def create_network(self, flags=0):
            return Network(flags)

        def create_builder_config(self):
            return Config()

        def create_optimization_profile(self):
            return Profile()

    if v >= (8, 0):
        def build_serialized_network(self, network, config):
            calls.append(("build_serialized_network",))
            if build_fails:
                self.logger.log(Logger.ERROR, "Requested amount of GPU memory could not be allocated: out of memory")
                return None
            return b"PLAN" * 10

        Builder.build_serialized_network = build_serialized_network
    if v < (10, 0):
        Builder.build_engine = lambda self, network, config: calls.append(("build_engine",))

    class OnnxParser:
        num_errors = 0

        def __init__(self, network, logger):
            pass

        def parse(self, data):
            calls.append(("parse", len(data)))
            return True

    trt.Builder, trt.OnnxParser = Builder, OnnxParser
    return trt


@pytest.fixture
def use(monkeypatch):
    def install(trt, numpy_version="1.19.5"):
        monkeypatch.setitem(sys.modules, "tensorrt", trt)
        monkeypatch.setattr(numpy, "__version__", numpy_version)
        return trt

    return install


def _build(tmp_path, precision="fp16"):
    from pipeline.device.agent.trt_engine import build_onnx

    model = tiny_onnx(tmp_path / "m.onnx")
    profile = {"input": {"min": [1, 4, 4, 3], "opt": [4, 4, 4, 3], "max": [8, 4, 4, 3]}}
    return build_onnx(str(model), str(tmp_path / "m.engine"), precision, 256, profile,
                      timing_cache=str(tmp_path / "timing.cache"), log_path=str(tmp_path / "build.log"))


def test_tensorrt_8_2_explicit_batch_and_max_workspace_size(use, tmp_path):
    trt = use(fake_tensorrt("8.2.1"))
    result = _build(tmp_path)
    assert ("create_network", 1) in trt.calls  # 1 << EXPLICIT_BATCH: implicit batch otherwise on <= 8.6
    assert ("set", "max_workspace_size", 256 << 20) in trt.calls
    assert not any(c[0] == "set_memory_pool_limit" for c in trt.calls)
    assert ("build_serialized_network",) in trt.calls and ("build_engine",) not in trt.calls
    assert ("set_flag", "FP16") in trt.calls
    assert ("add_optimization_profile", {"input": ((1, 4, 4, 3), (4, 4, 4, 3), (8, 4, 4, 3))}) in trt.calls
    assert (tmp_path / "m.engine").read_bytes() == b"PLAN" * 10 and not (tmp_path / "m.engine.tmp").exists()
    assert (tmp_path / "timing.cache").read_bytes() == b"timing"
    assert result["tensorrt_version"] == "8.2.1" and result["engine_bytes"] == 40
    assert result["inputs"] == [{"name": "input", "shape": [None, 4, 4, 3], "dtype": "DataType.FLOAT"}]


def test_tensorrt_8_5_memory_pools(use, tmp_path):
    trt = use(fake_tensorrt("8.5.2"))
    _build(tmp_path)
    assert ("create_network", 1) in trt.calls
    assert ("set_memory_pool_limit", "WORKSPACE", 256 << 20) in trt.calls
    assert not any(c[:2] == ("set", "max_workspace_size") for c in trt.calls)


def test_tensorrt_10_no_explicit_batch_flag_no_build_engine(use, tmp_path):
    trt = use(fake_tensorrt("10.3.0"), numpy_version="2.1.0")  # numpy >= 1.24 is fine from 8.6
    _build(tmp_path)
    assert ("create_network", 0) in trt.calls
    assert ("set_memory_pool_limit", "WORKSPACE", 256 << 20) in trt.calls
    assert not hasattr(trt.Builder, "build_engine")


def test_numpy_1_24_with_tensorrt_below_8_6_is_refused(use, tmp_path):
    from pipeline.device.agent.trt_engine import EngineError

    use(fake_tensorrt("8.2.1"), numpy_version="1.24.0")
    with pytest.raises(EngineError, match=r"numpy<1.24"):
        _build(tmp_path)


def test_a_failed_build_leaves_no_engine_and_says_out_of_memory(use, tmp_path):
    from pipeline.device.agent.trt_engine import EngineError

    use(fake_tensorrt("8.5.2", build_fails=True))
    with pytest.raises(EngineError, match="out of memory during the build: lower stages.engine.workspace_mb"):
        _build(tmp_path)
    assert not (tmp_path / "m.engine").exists() and not (tmp_path / "m.engine.tmp").exists()


def test_precisions_the_gpu_lacks(use, tmp_path):
    from pipeline.device.agent.trt_engine import EngineError

    use(fake_tensorrt("8.2.1", fast_fp16=False))
    with pytest.raises(EngineError, match="no fast fp16"):
        _build(tmp_path)
    use(fake_tensorrt("8.2.1", fast_int8=False))
    with pytest.raises(EngineError, match="no fast int8"):
        _build(tmp_path, precision="int8")
