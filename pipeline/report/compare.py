"""``deploy compare BASELINE CURRENT``: the nightly's regression gate.

The reference is a history, not a night. Tonight's figure is judged against the **median of the
reference nights**: the baseline (the run the user chose; it moves only when they choose again) and
the last ``nights - 1`` history nights measured on the baseline's fingerprint (kind of machine, board
or GPU, JetPack, TensorRT, runtime, power mode, clocks). Failed or incomplete nights (a ``FAILED``
marker, a non-zero exit code, no benchmark) are included where they have figures and flagged; a night
the gate itself called a regression (its ``comparison.json``) is left out, so a real slowdown stays
red until someone moves the baseline. A failed run is never a reference: as the baseline it makes
the comparison "not comparable".

A latency figure (p50, p99 per batch size; throughput is judged on the median call, batch / p50) is
a regression when its change from the reference, ``d = ln(tonight / reference)``, is beyond both

1. the tolerance (relative, default 3 %): smaller changes are "ok" whatever the noise says; and
2. ``k`` (default 3) standard deviations of the difference tonight - reference, where the
   night-to-night sigma is 1.4826 x MAD of the reference nights (log values; at least ``SIGMA_FLOOR``)
   once there are ``MIN_NIGHTS`` (5) of them, and ``SIGMA_PRIOR`` before (a new baseline: the nights'
   spread is not known yet); the median's own error (x sqrt(1 + 1.57 / n)) and tonight's sampling
   error (its 95 % interval, from the 101 percentiles and the number of calls) are added. A quantile
   the calls cannot bound (p99 of 100 calls) is judged by the nights alone, and not at all before five.

Changes between (1) and (2) are "noise". Each row carries tonight's 95 % interval and the band it may
lie in. Accuracy (engine top-1 agreement) regresses when it drops below the reference by more than the
accuracy tolerance *and* more than one image; validation accuracy is a host training figure and is not
a device gate. Batch consistency and the check's verdict regress when they go from pass to fail.

Verdicts: "pass" (exit 0); "regression", "not comparable" (another fingerprint unless
``--expect-change`` names the key, a failed baseline, a batch size not measured tonight) and "no data"
(nothing compared, or tonight has no benchmark) all exit 4. Host-CPU figures are labelled so, and a
host-CPU difference is a regression only against ``MIN_NIGHTS`` nights.
"""

import math
import statistics
from pathlib import Path

from pipeline import records
from pipeline.report.collect import accuracy_of, results_by_batch

SCHEMA = records.schema_of("comparison")  # deploy.comparison/2 (pipeline.records.Comparison)
Z95 = 1.96
MAD_SIGMA = 1.4826
MIN_NIGHTS = 5  # below this the MAD of the nights says little about their spread
SIGMA_PRIOR = 0.02  # night-to-night sigma (of ln figure) assumed until MIN_NIGHTS nights say otherwise
SIGMA_FLOOR = 0.01  # the MAD of a few quiet nights can be near zero by chance
MEDIAN_VAR = math.pi / 2  # variance of a median of n normal values: (pi / 2) sigma^2 / n

DEFAULTS = {"tolerance": 0.03, "accuracy_tolerance": 0.02, "k": 2.0, "nights": 20}
FINGERPRINT_KEYS = ("kind", "board", "gpu", "jetpack", "tensorrt", "runtime", "power_mode", "clocks")
VERDICTS = ("pass", "regression", "not comparable", "no data")
COMPARED = ("ok", "regression", "improved", "noise")


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


def _at(pct, position):
    i = min(int(position), 99)
    frac = position - i
    return pct[i] + (pct[i + 1] - pct[i]) * frac


def history_band(values, k):
    """(median, half width) of the night-to-night spread of ``values``, or None with fewer than MIN_NIGHTS."""
    values = [v for v in values if v is not None]
    if len(values) < MIN_NIGHTS:
        return None
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return med, k * MAD_SIGMA * mad


# --- the machine a run measured


