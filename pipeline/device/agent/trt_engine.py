"""TensorRT in the agent: build an engine from ONNX (or UFF) and run it, one code path for TensorRT 8.2
(JetPack 4.6: TX2, Nano), 8.5 (JetPack 5: Xavier) and 10.x (JetPack 6: Orin), branching on the version
exactly as shared/reference/device/trt_api.md lists:

    explicit batch       the EXPLICIT_BATCH flag below 10.0; networks are always explicit on 10.x
    build                build_serialized_network (8.0+); build_engine(...).serialize() below 8.0
    workspace            set_memory_pool_limit(WORKSPACE) from 8.4; max_workspace_size below
    I/O                  named tensors (set_input_shape, set_tensor_address, execute_async_v3) from 8.5;
                         bindings (set_binding_shape, execute_async_v2) below
    numpy                TensorRT < 8.6 uses np.bool, gone in numpy 1.24: refused with what to install

Type-checked with mypy against ``tensorrt-stubs`` (the 10.x API); calls that exist only in 8.x go
through ``getattr`` with the version named. tensorrt, numpy and pycuda / cuda-python are imported inside
functions: the agent imports this module only for a build or an engine run.
"""

import hashlib
import os
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple  # noqa: F401  (type comments: the 3.6 floor)

if TYPE_CHECKING:  # mypy reads tensorrt-stubs; at run time tensorrt is imported inside the functions
    import tensorrt as trt  # noqa: F401


class EngineError(Exception):
    """A build or run that failed, in one line saying what to do."""


def version_tuple(text):
    # type: (str) -> Tuple[int, int]
    parts = str(text).split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return 0, 0


def tensorrt_version():
    # type: () -> Optional[str]
    """TensorRT's version as the board's Python imports it; None without TensorRT (a stub-only
    ``tensorrt`` namespace, as tensorrt-stubs installs, has no version)."""
    try:
        import tensorrt as trt
    except ImportError:
        return None
    return getattr(trt, "__version__", None)


def checked_version():
    # type: () -> Tuple[int, int]
    """TensorRT's (major, minor), after the checks every build and run needs."""
    import tensorrt as trt

    version = getattr(trt, "__version__", None)
    if version is None:
        raise ImportError("the 'tensorrt' found is not TensorRT's Python bindings (type stubs only?)")
    v = version_tuple(version)
    if v < (8, 6):
        import numpy as np

        if version_tuple(np.__version__) >= (1, 24):
            raise EngineError("TensorRT {} uses np.bool, removed in numpy 1.24 (this board has numpy {}); install "
                              "numpy<1.24 for this Python: pip3 install 'numpy<1.24'".format(version, np.__version__))
    return v


def make_logger(lines):
    # type: (List[str]) -> trt.ILogger
    """A TensorRT logger that keeps every message (the build log)."""
    import tensorrt as trt

    names = {trt.Logger.INTERNAL_ERROR: "F", trt.Logger.ERROR: "E", trt.Logger.WARNING: "W", trt.Logger.INFO: "I",
             trt.Logger.VERBOSE: "V"}

    class Collecting(trt.ILogger):
        def __init__(self):
            # type: () -> None
            trt.ILogger.__init__(self)

        def log(self, severity, msg):
            # type: (trt.ILogger.Severity, str) -> None
            lines.append("[{}] {}".format(names.get(severity, "?"), msg))

    return Collecting()


def _errors(lines):
    # type: (List[str]) -> List[str]
    return [line[4:] for line in lines if line.startswith(("[E]", "[F]"))]


def _write_atomic(path, data):
    # type: (str, bytes) -> None
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _set_workspace(config, v, workspace_mb):
    # type: (trt.IBuilderConfig, Tuple[int, int], int) -> None
    import tensorrt as trt

    size = int(workspace_mb) << 20
    if v >= (8, 4):
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, size)
    else:  # max_workspace_size: TensorRT < 8.4 (deprecated in 8.4, removed in 10.0)
        setattr(config, "max_workspace_size", size)


