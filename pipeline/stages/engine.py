"""engine: build a TensorRT engine from the ONNX model on the device (``device:`` in the config).

Pending, with the reason, where no TensorRT can be reached: a target without TensorRT, a config
without ``device:``, or a device whose Python has no TensorRT bindings (``device.backend: auto``;
the benchmark then runs the ONNX model with ONNX Runtime there).
"""

from pipeline.errors import DeployError
from pipeline.stages import stage


def _pending(ctx):
    target = ctx.target
    if not target.has_tensorrt:
        return "target {} has no TensorRT (runtime {})".format(target.name, target.runtime)
    cfg = ctx.config.device
    if cfg is None:
        return ("TensorRT {} builds on the {} (JetPack {}): add a device: section (transport: local on the board, "
                "ssh from here)".format(target.tensorrt, target.name, target.jetpack))
    if cfg.backend == "onnxruntime":
        return "device.backend is onnxruntime: no engine to build"
    from pipeline.device.client import open_device

    with open_device(ctx.config, ctx.progress) as device:
        return _device_pending(ctx, device)


def _device_pending(ctx, device):
    if device.backend() != "tensorrt":
        return "TensorRT is not on {} (no Python bindings for {}); the benchmark runs the ONNX model with ONNX Runtime there".format(
            device.describe(), device.ping().get("executable"))
    if route(ctx) == "uff" and not device.has("uff"):
        return ("NVIDIA's uff converter is not on {} (JetPack 4.6: sudo apt install uff-converter-tf graphsurgeon-tf); "
                "stages.convert.format: onnx builds from the ONNX model".format(device.describe()))
    return None


def route(ctx):
    """The engine's route: stages.convert.format, where auto is the route deploy check recommended
    (the check stage's check.json; onnx when no check ran or it recommended neither)."""
    from pipeline import records
    from pipeline.device.engine import choose_route

    convert = ctx.config.stages.convert
    fmt = convert.format if convert is not None else "onnx"
    report = ctx.inputs.get("report") if fmt == "auto" else None
    recommended = None
    if report is not None:
        recommended = (records.read(report, "check", missing_ok=False).get("recommended") or {}).get("route")
    return choose_route(fmt, recommended, ctx.target.routes)


@stage("engine", inputs={"onnx": "convert", "frozen_graph": "freeze", "io": "freeze", "report": "check"},
       optional=("report",), outputs={"engine": "model.engine", "engine_manifest": "engine.json", "build_log": "build.log"},
       version=3, uses=("target", "device", "dataset", "stages.convert.format", "stages.benchmark.batch_sizes"),
       pending_reason=_pending)
def engine(ctx):
    """Build a TensorRT engine on the device (from the ONNX model, or from the frozen graph through UFF)."""
    from pipeline import records
    from pipeline.device.client import open_device
    from pipeline.device import engine as trt
    from pipeline.files import onnx_file

    opts, onnx_path = ctx.options, onnx_file(ctx.inputs["onnx"])
    where = dict(target=ctx.target, engine_path=ctx.output("engine"), log_path=ctx.output("build_log"),
                 log=ctx.progress.log)
    inputs, uff = trt.onnx_inputs(onnx_path), route(ctx) == "uff"
    with open_device(ctx.config, ctx.progress) as device:
        if uff:
            result = trt.build_uff(device, ctx.inputs["frozen_graph"], *_uff_io(ctx, inputs), opts, **where)
        else:
            bench = ctx.config.stages.benchmark
            profile = trt.profile_for(inputs, opts, list(bench.batch_sizes) if bench is not None else [])
            calibration = _calibration(ctx, inputs) if opts.precision == "int8" else None
            result = trt.build(device, onnx_path, opts, profile, calibration=calibration, **where)
    if result.log is None:  # a declared output: say that the device kept none, rather than leave it out
        ctx.output("build_log").write_text("deploy: {} returned no build log for this engine\n".format(result.device),
                                           encoding="utf-8")
    manifest = result.manifest
    records.write(ctx.output("engine_manifest"), manifest, "engine")  # schema deploy.engine/1 (pipeline.records)
    size_s = "{:.1f} MB, built in {:.1f} s on {}".format(manifest.get("engine_bytes", 0) / 1e6,
                                                         manifest.get("build_s", 0), result.device)
    if uff:
        return {"summary": "{} engine via UFF, {}".format(opts.precision, size_s),
                "tensorrt": manifest.get("tensorrt_version"), "route": "uff", "engine_bytes": manifest.get("engine_bytes")}
    return {
        "summary": "{} engine, {}{}".format(opts.precision, size_s,
                                          trt.dla_summary(manifest.get("dla")) if opts.dla_core is not None else ""),
        "tensorrt": manifest.get("tensorrt_version"),
        "build_s": manifest.get("build_s"),
        "engine_bytes": manifest.get("engine_bytes"),
        "board": result.board,
    }


def _uff_io(ctx, inputs):
    """(input name, input shape without the batch, output names) for the UFF route: the freeze stage's
    io.json names them, the ONNX model (the same graph, as tf2onnx names it) gives the NHWC shape."""
    from pipeline.graph.io import image_input, read_io_json

    io = read_io_json(ctx.inputs["io"]) if "io" in ctx.inputs else None
    if io is None or len(io["inputs"]) != 1 or image_input(inputs) is None:
        raise DeployError("the UFF route needs one NHWC image input and the freeze stage's io.json; use "
                          "stages.convert.format: onnx")
    return (io["inputs"][0]["name"].split(":")[0], list(inputs[0][1][1:]),
            [o["name"].split(":")[0] for o in io["outputs"]])


def _calibration(ctx, inputs):
    """Dataset images (preprocessed as at export: float32 NHWC 0..255, what the model's input takes) for
    int8 calibration of the model's one image input."""
    from pipeline.data.dataset import dataset_samples
    from pipeline.device.engine import Calibration
    from pipeline.graph.io import image_input

    image = image_input(inputs)
    if image is None:
        raise DeployError("stages.engine.precision int8 needs one image input (NHWC); the model has {}".format(
            ", ".join(n for n, _ in inputs)))
    name, height, width, _ = image
    images, source = dataset_samples(ctx.config, ctx.options.calibration_images, (height, width))
    if not source.startswith("dataset"):
        raise DeployError("stages.engine.precision int8 calibrates on dataset images, and the config has none; set "
                          "dataset.path (random pixels would give a useless calibration)")
    return Calibration(images=images, source=source, input=name)
