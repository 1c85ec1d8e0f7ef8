"""The engine stage's work on the host side: send the ONNX model (and int8 calibration images) to
the device, have the agent build there, fetch the engine and its log back. Library functions take
values (a Device, paths, EngineOptions, a profile) and return an ``EngineResult``; the engine stage
(``pipeline.stages.engine``) turns the config into these values and the result into its files.

    profile = profile_for(onnx_inputs(onnx_path), opts, batch_sizes)
    result = build(device, onnx_path, opts, profile, target=target, engine_path=out, log_path=log)

The runner's cache key already holds the ONNX model's sha256, the target (TensorRT version, board),
the stage's options (precision, workspace, profile, DLA, builder) and the dataset fingerprint
(calibration images); the device keeps a timing cache per board and TensorRT version and a
calibration cache per model and image set, so a rebuild is faster and int8 calibrates once.
"""

import hashlib
import json
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pipeline.device.agent.trt_precision import STRONGLY_TYPED_FROM
from pipeline.device.client import fingerprint
from pipeline.errors import DeployError

ENGINE_SUFFIX = ".engine"


def onnx_inputs(path):
    """[(name, dims)] of the ONNX model's graph inputs (initializers excluded); dims None where dynamic."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    found = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim]
        found.append((value.name, dims))
    return found


def dla_batch(opts, batch_sizes):
    """A DLA engine's one batch size (DLA has no dynamic shapes: min = opt = max): the benchmark's only
    batch size, else max_batch_size; several benchmark batch sizes are refused (one DLA engine each)."""
    sizes = sorted(set(batch_sizes)) if batch_sizes else [opts.max_batch_size]
    if len(sizes) > 1:
        raise DeployError("stages.engine.dla_core: a DLA engine has one static batch size, but "
                          "stages.benchmark.batch_sizes has {}; benchmark one batch size on DLA (e.g. "
                          "stages.benchmark.batch_sizes: [{}]) or remove dla_core".format(sizes, sizes[-1]))
    if sizes[0] > opts.max_batch_size:
        raise DeployError("stages.engine.max_batch_size is {} but stages.benchmark.batch_sizes has {}: raise "
                          "max_batch_size".format(opts.max_batch_size, sizes[0]))
    return sizes[0]


def profile_for(inputs, opts, batch_sizes):
    """The optimisation profile: batch 1 .. max_batch_size, tuned for the largest benchmarked batch; for
    DLA (``opts.dla_core``) one static batch, min = opt = max (``dla_batch``)."""
    biggest = max(batch_sizes) if batch_sizes else opts.max_batch_size
    if biggest > opts.max_batch_size:
        raise DeployError("stages.engine.max_batch_size is {} but stages.benchmark.batch_sizes has {}: the engine's "
                          "profile must cover it; raise max_batch_size".format(opts.max_batch_size, biggest))
    static = dla_batch(opts, batch_sizes) if opts.dla_core is not None else None
    profile = {}
    for name, dims in inputs:
        if not dims:
            continue
        rest = dims[1:]
        if any(d is None for d in rest):
            raise DeployError("the ONNX model's input {} has dynamic non-batch dims {}; export with a fixed input size "
                              "to build an engine".format(name, dims))
        if dims[0] is not None:  # a fixed batch: the profile is that shape
            profile[name] = {k: list(dims) for k in ("min", "opt", "max")}
        elif static is not None:
            profile[name] = {k: [static] + rest for k in ("min", "opt", "max")}
        else:
            profile[name] = {"min": [1] + rest, "opt": [biggest] + rest, "max": [opts.max_batch_size] + rest}
    return profile


def calibration_batch_for(profile, wanted=8):
    """The int8 calibration batch the host asks for: ``wanted`` (8) within every input's profile batch range,
    so a fixed-batch or static (DLA) input decides it. The agent calibrates at exactly this batch: its
    calibration profile is min = opt = max = this batch (TensorRT calibrates at OPT)."""
    batch = wanted
    for shapes in profile.values():
        batch = min(max(batch, shapes["min"][0]), shapes["max"][0])
    return batch


@dataclass
class Calibration:
    """int8 calibration images for the model's one image input: float32 NHWC 0..255 (as at export) and
    where they came from ("dataset (...)")."""
    images: Any
    source: str
    input: str


@dataclass
class EngineResult:
    """A build's outcome: the engine (fetched to ``engine_path``), its manifest (the agent's answer, the
    device's fingerprint and, on the ONNX route, the profile: engine.json), the build log where one came
    back, and the device's description and board."""
    engine: Path
    manifest: dict
    log: Optional[Path]
    device: str
    board: Optional[str]


def _tag(*parts, sort_keys=False):
    return hashlib.sha256(json.dumps(list(parts), sort_keys=sort_keys).encode()).hexdigest()[:16]


def _noop(message):
    pass


