"""``deploy compare BASELINE CURRENT``: the nightly's regression gate.

The reference is a history, not a night. Tonight's figure is judged against the **median of the
reference nights**: the baseline (the run the user chose; it moves only when they choose again) and
the last ``nights - 1`` history nights measured on the baseline's fingerprint (kind of machine, board
or GPU, JetPack, TensorRT, runtime, power mode, clocks). Failed or incomplete nights (a ``FAILED``
marker, a non-zero exit code, no benchmark) are included where they have figures and flagged; a night
the gate itself called a regression (its ``comparison.json``) is left out, so a real slowdown stays
red until someone moves the baseline. A failed run is never a reference: as the baseline it makes
the comparison "not comparable".

A latency figure (p50 and p99 per batch size) and the benchmark's measured throughput (its
``throughput_ips``: batch x calls / the timed loop's wall time, the figure the benchmark and the report
show) are *out of band* when their change from the reference, ``d = ln(tonight / reference)``, is beyond both

1. the tolerance (relative, default 3 %): smaller changes are "ok" whatever the noise says; and
2. ``k`` (default 2) standard deviations of the difference tonight - reference, where the
   night-to-night sigma is 1.4826 x MAD of the reference nights (log values; at least ``SIGMA_FLOOR``)
   once there are ``MIN_NIGHTS`` (5) of them, and ``SIGMA_PRIOR`` before (a new baseline: the nights'
   spread is not known yet); the median's own error (x sqrt(1 + 1.57 / n)) and tonight's sampling
   error (its 95 % interval, from the 101 percentiles and the number of calls) are added. A quantile
   the calls cannot bound (p99 of 100 calls: its interval runs past the slowest call) is never judged
   ("noise" or "ok", with a note asking for more calls).

Red means persistent. A figure out of band on one night is **suspect** (verdict "suspect", exit 0: a
warning; the night is kept as evidence). It is a **regression** when it persists: out of band on the
previous night too (two consecutive nights, both beyond the band drawn with the nights' robust spread), or
with the clipped mean of the last three nights beyond that mean's own band (a slow step, +5 %; this also
judges a night beyond the tolerance but inside its one-night band; the three nights' changes are measured from
the Hodges-Lehmann centre of the reference nights before them, so a step's own first nights are not in their
reference), or beyond ``FIRST_NIGHT_SIGMAS`` sigma
and ``FIRST_NIGHT_FLOOR`` (12 %) on its first night (gate_stats.persistence_judgement). The previous
nights are the newest history nights after the baseline that have figures on its fingerprint; their
statuses come from their own ``comparison.json``. A suspect night stays out of the reference until the night after
it passed; a night with a figure improved (out of band the other way) waits one night; a night the gate called a
regression stays out for good.

Changes between (1) and (2) are "noise". Each row carries tonight's 95 % interval and the band it may
lie in. Accuracy (engine top-1 agreement) regresses when it drops below the reference by more than the
accuracy tolerance *and* more than one image; validation accuracy is a host training figure and is not
a device gate. Batch consistency and the check's verdict regress when they go from pass to fail.

A night whose benchmark says it throttled (a ``power.throttled`` reason, or a GPU clock that moved during
the timed loop: ``power.clocks_mhz``) is flagged, not judged: verdict "throttled", exit 0 with a warning,
left out of the reference and of the persistence rule.

Verdicts: "pass" and "suspect" and "throttled" (exit 0); "regression", "not comparable" (another
fingerprint unless ``--expect-change`` names the key, a failed baseline or night, a batch size not
measured tonight) and "no data" (nothing compared, or tonight has no benchmark) exit 4 at once. Host-CPU
figures are labelled so, and a host-CPU difference is a regression only against ``MIN_NIGHTS`` nights.
"""


import math
import statistics
from pathlib import Path

from pipeline import records
from pipeline.report.collect import accuracy_of, results_by_batch
from pipeline.report.compare_format import format_junit, format_markdown, format_text
from pipeline.report.gate_stats import (COMPARED, MIN_NIGHTS, OUT_OF_BAND, history_band,  # noqa: F401 - re-exported
                                        level_judgement, mean_interval, persistence_judgement, quantile_interval,
                                        relative_change)
