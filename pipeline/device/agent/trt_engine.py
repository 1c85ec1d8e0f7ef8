"""TensorRT in the agent: build an engine from ONNX (or UFF) and run it, one code path for TensorRT 8.2
(JetPack 4.6: TX2, Nano), 8.5 (JetPack 5: Xavier) and 10.x (JetPack 6: Orin), branching on the version
as NVIDIA's Python bindings show it (python/src/infer/pyCore.cpp in github.com/NVIDIA/TensorRT at tags 8.2.1,
8.4.1, 8.5.3, v8.6.1 and v10.0.0; the "Added, Deprecated, And Removed APIs" pages of the TensorRT 8.0.1 and
8.4.3 API docs under docs.nvidia.com/deeplearning/tensorrt/archives/):

    explicit batch       the EXPLICIT_BATCH flag below 10.0; networks are always explicit on 10.x
    build                build_serialized_network (8.0+); build_engine(...).serialize() below 8.0
    workspace            set_memory_pool_limit(WORKSPACE) from 8.4; max_workspace_size below
    I/O                  named tensors (set_input_shape, set_tensor_address, execute_async_v3) from 8.5;
                         bindings (set_binding_shape, execute_async_v2) below
    numpy                TensorRT < 8.6 uses np.bool, gone in numpy 1.24: refused with what to install
                         (NVIDIA/TensorRT tools/Polygraphy/polygraphy/util/util.py at v8.6.1 says so)
    precision            builder flags FP16/INT8 (+ platform_has_fast_*, the int8 calibrator) up to 10.x;
                         TensorRT 11 removed them (pyCore.cpp at v11.0/v11.1: networks are always strongly
                         typed): fp32 as is, fp16 from an ONNX model typed fp16 on the host (request "typed"),
                         int8 refused (explicit Q/DQ quantization is a step deploy does not do yet)
    newer                a TensorRT above NEWEST_KNOWN_MAJOR is refused by name, never an AttributeError

Type-checked with mypy against ``tensorrt-stubs`` (the 10.x API); calls that exist only in 8.x go
through ``getattr`` with the version named. tensorrt, numpy and pycuda / cuda-python are imported inside
functions: the agent imports this module only for a build or an engine run.
"""

import hashlib
import os
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple  # noqa: F401  (type comments: the 3.6 floor)

from . import EngineError, write_atomic  # noqa: F401  (EngineError: imported from here by the agent's modules)
from .trt_calibration import calibration_batch, cuda_for_build, entropy_calibrator, null_context
from .trt_dla import dla_placement, setup_dla
from .trt_precision import (STRONGLY_TYPED_FROM, has_half_tensors, precision_flags,  # noqa: F401  (precision_flags:
                            set_precision, strongly_typed_precision)  # imported from here by trtexec_build)

if TYPE_CHECKING:  # mypy reads tensorrt-stubs; at run time tensorrt is imported inside the functions
    import tensorrt as trt  # noqa: F401


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


NEWEST_KNOWN_MAJOR = 11  # the newest TensorRT whose Python API this agent was written against (v11.1's bindings)


def newer_than_known(version):
    # type: (str) -> Optional[str]
    """The one line refusing a TensorRT newer than this agent knows, or None."""
    if version_tuple(version)[0] <= NEWEST_KNOWN_MAJOR:
        return None
    return ("TensorRT {} is newer than the TensorRT APIs this deploy knows (8.x to {}.x): its Python API and "
            "trtexec flags may have changed; install a TensorRT {}.x or 10.x for this Python, or update deploy".format(
                version, NEWEST_KNOWN_MAJOR, NEWEST_KNOWN_MAJOR))


def checked_version():
    # type: () -> Tuple[int, int]
    """TensorRT's (major, minor), after the checks every build and run needs."""
    import tensorrt as trt

    version = getattr(trt, "__version__", None)
    if version is None:
        raise ImportError("the 'tensorrt' found is not TensorRT's Python bindings (type stubs only?)")
    refused = newer_than_known(version)
    if refused:
        raise EngineError(refused)
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


def _set_workspace(config, v, workspace_mb):
    # type: (trt.IBuilderConfig, Tuple[int, int], int) -> None
    import tensorrt as trt

    size = int(workspace_mb) << 20
    if v >= (8, 4):
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, size)
    else:  # max_workspace_size: TensorRT < 8.4 (deprecated in 8.4, removed in 10.0)
        setattr(config, "max_workspace_size", size)


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


