"""The build's version branches, against a recording stand-in of TensorRT's Python API made from the
calls NVIDIA's bindings have at each version (python/src/infer/pyCore.cpp in NVIDIA/TensorRT at tags 8.2.1,
8.4.1, 8.5.3 and v10.0.0): each version has exactly those calls
(8.2: max_workspace_size, no memory pools; 8.5: memory pools; 10.x: no EXPLICIT_BATCH needed, no
max_workspace_size, no build_engine) and raises AttributeError for the rest, like the real bindings.
This checks which branch runs on which version; the calls themselves are type-checked against the real
stubs (test_trt_types.py) and run only on a board (pytest -m jetson)."""

import json
import sys
import types

import numpy
import pytest

from devicekit import tiny_onnx


def fake_tensorrt(version, fast_fp16=True, fast_int8=False, build_fails=False, dla_cores=0, inspector_layers=None,
                  build_log=(), half_layers=False):
    """``inspector_layers``: what the engine inspector's JSON lists under "Layers" (None: no inspector);
    ``build_log``: INFO lines the builder logs. Calibration batches are read from the recording CUDA
    stand-in (``trt.cuda``, set by the ``use`` fixture): an out-of-bounds read is recorded, where a real
    GPU would fault or read garbage."""
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
    if v >= (11, 0):  # pyCore.cpp @v11.1: no EXPLICIT_BATCH, no FP16/INT8 flags (TF32, GPU_FALLBACK remain)
        trt.NetworkDefinitionCreationFlag = types.SimpleNamespace(STRONGLY_TYPED=1)
        trt.BuilderFlag = types.SimpleNamespace(GPU_FALLBACK="GPU_FALLBACK", TF32="TF32")
    else:
        trt.NetworkDefinitionCreationFlag = types.SimpleNamespace(EXPLICIT_BATCH=0)
        trt.BuilderFlag = types.SimpleNamespace(FP16="FP16", INT8="INT8", GPU_FALLBACK="GPU_FALLBACK", TF32="TF32")
    trt.DataType = types.SimpleNamespace(FLOAT="DataType.FLOAT", HALF="DataType.HALF")
    trt.DeviceType = types.SimpleNamespace(DLA="DLA", GPU="GPU")
    if v >= (8, 2):
        trt.ProfilingVerbosity = types.SimpleNamespace(DETAILED="DETAILED", LAYER_NAMES_ONLY="LAYER_NAMES_ONLY")
        trt.LayerInformationFormat = types.SimpleNamespace(JSON="JSON", ONELINE="ONELINE")

    class IInt8EntropyCalibrator2:
        def __init__(self):
            calls.append(("calibrator_init",))

    if v < (11, 0):  # pyInt8.cpp is gone @v11.0
        trt.IInt8EntropyCalibrator2 = IInt8EntropyCalibrator2
    if v >= (8, 4):
        trt.MemoryPoolType = types.SimpleNamespace(WORKSPACE="WORKSPACE")
    trt.Dims = lambda shape: tuple(shape)

    class Tensor:
        def __init__(self, name, shape):
            self.name, self.shape, self.dtype = name, shape, "DataType.FLOAT"

    class Layer:
        name, num_outputs = "layer", 1

        def get_output(self, j):
            out = Tensor("out", (-1, 3))
            out.dtype = "DataType.HALF" if half_layers else "DataType.FLOAT"
            return out

    class Network:
        num_layers, num_inputs, num_outputs = 2, 1, 1

        def get_layer(self, i):
            return Layer()

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

        def clear_flag(self, flag):
            calls.append(("clear_flag", flag))

        def add_optimization_profile(self, profile):
            calls.append(("add_optimization_profile", profile.shapes))

        def create_timing_cache(self, data):
            return TimingCache()

        def set_timing_cache(self, cache, ignore_mismatch):
            return True

        def get_timing_cache(self):
            return TimingCache()

        def set_calibration_profile(self, profile):
            calls.append(("set_calibration_profile", profile.shapes))
            object.__setattr__(self, "calibration_profile", profile)

        def can_run_on_DLA(self, layer):
            return True

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
            calls.append(("Builder",))
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
            for line in build_log:
                self.logger.log(Logger.INFO, line)
            calibrator = getattr(config, "int8_calibrator", None)
            if calibrator is not None:
                _calibrate(calibrator, config)
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

    def _calibrate(calibrator, config):
        """TensorRT's side: calibrate at the calibration profile's OPT shape (MIN/MAX are overwritten by
        OPT, NvInfer.h setCalibrationProfile), reading that many bytes from the pointer get_batch gives."""
        shapes = getattr(config, "calibration_profile", None)
        opt = list(list(shapes.shapes.values())[0][1]) if shapes is not None else None
        calls.append(("calibrate", calibrator.get_batch_size(), opt))
        if calibrator.read_calibration_cache():
            return
        while True:
            pointers = calibrator.get_batch(["input"])
            if not pointers:
                break
            read = 4 * int(numpy.prod(opt))
            if read > trt.cuda.sizes[pointers[0]]:
                calls.append(("out-of-bounds read", read, trt.cuda.sizes[pointers[0]]))
            calls.append(("batch read", read))
        calibrator.write_calibration_cache(b"calibration-cache")

    class Inspector:
        def get_engine_information(self, fmt):
            calls.append(("get_engine_information", fmt))
            return json.dumps({"Layers": inspector_layers, "Bindings": ["input", "probabilities"]})

    class Engine:
        def create_engine_inspector(self):
            return Inspector()

    class Runtime:
        def __init__(self, logger):
            calls.append(("Runtime",))

        def __setattr__(self, name, value):
            calls.append(("runtime", name, value))

        def deserialize_cuda_engine(self, data):
            return Engine()

    if v < (9, 0):
        class UffParser:
            def register_input(self, name, shape, order):
                calls.append(("register_input", name, shape))

            def register_output(self, name):
                pass

            def parse(self, path, network):
                return False  # a graph the parser rejects: the build log must still be written

        trt.UffParser = UffParser
        trt.UffInputOrder = types.SimpleNamespace(NHWC="NHWC")
    if v < (8, 2) or inspector_layers is None:
        del Engine.create_engine_inspector
    Builder.num_DLA_cores = dla_cores
    if v >= (11, 0):  # removed @v11.0 (present @v10.16)
        del Builder.platform_has_fast_fp16, Builder.platform_has_fast_int8
    trt.Builder, trt.OnnxParser, trt.Runtime = Builder, OnnxParser, Runtime
    return trt


