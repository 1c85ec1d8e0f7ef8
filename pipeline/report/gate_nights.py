"""The nights around tonight that the gate's persistence rule reads, and what marks a night as not judged:

    previous_nights(baseline, current, history, fp)   the previous night's statuses and the last nights' runs
    baseline_hint(baseline, current, history, ...)    a red night's hint that the baseline itself is the outlier
    throttled(run)                                     why a night's figures are not the board's steady state
    benchmark_digest(run)                              which benchmark a comparison judged (sha256, when made)

The rule itself is pipeline.report.gate_stats.persistence_judgement; its words are pipeline.report.compare's
docstring."""

import hashlib
import math
import statistics
from pathlib import Path

from pipeline.report.collect import results_by_batch
from pipeline.report.gate_stats import (FIRST_NIGHT_FLOOR, FIRST_NIGHT_SIGMAS, MIN_NIGHTS, SPREAD_CLIP, WINDOW,
                                        WINDOW_CLIP, WINDOW_K)
from pipeline.report.machine import fingerprint, fingerprint_differs

PERSISTENCE = {"confirm_nights": 2, "window_nights": WINDOW, "window_statistic": "clipped mean",
               "window_reference": "hodges-lehmann, nights before the window",
               "window_k": WINDOW_K, "window_clip_sigmas": WINDOW_CLIP, "spread_clip_sigmas": SPREAD_CLIP,
               "first_night_sigmas": FIRST_NIGHT_SIGMAS, "first_night_floor": FIRST_NIGHT_FLOOR}
CLOCK_MOVED = 0.97  # a GPU clock whose lowest sample in the timed loop is below 97 % of its highest moved


def _same(a, b):
    return str(Path(a["dir"]).resolve()) == str(Path(b["dir"]).resolve()) or (
        a.get("when") and a.get("when") == b.get("when") and a.get("name") == b.get("name"))


def nights_since(baseline, current, history, base_fp):
    """The history nights after the baseline and before tonight (by their finish time) that have figures on its
    fingerprint and did not throttle, oldest first; tonight and the baseline's copies left out, whatever the gate
    said of them."""
    after = baseline.get("when") or ""
    return [n for n in history if not _same(n, current) and not _same(n, baseline)
            and (n.get("when") or "") > after and (not current.get("when") or (n.get("when") or "") < current["when"])
            and results_by_batch(n) and not fingerprint_differs(base_fp, fingerprint(n)) and not throttled(n)]


def previous_nights(baseline, current, history, base_fp):
    """({(figure, batch size): status} of the previous night, [the last WINDOW - 1 nights' runs, oldest first]):
    nights_since's nights. A night without figures (a failed one) neither confirms nor breaks the chain: it says
    nothing about the figures."""
    nights = nights_since(baseline, current, history, base_fp)
    if not nights:
        return {}, []
    rows = (nights[-1].get("gate") or {}).get("rows") or []
    prev = {}
    for r in rows:
        if isinstance(r, dict) and isinstance(r.get("figure"), str) and isinstance(r.get("status"), str):
            bs = r.get("batch_size")
            prev[(r["figure"], bs if isinstance(bs, int) else None)] = r["status"]
    return prev, nights[-(WINDOW - 1):]


def baseline_hint(baseline, current, history, base_fp, rows, reference_nights, tolerance):
    """A line for a red night when the baseline itself looks like the outlier, else None: the reference holds fewer
    than MIN_NIGHTS nights, and a p50 the gate called a regression sits beyond the tolerance from the baseline on
    every night since it (at least WINDOW nights, tonight's included, whatever the gate said of them) while those
    nights agree with each other within the tolerance. A real step on the night after the baseline looks the same:
    the line says how to tell."""
    if reference_nights >= MIN_NIGHTS:
        return None
    since = nights_since(baseline, current, history, base_fp) + [current]
    base, tol = results_by_batch(baseline), math.log1p(tolerance)
    for row in rows:
        bs = row.get("batch_size")
        if row.get("figure") != "p50_ms" or row.get("status") != "regression" or not _number((base.get(bs) or {}).get(
                "p50_ms")) or base[bs]["p50_ms"] <= 0:
            continue
        values = [(results_by_batch(n).get(bs) or {}).get("p50_ms") for n in since]
        logs = [math.log(v / base[bs]["p50_ms"]) for v in values if _number(v) and v > 0]
        if len(logs) < WINDOW:
            continue
        mid = statistics.median(logs)
        if all(abs(x - mid) <= tol for x in logs) and all(x > tol for x in logs):
            return ("the baseline may be the outlier: the {} nights since it agree with each other (p50 batch {} "
                    "within {:.1%} of their median) and all sit {:+.1%} from it; if nothing changed between the "
                    "baseline's night and the next, make a typical night the baseline (the workflow's update_baseline "
                    "input); if something did, this is the regression".format(
                        len(logs), bs, math.expm1(max(abs(x - mid) for x in logs)), math.expm1(mid)))
    return None


def throttled(run):
    """Why the night's figures are not the board's steady state (the benchmark's ``power.throttled`` reason, or a
    GPU clock that moved during a timed loop: ``power.clocks_mhz.gpu`` {min, max}), else None."""
    for bs, row in sorted(results_by_batch(run).items()):
        power = row.get("power") if isinstance(row.get("power"), dict) else {}
        said = power.get("throttled")
        if said:
            return "batch {}: {}".format(bs, said if isinstance(said, str) else "the benchmark says it throttled")
        gpu = (power.get("clocks_mhz") or {}).get("gpu") if isinstance(power.get("clocks_mhz"), dict) else None
        if isinstance(gpu, dict):
            low, high = gpu.get("min"), gpu.get("max")
            if _number(low) and _number(high) and high > 0 and low < CLOCK_MOVED * high:
                return "batch {}: the GPU clock moved from {:g} to {:g} MHz during the timed loop".format(bs, high, low)
    return None


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) < float("inf")


def benchmark_digest(run):
    """{"sha256", "made"} of the run's benchmark/benchmark.json (None when it has none): which benchmark a
    comparison judged. ``made``: when the benchmark stage made it (its manifest), else the run's finish time."""
    path = Path(run["dir"]) / "benchmark" / "benchmark.json"
    try:
        data = path.read_bytes() if path.is_file() else None
    except OSError:
        data = None
    if data is None:
        return None
    made = next((s.get("made") for s in run.get("stages") or [] if s.get("name") == "benchmark" and s.get("made")),
                None)
    return {"sha256": hashlib.sha256(data).hexdigest(), "made": made or run.get("when")}
