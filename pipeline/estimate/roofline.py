"""A roofline per engine layer: its time from its arithmetic or from the bytes it moves, plus a launch cost.

    t(layer) = max(flops * batch / (peak[precision, kind] * eff[kind]) [* (1 + k_half / K) for conv, matmul],
                   bytes / (bandwidth * eff_mem)) + launch
    latency = sum of t over the layers;  throughput = batch / latency

``peak``: the board's tensor-core peak for convolutions and matrix products where the GPU has tensor
cores (Xavier, Orin), else its CUDA-core peak; point-wise, depthwise, pooling and the rest run on CUDA
cores. ``bytes``: the weights once per batch plus the activations each image reads and writes, at the
precision built (fp32 4 bytes, fp16 2, int8 1). ``eff`` and ``launch`` are the calibrated parameters
(pipeline.estimate.calibration); the facts come from the target file's ``estimate:`` block.
"""

import math
from dataclasses import dataclass

BYTES = {"fp32": 4, "fp16": 2, "int8": 1}
TENSOR_KINDS = ("conv", "matmul")


@dataclass(frozen=True)
class Params:
    """The free parameters of the model: efficiencies (fractions of peak) and the launch cost per layer."""

    eff_conv: float  # convolutions and matrix products, of the (tensor-core where present) peak
    eff_other: float  # depthwise, pooling, point-wise, reductions: of the CUDA-core peak
    eff_mem: float  # of the memory bandwidth
    launch_us: float  # per layer
    spread: float  # the range: estimate / e**spread .. estimate * e**spread (log half-width)
    overhead_ms: float = 0.0  # per call outside the engine in the figures fitted: never part of an estimate
    k_half: float = 0.0  # a conv or matmul's reduction length K at which it runs at half of eff_conv

    def to_dict(self):
        return {"eff_conv": self.eff_conv, "eff_other": self.eff_other, "eff_mem": self.eff_mem,
                "launch_us": self.launch_us, "spread": self.spread, "overhead_ms": self.overhead_ms,
                "k_half": self.k_half}


def reduction_length(layer):
    """K of a convolution or matrix product seen as a GEMM (kh * kw * C_in, or the dense layer's inputs): its
    FLOPs per image over twice the outputs it writes. A short K (a 1x1 convolution of few channels) keeps the
    multipliers busy for less of each output tile's loads and stores than a long one (a 3x3 of 512)."""
    return layer.flops / (2.0 * layer.writes) if layer.writes else 0.0


def k_factor(layer, k_half):
    """How much slower than eff_conv a conv or matmul runs for its K: 1 + k_half / K."""
    k = reduction_length(layer)
    return 1.0 + k_half / k if k_half and k > 0 else 1.0


def peaks(facts, precision):
    """(peak FLOP/s for conv and matmul, peak FLOP/s for the rest, bytes/s) of a board at ``precision``."""
    cuda = getattr(facts.peak_tflops, precision) or (facts.peak_tflops.fp16 if precision == "int8" else None) \
        or facts.peak_tflops.fp32
    tensor = getattr(facts.tensor_tflops, precision)
    return (tensor or cuda) * 1e12, cuda * 1e12, facts.memory_bandwidth_gbs * 1e9


def layer_times(layers, facts, params, precision, batch):
    """[(compute s, memory s, launch s)] per layer (unknown layers: zeros)."""
    conv_peak, other_peak, bandwidth = peaks(facts, precision)
    size = BYTES[precision]
    launch = params.launch_us * 1e-6
    out = []
    for layer in layers:
        if not layer.known:
            out.append((0.0, 0.0, 0.0))
            continue
        if layer.kind in TENSOR_KINDS:
            compute = layer.flops * batch / (conv_peak * params.eff_conv) * k_factor(layer, params.k_half)
        else:
            compute = layer.flops * batch / (other_peak * params.eff_other)
        moved = (layer.weights + (layer.reads + layer.writes) * batch) * size
        out.append((compute, moved / (bandwidth * params.eff_mem), launch))
    return out


def estimate_latency(layers, facts, params, precision, batch):
    """{"latency_ms", "low_ms", "high_ms", "throughput", "bound", "shares", "layers": [(layer, ms, bound)]}."""
    times = layer_times(layers, facts, params, precision, batch)
    costed = []
    spent = {"compute": 0.0, "memory": 0.0, "launch": 0.0}
    total = 0.0
    for layer, (compute, memory, launch) in zip(layers, times):
        if not layer.known:
            continue
        work = max(compute, memory)
        t = work + launch
        total += t
        bound = "compute" if compute >= memory else "memory"
        if launch > work:
            bound = "launch"
        spent["compute" if compute >= memory else "memory"] += work
        spent["launch"] += launch
        costed.append((layer, t * 1e3, bound))
    latency_ms = total * 1e3
    factor = math.exp(params.spread)
    shares = {k: (v / total if total else 0.0) for k, v in spent.items()}
    return {
        "latency_ms": latency_ms,
        "low_ms": latency_ms / factor,
        "high_ms": latency_ms * factor,
        "throughput": batch / total if total else None,
        "bound": max(shares, key=shares.get) if total else "launch",
        "shares": shares,
        "layers": costed,
    }