class FakeCuda:
    """A recording stand-in of the agent's CUDA layer: allocation sizes by pointer, and the order of calls."""

    def __init__(self, calls):
        self.calls, self.sizes, self.next = calls, {}, 4096

    def active(self):
        calls = self.calls

        class Active:
            def __enter__(self):
                calls.append(("cuda_push",))

            def __exit__(self, *exc):
                calls.append(("cuda_pop",))

        return Active()

    def alloc(self, nbytes):
        self.calls.append(("alloc", nbytes))
        self.next += 1 << 20
        self.sizes[self.next] = nbytes
        return self.next

    def copy_to_device(self, pointer, array, stream=None):
        assert array.nbytes <= self.sizes[pointer], "copy past the device buffer"
        self.calls.append(("copy", array.shape[0]))

    def free(self, pointer):
        self.calls.append(("free", self.sizes.pop(pointer)))


@pytest.fixture
def use(monkeypatch):
    def install(trt, numpy_version="1.19.5"):
        from pipeline.device.agent import cuda as cuda_module

        monkeypatch.setitem(sys.modules, "tensorrt", trt)
        monkeypatch.setattr(numpy, "__version__", numpy_version)
        fake = FakeCuda(trt.calls)

        def shared():
            trt.calls.append(("cuda.shared",))
            return fake

        monkeypatch.setattr(cuda_module, "shared", shared, raising=False)
        trt.cuda = fake
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