def fingerprint(run):
    """The keys two runs must share for their latency to be compared (None: not known)."""
    where = (run.get("benchmark") or {}).get("where") or {}
    fp = where.get("fingerprint") or {}
    mode = fp.get("power_mode")
    kind = _kind(where, fp)
    clocks = fp.get("clocks_locked")
    return {"kind": kind, "board": fp.get("board") or fp.get("model"),
            "gpu": fp.get("gpu") if kind == "desktop-gpu" else None,
            "jetpack": fp.get("jetpack") or fp.get("l4t"), "tensorrt": fp.get("tensorrt"),
            "runtime": where.get("runtime"),
            "power_mode": mode.get("mode_name") if isinstance(mode, dict) else mode,
            "clocks": None if clocks is None else ("locked" if clocks else "not locked")}


def _kind(where, fp):
    """"jetson", "desktop-gpu" (an NVIDIA GPU that is not a Jetson's), "host-cpu" (the host in-process,
    or a device without a GPU), or None (no device figures)."""
    kind = fp.get("kind")
    if kind in ("jetson", "desktop-gpu"):
        return kind
    if kind or where.get("host"):
        return "host-cpu"
    if fp.get("board") or fp.get("l4t"):
        return "jetson"
    return None


def hardware(run):
    """{"kind", "label"}: what measured the run, in words a reader of the report needs."""
    where = (run.get("benchmark") or {}).get("where") or {}
    fp = where.get("fingerprint") or {}
    f = fingerprint(run)
    kind = f["kind"]
    if kind == "jetson":
        bits = ["JetPack " + str(f["jetpack"]) if f["jetpack"] else None,
                "TensorRT " + str(f["tensorrt"]) if f["tensorrt"] else None,
                "power mode " + str(f["power_mode"]) if f["power_mode"] else None,
                "clocks " + f["clocks"] if f["clocks"] else "clocks unknown"]
        label = "Jetson {} ({})".format(f["board"] or "board", ", ".join(b for b in bits if b))
    elif kind == "desktop-gpu":
        label = "desktop GPU {}: not a Jetson".format(f["gpu"] or "(unnamed)")
    elif kind == "host-cpu":
        host = where.get("host") or {}
        machine = host.get("machine") or fp.get("machine") or "CPU"
        label = "host CPU ({}, {}): not Jetson figures".format(machine, where.get("runtime") or "runtime unknown")
    else:
        label = "no device figures"
    return {"kind": kind, "label": label}


KIND_WORDS = {"jetson": "a Jetson", "desktop-gpu": "a desktop GPU", "host-cpu": "a host CPU"}


def _fingerprint_reasons(base_fp, cur_fp, expect):
    """(reasons not comparable, notes of expected changes)."""
    differs = {key: (base_fp[key], cur_fp[key]) for key in FINGERPRINT_KEYS if base_fp[key] != cur_fp[key]}
    if not differs:
        return [], []
    text = "; ".join("{} {} vs {}".format(key, a, b) for key, (a, b) in differs.items())
    unexpected = [key for key in differs if key not in expect]
    if not unexpected:
        return [], ["expected change (--expect-change): {}; figures compared with the old reference. Make a night "
                    "on the new setup the baseline once you have looked".format(text)]
    if "kind" in differs and "desktop-gpu" in differs["kind"]:
        words = ["{}{}".format(KIND_WORDS.get(k, "an unknown machine"), " ({})".format(g) if g else "")
                 for k, g in zip(differs["kind"], (base_fp["gpu"], cur_fp["gpu"]))]
        return ["latency not compared: the baseline ran on {}, the current run on {}; a desktop GPU's figures say "
                "nothing about a Jetson's (compare desktop-GPU runs with desktop-GPU runs)".format(*words)], []
    return ["not comparable: measured on different hardware or runtime ({}); if this change is intended, pass "
            "--expect-change {} (then make a night on the new setup the baseline)".format(text, " ".join(unexpected))], []


# --- the reference: the baseline and the nights on its fingerprint


def _identity(run):
    return (run.get("name"), run.get("when")) if run.get("when") else (None, str(Path(run["dir"]).resolve()))