def typed_for(onnx_path, precision, tensorrt, folder, log=_noop):
    """The ONNX model the device builds from and the request's ``typed`` key. TensorRT >= 11 has no fp16 builder
    flag (networks are strongly typed: the agent's ``trt_precision``), so fp16 there is the model typed fp16 here
    with onnxconverter-common's float16 conversion, inputs and outputs kept float32 (the benchmark, infer and the
    consistency check feed and read float32 as on TensorRT 10): written into ``folder``, ``typed`` "fp16". Any
    other precision or TensorRT is the model as it is, ``typed`` None. Both builders (Python, trtexec) take it."""
    if precision != "fp16" or trt_major_minor(tensorrt) < STRONGLY_TYPED_FROM:
        return Path(onnx_path), None
    try:
        from onnxconverter_common import float16
    except ImportError:
        raise DeployError("stages.engine.precision fp16 on TensorRT {} needs the ONNX model typed fp16 on this "
                          "machine (TensorRT 11 has no fp16 builder flag): pip install onnxconverter-common (or "
                          "pip install 'deploy[trt11]'), or set stages.engine.precision: fp32".format(tensorrt)) from None
    import onnx

    log("engine: typing {} fp16 for TensorRT {} (onnxconverter-common; inputs and outputs stay float32)".format(
        Path(onnx_path).name, tensorrt))
    try:
        model = float16.convert_float_to_float16(onnx.load(str(onnx_path)), keep_io_types=True)
    except Exception as e:  # a third-party converter's failure on this model: one line naming it, not a traceback
        raise DeployError("onnxconverter-common could not type {} fp16 for TensorRT {} ({}: {}); set "
                          "stages.engine.precision: fp32, or build on TensorRT 10.x".format(
                              onnx_path, tensorrt, type(e).__name__, " ".join(str(e).split())[:300])) from None
    typed = Path(folder) / (Path(onnx_path).stem + ".fp16.onnx")
    onnx.save(model, str(typed))
    return typed, "fp16"


def trt_major_minor(version):
    """(major, minor) of a TensorRT version string ("11.1.0.7" -> (11, 1)); (0, 0) where unknown (no Python
    bindings on the device: the agent then treats it as 8.x)."""
    parts = str(version or "").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return 0, 0


def build(device, onnx_path, opts, profile, *, target, engine_path, log_path, calibration=None, log=_noop):
    """Build a TensorRT engine from ``onnx_path`` on ``device`` (options ``opts``: EngineOptions; ``profile``:
    ``profile_for``'s), fetch it to ``engine_path`` and the build log to ``log_path``. int8 needs
    ``calibration`` (a Calibration)."""
    device.check_tensorrt(target, warn=log)
    probe = device.probe()
    if opts.dla_core is not None and not target.dla_cores:
        raise DeployError("stages.engine.dla_core: {} has no DLA cores; remove dla_core".format(target.name))
    transport = device.transport
    with tempfile.TemporaryDirectory(prefix="deploy-typed-") as folder:
        sent, typed = typed_for(onnx_path, opts.precision, probe.get("tensorrt"), folder, log)
        remote_onnx = transport.send(sent)
    board = (probe.get("board") or target.name) + "-trt" + str(probe.get("tensorrt"))
    tag = _tag(remote_onnx, opts.model_dump(mode="json"), board, sort_keys=True)
    request = {
        "command": "build", "onnx": remote_onnx, "precision": opts.precision, "workspace_mb": opts.workspace_mb,
        "profile": profile, "dla_core": opts.dla_core, "builder": opts.builder, "tensorrt": probe.get("tensorrt"),
        "fast_fp16": target.supports_precision("fp16"),  # int8 beside fp16, in both builders (trtexec cannot ask)
        "engine": "{}/out/{}{}".format(transport.work, tag, ENGINE_SUFFIX),
        "log": "{}/out/{}.log".format(transport.work, tag),
        "timing_cache": "{}/cache/timing-{}.cache".format(transport.work, board),
    }
    if typed is not None:
        request["typed"] = typed
    transport.exec("mkdir -p {} {}".format(shlex.quote(transport.work + "/out"), shlex.quote(transport.work + "/cache")),
                   what="preparing the work folder")
    if opts.precision == "int8":
        if calibration is None:
            raise DeployError("stages.engine.precision int8 needs calibration images")
        request["calibration"] = _calibration(transport, calibration, remote_onnx, probe.get("tensorrt"),
                                              calibration_batch_for(profile), log)
    log("engine: building {} {} on {} (TensorRT {})".format(
        Path(onnx_path).name, opts.precision, device.describe(), probe.get("tensorrt")))
    manifest = _build_keeping_the_log(log_path, transport, device, request, "the engine build")
    manifest["device"] = fingerprint(probe)
    manifest["profile"] = profile
    return _fetched(transport, request, engine_path, log_path, manifest, device, probe)