def _int8(tmp_path, profile, batch_size=8, images=256, cache=None):
    from pipeline.device.agent.trt_engine import build_onnx

    model = tiny_onnx(tmp_path / "m.onnx")
    numpy.save(str(tmp_path / "calib.npy"), numpy.zeros((images, 4, 4, 3), numpy.float32))
    calibration = {"images": str(tmp_path / "calib.npy"), "batch_size": batch_size, "cache": cache}
    return build_onnx(str(model), str(tmp_path / "m.engine"), "int8", 256, profile, calibration=calibration,
                      log_path=str(tmp_path / "build.log"))


@pytest.mark.parametrize("benchmark_batches", [[1], [1, 16]])
def test_int8_calibrates_at_the_calibration_profiles_batch_and_never_reads_past_its_buffer(use, tmp_path,
                                                                                           benchmark_batches):
    """D4: TensorRT calibrates at the calibration profile's OPT shape; the calibrator, its device buffer and
    that profile must agree (old code: the build profile, OPT 16, against an 8-image buffer)."""
    from pipeline.config.schema import EngineOptions
    from pipeline.device.engine import calibration_batch_for, profile_for

    trt = use(fake_tensorrt("8.5.2", fast_int8=True))
    profile = profile_for([("input", [None, 4, 4, 3])], EngineOptions(max_batch_size=16), benchmark_batches)
    batch = calibration_batch_for(profile)  # what the host sends
    result = _int8(tmp_path, profile, batch_size=batch)
    (_, calibrated_batch, opt), = [c for c in trt.calls if c[0] == "calibrate"]
    (_, shapes), = [c for c in trt.calls if c[0] == "set_calibration_profile"]
    assert shapes == {"input": ((batch, 4, 4, 3),) * 3}  # min = opt = max
    assert calibrated_batch == opt[0] == batch == result["calibration"]["batch_size"]
    assert result["calibration"]["buffer_bytes"] == batch * 4 * 4 * 3 * 4  # exactly one batch of images
    assert not [c for c in trt.calls if c[0] == "out-of-bounds read"]
    assert len([c for c in trt.calls if c[0] == "batch read"]) == 256 // batch
    assert result["calibration"]["images"] == 256 // batch * batch
    # the build's own profile is untouched: batch 1..16, tuned for the largest benchmark batch
    assert ("add_optimization_profile", {"input": ((1, 4, 4, 3), (max(benchmark_batches), 4, 4, 3), (16, 4, 4, 3))}) \
        in trt.calls


def test_int8_cuda_context_comes_first_and_is_current_around_the_copies(use, tmp_path):
    """D1's order for the calibrator: the process's CUDA object (primary context) exists before trt.Builder,
    each copy runs with it current, and the device buffer is released after the build."""
    trt = use(fake_tensorrt("8.5.2", fast_int8=True))
    _int8(tmp_path, {"input": {"min": [1, 4, 4, 3], "opt": [8, 4, 4, 3], "max": [8, 4, 4, 3]}})
    names = [c[0] for c in trt.calls]
    assert names.index("cuda.shared") < names.index("Builder")
    first_copy = names.index("copy")
    assert names[first_copy - 1] == "cuda_push" and names[first_copy + 1] == "cuda_pop"
    assert ("free", 8 * 4 * 4 * 3 * 4) in trt.calls and names.index("free") > names.index("build_serialized_network")


def test_a_fixed_batch_input_decides_the_calibration_batch(use, tmp_path):
    from pipeline.device.agent.trt_engine import calibration_batch

    fixed = {"input": {"min": [2, 4, 4, 3], "opt": [2, 4, 4, 3], "max": [2, 4, 4, 3]}}
    assert calibration_batch(fixed, 8) == 2
    assert calibration_batch({"input": {"min": [1, 4, 4, 3], "opt": [1, 4, 4, 3], "max": [4, 4, 4, 3]}}, 8) == 4
    trt = use(fake_tensorrt("10.3.0", fast_int8=True), numpy_version="2.1.0")
    result = _int8(tmp_path, fixed, batch_size=8)
    assert result["calibration"]["batch_size"] == 2
    assert not [c for c in trt.calls if c[0] == "out-of-bounds read"]