def precision_flags(precision, fast_fp16, fast_int8):
    # type: (str, bool, bool) -> List[str]
    """The builder flags a precision means on this GPU, the same for the Python builder and trtexec:
    fp16 -> [fp16]; int8 -> [int8, fp16] where the GPU has fast fp16 (layers int8 cannot run stay fp16,
    not fp32), else [int8]; fp32 -> []."""
    if precision == "fp32":
        return []
    if precision == "fp16":
        if not fast_fp16:
            raise EngineError("this GPU has no fast fp16; set stages.engine.precision: fp32")
        return ["fp16"]
    if precision == "int8":
        if not fast_int8:
            raise EngineError("this GPU has no fast int8 (TX2 and Nano do not); set stages.engine.precision: fp16")
        return ["int8", "fp16"] if fast_fp16 else ["int8"]
    raise EngineError("unknown precision {!r} (fp32, fp16, int8)".format(precision))


def _set_precision(builder, config, precision):
    # type: (trt.Builder, trt.IBuilderConfig, str) -> None
    import tensorrt as trt

    for flag in precision_flags(precision, builder.platform_has_fast_fp16, builder.platform_has_fast_int8):
        config.set_flag(trt.BuilderFlag.INT8 if flag == "int8" else trt.BuilderFlag.FP16)
    if precision == "fp32" and hasattr(trt.BuilderFlag, "TF32"):
        # TensorRT turns TF32 on by default (Ampere and newer: Orin, desktop GPUs): fp32 means fp32, as in
        # Polygraphy (TF32 off unless asked) and trtexec --noTF32
        config.clear_flag(trt.BuilderFlag.TF32)


def _timing_cache(config, path, warnings):
    # type: (trt.IBuilderConfig, Optional[str], List[str]) -> bool
    """Load the board's timing cache into ``config`` (8.0+); a cache of another device or version is replaced."""
    if not path:
        return False
    data = b""
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
    cache = config.create_timing_cache(data)
    if not config.set_timing_cache(cache, False):
        warnings.append("the timing cache {} does not match this device or TensorRT; starting a new one".format(path))
        config.set_timing_cache(config.create_timing_cache(b""), False)
        return False
    return bool(data)


def _dla(builder, config, network, dla_core, precision, profile):
    # type: (trt.Builder, trt.IBuilderConfig, trt.INetworkDefinition, Optional[int], str, Dict[str, Dict[str, List[int]]]) -> List[str]
    """Build for DLA core ``dla_core`` with GPU fallback; the layers the builder says cannot run on DLA
    (before the build: where they really ran is read after it, ``dla_placement``). DLA runs fp16 and int8
    only, and has no dynamic shapes (NVIDIA, "DLA Supported Layers and Restrictions"): both are refused
    here, as the config check refuses them on the host."""
    import tensorrt as trt

    if dla_core is None:
        return []
    if precision not in ("fp16", "int8"):
        raise EngineError("DLA runs fp16 and int8 only: set stages.engine.precision: fp16 (or int8) to build for "
                          "dla_core {}".format(dla_core))
    for name, shapes in sorted(profile.items()):
        if not shapes["min"] == shapes["opt"] == shapes["max"]:
            raise EngineError("DLA needs static shapes, but the profile of {!r} is {} .. {}: one batch size per DLA "
                              "engine (stages.benchmark.batch_sizes)".format(name, shapes["min"], shapes["max"]))
    if builder.num_DLA_cores <= dla_core:
        raise EngineError("stages.engine.dla_core {}: this board has {} DLA cores".format(dla_core, builder.num_DLA_cores))
    config.default_device_type = trt.DeviceType.DLA
    config.DLA_core = int(dla_core)
    config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
    verbosity = getattr(trt, "ProfilingVerbosity", None)  # DETAILED from 8.2: the engine inspector then names each layer
    if verbosity is not None and hasattr(verbosity, "DETAILED"):
        config.profiling_verbosity = verbosity.DETAILED
    fallback = []  # type: List[str]
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if not config.can_run_on_DLA(layer):
            fallback.append(layer.name)
    return fallback


def _on_dla(layer):
    # type: (Any) -> bool
    """Whether an engine inspector layer (JSON, DETAILED verbosity) runs on the DLA: TensorRT puts a DLA
    subgraph into one layer of type ForeignNode ("{ForeignNode[...]}"), or names DLA in its type or tactic."""
    if not isinstance(layer, dict):
        return "ForeignNode" in str(layer) or "DLA" in str(layer)
    words = " ".join(str(layer.get(key, "")) for key in ("LayerType", "Name", "TacticName", "Origin"))
    return "ForeignNode" in words or "DLA" in words.upper()


