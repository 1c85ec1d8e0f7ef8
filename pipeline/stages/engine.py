"""engine: build a TensorRT engine from the ONNX model on the device (``device:`` in the config).

Pending, with the reason, where no TensorRT can be reached: a target without TensorRT, a config
without ``device:``, or a device whose Python has no TensorRT bindings (``device.backend: auto``;
the benchmark then runs the ONNX model with ONNX Runtime there).
"""

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
    from pipeline.device.client import device_for

    device = device_for(ctx.config, ctx.progress)
    if device.backend() != "tensorrt":
        return "TensorRT is not on {} (no Python bindings for {}); the benchmark runs the ONNX model with ONNX Runtime there".format(
            device.describe(), device.ping().get("executable"))
    from pipeline.device.engine import route

    if route(ctx) == "uff" and not device.has("uff"):
        return ("NVIDIA's uff converter is not on {} (JetPack 4.6: sudo apt install uff-converter-tf graphsurgeon-tf); "
                "stages.convert.format: onnx builds from the ONNX model".format(device.describe()))
    return None


@stage("engine", inputs={"onnx": "convert", "frozen_graph": "freeze", "io": "freeze", "report": "check"},
       optional=("report",), outputs={"engine": "model.engine"}, version=2, uses=("target", "device", "dataset", "stages.convert.format", "stages.benchmark.batch_sizes"),
       pending_reason=_pending)
def engine(ctx):
    """Build a TensorRT engine on the device (from the ONNX model, or from the frozen graph through UFF)."""
    from pipeline.device.engine import build_engine, build_engine_uff, route
    from pipeline.files import onnx_file

    if route(ctx) == "uff":
        return build_engine_uff(ctx, onnx_file(ctx.inputs["onnx"]))
    return build_engine(ctx, onnx_file(ctx.inputs["onnx"]))