def test_int8_flags_match_between_the_python_builder_and_trtexec(use, tmp_path):
    """D16: int8 adds fp16 where the GPU has it, in both builders (one function decides for both)."""
    from pipeline.device.agent.trtexec_build import command

    cache = tmp_path / "calib.cache"
    cache.write_bytes(b"TRT-8502-EntropyCalibration2\n")
    for fast_fp16 in (True, False):
        trt = use(fake_tensorrt("8.5.2", fast_int8=True, fast_fp16=fast_fp16))
        _int8(tmp_path, {"input": {"min": [1, 4, 4, 3], "opt": [8, 4, 4, 3], "max": [8, 4, 4, 3]}})
        python_flags = sorted(c[1].lower() for c in trt.calls if c[0] == "set_flag" and c[1] in ("FP16", "INT8"))
        argv = command("trtexec", {"onnx": "m.onnx", "precision": "int8", "tensorrt": "8.5.2", "fast_fp16": fast_fp16,
                                   "calibration": {"cache": str(cache)}}, "out.tmp")
        trtexec_flags = sorted(a[2:] for a in argv if a in ("--fp16", "--int8"))
        assert python_flags == trtexec_flags == (["fp16", "int8"] if fast_fp16 else ["int8"])


def test_fp32_means_fp32_in_both_builders_tf32_off(use, tmp_path):
    """TensorRT enables TF32 by default on Ampere and newer (Orin, desktop GPUs): an "fp32" engine would
    then differ from ONNX Runtime by TF32's 10-bit mantissa. Both builders turn it off for fp32 only."""
    from pipeline.device.agent.trt_engine import build_onnx
    from pipeline.device.agent.trtexec_build import command

    for precision, cleared in (("fp32", True), ("fp16", False)):
        trt = use(fake_tensorrt("10.3.0"))
        build_onnx(str(tiny_onnx(tmp_path / "m.onnx")), str(tmp_path / "m.engine"), precision, 256, {})
        assert (("clear_flag", "TF32") in trt.calls) is cleared, precision
        argv = command("trtexec", {"onnx": "m.onnx", "precision": precision, "tensorrt": "10.3.0"}, "out.tmp")
        assert ("--noTF32" in argv) is cleared, argv


def test_calibration_cache_reused_reads_no_images(use, tmp_path):
    trt = use(fake_tensorrt("8.5.2", fast_int8=True))
    cache = tmp_path / "calib.cache"
    cache.write_bytes(b"cached")
    result = _int8(tmp_path, {"input": {"min": [1, 4, 4, 3], "opt": [8, 4, 4, 3], "max": [8, 4, 4, 3]}},
                   cache=str(cache))
    assert result["calibration"]["cache_reused"] and not [c for c in trt.calls if c[0] == "batch read"]


def test_a_cuda_error_in_the_build_is_build_failed_not_internal(use, tmp_path, monkeypatch):
    """D11: the calibrator's CudaError is the build's failure, with its message."""
    from pipeline.device.agent import AgentError, commands
    from pipeline.device.agent import cuda as cuda_module

    use(fake_tensorrt("8.5.2", fast_int8=True))

    def broken():
        raise cuda_module.CudaError("cuInit failed: no CUDA-capable device is detected")

    monkeypatch.setattr(cuda_module, "shared", broken, raising=False)
    monkeypatch.setattr(cuda_module, "Cuda", broken)
    model = tiny_onnx(tmp_path / "m.onnx")
    numpy.save(str(tmp_path / "calib.npy"), numpy.zeros((16, 4, 4, 3), numpy.float32))
    request = {"command": "build", "onnx": str(model), "engine": str(tmp_path / "m.engine"), "precision": "int8",
               "profile": {"input": {"min": [1, 4, 4, 3], "opt": [8, 4, 4, 3], "max": [8, 4, 4, 3]}},
               "calibration": {"images": str(tmp_path / "calib.npy"), "batch_size": 8}}
    with pytest.raises(AgentError) as err:
        commands.dispatch(request)
    assert err.value.kind == "build-failed" and "no CUDA-capable device" in str(err.value)