from pipeline.report.gate_nights import PERSISTENCE, baseline_hint, benchmark_digest, previous_nights, throttled
from pipeline.report.machine import (FINGERPRINT_KEYS, fingerprint, fingerprint_differs, fingerprint_reasons,  # noqa: F401
                                     hardware)

__all__ = ["compare_runs", "write_comparison", "reference_nights", "format_text", "format_markdown", "format_junit",
           "quantile_interval", "history_band", "level_judgement", "fingerprint", "hardware", "DEFAULTS", "SCHEMA",
           "MIN_NIGHTS", "VERDICTS"]

SCHEMA = records.schema_of("comparison")  # deploy.comparison/2 (pipeline.records.models.Comparison)

DEFAULTS = {"tolerance": 0.03, "accuracy_tolerance": 0.02, "k": 2.0, "nights": 20}
VERDICTS = ("pass", "suspect", "throttled", "regression", "not comparable", "no data")
PASSING = ("pass", "suspect", "throttled")  # exit 0: suspect and throttled are warnings (amber), not red


# --- the reference: the baseline and the nights on its fingerprint


def _identity(run):
    return (run.get("name"), run.get("when")) if run.get("when") else (None, str(Path(run["dir"]).resolve()))


def reference_nights(baseline, current, history, nights=DEFAULTS["nights"]):
    """(reference runs, oldest first with the baseline first, notes): the baseline and the last
    ``nights - 1`` history nights on its fingerprint. The current run and copies of the baseline are
    not history, nor is a night that finished after the current run (re-judging an old night against the whole
    archive); a night the gate called a regression is left out; failed nights stay, flagged."""
    base_fp = fingerprint(baseline)
    skip = {_identity(baseline), _identity(current), (None, str(Path(baseline["dir"]).resolve())),
            (None, str(Path(current["dir"]).resolve()))}
    picked, other, regressed, hot, later = [], 0, 0, 0, 0
    for night in history:
        if _identity(night) in skip or (None, str(Path(night["dir"]).resolve())) in skip:
            continue
        if current.get("when") and (night.get("when") or "") > current["when"]:
            later += 1
            continue
        has_figures = bool(results_by_batch(night))
        if has_figures and fingerprint_differs(base_fp, fingerprint(night)):
            other += 1
            continue
        if (night.get("gate") or {}).get("verdict") == "regression":
            regressed += 1
            continue
        if has_figures and throttled(night):
            hot += 1
            continue
        picked.append(night)
    # a suspect night is under test until the night after it passed: out of the reference until then; a night with a
    # figure out of band the other way (improved) waits one night: a night far off either way joins the reference
    # only once a later night says whether it was drift (a two-night reference's median is their mean)
    picked = [n for i, n in enumerate(picked) if not _waiting(n, picked[i + 1:]) or (
        i + 1 < len(picked) and (picked[i + 1].get("gate") or {}).get("verdict") == "pass")]
    picked = picked[-(nights - 1):] if nights > 1 else []
    notes = []
    if later:
        notes.append("{} history night{} finished after this run, not in its reference".format(
            later, "" if later == 1 else "s"))
    if other:
        notes.append("{} history night{} measured on another fingerprint, not in the reference".format(
            other, "" if other == 1 else "s"))
    if regressed:
        notes.append("{} history night{} the gate called a regression, not in the reference (the reference moves "
                     "only when you choose a new baseline)".format(regressed, "" if regressed == 1 else "s"))
    if hot:
        notes.append("{} history night{} throttled, not in the reference".format(hot, "" if hot == 1 else "s"))
    failed = [n for n in picked if n.get("failed")]
    if failed:
        notes.append("{} failed night{} in the reference, flagged and kept ({})".format(
            len(failed), "" if len(failed) == 1 else "s",
            "; ".join("{}: {}".format(Path(n["dir"]).name, n["failed"]) for n in failed[:3])))
    return [baseline] + picked, notes


def _waiting(night, after):
    """True while a night is under test: suspect, or improved with no night with figures after it yet."""
    suspect = (night.get("gate") or {}).get("verdict") == "suspect"
    return suspect or (_improved(night) and not any(results_by_batch(n) for n in after))


