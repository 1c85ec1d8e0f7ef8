"""pipeline.bench.latency: summarize on known lists (the timing loop is the runners': tests/device/test_ort_runner.py)."""

import numpy as np
import pytest

from pipeline.bench.latency import STAT_KEYS, summarize


# --- summarize ---------------------------------------------------------------------------


def test_summarize_known_values():
    times = [0.001, 0.002, 0.003, 0.004, 0.005]  # seconds
    s = summarize(times, batch_size=1)
    assert set(s) == set(STAT_KEYS)
    assert s["iterations"] == 5
    assert s["mean_ms"] == pytest.approx(3.0)
    assert s["min_ms"] == pytest.approx(1.0)
    assert s["max_ms"] == pytest.approx(5.0)
    assert s["std_ms"] == pytest.approx(np.sqrt(2.0))  # population std of 1..5
    # linear interpolation: rank = q/100 * (n-1)
    assert s["p50_ms"] == pytest.approx(3.0)
    assert s["p90_ms"] == pytest.approx(4.6)
    assert s["p95_ms"] == pytest.approx(4.8)
    assert s["p99_ms"] == pytest.approx(4.96)
    assert s["throughput_ips"] == pytest.approx(5 / 0.015)


def test_summarize_percentiles_match_numpy_linear():
    rng = np.random.default_rng(1)
    times = list(rng.exponential(0.002, size=1000))
    s = summarize(times, batch_size=1)
    ms = np.asarray(times) * 1000
    for q in (50, 90, 95, 99):
        assert s[f"p{q}_ms"] == pytest.approx(np.percentile(ms, q, method="linear"))
    assert s["min_ms"] <= s["p50_ms"] <= s["p90_ms"] <= s["p95_ms"] <= s["p99_ms"] <= s["max_ms"]


def test_summarize_throughput_counts_images():
    times = [0.01] * 4  # 4 calls of 10 ms
    assert summarize(times, batch_size=1)["throughput_ips"] == pytest.approx(100.0)
    assert summarize(times, batch_size=8)["throughput_ips"] == pytest.approx(800.0)
    # throughput is over the total time, not 1 / mean of something else
    s = summarize([0.01, 0.03], batch_size=4)
    assert s["throughput_ips"] == pytest.approx(4 * 2 / 0.04)


def test_summarize_single_time_and_types():
    s = summarize([0.002], batch_size=2)
    assert s["iterations"] == 1
    assert s["std_ms"] == 0.0
    assert s["p50_ms"] == s["p99_ms"] == pytest.approx(2.0)
    assert all(type(v) is float for k, v in s.items() if k not in ("iterations", "percentiles_ms"))
    assert all(type(v) is float for v in s["percentiles_ms"])
    assert type(s["iterations"]) is int


def test_summarize_rejects_empty_and_bad_batch():
    with pytest.raises(ValueError):
        summarize([], batch_size=1)
    with pytest.raises(ValueError):
        summarize([0.001], batch_size=0)


def test_summarize_zero_total_time():
    assert summarize([0.0, 0.0], batch_size=1)["throughput_ips"] is None


# --- measure -----------------------------------------------------------------------------


def test_summarize_throughput_from_a_loop():
    """D7: with the back-to-back loop's wall time, throughput is batch x loop calls / loop seconds; the
    latency figures stay those of the per-call times."""
    s = summarize([0.010, 0.010, 0.010], batch_size=4, loop_s=0.5, loop_calls=100)
    assert s["throughput_ips"] == pytest.approx(4 * 100 / 0.5)
    assert s["p50_ms"] == pytest.approx(10.0) and s["iterations"] == 3


def test_latency_module_imports_nothing_heavy():
    import subprocess
    import sys

    code = (
        "import sys, pipeline.bench.latency, pipeline.bench, pipeline.backends, pipeline.stages.benchmark;"
        "heavy = [m for m in ('numpy', 'onnxruntime', 'onnx', 'tensorflow', 'tqdm') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_summarize_keeps_the_distribution_as_101_percentiles():
    rng = np.random.default_rng(2)
    times = list(rng.lognormal(-6, 0.3, size=777))
    s = summarize(times, batch_size=2)
    p = s["percentiles_ms"]
    assert len(p) == 101 and p == sorted(p)
    assert p[0] == pytest.approx(s["min_ms"], rel=1e-5) and p[100] == pytest.approx(s["max_ms"], rel=1e-5)
    assert p[50] == pytest.approx(s["p50_ms"], rel=1e-5) and p[99] == pytest.approx(s["p99_ms"], rel=1e-5)