def test_a_failed_build_still_writes_its_log(use, tmp_path):
    """D13: the build log matters most when the build fails: written in a finally (ONNX and UFF routes)."""
    from pipeline.device.agent.trt_engine import EngineError, build_uff

    use(fake_tensorrt("8.5.2", build_fails=True))
    with pytest.raises(EngineError):
        _build(tmp_path)
    assert "out of memory" in (tmp_path / "build.log").read_text()
    use(fake_tensorrt("8.2.1"))
    with pytest.raises(EngineError, match="UFF parser rejects"):
        build_uff(str(tmp_path / "m.uff"), str(tmp_path / "u.engine"), "input", [4, 4, 3], ["probabilities"], "fp16",
                  256, 8, log_path=str(tmp_path / "uff.log"))
    assert (tmp_path / "uff.log").exists()


STATIC = {"input": {"min": [8, 4, 4, 3], "opt": [8, 4, 4, 3], "max": [8, 4, 4, 3]}}
DLA_LAYERS = [{"Name": "{ForeignNode[Conv_0...Relu_5]}", "LayerType": "ForeignNode"},
              {"Name": "input to nvm", "LayerType": "Reformat"}, {"Name": "Softmax_7", "LayerType": "SoftMax"}]


def _dla_build(tmp_path, precision="fp16", profile=STATIC):
    from pipeline.device.agent.trt_engine import build_onnx

    model = tiny_onnx(tmp_path / "m.onnx")
    return build_onnx(str(model), str(tmp_path / "m.engine"), precision, 256, profile, dla_core=1,
                      log_path=str(tmp_path / "build.log"))


def test_dla_placement_comes_from_the_engine_inspector(use, tmp_path):
    """D5: where the layers ran, read after the build (TensorRT >= 8.2, DETAILED verbosity)."""
    trt = use(fake_tensorrt("8.5.2", dla_cores=2, inspector_layers=DLA_LAYERS))
    result = _dla_build(tmp_path)
    assert ("set", "profiling_verbosity", "DETAILED") in trt.calls and ("set", "DLA_core", 1) in trt.calls
    assert ("runtime", "DLA_core", 1) in trt.calls and ("get_engine_information", "JSON") in trt.calls
    assert result["dla"] == {"core": 1, "layers_on_dla": 1, "layers_on_gpu": 1, "io_layers": 1, "runs_on": "mixed",
                             "source": "engine_inspector"}
    assert result["dla_core"] == 1


def test_a_fully_dla_engine_with_its_io_layers_reads_dla(use, tmp_path):
    """Review N10: a DLA engine's copies in and out of DLA memory and its reformats are not GPU layers
    (NVIDIA/TensorRT#3143: ``images to nvm``, ``{ForeignNode[...]}``, ``head_3 from nvm``, ``... copy finish``)."""
    layers = [{"Name": "images to nvm", "LayerType": "Reformat"}, {"Name": "{ForeignNode[Conv_0...Softmax_7]}",
                                                                   "LayerType": "ForeignNode"},
              {"Name": "probabilities from nvm", "LayerType": "Reformat"},
              {"Name": "probabilities copy finish", "LayerType": "Reformat"}]
    use(fake_tensorrt("8.5.2", dla_cores=2, inspector_layers=layers))
    result = _dla_build(tmp_path)
    assert result["dla"] == {"core": 1, "layers_on_dla": 1, "layers_on_gpu": 0, "io_layers": 3, "runs_on": "dla",
                             "source": "engine_inspector"}
    assert result["dla_core"] == 1