def _improved(night):
    """True when the night's comparison called a latency or throughput figure improved (out of band, faster)."""
    return any(isinstance(r, dict) and r.get("status") == "improved" and r.get("figure") in LATENCY_FIGURES
               for r in (night.get("gate") or {}).get("rows") or [])


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
    fp_reasons, fp_notes = fingerprint_reasons(base_fp, cur_fp, set(expect_change))
    notes += fp_notes
    if baseline.get("failed"):
        reasons.append("not comparable: the baseline {} is a failed night ({}); a failed run is never a reference: "
                       "make a night that completed the baseline".format(baseline["dir"], baseline["failed"]))
    elif not cur_res:
        reasons.append("no data: the current run has no benchmark figures ({}); a night without figures is a "
                       "failure, never a pass".format(current.get("failed") or "no benchmark"))
    elif current.get("failed"):
        reasons.append("not comparable: the current run {} failed ({}); its figures are not a night's, never a "
                       "pass".format(current["dir"], current["failed"]))
    elif fp_reasons:
        reasons += fp_reasons
    elif throttled(current):
        notes.append("throttled: {}; tonight's figures are flagged, not judged (they are not the board's steady "
                     "state): let the board cool, check its fan and power supply".format(throttled(current)))
    else:
        host = hw["kind"] == "host-cpu"
        prev_rows, recent = previous_nights(baseline, current, history, base_fp)
        # the window's reference: the reference nights as they stood before the window's own nights
        before_runs = reference_nights(baseline, current, [h for h in history if not any(
            h is r for r in recent)], nights)[0]
        for bs in sorted(set(base_res) | set(cur_res)):
            if bs not in cur_res:
                rows.append(_missing_row(bs, "measured in the baseline, not tonight"))
                reasons.append("not comparable: batch size {} was measured in the baseline but not tonight".format(bs))
                continue
            if bs not in base_res:
                rows.append(_missing_row(bs, "measured tonight, not in the baseline"))
                continue
            rows += _latency_rows(bs, cur_res[bs], [results_by_batch(r).get(bs) or {} for r in ref_runs],
                                  tolerance, k, host, prev_rows, [results_by_batch(r).get(bs) or {} for r in recent],
                                  [results_by_batch(r).get(bs) or {} for r in before_runs])
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
    suspects = [r for r in rows if r["status"] == "suspect"]
    if regressions:
        verdict = "regression"
        hint = baseline_hint(baseline, current, history, base_fp, rows, len(ref_runs), tolerance)
        if hint:
            notes.append(hint)
        reasons.insert(0, "{} regression{}: {}".format(len(regressions), "" if len(regressions) == 1 else "s", ", ".join(
            "{} {}".format(r["label"], _pct(r["change"])) if isinstance(r["change"], float) and r["figure"] != "accuracy"
            else r["label"] for r in regressions)))
    elif any(r.startswith("no data") for r in reasons):
        verdict = "no data"
    elif reasons:
        verdict = "not comparable"
    elif throttled(current):
        verdict = "throttled"
        reasons.append("throttled: {} (not judged; the night is kept, out of the reference)".format(throttled(current)))
    elif suspects:
        verdict = "suspect"
        reasons.append("{} suspect figure{} (out of band tonight; a regression only if it persists): {}".format(
            len(suspects), "" if len(suspects) == 1 else "s", ", ".join("{} {}".format(r["label"], _pct(r["change"]))
                                                                        for r in suspects)))
    else:
        verdict = "pass"
    failed = sum(1 for r in ref_runs if r.get("failed"))
    return {
        "schema": SCHEMA, "verdict": verdict, "passed": verdict in PASSING, "reasons": reasons, "notes": notes,
        "baseline": _run_ref(baseline), "current": _run_ref(current),
        "reference": {"nights": len(ref_runs), "failed_nights": failed, "fingerprint": base_fp,
                      "runs": [Path(r["dir"]).name for r in ref_runs]},
        "hardware": hw, "tolerance": tolerance, "accuracy_tolerance": accuracy_tolerance, "k": k, "max_nights": nights,
        "expect_change": sorted(expect_change), "regressions": len(regressions), "suspects": len(suspects),
        "persistence": dict(PERSISTENCE), "rows": rows,
    }


