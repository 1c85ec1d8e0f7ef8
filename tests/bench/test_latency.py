"""pipeline.bench.latency: summarize on known lists, measure's call counting and semantics."""

import time

import numpy as np
import pytest

from pipeline.bench.latency import STAT_KEYS, measure, summarize


class Counter:
    def __init__(self, sleep_first=0, sleep_s=0.0):
        self.calls = 0
        self.sleep_first = sleep_first
        self.sleep_s = sleep_s

    def __call__(self):
        self.calls += 1
        if self.calls <= self.sleep_first:
            time.sleep(self.sleep_s)


class FakeBar:
    def __init__(self):
        self.updates = []

    def update(self, n=1):
        self.updates.append(n)


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


def test_measure_counts_calls():
    f = Counter()
    times = measure(f, warmup=3, iterations=7)
    assert f.calls == 10
    assert len(times) == 7
    assert all(isinstance(t, float) and t >= 0 for t in times)


def test_measure_zero_warmup():
    f = Counter()
    assert len(measure(f, warmup=0, iterations=1)) == 1
    assert f.calls == 1


def test_measure_warmup_not_timed():
    f = Counter(sleep_first=2, sleep_s=0.03)  # the 2 warm-up calls are slow, the rest instant
    times = measure(f, warmup=2, iterations=5)
    assert len(times) == 5
    assert max(times) < 0.02


def test_measure_times_the_call():
    f = Counter(sleep_first=10**9, sleep_s=0.005)
    times = measure(f, warmup=0, iterations=3)
    assert all(t >= 0.005 for t in times)


def test_measure_progress_bar_gets_every_call():
    bar = FakeBar()
    times = measure(Counter(), warmup=5, iterations=10_000, progress_bar=bar)
    assert sum(bar.updates) == len(times) == 10_000
    assert len(bar.updates) < 100  # updated in chunks, not once per call


def test_measure_duration_ignores_iterations():
    f = Counter(sleep_first=10**9, sleep_s=0.002)
    t0 = time.perf_counter()
    times = measure(f, warmup=1, iterations=1, duration_s=0.05)
    elapsed = time.perf_counter() - t0
    assert f.calls == len(times) + 1
    assert len(times) > 1  # iterations=1 did not stop it
    assert sum(times) >= 0.04  # ran for about the duration (timed calls only: loop work excluded)
    assert elapsed < 1.0


def test_measure_duration_at_least_one_call():
    f = Counter(sleep_first=10**9, sleep_s=0.02)
    bar = FakeBar()
    times = measure(f, warmup=0, iterations=100, duration_s=0.001, progress_bar=bar)
    assert len(times) == 1 and f.calls == 1
    assert sum(bar.updates) == 1


def test_measure_duration_progress_bar_total():
    bar = FakeBar()
    times = measure(Counter(), warmup=0, duration_s=0.05, progress_bar=bar)
    assert sum(bar.updates) == len(times)


@pytest.mark.parametrize(
    "kwargs",
    [dict(warmup=-1), dict(iterations=0), dict(duration_s=0), dict(duration_s=-1.0)],
)
def test_measure_rejects_bad_settings(kwargs):
    f = Counter()
    with pytest.raises(ValueError):
        measure(f, **kwargs)
    assert f.calls == 0


def test_measure_duration_allows_zero_iterations():
    # iterations is ignored when duration_s is set, so its value does not matter
    assert len(measure(Counter(), warmup=0, iterations=0, duration_s=0.005)) >= 1


def test_measure_propagates_errors():
    def boom():
        raise RuntimeError("bad input")

    with pytest.raises(RuntimeError, match="bad input"):
        measure(boom, warmup=0, iterations=3)


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