TRT10_LOG = ["[I] ", "[I] --------------- Layers running on DLA:",
             "[I] [DlaLayer] {ForeignNode[Conv_0...Relu_5]}, [DlaLayer] {ForeignNode[Conv_8...Relu_9]}, ",
             "[I] --------------- Layers running on GPU:",
             "[I] [GpuLayer] SOFTMAX: Softmax_7, [GpuLayer] REFORMAT: input to nvm, ",
             "[I] Total Activation Memory: 1024"]


def test_the_build_log_summary_of_tensorrt_10_and_of_trtexec(use, tmp_path):
    """Review N10: TensorRT 10 prints "--------------- Layers running on DLA:" and the layers comma-separated
    on one line (NVIDIA/TensorRT samples/sampleCudla/README.md @v10.16, @v11.1); trtexec prefixes every
    line with a timestamp, [I] and [TRT]."""
    from pipeline.device.agent.trt_dla import placement_from_log

    want = {"core": 0, "layers_on_dla": 2, "layers_on_gpu": 1, "io_layers": 1, "runs_on": "mixed",
            "source": "build_log"}
    assert placement_from_log(0, TRT10_LOG) == want
    trtexec = ["[11/28/2026-01:02:03] [I] [TRT] " + line[4:] for line in TRT10_LOG]
    assert placement_from_log(0, trtexec) == want
    use(fake_tensorrt("8.0.1", dla_cores=2, build_log=[line[4:] for line in TRT10_LOG]))
    assert _dla_build(tmp_path)["dla"] == dict(want, core=1)


def test_a_dla_build_that_landed_on_the_gpu_is_not_labelled_with_a_core(use, tmp_path):
    use(fake_tensorrt("8.5.2", dla_cores=2, inspector_layers=[{"Name": "Conv_0", "LayerType": "Convolution"}]))
    result = _dla_build(tmp_path)
    assert result["dla"]["runs_on"] == "gpu" and result["dla"]["layers_on_dla"] == 0
    assert result["dla_core"] is None


def test_dla_placement_falls_back_to_the_build_log_then_unknown(use, tmp_path):
    log = ["---------- Layers Running on DLA ----------", "[DlaLayer] {ForeignNode[Conv_0...Relu_5]}",
           "---------- Layers Running on GPU ----------", "[GpuLayer] SOFTMAX: Softmax_7",
           "[GpuLayer] SHUFFLE: Reshape_6", "Total Activation Memory: 1024"]
    use(fake_tensorrt("8.0.1", dla_cores=2, build_log=log))  # no engine inspector before 8.2
    result = _dla_build(tmp_path)
    assert result["dla"] == {"core": 1, "layers_on_dla": 1, "layers_on_gpu": 2, "io_layers": 0, "runs_on": "mixed",
                             "source": "build_log"}
    use(fake_tensorrt("8.0.1", dla_cores=2))
    result = _dla_build(tmp_path)
    assert result["dla"] == {"core": 1, "layers_on_dla": None, "layers_on_gpu": None, "io_layers": None,
                             "runs_on": "unknown", "source": "unavailable"}
    assert result["dla_core"] is None


def test_dla_refuses_fp32_and_dynamic_shapes(use, tmp_path):
    from pipeline.device.agent.trt_engine import EngineError

    use(fake_tensorrt("8.5.2", dla_cores=2))
    with pytest.raises(EngineError, match=r"DLA runs fp16 and int8 only: set stages.engine.precision: fp16"):
        _dla_build(tmp_path, precision="fp32")
    with pytest.raises(EngineError, match="DLA needs static shapes"):
        _dla_build(tmp_path, profile={"input": {"min": [1, 4, 4, 3], "opt": [8, 4, 4, 3], "max": [8, 4, 4, 3]}})


