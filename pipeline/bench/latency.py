"""Latency measurement: time calls of a function, and summarize the times.

``measure`` semantics:

- ``warmup`` calls run first and are not timed (0 is allowed).
- Without ``duration_s``: exactly ``iterations`` timed calls (at least 1).
- With ``duration_s``: timed calls until ``duration_s`` seconds of wall time have passed since the
  first timed call started; ``iterations`` is then ignored. The call in flight when the time is up
  finishes and counts, so there is always at least 1 timed call and the run overshoots by at most
  one call.

Each call is timed alone, ``time.perf_counter()`` right before and right after it; loop and
progress-bar work falls outside the timed interval. The progress bar, if any, is updated in chunks
of about ``UPDATE_EVERY_S`` seconds of calls (chunk size adapts to the call time), so a fast call is
not dominated by bar bookkeeping.
"""

import time

UPDATE_EVERY_S = 0.1  # progress bar update period (the bar's own mininterval limits redraws further)

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


def measure(run_once, *, warmup=10, iterations=100, duration_s=None, progress_bar=None):
    """Call ``run_once()`` repeatedly; return the seconds each timed call took, in call order.

    See the module docstring for the exact warm-up / iterations / duration semantics.
    ``progress_bar`` is anything with ``update(n)`` (tqdm, ``Progress.bar()``); it gets the
    number of timed calls done. ``ValueError`` for a negative warm-up, iterations < 1 or
    duration_s <= 0.
    """
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if duration_s is None and iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    if duration_s is not None and not duration_s > 0:
        raise ValueError(f"duration_s must be > 0, got {duration_s}")

    for _ in range(warmup):
        run_once()

    update = progress_bar.update if progress_bar is not None else None
    if duration_s is None:
        return _fixed(run_once, int(iterations), update)
    return _timed(run_once, float(duration_s), update)


def _chunk_size(elapsed, calls):
    """How many calls make about UPDATE_EVERY_S seconds, given ``calls`` took ``elapsed``."""
    if elapsed <= 0:
        return calls * 2
    return max(1, int(UPDATE_EVERY_S * calls / elapsed))


def _fixed(run_once, iterations, update):
    clock = time.perf_counter
    times = [0.0] * iterations
    done = 0
    chunk = 1  # first chunk: one call, to learn the call time
    while done < iterations:
        end = min(iterations, done + chunk)
        c0 = clock()
        for i in range(done, end):
            t0 = clock()
            run_once()
            times[i] = clock() - t0
        chunk = _chunk_size(clock() - c0, end - done)
        if update is not None:
            update(end - done)
        done = end
    return times


def _timed(run_once, duration_s, update):
    clock = time.perf_counter
    times = []
    append = times.append
    chunk = 1
    running = True
    deadline = clock() + duration_s
    while running:
        n = 0
        c0 = t1 = clock()
        for _ in range(chunk):
            t0 = clock()
            run_once()
            t1 = clock()
            append(t1 - t0)
            n += 1
            if t1 >= deadline:
                running = False
                break
        chunk = _chunk_size(t1 - c0, n)
        if update is not None:
            update(n)
    return times


def summarize(times, batch_size):
    """Statistics of per-call ``times`` (seconds) for calls of ``batch_size`` images each.

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
        "throughput_ips": float(batch_size * t.size / total) if total > 0 else None,
        "percentiles_ms": [float("{:.6g}".format(v)) for v in percentiles],
    }