def reference_nights(baseline, current, history, nights=DEFAULTS["nights"]):
    """(reference runs, oldest first with the baseline first, notes): the baseline and the last
    ``nights - 1`` history nights on its fingerprint. The current run and copies of the baseline are
    not history; a night the gate called a regression is left out; failed nights stay, flagged."""
    base_fp = fingerprint(baseline)
    skip = {_identity(baseline), _identity(current), (None, str(Path(baseline["dir"]).resolve())),
            (None, str(Path(current["dir"]).resolve()))}
    picked, other, regressed = [], 0, 0
    for night in history:
        if _identity(night) in skip or (None, str(Path(night["dir"]).resolve())) in skip:
            continue
        has_figures = bool(results_by_batch(night))
        if has_figures and fingerprint(night) != base_fp:
            other += 1
            continue
        if (night.get("gate") or {}).get("verdict") == "regression":
            regressed += 1
            continue
        picked.append(night)
    picked = picked[-(nights - 1):] if nights > 1 else []
    notes = []
    if other:
        notes.append("{} history night{} measured on another fingerprint, not in the reference".format(
            other, "" if other == 1 else "s"))
    if regressed:
        notes.append("{} history night{} the gate called a regression, not in the reference (the reference moves "
                     "only when you choose a new baseline)".format(regressed, "" if regressed == 1 else "s"))
    failed = [n for n in picked if n.get("failed")]
    if failed:
        notes.append("{} failed night{} in the reference, flagged and kept ({})".format(
            len(failed), "" if len(failed) == 1 else "s",
            "; ".join("{}: {}".format(Path(n["dir"]).name, n["failed"]) for n in failed[:3])))
    return [baseline] + picked, notes


# --- the judgement of one figure


def level_judgement(current, values, interval, tolerance, k, lower_is_better=True, allow_regression=True,
                    ref_intervals=()):
    """Judge ``current`` against the reference nights' ``values`` (> 0; the first is the baseline's).
    ``interval``: tonight's 95 % interval of this figure (None: unknown; an infinite end: unbounded);
    ``ref_intervals``: the reference nights' intervals: a change is judged only when tonight's interval
    clears the reference's (the median of their ends), as two runs' intervals must not overlap.
    Returns dict(reference, band, change, status, note, threshold)."""
    n = len(values)
    ref = statistics.median(values)
    logs = [math.log(v) for v in values]
    sign = 1.0 if lower_is_better else -1.0
    d = sign * (math.log(current) - math.log(ref))
    run_sigma = _interval_sigma(interval, current)
    notes = []
    if math.isinf(run_sigma):  # p99 of 100 calls is its second-slowest call: the nights' MAD would not save it
        status = "noise" if abs(d) > math.log1p(tolerance) else "ok"
        return _level_row(ref, None, current, status, "not judged: tonight's calls cannot bound this quantile (its 95 % "
                          "interval runs past the slowest call); give more calls (stages.benchmark.iterations: 1000)",
                          None)
    if n >= MIN_NIGHTS:
        mid = statistics.median(logs)
        night = max(MAD_SIGMA * statistics.median(abs(v - mid) for v in logs), SIGMA_FLOOR)
        var = night ** 2 * MEDIAN_VAR / n + max(night ** 2, run_sigma ** 2)
        spread = "nights' spread ±{:.1%} over {} nights".format(math.expm1(night), n)
    else:
        var = SIGMA_PRIOR ** 2 * (1 + MEDIAN_VAR / n) + run_sigma ** 2
        spread = "{} reference night{}: nights' spread assumed ±{:.1%} until {}".format(
            n, "" if n == 1 else "s", SIGMA_PRIOR, MIN_NIGHTS)
    tol = math.log1p(tolerance)
    threshold = max(tol, k * math.sqrt(var))
    band = sorted((ref * math.exp(-threshold), ref * math.exp(threshold)))
    if interval is not None and not any(math.isinf(v) for v in interval):
        half = (math.log(max(interval)) - math.log(min(interval))) / 2 if min(interval) > 0 else math.inf
        if half > tol:
            notes.append("its 95 % interval (±{:.1%}) is wider than the tolerance ({:.0%}): more calls would "
                         "judge it closer".format(math.expm1(half), tolerance))
    overlap = _overlap(interval, ref_intervals, d > 0, lower_is_better)
    if abs(d) <= tol:
        status, why = "ok", "within {:.0%} of the reference".format(tolerance)
    elif abs(d) > threshold and overlap:
        status, why = "noise", "beyond {:.0%}, but tonight's 95 % interval overlaps the reference nights' ({})".format(
            tolerance, overlap)
    elif d > threshold:
        status, why = "regression", "worse by more than {:.1%} ({})".format(math.expm1(threshold), spread)
        if not allow_regression:
            status = "noise"
            why += "; host CPU figures: a regression only against {} nights of history".format(MIN_NIGHTS)
    elif d < -threshold:
        status, why = "improved", "better by more than {:.1%} ({})".format(math.expm1(threshold), spread)
    else:
        status, why = "noise", "beyond {:.0%} but within the noise, ±{:.1%} ({})".format(
            tolerance, math.expm1(threshold), spread)
    return _level_row(ref, band, current, status, "; ".join([why] + notes), threshold)