def _placement(dla_core, on_dla, on_gpu, source):
    # type: (int, Optional[int], Optional[int], str) -> Dict[str, Any]
    if on_dla is None or on_gpu is None:
        runs_on = "unknown"
    elif on_dla == 0:
        runs_on = "gpu"
    else:
        runs_on = "mixed" if on_gpu else "dla"
    return {"core": int(dla_core), "layers_on_dla": on_dla, "layers_on_gpu": on_gpu, "runs_on": runs_on, "source": source}


def placement_from_log(dla_core, lines):
    # type: (int, List[str]) -> Optional[Dict[str, Any]]
    """The build log's summary (TensorRT 8.x, INFO): "---------- Layers Running on DLA ----------" then one
    "[DlaLayer] ..." line per DLA subgraph, "---------- Layers Running on GPU ----------" then "[GpuLayer] ..."."""
    counts = {}  # type: Dict[str, int]
    section = None  # type: Optional[str]
    for line in lines:
        text = line.split("] ", 1)[1] if line.startswith("[") and "] " in line else line
        if "Layers Running on DLA" in text:
            section = "dla"
            counts.setdefault(section, 0)
        elif "Layers Running on GPU" in text:
            section = "gpu"
            counts.setdefault(section, 0)
        elif section is not None and ("[DlaLayer]" in text or "[GpuLayer]" in text):
            counts[section] += 1
        elif section is not None and text.strip() and not text.lstrip().startswith("["):
            section = None
    if not counts:
        return None
    return _placement(dla_core, counts.get("dla", 0), counts.get("gpu", 0), "build_log")


def dla_placement(data, dla_core, logger, lines, v):
    # type: (bytes, int, trt.ILogger, List[str], Tuple[int, int]) -> Dict[str, Any]
    """Where the layers of a DLA build really run: the engine inspector (TensorRT >= 8.2), else the build
    log's summary, else unknown -- for engine.json's "dla" key (never "runs on DLA" on a guess)."""
    import json

    import tensorrt as trt

    if v >= (8, 2):
        try:
            runtime = trt.Runtime(logger)
            runtime.DLA_core = int(dla_core)
            engine = runtime.deserialize_cuda_engine(data)
            inspector = engine.create_engine_inspector() if engine is not None else None
            info = json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON)) if inspector else {}
            layers = info.get("Layers") or []
            if layers and all(isinstance(layer, dict) for layer in layers):
                on_dla = sum(1 for layer in layers if _on_dla(layer))
                return _placement(dla_core, on_dla, len(layers) - on_dla, "engine_inspector")
        except Exception as e:  # the inspector is a diagnostic: fall back to the log, say why
            lines.append("[W] engine inspector failed ({}: {}); reading the build log".format(type(e).__name__, e))
    found = placement_from_log(dla_core, lines)
    return found if found is not None else _placement(dla_core, None, None, "unavailable")


def dims(value):
    # type: (trt.Dims) -> List[int]
    """A Dims as a list (it behaves like a tuple; -1 is a dynamic dimension)."""
    return [int(value[i]) for i in range(len(value))]


def _io(network):
    # type: (trt.INetworkDefinition) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]
    def describe(t):
        # type: (trt.ITensor) -> Dict[str, Any]
        return {"name": t.name, "shape": [d if d >= 0 else None for d in dims(t.shape)], "dtype": str(t.dtype)}

    inputs = [describe(network.get_input(i)) for i in range(network.num_inputs)]
    outputs = [describe(network.get_output(i)) for i in range(network.num_outputs)]
    return inputs, outputs


