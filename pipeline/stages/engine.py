"""engine: build a TensorRT engine from the ONNX model — on a machine that has TensorRT.

The build itself comes with the device issue; until then, on a machine without TensorRT, the
stage reports itself pending with the reason instead of pretending.
"""

from pipeline.errors import StageFailed
from pipeline.stages import stage


def _pending(ctx):
    target = ctx.target
    if not target.has_tensorrt:
        return "target {} has no TensorRT (runtime {})".format(target.name, target.runtime)
    try:
        import importlib.util

        found = importlib.util.find_spec("tensorrt") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return "TensorRT {} is not on this machine; build the engine on the {} (JetPack {})".format(
            target.tensorrt, target.name, target.jetpack)
    return "engine build with TensorRT lands with the device issue; not implemented yet"


@stage("engine", inputs={"onnx": "convert"}, outputs={"engine": "model.engine"}, version=1, uses=("target",), pending_reason=_pending,
       tools=("tensorrt",))
def engine(ctx):
    """Build a TensorRT engine (on the device)."""
    raise StageFailed("engine build is not implemented yet")
