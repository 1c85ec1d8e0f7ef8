"""The roofline arithmetic per layer, the bound and the range."""

import math

import pytest

from pipeline.estimate.layers import Layer
from pipeline.estimate.roofline import Params, estimate_latency, layer_times
from pipeline.targets.estimate_facts import EstimateFacts

FACTS = EstimateFacts(power_mode="MAXN", gpu="test", peak_tflops={"fp32": 1.0, "fp16": 2.0},
                      tensor_tflops={"fp16": 8.0}, memory_bandwidth_gbs=100.0,
                      sources={"peak_tflops": ["x"], "memory_bandwidth_gbs": ["x"], "tensor_tflops": ["x"]})
PARAMS = Params(eff_conv=0.5, eff_other=0.25, eff_mem=0.5, launch_us=10.0, spread=math.log(1.5))


def test_each_term_of_a_layer():
    conv = Layer("c", "conv", flops=8e9, weights=1e6, reads=1e6, writes=1e6)
    pool = Layer("p", "pool", flops=1e6, reads=1e8, writes=1e6)
    (c_compute, c_memory, c_launch), (p_compute, p_memory, _) = layer_times([conv, pool], FACTS, PARAMS, "fp16", 2)
    assert c_compute == pytest.approx(8e9 * 2 / (8e12 * 0.5))  # tensor-core peak for a conv
    assert c_memory == pytest.approx((1e6 + 2e6 * 2) * 2 / (100e9 * 0.5))
    assert c_launch == pytest.approx(10e-6)
    assert p_compute == pytest.approx(1e6 * 2 / (2e12 * 0.25))  # CUDA-core fp16 peak for the rest
    assert p_memory == pytest.approx((101e6 * 2) * 2 / 50e9)


def test_sum_bound_range_and_throughput():
    conv = Layer("c", "conv", flops=8e9, weights=0, reads=0, writes=0)
    result = estimate_latency([conv, Layer("u", "other", known=False)], FACTS, PARAMS, "fp16", 4)
    expected = (8e9 * 4 / 4e12 + 10e-6) * 1e3
    assert result["latency_ms"] == pytest.approx(expected)
    assert result["low_ms"] == pytest.approx(expected / 1.5) and result["high_ms"] == pytest.approx(expected * 1.5)
    assert result["throughput"] == pytest.approx(4 / (expected / 1e3))
    assert result["bound"] == "compute" and len(result["layers"]) == 1


def test_many_tiny_layers_are_launch_bound():
    layers = [Layer("e%d" % i, "pointwise", flops=10, reads=10, writes=10) for i in range(100)]
    assert estimate_latency(layers, FACTS, PARAMS, "fp32", 1)["bound"] == "launch"


def test_fp32_on_a_tensor_core_board_uses_the_cuda_peak():
    conv = Layer("c", "conv", flops=1e9)
    (compute, _, _), = layer_times([conv], FACTS, PARAMS, "fp32", 1)
    assert compute == pytest.approx(1e9 / (1e12 * 0.5))


def test_a_short_reduction_runs_slower_per_flop_than_a_long_one():
    """K = flops / (2 * writes): a 1x1 convolution of 64 channels (K 64) at k_half 64 takes twice its time at
    k_half 0; a 3x3 of 512 channels (K 4608) barely moves; a pooling layer is never touched."""
    from dataclasses import replace

    from pipeline.estimate.roofline import reduction_length

    short = Layer("s", "conv", flops=2 * 64 * 1e5, writes=1e5)  # K = 64
    long = Layer("l", "conv", flops=2 * 4608 * 1e5, writes=1e5)  # K = 4608
    pool = Layer("p", "pool", flops=1e6, reads=1e6, writes=1e5)
    assert reduction_length(short) == pytest.approx(64) and reduction_length(long) == pytest.approx(4608)
    slow = replace(PARAMS, k_half=64.0)
    before = layer_times([short, long, pool], FACTS, PARAMS, "fp16", 1)
    after = layer_times([short, long, pool], FACTS, slow, "fp16", 1)
    assert after[0][0] == pytest.approx(2 * before[0][0])
    assert after[1][0] == pytest.approx(before[1][0] * (1 + 64 / 4608))
    assert after[2] == before[2]