def _overlap(interval, ref_intervals, worse, lower_is_better):
    """The reference's interval (text) when tonight's 95 % interval reaches into it, else None."""
    if interval is None or any(math.isinf(v) for v in interval):
        return None
    ends = [sorted(iv) for iv in ref_intervals if iv is not None and not any(math.isinf(v) for v in iv)]
    if not ends:
        return None
    lo, hi = statistics.median(e[0] for e in ends), statistics.median(e[1] for e in ends)
    up = worse == lower_is_better  # tonight's value is above the reference's
    touches = min(interval) <= hi if up else max(interval) >= lo
    return "{:.4g}–{:.4g}".format(lo, hi) if touches else None


def _level_row(ref, band, current, status, note, threshold):
    return {"reference": ref, "band": band, "change": current / ref - 1, "status": status, "note": note,
            "threshold": threshold}


def _interval_sigma(interval, value):
    """Tonight's sampling sigma of ln(figure) from its 95 % interval: 0 unknown, inf unbounded."""
    if interval is None:
        return 0.0
    lo, hi = min(interval), max(interval)
    if math.isinf(lo) or math.isinf(hi) or lo <= 0:
        return math.inf
    return (math.log(hi) - math.log(lo)) / (2 * Z95)


def _median_throughput(row):
    p50 = row.get("p50_ms")
    return None if not p50 else row["batch_size"] * 1000.0 / p50


# --- the comparison


