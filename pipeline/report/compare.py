"""``deploy compare BASELINE CURRENT``: a regression gate that knows how noisy latency is.

A latency figure is a regression only when all three hold:

1. it is worse than the baseline's by more than ``tolerance`` (relative, default 5 %);
2. it is worse beyond the run's own noise: the confidence intervals (95 %) of the two runs'
   quantiles do not overlap. A quantile's interval comes from the order statistics of the timed
   calls: for quantile q of n calls, the percentiles q ± 1.96·sqrt(q(1-q)/n), read off the 101
   percentiles each benchmark keeps (``percentiles_ms``);
3. with ``--history`` runs (earlier nights, five or more), it moved from the baseline by more than
   the nights move among themselves: ``k`` robust standard deviations (1.4826 × MAD), relative to
   the nights' median and scaled to the baseline. The nights say how much a figure wanders; the
   baseline says where it should be.

Throughput uses (1) and (3). Accuracy (engine top-1 agreement against ONNX Runtime, validation
accuracy) regresses when it drops by more than ``accuracy_tolerance`` (absolute) and beyond the
history's band; batch consistency and the check's verdict regress when they go from pass to fail.
Latency measured on different hardware (board, GPU, TensorRT, runtime, power mode) is not compared; a
desktop GPU's run is never compared with a Jetson's (or a CPU's).
"""

import math
import statistics

from pipeline.report.collect import accuracy_of, results_by_batch

Z95 = 1.96
MAD_SIGMA = 1.4826


def quantile_interval(result, q):
    """(low, high) of the 95 % confidence interval of quantile ``q`` (0..1) of a benchmark row, or None
    without ``percentiles_ms``. An end the calls cannot bound (p99 of 100 calls: the interval runs past
    the largest call) is infinite: such a figure is judged by the history alone."""
    pct = result.get("percentiles_ms")
    n = result.get("iterations")
    if not pct or len(pct) != 101 or not n:
        return None
    half = Z95 * math.sqrt(q * (1 - q) / n)
    low, high = q - half, q + half + 1.0 / n  # + one call: the rank above n*q
    return (_at(pct, low * 100) if low >= 0 else -math.inf), (_at(pct, high * 100) if high <= 1 else math.inf)


def mean_interval(result):
    """(low, high) of the 95 % confidence interval of the mean call time (ms), or None."""
    mean, std, n = result.get("mean_ms"), result.get("std_ms"), result.get("iterations")
    if mean is None or std is None or not n:
        return None
    half = Z95 * std / math.sqrt(n)
    return mean - half, mean + half


def _at(pct, position):
    i = min(int(position), 99)
    frac = position - i
    return pct[i] + (pct[i + 1] - pct[i]) * frac


MIN_NIGHTS = 5  # below this the MAD of the nights says little about their spread


def history_band(values, k):
    """(median, half width) of the night-to-night spread of ``values``, or None with fewer than MIN_NIGHTS."""
    values = [v for v in values if v is not None]
    if len(values) < MIN_NIGHTS:
        return None
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return med, k * MAD_SIGMA * mad


def _hardware(run):
    where = (run.get("benchmark") or {}).get("where") or {}
    fp = where.get("fingerprint") or {}
    mode = fp.get("power_mode")
    kind = _kind(where, fp)
    return {"kind": kind, "gpu": fp.get("gpu") if kind == "desktop-gpu" else None, "runtime": where.get("runtime"),
            "provider": where.get("provider"), "board": fp.get("board") or fp.get("model"),
            "tensorrt": fp.get("tensorrt"), "power_mode": mode.get("mode_name") if isinstance(mode, dict) else mode,
            "machine": fp.get("machine") or (where.get("host") or {}).get("machine")}


def _kind(where, fp):
    """"jetson", "desktop-gpu" (an NVIDIA GPU that is not a Jetson's), "cpu", or None (no device figures).
    Fingerprints from before the probe said so: a Jetson is a board or an L4T release."""
    if fp.get("kind"):
        return fp["kind"]
    if fp.get("board") or fp.get("l4t"):
        return "jetson"
    return "host" if where.get("host") else None


KIND_WORDS = {"jetson": "a Jetson", "desktop-gpu": "a desktop GPU", "cpu": "a CPU (no GPU)",
              "host": "the host (in-process)"}


def _kind_note(base_hw, cur_hw):
    """Why a desktop-GPU run and a board run are never compared (None when neither is a desktop GPU or
    both are)."""
    kinds = (base_hw["kind"], cur_hw["kind"])
    if kinds[0] == kinds[1] or "desktop-gpu" not in kinds:
        return None
    words = ["{}{}".format(KIND_WORDS.get(k, "an unknown machine"), " ({})".format(hw["gpu"]) if hw["gpu"] else "")
             for k, hw in zip(kinds, (base_hw, cur_hw))]
    return ("latency not compared: the baseline ran on {}, the current run on {}; a desktop GPU's figures say "
            "nothing about a Jetson's (compare desktop-GPU runs with desktop-GPU runs)".format(*words))


