"""The engine stage's work on the host side: send the ONNX model (and int8 calibration images) to
the device, have the agent build there, fetch the engine and its log back.

The runner's cache key already holds the ONNX model's sha256, the target (TensorRT version, board),
the stage's options (precision, workspace, profile, DLA, builder) and the dataset fingerprint
(calibration images); the device keeps a timing cache per board and TensorRT version and a
calibration cache per model and image set, so a rebuild is faster and int8 calibrates once.
"""

import hashlib
import json
import tempfile
from pathlib import Path

from pipeline import records
from pipeline.device.client import device_for, fingerprint
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
    static = dla_batch(opts, batch_sizes) if getattr(opts, "dla_core", None) is not None else None
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


def build_engine(ctx, onnx_path):
    opts, target = ctx.options, ctx.target
    device = device_for(ctx.config, ctx.progress)
    device.check_tensorrt(target, warn=ctx.progress.log)
    probe = device.probe()
    if opts.dla_core is not None and not target.dla_cores:
        raise DeployError("stages.engine.dla_core: {} has no DLA cores; remove dla_core".format(target.name))
    bench = ctx.config.stages.benchmark
    inputs = onnx_inputs(onnx_path)
    profile = profile_for(inputs, opts, list(bench.batch_sizes) if bench is not None else [])
    transport = device.transport
    remote_onnx = transport.send(onnx_path)
    board = (probe.get("board") or target.name) + "-trt" + str(probe.get("tensorrt"))
    tag = hashlib.sha256(json.dumps([remote_onnx, opts.model_dump(mode="json"), board], sort_keys=True).encode()).hexdigest()[:16]
    request = {
        "command": "build", "onnx": remote_onnx, "precision": opts.precision, "workspace_mb": opts.workspace_mb,
        "profile": profile, "dla_core": opts.dla_core, "builder": opts.builder, "tensorrt": probe.get("tensorrt"),
        "fast_fp16": target.supports_precision("fp16"),  # int8 beside fp16, in both builders (trtexec cannot ask)
        "engine": "{}/out/{}{}".format(transport.work, tag, ENGINE_SUFFIX),
        "log": "{}/out/{}.log".format(transport.work, tag),
        "timing_cache": "{}/cache/timing-{}.cache".format(transport.work, board),
    }
    transport.exec("mkdir -p {w}/out {w}/cache".format(w=transport.work), what="preparing the work folder")
    if opts.precision == "int8":
        request["calibration"] = _calibration(ctx, transport, inputs, remote_onnx, probe.get("tensorrt"),
                                              calibration_batch_for(profile))
    ctx.progress.log("engine: building {} {} on {} (TensorRT {})".format(
        Path(onnx_path).name, opts.precision, device.describe(), probe.get("tensorrt")))
    result = _build_keeping_the_log(ctx, transport, device, request, "the engine build")
    out = ctx.output("engine")
    out.parent.mkdir(parents=True, exist_ok=True)
    transport.fetch(request["engine"], out)
    result["device"] = fingerprint(probe)
    result["profile"] = profile
    records.write(ctx.out_dir / "engine.json", result, "engine")  # schema deploy.engine/1 (pipeline.records)
    return {
        "summary": "{} engine, {:.1f} MB, built in {:.1f} s on {}{}".format(
            opts.precision, result.get("engine_bytes", 0) / 1e6, result.get("build_s", 0), device.describe(),
            _dla_summary(result.get("dla")) if opts.dla_core is not None else ""),
        "tensorrt": result.get("tensorrt_version"),
        "build_s": result.get("build_s"),
        "engine_bytes": result.get("engine_bytes"),
        "board": probe.get("board"),
    }


def _build_keeping_the_log(ctx, transport, device, request, what):
    """The build's answer; its log (written on the device also when the build fails) lands in the stage's
    folder as build.log either way, and a failed build's error says where it is."""
    try:
        result = device.call(request, what=what)
    except DeployError as e:
        kept = _fetch_log(transport, request, ctx.out_dir)
        if kept is not None:
            e.message = "{} (build log: {})".format(e.message, kept)
            e.args = (e.message,)
        raise
    _fetch_log(transport, request, ctx.out_dir)
    return result


def _fetch_log(transport, request, out_dir):
    """Fetch the device's build log to ``out_dir/build.log``; its path, or None where there is none."""
    target = Path(out_dir) / "build.log"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.unlink()  # never an older build's log beside this build's result
        transport.fetch(request["log"], target)
    except (DeployError, OSError):
        return None  # the log is a convenience; the engine and its manifest are what count
    return target


def _dla_summary(dla):
    if not dla:
        return ""
    if dla["runs_on"] == "unknown":
        return ", DLA core {}: placement unknown (no engine inspector, no build-log summary)".format(dla["core"])
    return ", DLA core {}: {} layers on DLA, {} on GPU{}".format(
        dla["core"], dla["layers_on_dla"], dla["layers_on_gpu"],
        " (the engine runs on the GPU)" if dla["runs_on"] == "gpu" else "")