def _fetched(transport, request, engine_path, log_path, manifest, device, probe):
    engine_path = Path(engine_path)
    engine_path.parent.mkdir(parents=True, exist_ok=True)
    transport.fetch(request["engine"], engine_path)
    log_path = Path(log_path)
    return EngineResult(engine=engine_path, manifest=manifest, log=log_path if log_path.is_file() else None,
                        device=device.describe(), board=probe.get("board"))


def _build_keeping_the_log(log_path, transport, device, request, what):
    """The build's answer; its log (written on the device also when the build fails) lands at ``log_path``
    either way, and a failed build's error says where it is."""
    try:
        result = device.call(request, what=what)
    except DeployError as e:
        kept = _fetch_log(transport, request, log_path)
        if kept is not None:
            e.message = "{} (build log: {})".format(e.message, kept)
            e.args = (e.message,)
        raise
    _fetch_log(transport, request, log_path)
    return result


def _fetch_log(transport, request, log_path):
    """Fetch the device's build log to ``log_path``; its path, or None where there is none."""
    target = Path(log_path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.unlink()  # never an older build's log beside this build's result
        transport.fetch(request["log"], target)
    except (DeployError, OSError):
        return None  # the log is a convenience; the engine and its manifest are what count
    return target


def dla_summary(dla):
    """", DLA core 0: 40 layers on DLA, 2 on GPU" for a summary line ("" without DLA)."""
    if not dla:
        return ""
    if dla["runs_on"] == "unknown":
        return ", DLA core {}: placement unknown (no engine inspector, no build-log summary)".format(dla["core"])
    return ", DLA core {}: {} layers on DLA, {} on GPU{}".format(
        dla["core"], dla["layers_on_dla"], dla["layers_on_gpu"],
        " (the engine runs on the GPU)" if dla["runs_on"] == "gpu" else "")


def _calibration(transport, calibration, remote_onnx, tensorrt, batch, log=_noop):
    """The calibration images on the device, calibrated ``batch`` images a batch (``calibration_batch_for``);
    the calibration cache is keyed by model, images, batch and TensorRT version (a JetPack upgrade
    calibrates again)."""
    import numpy as np

    images = calibration.images
    if len(images) < batch:
        raise DeployError("int8 calibration: the dataset has {} images, fewer than one calibration batch ({}); add "
                          "images or lower stages.engine.max_batch_size".format(len(images), batch))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "calibration.npy"
        np.save(path, np.ascontiguousarray(images, dtype=np.float32))
        remote_images = transport.send(path)
    key = _tag(remote_onnx, remote_images, batch, "tensorrt", str(tensorrt))
    log("engine: int8 calibration on {} images ({})".format(len(images), calibration.source))
    return {"images": remote_images, "cache": "{}/cache/calibration-{}.cache".format(transport.work, key),
            "batch_size": batch, "input": calibration.input}


def choose_route(fmt, recommended, routes):
    """The engine's route: ``fmt`` (stages.convert.format), where auto is ``recommended`` (the route deploy
    check recommended) when it is uff or onnx and the target has it, else onnx."""
    if fmt != "auto":
        return fmt
    from pipeline.targets.device import RUNNABLE_ROUTES

    if recommended in RUNNABLE_ROUTES and recommended in routes:
        return recommended
    return "onnx"


def build_uff(device, frozen_graph, input_name, input_shape, outputs, opts, *, target, engine_path, log_path,
              log=_noop):
    """UFF route (TensorRT <= 8.x): the frozen graph to UFF with NVIDIA's converter on the device, then
    UffParser (implicit batch, NHWC ``input_shape`` without the batch) and an engine for batches up to
    max_batch_size."""
    device.check_tensorrt(target, warn=log)
    probe = device.probe()
    if opts.precision == "int8" or opts.dla_core is not None:
        raise DeployError("stages.engine: the UFF route builds fp32/fp16 on the GPU here; int8 calibration and DLA "
                          "take the ONNX route (stages.convert.format: onnx)")
    transport = device.transport
    remote_pb = transport.send(frozen_graph)
    tag = _tag(remote_pb, opts.model_dump(mode="json"), probe.get("tensorrt"))
    transport.exec("mkdir -p {}".format(shlex.quote(transport.work + "/out")), what="preparing the work folder")
    request = {"command": "build_uff", "frozen": remote_pb, "uff": "{}/out/{}.uff".format(transport.work, tag),
               "engine": "{}/out/{}{}".format(transport.work, tag, ENGINE_SUFFIX), "log": "{}/out/{}.log".format(transport.work, tag),
               "input": input_name, "input_shape": list(input_shape), "outputs": list(outputs),
               "precision": opts.precision, "workspace_mb": opts.workspace_mb, "max_batch_size": opts.max_batch_size}
    log("engine: UFF route: converting and building {} on {} (TensorRT {})".format(
        Path(frozen_graph).name, device.describe(), probe.get("tensorrt")))
    manifest = _build_keeping_the_log(log_path, transport, device, request, "the UFF conversion and engine build")
    manifest["device"] = fingerprint(probe)
    return _fetched(transport, request, engine_path, log_path, manifest, device, probe)
