"""Latency statistics: ``summarize`` turns per-call times into the benchmark's figures.

The timing itself is the runners' (``pipeline.device.agent.runners``: ``time`` for per-call wall
times, ``loop`` for a back-to-back throughput loop), the same on the host and on a board.
"""

STAT_KEYS = (
    "mean_ms",
    "std_ms",
    "min_ms",
    "p50_ms",
    "p90_ms",
    "p95_ms",
    "p99_ms",
    "max_ms",
    "iterations",
    "throughput_ips",
    "percentiles_ms",
)


def summarize(times, batch_size, loop_s=None, loop_calls=None):
    """Statistics of per-call ``times`` (seconds) for calls of ``batch_size`` images each.

    With ``loop_s``/``loop_calls`` (the wall seconds of ``loop_calls`` back-to-back calls, the
    benchmark's throughput loop) ``throughput_ips`` = batch_size * loop_calls / loop_s instead.

    Returns ``mean_ms, std_ms, min_ms, p50_ms, p90_ms, p95_ms, p99_ms, max_ms`` (milliseconds per
    call; std is the population standard deviation, numpy's default; percentiles by
    ``numpy.percentile``, linear interpolation), ``iterations`` (number of timed calls) and
    ``throughput_ips`` = batch_size * iterations / sum(times), images per second over the timed
    calls only (``None`` if the clock measured no time at all), and ``percentiles_ms``: the
    0th, 1st, ..., 100th percentiles (101 values), the distribution in a fixed size whatever the
    number of calls: what ``deploy report`` plots and ``deploy compare`` estimates noise from.
    """
    import numpy as np

    t = np.asarray(times, dtype=np.float64)
    if t.ndim != 1 or t.size == 0:
        raise ValueError("summarize needs a non-empty list of times")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    ms = t * 1000.0
    p50, p90, p95, p99 = np.percentile(ms, [50, 90, 95, 99], method="linear")
    total = float(t.sum())
    if loop_s is not None:
        total, count = float(loop_s), int(loop_calls)
    else:
        count = int(t.size)
    percentiles = np.percentile(ms, np.arange(101), method="linear")
    return {
        "mean_ms": float(ms.mean()),
        "std_ms": float(ms.std()),
        "min_ms": float(ms.min()),
        "p50_ms": float(p50),
        "p90_ms": float(p90),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "max_ms": float(ms.max()),
        "iterations": int(t.size),
        "throughput_ips": float(batch_size * count / total) if total > 0 else None,
        "percentiles_ms": [float("{:.6g}".format(v)) for v in percentiles],
    }