def _calibration(ctx, transport, inputs, remote_onnx, tensorrt, batch):
    """Dataset images (preprocessed as at export: float32 NHWC 0..255, what the model's input takes) on the
    device, calibrated ``batch`` images a batch (``calibration_batch_for``); the calibration cache is keyed
    by model, images, batch and TensorRT version (a JetPack upgrade calibrates again)."""
    import numpy as np

    from pipeline.data.dataset import dataset_samples

    opts = ctx.options
    if len(inputs) != 1 or len(inputs[0][1]) != 4:
        raise DeployError("stages.engine.precision int8 needs one image input (NHWC); the model has {}".format(
            ", ".join(n for n, _ in inputs)))
    name, dims = inputs[0]
    images, source = dataset_samples(ctx.config, opts.calibration_images, (dims[1], dims[2]))
    if not source.startswith("dataset"):
        raise DeployError("stages.engine.precision int8 calibrates on dataset images, and the config has none; set "
                          "dataset.path (random pixels would give a useless calibration)")
    if len(images) < batch:
        raise DeployError("int8 calibration: the dataset has {} images, fewer than one calibration batch ({}); add "
                          "images or lower stages.engine.max_batch_size".format(len(images), batch))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "calibration.npy"
        np.save(path, np.ascontiguousarray(images, dtype=np.float32))
        remote_images = transport.send(path)
    key = hashlib.sha256(json.dumps([remote_onnx, remote_images, batch, "tensorrt", str(tensorrt)]).encode()).hexdigest()[:16]
    ctx.progress.log("engine: int8 calibration on {} images ({})".format(len(images), source))
    return {"images": remote_images, "cache": "{}/cache/calibration-{}.cache".format(transport.work, key),
            "batch_size": batch, "input": name}


def route(ctx):
    """The engine's route: stages.convert.format, where auto is the route deploy check recommended
    (the check stage's check.json; onnx when no check ran or it recommended neither)."""
    convert = ctx.config.stages.convert
    fmt = convert.format if convert is not None else "onnx"
    if fmt != "auto":
        return fmt
    report = ctx.inputs.get("report")
    if report is not None:
        recommended = (records.read(report, "check", missing_ok=False).get("recommended") or {}).get("route")
        if recommended in ("uff", "onnx") and recommended in ctx.target.routes:
            return recommended
    return "onnx"


def build_engine_uff(ctx, onnx_path):
    """UFF route (TensorRT <= 8.x): the frozen graph to UFF with NVIDIA's converter on the device, then
    UffParser (implicit batch, NHWC input) and an engine for batches up to max_batch_size."""
    from pipeline.graph.io import read_io_json

    opts, target = ctx.options, ctx.target
    device = device_for(ctx.config, ctx.progress)
    device.check_tensorrt(target, warn=ctx.progress.log)
    probe = device.probe()
    if opts.precision == "int8" or opts.dla_core is not None:
        raise DeployError("stages.engine: the UFF route builds fp32/fp16 on the GPU here; int8 calibration and DLA "
                          "take the ONNX route (stages.convert.format: onnx)")
    inputs = onnx_inputs(onnx_path)  # the same graph's input, as tf2onnx names it (NHWC)
    io = read_io_json(ctx.inputs["io"]) if "io" in ctx.inputs else None
    if io is None or len(io["inputs"]) != 1 or len(inputs) != 1 or len(inputs[0][1]) != 4:
        raise DeployError("the UFF route needs one NHWC image input and the freeze stage's io.json; use "
                          "stages.convert.format: onnx")
    input_name = io["inputs"][0]["name"].split(":")[0]
    outputs = [o["name"].split(":")[0] for o in io["outputs"]]
    transport = device.transport
    remote_pb = transport.send(ctx.inputs["frozen_graph"])
    tag = hashlib.sha256(json.dumps([remote_pb, opts.model_dump(mode="json"), probe.get("tensorrt")]).encode()).hexdigest()[:16]
    transport.exec("mkdir -p {w}/out".format(w=transport.work), what="preparing the work folder")
    request = {"command": "build_uff", "frozen": remote_pb, "uff": "{}/out/{}.uff".format(transport.work, tag),
               "engine": "{}/out/{}{}".format(transport.work, tag, ENGINE_SUFFIX), "log": "{}/out/{}.log".format(transport.work, tag),
               "input": input_name, "input_shape": list(inputs[0][1][1:]), "outputs": outputs,
               "precision": opts.precision, "workspace_mb": opts.workspace_mb, "max_batch_size": opts.max_batch_size}
    ctx.progress.log("engine: UFF route: converting and building {} on {} (TensorRT {})".format(
        Path(ctx.inputs["frozen_graph"]).name, device.describe(), probe.get("tensorrt")))
    result = _build_keeping_the_log(ctx, transport, device, request, "the UFF conversion and engine build")
    out = ctx.output("engine")
    out.parent.mkdir(parents=True, exist_ok=True)
    transport.fetch(request["engine"], out)
    result["device"] = fingerprint(probe)
    records.write(ctx.out_dir / "engine.json", result, "engine")  # schema deploy.engine/1
    return {"summary": "{} engine via UFF, {:.1f} MB, built in {:.1f} s on {}".format(
        opts.precision, result.get("engine_bytes", 0) / 1e6, result.get("build_s", 0), device.describe()),
        "tensorrt": result.get("tensorrt_version"), "route": "uff", "engine_bytes": result.get("engine_bytes")}