def _pct(change):
    return "{:+.1%}".format(change) if change < 1e4 else "x{:.3g}".format(change + 1)


def write_comparison(path, result, flag="-o"):
    """``deploy compare -o FILE``: the comparison checked against its schema (deploy.comparison/2, the one
    deploy report reads it with) and written atomically; a folder that cannot be written is one line."""
    from pipeline.errors import DeployError

    try:
        return records.write(path, result, "comparison")
    except OSError as e:
        raise DeployError("{} {}: cannot write ({})".format(flag, path, e.strerror or e))


def _run_ref(run):
    """Which run was compared: its folder, name, finish time, and the benchmark it was judged on (benchmark.json's
    sha256 and when its stage made it): a report shows a comparison as stale when the run's benchmark differs."""
    return {"dir": run["dir"], "name": run.get("name"), "when": run.get("when"), "failed": run.get("failed"),
            "benchmark": benchmark_digest(run)}


def _missing_row(bs, why):
    return {"figure": "p50_ms", "label": "batch {}".format(bs), "batch_size": bs, "baseline": None, "current": None,
            "reference": None, "band": None, "interval": None, "change": None, "status": "not compared", "note": why}


FIGURES = (("p50_ms", 0.5, "p50 b{} (ms)"), ("p99_ms", 0.99, "p99 b{} (ms)"))
LATENCY_FIGURES = ("p50_ms", "p99_ms", "throughput_ips")


def _latency_rows(bs, cur, ref_rows, tolerance, k, host, prev_rows=None, recent=(), before=None):
    """p50, p99 and the measured throughput of batch size ``bs``: tonight's ``cur`` against the reference nights'
    ``ref_rows``; ``prev_rows`` {(figure, batch size): status} of the previous night, ``recent`` (the last
    nights' rows, newest last) and ``before`` (the reference nights' rows before those) for the persistence rule."""
    before = ref_rows if before is None else before
    rows = []
    n_ref = sum(1 for r in ref_rows if r.get("p50_ms"))
    allow = not host or n_ref >= MIN_NIGHTS
    prev_rows = prev_rows or {}
    for key, q, label in FIGURES:
        rows.append(_figure_row(key, label.format(bs), bs, cur.get(key), [r.get(key) for r in ref_rows],
                                quantile_interval(cur, q), tolerance, k, True, allow,
                                [quantile_interval(r, q) for r in ref_rows if r.get(key)],
                                prev_rows.get((key, bs)), [r.get(key) for r in recent], [r.get(key) for r in before]))
    row = _figure_row("throughput_ips", "throughput b{} (img/s)".format(bs), bs, cur.get("throughput_ips"),
                      [r.get("throughput_ips") for r in ref_rows], mean_interval(cur, cur.get("throughput_ips")),
                      tolerance, k, False, allow, (),
                      prev_rows.get(("throughput_ips", bs)), [r.get("throughput_ips") for r in recent],
                      [r.get("throughput_ips") for r in before])
    row["note"] = "measured: the benchmark's throughput (interval from the calls' spread); " + row["note"]
    rows.append(row)
    return rows


def _figure_row(key, label, bs, cur, values, interval, tolerance, k, lower_is_better, allow, ref_intervals=(),
                previous=None, recent=(), before=None):
    base = values[0] if values else None
    row = {"figure": key, "label": label, "batch_size": bs, "baseline": base, "current": cur,
           "interval": None if interval is None else [None if math.isinf(v) else v for v in interval]}
    values = [v for v in values if v]
    if not cur or not values:
        return dict(row, reference=None, band=None, change=None, status="not compared",
                    note="not measured tonight" if cur is None else "not measured in the reference nights")
    judged = level_judgement(cur, values, interval, tolerance, k, lower_is_better, allow, ref_intervals)
    judged = persistence_judgement(judged, cur, list(recent), previous, lower_is_better, before)
    for private in ("threshold", "d", "night_var", "var", "n", "tol", "run_var", "logs", "allow", "k"):
        judged.pop(private, None)
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