def _serialize(builder, network, config, v, lines):
    # type: (trt.Builder, trt.INetworkDefinition, trt.IBuilderConfig, Tuple[int, int], List[str]) -> bytes
    data = None  # type: Optional[bytes]
    try:
        if v >= (8, 0):
            plan = builder.build_serialized_network(network, config)
            data = bytes(plan) if plan is not None else None
        else:  # build_engine: TensorRT < 8.0 (deprecated in 8.0, removed in 10.0)
            engine = getattr(builder, "build_engine")(network, config)
            data = bytes(engine.serialize()) if engine is not None else None
    except MemoryError:
        data = None
        lines.append("[E] out of memory")
    if data is None:
        errors = _errors(lines)
        text = " ".join(errors).lower()
        if "out of memory" in text or "cudaerrormemoryallocation" in text or "insufficient" in text:
            raise EngineError("out of memory during the build: lower stages.engine.workspace_mb or max_batch_size "
                              "(and close other GPU work on the board)")
        raise EngineError("TensorRT built no engine: {}".format(errors[-1] if errors else "no error message (see build.log)"))
    return data


def _write_log(log_path, lines):
    # type: (Optional[str], List[str]) -> None
    if log_path:
        with open(log_path, "w") as f:
            f.write("\n".join(lines) + "\n")


def calibration_batch(profile, wanted):
    # type: (Dict[str, Dict[str, List[int]]], int) -> int
    """The batch int8 calibration runs at: TensorRT calibrates at the calibration profile's OPT shape, so the
    calibrator, its buffer and that profile all use this one number -- ``wanted`` (the host's choice) within
    every input's min..max batch (a fixed-batch input decides it)."""
    batch = int(wanted)
    for name, shapes in sorted(profile.items()):
        low, high = int(shapes["min"][0]), int(shapes["max"][0])
        batch = min(max(batch, low), high)
        if not low <= batch <= high:
            raise EngineError("int8 calibration: the inputs' batch ranges do not overlap ({!r}: {}..{})".format(
                name, low, high))
    return batch


def _null_context():
    # type: () -> Any
    class Null(object):
        def __enter__(self):
            # type: () -> None
            return None

        def __exit__(self, *exc):
            # type: (*Any) -> None
            return None

    return Null()


def _cuda_for_build():
    # type: () -> Any
    """The process's CUDA object, made before any TensorRT object (the primary context: cuda.shared())."""
    from . import cuda as cuda_module

    shared = getattr(cuda_module, "shared", None)
    return shared() if shared is not None else cuda_module.Cuda()


def _active(cuda):
    # type: (Any) -> Any
    """``with _active(cuda):`` -- the CUDA context current around a call (cuda.active(); nothing to do where
    the binding has no such call)."""
    active = getattr(cuda, "active", None)
    return active() if active is not None else _null_context()


def build_onnx(onnx_path, engine_path, precision, workspace_mb, profile, dla_core=None, timing_cache=None,
               calibration=None, log_path=None):
    # type: (str, str, str, int, Dict[str, Dict[str, List[int]]], Optional[int], Optional[str], Optional[Dict[str, Any]], Optional[str]) -> Dict[str, Any]
    """Build an engine from an ONNX model; the engine is written to ``engine_path`` only when the build
    succeeded; the build log to ``log_path`` whether it succeeded or not."""
    import tensorrt as trt

    v = checked_version()
    lines = []  # type: List[str]
    try:
        return _build_onnx(trt, v, lines, onnx_path, engine_path, precision, workspace_mb, profile, dla_core,
                           timing_cache, calibration)
    finally:
        _write_log(log_path, lines)