def test_a_gpu_build_has_no_dla_key(use, tmp_path):
    use(fake_tensorrt("8.5.2"))
    result = _build(tmp_path)
    assert "dla" not in result and result["dla_core"] is None


# -- TensorRT 11: strongly typed networks only (review N1) ------------------------------------------------------

def _build_request(tmp_path, precision, **kw):
    model = tiny_onnx(tmp_path / "m.onnx")
    request = {"command": "build", "onnx": str(model), "engine": str(tmp_path / "m.engine"), "precision": precision,
               "profile": {"input": {"min": [1, 4, 4, 3], "opt": [4, 4, 4, 3], "max": [8, 4, 4, 3]}},
               "log": str(tmp_path / "build.log")}
    request.update(kw)
    return request


def test_tensorrt_11_builds_fp32_strongly_typed_without_the_removed_calls(use, tmp_path):
    """pyCore.cpp @v11.1 has no BuilderFlag.FP16/INT8, no platform_has_fast_*, no EXPLICIT_BATCH: the old code
    read platform_has_fast_fp16 for every precision and answered AttributeError ("an agent error")."""
    from pipeline.device.agent import commands

    trt = use(fake_tensorrt("11.1.0"), numpy_version="2.1.0")
    result = commands.dispatch(_build_request(tmp_path, "fp32"))
    assert ("create_network", 0) in trt.calls and ("clear_flag", "TF32") in trt.calls
    assert not [c for c in trt.calls if c[0] == "set_flag"]
    assert result["tensorrt_version"] == "11.1.0" and (tmp_path / "m.engine").exists()


def test_tensorrt_11_builds_fp16_from_a_model_typed_fp16_on_the_host(use, tmp_path):
    from pipeline.device.agent import commands

    trt = use(fake_tensorrt("11.1.0", half_layers=True), numpy_version="2.1.0")
    result = commands.dispatch(_build_request(tmp_path, "fp16", typed="fp16"))
    assert not [c for c in trt.calls if c[0] in ("set_flag", "clear_flag")] and result["typed"] == "fp16"


@pytest.mark.parametrize("precision,typed,half,message", [
    ("fp16", None, True, "builds strongly typed networks only (no fp16 builder flag)"),
    ("fp16", "fp16", False, "has no fp16 tensor after parsing"),
    ("int8", None, False, "removed the int8 calibrator and builder flag"),
])
def test_tensorrt_11_refuses_what_it_cannot_build_in_one_line(use, tmp_path, precision, typed, half, message):
    from pipeline.device.agent import AgentError, commands

    use(fake_tensorrt("11.1.0", fast_int8=True, half_layers=half), numpy_version="2.1.0")
    numpy.save(str(tmp_path / "calib.npy"), numpy.zeros((16, 4, 4, 3), numpy.float32))
    request = _build_request(tmp_path, precision, typed=typed,
                             calibration={"images": str(tmp_path / "calib.npy"), "batch_size": 8})
    with pytest.raises(AgentError) as err:
        commands.dispatch(request)
    assert err.value.kind == "build-failed" and message in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "m.engine").exists()


def test_a_tensorrt_newer_than_deploy_knows_is_refused_by_name_for_builds_and_runs(use, tmp_path):
    from pipeline.device.agent import AgentError, commands

    use(fake_tensorrt("12.0.0"), numpy_version="2.1.0")
    with pytest.raises(AgentError) as err:
        commands.dispatch(_build_request(tmp_path, "fp32"))
    assert err.value.kind == "build-failed"
    assert "TensorRT 12.0.0 is newer than the TensorRT APIs this deploy knows (8.x to 11.x)" in str(err.value)
    (tmp_path / "m.engine").write_bytes(b"plan")
    with pytest.raises(AgentError, match="TensorRT 12.0.0 is newer") as err:
        commands.dispatch({"command": "describe", "model": str(tmp_path / "m.engine"), "backend": "tensorrt"})
    assert err.value.kind == "tensorrt"