def compare_runs(baseline, current, history=(), tolerance=0.05, accuracy_tolerance=0.02, k=3.0):
    """Compare two loaded runs (pipeline.report.collect.load_run); returns the verdict and one row per figure."""
    rows, notes = [], []
    base_hw, cur_hw = _hardware(baseline), _hardware(current)
    differs = {key: (base_hw[key], cur_hw[key]) for key in base_hw if base_hw[key] != cur_hw[key]}
    base_res, cur_res = results_by_batch(baseline), results_by_batch(current)
    kind_note = _kind_note(base_hw, cur_hw)
    if kind_note and base_res and cur_res:
        notes.append(kind_note)
    elif differs and base_res and cur_res:
        notes.append("latency not compared: measured on different hardware or runtime ({})".format(
            "; ".join("{} {} vs {}".format(key, a, b) for key, (a, b) in sorted(differs.items()))))
    elif base_res and cur_res:
        for bs in sorted(set(base_res) & set(cur_res)):
            past = [results_by_batch(h).get(bs, {}) for h in history]
            for key, q in (("p50_ms", 0.5), ("p99_ms", 0.99)):
                rows.append(_latency_row(bs, key, q, base_res[bs], cur_res[bs], [p.get(key) for p in past], tolerance, k))
            rows.append(_throughput_row(bs, base_res[bs], cur_res[bs], [p.get("throughput_ips") for p in past], tolerance, k))
        missing = sorted(set(base_res) - set(cur_res))
        if missing:
            notes.append("batch sizes in the baseline but not measured now: {}".format(", ".join(map(str, missing))))
    for run, label in ((baseline, "baseline"), (current, "current")):
        for w in ((run.get("benchmark") or {}).get("where") or {}).get("warnings") or []:
            notes.append("{}: {} (its figures are noisier)".format(label, w))
    base_acc, cur_acc = accuracy_of(baseline), accuracy_of(current)
    past_acc = [accuracy_of(h) for h in history]
    for key, label in (("engine_top1_agreement", "engine top-1 agreement"), ("val_accuracy", "validation accuracy")):
        if base_acc.get(key) is not None and cur_acc.get(key) is not None:
            rows.append(_higher_is_better(label, base_acc[key], cur_acc[key], [a.get(key) for a in past_acc],
                                          accuracy_tolerance, k, relative=False))
    rows += _pass_fail_rows(baseline, current)
    regressions = [r for r in rows if r["verdict"] == "regression"]
    return {"baseline": baseline["dir"], "current": current["dir"], "history": len(history),
            "tolerance": tolerance, "accuracy_tolerance": accuracy_tolerance, "k": k,
            "passed": not regressions, "regressions": len(regressions), "rows": rows, "notes": notes}


def _latency_row(bs, key, q, base, cur, past, tolerance, k):
    b, c = base.get(key), cur.get(key)
    row = {"metric": "{} b{} (ms)".format(key[:3], bs), "baseline": b, "current": c, "change": _rel(b, c)}
    if b is None or c is None:
        return dict(row, verdict="missing", why="not measured in both runs")
    b_ci, c_ci = quantile_interval(base, q), quantile_interval(cur, q)
    band = history_band(past, k)
    row["interval_baseline"], row["interval_current"] = b_ci, c_ci
    worse = c > b * (1 + tolerance)
    better = c < b * (1 - tolerance)
    if not worse and not better:
        return dict(row, verdict="ok", why="within {:.0%}".format(tolerance))
    return _judge(row, worse, b_ci, c_ci, band, tolerance, cur.get("iterations"))


def _judge(row, worse, b_ci, c_ci, band, tolerance, n):
    """A change beyond the tolerance: regression/improved, or noise when the runs' own intervals overlap
    or the history's band holds it. ``b_ci``/``c_ci`` are intervals of a lower-is-better quantity."""
    c = row["current"]
    unbounded = b_ci is not None and c_ci is not None and any(math.isinf(v) for v in b_ci + c_ci)
    beyond_run_noise = (None if b_ci is None or c_ci is None or unbounded else
                        (c_ci[0] > b_ci[1] if worse else c_ci[1] < b_ci[0]))
    beyond_history = None if band is None else abs(c - row["baseline"]) > _noise(band, row["baseline"])
    if beyond_run_noise is False:
        return dict(row, verdict="noise", why="the 95 % intervals overlap ({} vs {})".format(_iv(b_ci), _iv(c_ci)))
    if unbounded and band is None:
        return dict(row, verdict="noise", why="{} calls cannot bound this quantile; give more iterations or --history "
                                              "runs".format(n))
    if beyond_history is False:
        return dict(row, verdict="noise", why="within the nights' spread (± {:.1%})".format(band[1] / band[0]))
    why = "beyond {:.0%}{}{}".format(tolerance, "" if b_ci is None or unbounded else ", intervals {} vs {}".format(
        _iv(b_ci), _iv(c_ci)), "" if band is None else ", nights' spread ± {:.1%}".format(band[1] / band[0]))
    if b_ci is None:
        why += " (no percentiles_ms: run noise unknown)"
    return dict(row, verdict="regression" if worse else "improved", why=why)