def compare_runs(baseline, current, history=(), tolerance=DEFAULTS["tolerance"],
                 accuracy_tolerance=DEFAULTS["accuracy_tolerance"], k=DEFAULTS["k"], nights=DEFAULTS["nights"],
                 expect_change=()):
    """Judge ``current`` against ``baseline`` and the ``history`` nights (loaded runs,
    pipeline.report.collect.load_run / expand_history). Returns the comparison (schema deploy.comparison/2)."""
    reasons, notes, rows = [], [], []
    base_fp, cur_fp = fingerprint(baseline), fingerprint(current)
    hw = hardware(current)
    ref_runs, ref_notes = reference_nights(baseline, current, history, nights)
    notes += ref_notes
    base_res, cur_res = results_by_batch(baseline), results_by_batch(current)
    fp_reasons, fp_notes = _fingerprint_reasons(base_fp, cur_fp, set(expect_change))
    notes += fp_notes
    if baseline.get("failed"):
        reasons.append("not comparable: the baseline {} is a failed night ({}); a failed run is never a reference: "
                       "make a night that completed the baseline".format(baseline["dir"], baseline["failed"]))
    elif not cur_res:
        reasons.append("no data: the current run has no benchmark figures ({}); a night without figures is a "
                       "failure, never a pass".format(current.get("failed") or "no benchmark"))
    elif fp_reasons:
        reasons += fp_reasons
    else:
        host = hw["kind"] == "host-cpu"
        for bs in sorted(set(base_res) | set(cur_res)):
            if bs not in cur_res:
                rows.append(_missing_row(bs, "measured in the baseline, not tonight"))
                reasons.append("not comparable: batch size {} was measured in the baseline but not tonight".format(bs))
                continue
            if bs not in base_res:
                rows.append(_missing_row(bs, "measured tonight, not in the baseline"))
                continue
            rows += _latency_rows(bs, cur_res[bs], [results_by_batch(r).get(bs) or {} for r in ref_runs],
                                  tolerance, k, host)
        if host:
            notes.append("host CPU figures (not Jetson figures): a difference is called a regression only against "
                         "{} nights of history".format(MIN_NIGHTS))
    for run, label in ((baseline, "baseline"), (current, "current")):
        for w in ((run.get("benchmark") or {}).get("where") or {}).get("warnings") or []:
            notes.append("{}: {} (its figures are noisier)".format(label, w))
    rows += _accuracy_rows(current, ref_runs, accuracy_tolerance, k)
    rows += _pass_fail_rows(baseline, current)
    if not any(r["status"] in COMPARED for r in rows) and not reasons:
        reasons.append("no data: no figure was compared (neither run has figures both measured); a comparison of "
                       "nothing is never a pass")
    regressions = [r for r in rows if r["status"] == "regression"]
    if regressions:
        verdict = "regression"
        reasons.insert(0, "{} regression{}: {}".format(len(regressions), "" if len(regressions) == 1 else "s", ", ".join(
            "{} {:+.1%}".format(r["label"], r["change"]) if isinstance(r["change"], float) and r["figure"] != "accuracy"
            else r["label"] for r in regressions)))
    elif any(r.startswith("no data") for r in reasons):
        verdict = "no data"
    elif reasons:
        verdict = "not comparable"
    else:
        verdict = "pass"
    failed = sum(1 for r in ref_runs if r.get("failed"))
    return {
        "schema": SCHEMA, "verdict": verdict, "passed": verdict == "pass", "reasons": reasons, "notes": notes,
        "baseline": _run_ref(baseline), "current": _run_ref(current),
        "reference": {"nights": len(ref_runs), "failed_nights": failed, "fingerprint": base_fp,
                      "runs": [Path(r["dir"]).name for r in ref_runs]},
        "hardware": hw, "tolerance": tolerance, "accuracy_tolerance": accuracy_tolerance, "k": k, "max_nights": nights,
        "expect_change": sorted(expect_change), "regressions": len(regressions), "rows": rows,
    }


def write_comparison(path, result, flag="-o"):
    """``deploy compare -o FILE``: the comparison checked against its schema (deploy.comparison/2, the one
    deploy report reads it with) and written atomically; a folder that cannot be written is one line."""
    from pipeline.errors import DeployError

    try:
        return records.write(path, result, "comparison")
    except OSError as e:
        raise DeployError("{} {}: cannot write ({})".format(flag, path, e.strerror or e))


def _run_ref(run):
    return {"dir": run["dir"], "name": run.get("name"), "when": run.get("when"), "failed": run.get("failed")}


def _missing_row(bs, why):
    return {"figure": "p50_ms", "label": "batch {}".format(bs), "batch_size": bs, "baseline": None, "current": None,
            "reference": None, "band": None, "interval": None, "change": None, "status": "not compared", "note": why}


FIGURES = (("p50_ms", 0.5, "p50 b{} (ms)"), ("p99_ms", 0.99, "p99 b{} (ms)"))


