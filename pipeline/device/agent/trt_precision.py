"""The precision of a TensorRT build, the same rule for the Python builder and trtexec: builder flags up to
TensorRT 10.x (``precision_flags``, with the GPU's fast fp16/int8), the model's own types from TensorRT 11
(``strongly_typed_precision``: pyCore.cpp at NVIDIA/TensorRT v11.0/v11.1 has no BuilderFlag.FP16/INT8, no
platform_has_fast_*, no int8 calibrator; networks are always strongly typed).
"""

from typing import TYPE_CHECKING, List, Optional, Tuple  # noqa: F401  (type comments: the 3.6 floor)

from . import EngineError

if TYPE_CHECKING:  # mypy reads tensorrt-stubs; at run time tensorrt is imported inside the functions
    import tensorrt as trt  # noqa: F401


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


STRONGLY_TYPED_FROM = (11, 0)  # TensorRT 11: no FP16/INT8 builder flags, no calibrator, networks strongly typed


def strongly_typed_precision(version, precision, typed):
    # type: (str, str, Optional[str]) -> None
    """TensorRT >= 11 (the Python builder and trtexec alike): the precision lives in the ONNX model's types.
    fp32 builds as is; fp16 needs a model the host typed fp16 (``typed``); int8 is refused."""
    if precision == "int8":
        raise EngineError("TensorRT {} cannot build int8 from calibration images: TensorRT 11 removed the int8 "
                          "calibrator and builder flag (int8 comes from explicit Q/DQ quantization of the ONNX model, "
                          "a step deploy does not do yet); set stages.engine.precision: fp16, or use TensorRT "
                          "10.x".format(version))
    if precision == "fp16" and typed != "fp16":
        raise EngineError("TensorRT {} builds strongly typed networks only (no fp16 builder flag): fp16 needs the "
                          "ONNX model typed fp16, which deploy does on the host (onnxconverter-common's float16 "
                          "conversion: pip install onnxconverter-common) -- this model was sent untyped; update "
                          "deploy on the host, or set stages.engine.precision: fp32".format(version))
    if precision not in ("fp32", "fp16"):
        raise EngineError("unknown precision {!r} (fp32, fp16, int8)".format(precision))


def set_precision(builder, config, precision, v=(10, 0), typed=None):
    # type: (trt.Builder, trt.IBuilderConfig, str, Tuple[int, int], Optional[str]) -> None
    import tensorrt as trt

    if v >= STRONGLY_TYPED_FROM:
        strongly_typed_precision(trt.__version__, precision, typed)
    else:
        for flag in precision_flags(precision, builder.platform_has_fast_fp16, builder.platform_has_fast_int8):
            config.set_flag(trt.BuilderFlag.INT8 if flag == "int8" else trt.BuilderFlag.FP16)
    if precision == "fp32" and hasattr(trt.BuilderFlag, "TF32"):
        # TensorRT turns TF32 on by default (Ampere and newer: Orin, desktop GPUs): fp32 means fp32, as in
        # Polygraphy (TF32 off unless asked) and trtexec --noTF32
        config.clear_flag(trt.BuilderFlag.TF32)


def has_half_tensors(network):
    # type: (trt.INetworkDefinition) -> bool
    """Whether a parsed (strongly typed) network computes anything in fp16: an fp16-typed ONNX model does."""
    import tensorrt as trt

    for i in range(network.num_layers):
        layer = network.get_layer(i)
        for j in range(layer.num_outputs):
            if layer.get_output(j).dtype == trt.DataType.HALF:
                return True
    return False