def build_onnx(onnx_path, engine_path, precision, workspace_mb, profile, dla_core=None, timing_cache=None,
               calibration=None, log_path=None, typed=None):
    # type: (str, str, str, int, Dict[str, Dict[str, List[int]]], Optional[int], Optional[str], Optional[Dict[str, Any]], Optional[str], Optional[str]) -> Dict[str, Any]
    """Build an engine from an ONNX model; the engine is written to ``engine_path`` only when the build
    succeeded; the build log to ``log_path`` whether it succeeded or not. ``typed``: "fp16" when the host typed
the ONNX model fp16 (TensorRT >= 11 takes the precision from the model's types)."""
    import tensorrt as trt

    v = checked_version()
    if v >= STRONGLY_TYPED_FROM:  # before any TensorRT object: a refusal is one line, not a half build
        strongly_typed_precision(trt.__version__, precision, typed)
    lines = []  # type: List[str]
    try:
        return _build_onnx(trt, v, lines, onnx_path, engine_path, precision, workspace_mb, profile, dla_core,
                           timing_cache, calibration, typed)
    finally:
        _write_log(log_path, lines)


def _build_onnx(trt, v, lines, onnx_path, engine_path, precision, workspace_mb, profile, dla_core, timing_cache,
                calibration, typed=None):
    # type: (Any, Tuple[int, int], List[str], str, str, str, int, Dict[str, Dict[str, List[int]]], Optional[int], Optional[str], Optional[Dict[str, Any]], Optional[str]) -> Dict[str, Any]
    warnings = []  # type: List[str]
    # int8: the CUDA context exists before the first TensorRT object (the primary context TensorRT uses too)
    cuda = cuda_for_build() if precision == "int8" else None
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
    if v >= STRONGLY_TYPED_FROM and precision == "fp16" and not has_half_tensors(network):
        raise EngineError("the model sent as fp16-typed has no fp16 tensor after parsing (TensorRT {} takes the "
                          "precision from the model's types); re-run the engine stage (deploy run --force "
                          "engine)".format(trt.__version__))
    config = builder.create_builder_config()
    _set_workspace(config, v, workspace_mb)
    set_precision(builder, config, precision, v, typed)
    optimization = builder.create_optimization_profile()
    for name, shapes in sorted(profile.items()):
        optimization.set_shape(name, trt.Dims(shapes["min"]), trt.Dims(shapes["opt"]), trt.Dims(shapes["max"]))
    if profile:
        config.add_optimization_profile(optimization)
    fallback = setup_dla(builder, config, network, dla_core, precision, profile)
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
        calibrator = entropy_calibrator(calibration, batch, cuda, image_shape)
        config.int8_calibrator = calibrator  # deprecated from 10.1 (explicit quantization); present on every Jetson TensorRT
    used_cache = _timing_cache(config, timing_cache, warnings) if v >= (8, 0) else False
    started = time.time()
    try:
        with cuda.active() if cuda is not None else null_context():
            data = _serialize(builder, network, config, v, lines)
    finally:
        if calibrator is not None:
            calibrator.release()
    build_s = time.time() - started
    write_atomic(engine_path, data)
    if timing_cache and v >= (8, 0):
        write_atomic(timing_cache, bytes(config.get_timing_cache().serialize()))
    inputs, outputs = _io(network)
    dla = dla_placement(data, dla_core, logger, lines, v) if dla_core is not None else None
    result = {"tensorrt_version": trt.__version__, "precision": precision, "build_s": build_s, "engine_bytes": len(data),
              "engine_sha256": hashlib.sha256(data).hexdigest(), "inputs": inputs, "outputs": outputs,
              # dla_core only where layers run on the DLA: a GPU engine is never labelled with a core
              "dla_core": dla_core if dla is not None and dla["runs_on"] in ("dla", "mixed") else None,
              "dla_fallback_layers": fallback, "timing_cache": {"used": used_cache, "path": timing_cache},
              "calibration": calibrator.report() if calibrator is not None else None, "log_lines": len(lines),
              "warnings": warnings + [line[4:] for line in lines if line.startswith("[W]")][:50], "builder": "python",
              "typed": typed if v >= STRONGLY_TYPED_FROM else None}
    if dla is not None:
        result["dla"] = dla
    return result


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
    set_precision(builder, config, precision, v)
    started = time.time()
    data = _serialize(builder, network, config, v, lines)
    write_atomic(engine_path, data)
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