def _latency_rows(bs, cur, ref_rows, tolerance, k, host):
    rows = []
    n_ref = sum(1 for r in ref_rows if r.get("p50_ms"))
    allow = not host or n_ref >= MIN_NIGHTS
    for key, q, label in FIGURES:
        rows.append(_figure_row(key, label.format(bs), bs, cur.get(key), [r.get(key) for r in ref_rows],
                                quantile_interval(cur, q), tolerance, k, True, allow,
                                [quantile_interval(r, q) for r in ref_rows if r.get(key)]))
    row = _figure_row("throughput_ips", "throughput b{} (img/s)".format(bs), bs, _median_throughput(cur),
                      [_median_throughput(r) if r.get("p50_ms") else None for r in ref_rows],
                      _throughput_interval(cur), tolerance, k, False, allow,
                      [_throughput_interval(r) for r in ref_rows if r.get("p50_ms")])
    row["note"] = "median call: batch / p50; " + row["note"]
    rows.append(row)
    return rows


def _throughput_interval(row):
    """The median-call throughput's 95 % interval: batch / the p50's interval."""
    iv = quantile_interval(row, 0.5)
    if iv is None:
        return None
    bs = row["batch_size"]
    return tuple(sorted(bs * 1000.0 / v if 0 < v < math.inf else (math.inf if v <= 0 else 0.0) for v in iv))


def _figure_row(key, label, bs, cur, values, interval, tolerance, k, lower_is_better, allow, ref_intervals=()):
    base = values[0] if values else None
    row = {"figure": key, "label": label, "batch_size": bs, "baseline": base, "current": cur,
           "interval": None if interval is None else [None if math.isinf(v) else v for v in interval]}
    values = [v for v in values if v]
    if cur is None or not values:
        return dict(row, reference=None, band=None, change=None, status="not compared",
                    note="not measured tonight" if cur is None else "not measured in the reference nights")
    judged = level_judgement(cur, values, interval, tolerance, k, lower_is_better, allow, ref_intervals)
    judged.pop("threshold")
    return dict(row, **judged)


def _accuracy_rows(current, ref_runs, tolerance, k):
    rows = []
    cur = accuracy_of(current)
    past = [accuracy_of(r).get("engine_top1_agreement") for r in ref_runs]
    base = past[0] if past else None
    past = [v for v in past if v is not None]
    c = cur.get("engine_top1_agreement")
    if c is not None and past:
        images = ((current.get("benchmark") or {}).get("accuracy") or {}).get("images")
        ref = statistics.median(past)
        one = 1.0 / images if images else 0.0
        allowed = max(tolerance, one)
        band = history_band(past, k)
        if band is not None:
            allowed = max(allowed, band[1])
        row = {"figure": "accuracy", "label": "engine top-1 agreement", "batch_size": None, "baseline": base,
               "current": c, "reference": ref, "band": [ref - allowed, min(1.0, ref + allowed)], "interval": None,
               "change": c - ref}
        what = "{:.3g} absolute".format(allowed)
        if images and allowed == one:
            what += " (one image of {}: a single flipped image is allowed; 200 images or more let the tolerance " \
                    "decide)".format(images)
        if ref - c > allowed + 1e-9:
            row.update(status="regression", note="dropped by more than {}".format(what))
        elif c - ref > allowed + 1e-9:
            row.update(status="improved", note="rose by more than {}".format(what))
        else:
            row.update(status="ok", note="within {}".format(what))
        rows.append(row)
    v = cur.get("val_accuracy")
    if v is not None:
        rows.append({"figure": "accuracy", "label": "validation accuracy (host training)", "batch_size": None,
                     "baseline": accuracy_of(ref_runs[0]).get("val_accuracy") if ref_runs else None, "current": v,
                     "reference": None, "band": None, "interval": None, "change": None, "status": "not compared",
                     "note": "a host training figure, not a device gate (judge training in the host job)"})
    return rows


def _pass_fail_rows(baseline, current):
    rows = []
    pairs = (("consistency", "batch consistency",
              lambda r: ((r.get("benchmark") or {}).get("consistency") or {}).get("passed")),
             ("check", "check: deployable", lambda r: (r.get("check") or {}).get("deployable")))
    for figure, label, get in pairs:
        b, c = get(baseline), get(current)
        if b is None or c is None:
            continue
        status = "regression" if b and not c else "improved" if c and not b else "ok"
        rows.append({"figure": figure, "label": label, "batch_size": None, "baseline": b, "current": c,
                     "reference": b, "band": None, "interval": None, "change": None, "status": status,
                     "note": "was passing, now fails" if status == "regression" else
                     "fails in both" if not b and not c else ""})
    return rows