def _build_onnx(trt, v, lines, onnx_path, engine_path, precision, workspace_mb, profile, dla_core, timing_cache,
                calibration):
    # type: (Any, Tuple[int, int], List[str], str, str, str, int, Dict[str, Dict[str, List[int]]], Optional[int], Optional[str], Optional[Dict[str, Any]]) -> Dict[str, Any]
    warnings = []  # type: List[str]
    # int8: the CUDA context exists before the first TensorRT object (the primary context TensorRT uses too)
    cuda = _cuda_for_build() if precision == "int8" else None
    logger = make_logger(lines)
    builder = trt.Builder(logger)
    flags = 0 if v >= (10, 0) else 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    with open(onnx_path, "rb") as f:
        parsed = parser.parse(f.read())
    if not parsed:
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        lines.extend("[E] " + e for e in errors)
        raise EngineError("TensorRT {}'s ONNX parser rejects the model: {}; deploy check --target names what it "
                          "cannot parse".format(trt.__version__, errors[0] if errors else "no message"))
    config = builder.create_builder_config()
    _set_workspace(config, v, workspace_mb)
    _set_precision(builder, config, precision)
    optimization = builder.create_optimization_profile()
    for name, shapes in sorted(profile.items()):
        optimization.set_shape(name, trt.Dims(shapes["min"]), trt.Dims(shapes["opt"]), trt.Dims(shapes["max"]))
    if profile:
        config.add_optimization_profile(optimization)
    fallback = _dla(builder, config, network, dla_core, precision, profile)
    calibrator = None
    if precision == "int8":
        calibration = dict(calibration or {})
        batch = calibration_batch(profile, calibration.get("batch_size", 8))
        if profile:  # calibration runs at the calibration profile's OPT shape: min = opt = max = the calibrator's batch
            calibrating = builder.create_optimization_profile()
            for name, shapes in sorted(profile.items()):
                shape = trt.Dims([batch] + list(shapes["opt"][1:]))
                calibrating.set_shape(name, shape, shape, shape)
            config.set_calibration_profile(calibrating)
        image_shape = list(sorted(profile.items())[0][1]["opt"][1:]) if profile else None
        calibrator = _calibrator(calibration, batch, cuda, image_shape)
        config.int8_calibrator = calibrator  # deprecated from 10.1 (explicit quantization); present on every Jetson TensorRT
    used_cache = _timing_cache(config, timing_cache, warnings) if v >= (8, 0) else False
    started = time.time()
    try:
        with _active(cuda) if cuda is not None else _null_context():
            data = _serialize(builder, network, config, v, lines)
    finally:
        if calibrator is not None:
            calibrator.release()
    build_s = time.time() - started
    _write_atomic(engine_path, data)
    if timing_cache and v >= (8, 0):
        _write_atomic(timing_cache, bytes(config.get_timing_cache().serialize()))
    inputs, outputs = _io(network)
    dla = dla_placement(data, dla_core, logger, lines, v) if dla_core is not None else None
    result = {"tensorrt_version": trt.__version__, "precision": precision, "build_s": build_s, "engine_bytes": len(data),
              "engine_sha256": hashlib.sha256(data).hexdigest(), "inputs": inputs, "outputs": outputs,
              # dla_core only where layers run on the DLA: a GPU engine is never labelled with a core
              "dla_core": dla_core if dla is not None and dla["runs_on"] in ("dla", "mixed") else None,
              "dla_fallback_layers": fallback, "timing_cache": {"used": used_cache, "path": timing_cache},
              "calibration": calibrator.report() if calibrator is not None else None, "log_lines": len(lines),
              "warnings": warnings + [line[4:] for line in lines if line.startswith("[W]")][:50], "builder": "python"}
    if dla is not None:
        result["dla"] = dla
    return result


def _calibrator(calibration, batch, cuda, image_shape=None):
    # type: (Dict[str, Any], int, Any, Optional[List[int]]) -> Any
    """An entropy calibrator over ``calibration["images"]`` (an .npy of images preprocessed as at export),
    ``batch`` images a batch (the calibration profile's OPT batch; its device buffer holds exactly that),
    reading and writing ``calibration["cache"]`` (reused: the images are not run again)."""
    import numpy as np
    import tensorrt as trt

    images = np.ascontiguousarray(np.load(calibration["images"], allow_pickle=False), dtype=np.float32)
    cache_path = calibration.get("cache")
    if len(images) < batch and not (cache_path and os.path.exists(cache_path)):
        raise EngineError("int8 calibration needs at least {} images (one batch), got {}; add dataset images".format(
            batch, len(images)))
    if image_shape is not None and len(images) and list(images.shape[1:]) != list(image_shape):
        raise EngineError("int8 calibration images are {} but the model's input is {}; re-run the engine stage".format(
            list(images.shape[1:]), list(image_shape)))
    nbytes = int(images[:1].nbytes) * batch  # one batch: get_batch never hands TensorRT more than this buffer

    class Entropy(trt.IInt8EntropyCalibrator2):
        def __init__(self):
            # type: () -> None
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.index = 0
            self.reused = False
            with _active(cuda):
                self.device = cuda.alloc(nbytes)  # type: Optional[int]

        def get_batch_size(self):
            # type: () -> int
            return batch

        def get_batch(self, names, *args):
            # type: (List[str], *Any) -> List[int]
            if self.device is None or self.index + batch > len(images):
                return []  # no more batches (pyInt8Doc.h: "or an empty list")
            chunk = images[self.index:self.index + batch]
            with _active(cuda):
                cuda.copy_to_device(self.device, chunk)
            self.index += batch
            return [int(self.device)]

        def read_calibration_cache(self, *args):
            # type: (*Any) -> Optional[bytes]
            if cache_path and os.path.exists(cache_path):
                self.reused = True
                with open(cache_path, "rb") as f:
                    return f.read()
            return None

        def write_calibration_cache(self, cache, *args):
            # type: (Any, *Any) -> None
            if cache_path:
                _write_atomic(cache_path, bytes(cache))

        def release(self):
            # type: () -> None
            free = getattr(cuda, "free", None)
            if self.device is not None and free is not None:
                with _active(cuda):
                    free(self.device)
            self.device = None

        def report(self):
            # type: () -> Dict[str, Any]
            return {"cache_reused": self.reused, "images": self.index, "batch_size": batch, "cache": cache_path,
                    "buffer_bytes": nbytes}

    return Entropy()