def _throughput_row(bs, base, cur, past, tolerance, k):
    """Throughput is batch / mean call time: judged on the mean's interval (its standard error)."""
    b, c = base.get("throughput_ips"), cur.get("throughput_ips")
    row = {"metric": "throughput b{} (img/s)".format(bs), "baseline": b, "current": c, "change": _rel(b, c)}
    if b is None or c is None:
        return dict(row, verdict="missing", why="not measured in both runs")
    if abs(c - b) <= b * tolerance:
        return dict(row, verdict="ok", why="within {:.0%}".format(tolerance))
    return _judge(row, c < b, mean_interval(base), mean_interval(cur), history_band(past, k), tolerance,
                  cur.get("iterations"))


def _higher_is_better(metric, b, c, past, tolerance, k, relative):
    row = {"metric": metric, "baseline": b, "current": c, "change": _rel(b, c) if relative else _abs(b, c),
           "change_is": "relative" if relative else "absolute"}
    if b is None or c is None:
        return dict(row, verdict="missing", why="not measured in both runs")
    limit = b * tolerance if relative else tolerance
    band = history_band(past, k)
    if abs(c - b) <= limit:
        return dict(row, verdict="ok", why="within {}".format("{:.0%}".format(tolerance) if relative else tolerance))
    if band is not None and abs(c - b) <= (_noise(band, b) if relative else band[1]):
        return dict(row, verdict="noise", why="within the nights' spread (± {:.3g})".format(band[1]))
    return dict(row, verdict="regression" if c < b else "improved",
                why="{} by more than {}".format("dropped" if c < b else "rose",
                                                "{:.0%}".format(tolerance) if relative else tolerance))


def _pass_fail_rows(baseline, current):
    rows = []
    pairs = (("batch consistency", lambda r: ((r.get("benchmark") or {}).get("consistency") or {}).get("passed")),
             ("check: deployable", lambda r: (r.get("check") or {}).get("deployable")))
    for metric, get in pairs:
        b, c = get(baseline), get(current)
        if b is None or c is None:
            continue
        verdict = "regression" if b and not c else "improved" if c and not b else "ok"
        rows.append({"metric": metric, "baseline": b, "current": c, "change": None, "verdict": verdict,
                     "why": "was passing, now fails" if verdict == "regression" else ""})
    return rows


def _noise(band, baseline):
    """The nights' spread around the baseline: their half width relative to their median, scaled to the
    baseline (the nights say how much a figure moves, the baseline where it should be)."""
    median, half = band
    return abs(baseline) * half / median if median else half


def _rel(b, c):
    return None if b in (None, 0) or c is None else (c - b) / b


def _abs(b, c):
    return None if b is None or c is None else c - b


def _iv(interval):
    return "–" if interval is None else "[{:.3g}, {:.3g}] ms".format(*interval)


def _cell(value, change=None):
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "pass" if value else "FAIL"
    if change == "absolute":
        return "{:+.3g}".format(value)
    if change:
        return "{:+.1%}".format(value) if isinstance(value, float) else str(value)
    return "{:.4g}".format(value) if isinstance(value, float) else str(value)


def _lines(result):
    return [[r["metric"], _cell(r["baseline"]), _cell(r["current"]), _cell(r["change"], change=r.get("change_is", "relative")), r["verdict"], r["why"]]
            for r in result["rows"]]


def format_text(result):
    header = ["figure", "baseline", "current", "change", "verdict", "why"]
    rows = [header] + _lines(result)
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header) - 1)]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]
    out += ["note: " + n for n in result["notes"]]
    out.append("{}: {} regression{} ({} vs {}; tolerance {:.0%}, {} earlier runs)".format(
        "PASS" if result["passed"] else "FAIL", result["regressions"], "" if result["regressions"] == 1 else "s",
        result["current"], result["baseline"], result["tolerance"], result["history"]))
    return "\n".join(out)


def format_markdown(result):
    out = ["### deploy compare: {}".format("pass" if result["passed"] else "**{} regression{}**".format(
        result["regressions"], "" if result["regressions"] == 1 else "s")), "",
        "| figure | baseline | current | change | verdict | why |", "| --- | --- | --- | --- | --- | --- |"]
    for line in _lines(result):
        if line[4] == "regression":
            line[4] = "**regression**"
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in line) + " |")
    out += ["", *("> " + n for n in result["notes"])]
    return "\n".join(out).rstrip() + "\n"


def format_junit(result):
    from xml.sax.saxutils import quoteattr

    cases = []
    for r in result["rows"]:
        body = ""
        if r["verdict"] == "regression":
            body = "<failure message={}/>".format(quoteattr("{}: {} -> {} ({})".format(
                r["metric"], _cell(r["baseline"]), _cell(r["current"]), r["why"])))
        cases.append('  <testcase classname="deploy.compare" name={}>{}</testcase>'.format(quoteattr(r["metric"]), body))
    return ('<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="deploy compare" tests="{}" failures="{}">\n{}\n'
            "</testsuite>\n").format(len(result["rows"]), result["regressions"], "\n".join(cases))