# --- output


def _cell(value, change=False):
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "pass" if value else "FAIL"
    if change:
        return "{:+.1%}".format(value)
    return "{:.4g}".format(value) if isinstance(value, float) else str(value)


def _change(r):
    if r["change"] is None:
        return "–"
    return "{:+.3g}".format(r["change"]) if r["figure"] == "accuracy" else "{:+.1%}".format(r["change"])


def _band(r):
    if r.get("band") is None:
        return "–"
    return "{:.4g}–{:.4g}".format(*r["band"])


def _interval(r):
    iv = r.get("interval")
    if not iv:
        return "–"
    return "{}–{}".format(*("∞" if v is None else "{:.4g}".format(v) for v in iv))


HEADER = ["figure", "reference", "tonight", "change", "95 % interval", "band", "status", "note"]


def _lines(result):
    return [[r["label"], _cell(r["reference"]), _cell(r["current"]), _change(r), _interval(r), _band(r), r["status"],
             r["note"]] for r in result["rows"]]


def _summary(result):
    ref = result["reference"]
    return "{}: {} ({} vs {}; reference: median of {} night{}{}, tolerance {:.0%}, k {:g}; {})".format(
        result["verdict"].upper(), "; ".join(result["reasons"]) or "{} figures compared".format(
            sum(1 for r in result["rows"] if r["status"] in COMPARED)),
        result["current"]["dir"], result["baseline"]["dir"], ref["nights"], "" if ref["nights"] == 1 else "s",
        ", {} failed".format(ref["failed_nights"]) if ref["failed_nights"] else "", result["tolerance"], result["k"],
        result["hardware"]["label"])


def format_text(result):
    rows = [HEADER] + _lines(result)
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(HEADER) - 1)]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]
    out += ["note: " + n for n in result["notes"]]
    out.append(_summary(result))
    return "\n".join(out)


def _md(text):
    from html import escape

    return escape(str(text), quote=False).replace("|", "\\|")


def format_markdown(result):
    verdict = result["verdict"]
    head = "pass" if verdict == "pass" else "**{}**".format(verdict)
    out = ["### deploy compare: {} — {}".format(head, _md(result["hardware"]["label"])), ""]
    out += ["> " + _md(r) for r in result["reasons"]]
    out += ["", "| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    for line in _lines(result):
        if line[6] == "regression":
            line[6] = "**regression**"
        out.append("| " + " | ".join(_md(c) for c in line) + " |")
    ref = result["reference"]
    out += ["", "Reference: median of {} night{} on the baseline's fingerprint ({} failed), baseline {}.".format(
        ref["nights"], "" if ref["nights"] == 1 else "s", ref["failed_nights"], _md(result["baseline"]["dir"]))]
    out += ["", *("- " + _md(n) for n in result["notes"])]
    return "\n".join(out).rstrip() + "\n"


def format_junit(result):
    from xml.sax.saxutils import quoteattr

    cases = []
    for r in result["rows"]:
        body = ""
        if r["status"] == "regression":
            body = "<failure message={}/>".format(quoteattr("{}: {} -> {} ({})".format(
                r["label"], _cell(r["reference"]), _cell(r["current"]), r["note"])))
        cases.append('  <testcase classname="deploy.compare" name={}>{}</testcase>'.format(quoteattr(r["label"]), body))
    failures = result["regressions"]
    if result["verdict"] in ("not comparable", "no data"):
        cases.append('  <testcase classname="deploy.compare" name="verdict"><failure message={}/></testcase>'.format(
            quoteattr("{}: {}".format(result["verdict"], "; ".join(result["reasons"])))))
        failures += 1
    return ('<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="deploy compare" tests="{}" failures="{}">\n{}\n'
            "</testsuite>\n").format(len(cases), failures, "\n".join(cases))