def build_uff(uff_path, engine_path, input_name, input_shape, output_names, precision, workspace_mb, max_batch_size,
              log_path=None):
    # type: (str, str, str, List[int], List[str], str, int, int, Optional[str]) -> Dict[str, Any]
    """UFF route, TensorRT <= 8.x only: implicit batch, UffParser, build_engine (trt_api.md, "UFF path").
    ``input_shape`` is one image, HWC: TensorFlow graphs are NHWC, registered with UffInputOrder.NHWC."""
    import tensorrt as trt

    v = checked_version()
    if v >= (9, 0) or not hasattr(trt, "UffParser"):
        raise EngineError("TensorRT {} has no UFF parser (removed in 9.0): use stages.convert.format: onnx".format(
            trt.__version__))
    lines = []  # type: List[str]
    try:
        return _build_uff(trt, v, lines, uff_path, engine_path, input_name, input_shape, output_names, precision,
                          workspace_mb, max_batch_size)
    finally:
        _write_log(log_path, lines)


def _build_uff(trt, v, lines, uff_path, engine_path, input_name, input_shape, output_names, precision, workspace_mb,
               max_batch_size):
    # type: (Any, Tuple[int, int], List[str], str, str, str, List[int], List[str], str, int, int) -> Dict[str, Any]
    logger = make_logger(lines)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # UFF needs implicit batch
    parser = getattr(trt, "UffParser")()  # TensorRT <= 8.x
    parser.register_input(input_name, tuple(input_shape), getattr(trt, "UffInputOrder").NHWC)
    for name in output_names:
        parser.register_output(name)
    if not parser.parse(uff_path, network):
        raise EngineError("TensorRT's UFF parser rejects {}: {}".format(uff_path, (_errors(lines) or ["no message"])[-1]))
    setattr(builder, "max_batch_size", int(max_batch_size))  # implicit batch: TensorRT <= 8.x
    config = builder.create_builder_config()
    _set_workspace(config, v, workspace_mb)
    _set_precision(builder, config, precision)
    started = time.time()
    data = _serialize(builder, network, config, v, lines)
    _write_atomic(engine_path, data)
    return {"tensorrt_version": trt.__version__, "precision": precision, "build_s": time.time() - started,
            "engine_bytes": len(data), "engine_sha256": hashlib.sha256(data).hexdigest(), "route": "uff",
            "builder": "python"}


def convert_to_uff(frozen_pb, output_names, uff_path):
    # type: (str, List[str], str) -> Dict[str, Any]
    """A frozen TensorFlow graph to UFF with NVIDIA's converter (JetPack <= 4.6, TensorFlow 1.x beside it)."""
    try:
        import uff  # type: ignore[import-not-found]
    except ImportError:
        raise EngineError("UFF needs TensorRT <= 8.x and NVIDIA's uff converter (JetPack 4.6: sudo apt install "
                          "uff-converter-tf graphsurgeon-tf); or use stages.convert.format: onnx")
    tmp = uff_path + ".tmp"
    uff.from_tensorflow_frozen_model(frozen_pb, list(output_names), output_filename=tmp, quiet=True)
    os.replace(tmp, uff_path)
    return {"uff_bytes": os.path.getsize(uff_path)}
