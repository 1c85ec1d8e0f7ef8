"""The gate's statistics: a benchmark quantile's 95 % interval, the nights' spread, the judgement of one
figure against the reference nights (``level_judgement``: ok, noise, out of band, improved), and whether
a figure out of band is a regression or only suspect (``persistence_judgement``: red means persistent).
The rule in words is pipeline.report.compare's docstring; the comparison of two runs is compare_runs there."""

import math
import statistics

Z95 = 1.96
MAD_SIGMA = 1.4826
MIN_NIGHTS = 5  # below this the MAD of the nights says little about their spread
SIGMA_PRIOR = 0.02  # night-to-night sigma (of ln figure) assumed until MIN_NIGHTS nights say otherwise
SIGMA_FLOOR = 0.01  # the MAD of a few quiet nights can be near zero by chance
MEDIAN_VAR = math.pi / 2  # variance of a median of n normal values: (pi / 2) sigma^2 / n
HL_VAR = math.pi / 3  # variance of the Hodges-Lehmann centre of n normal values: (pi / 3) sigma^2 / n
COMPARED = ("ok", "regression", "suspect", "improved", "noise")  # the statuses of a figure that was compared
OUT_OF_BAND = ("suspect", "regression")  # a night's figure beyond its band (a regression: confirmed)
# Red means persistent: a figure out of band is a regression only when it is confirmed by
#   - its size: beyond FIRST_NIGHT_SIGMAS sigma and FIRST_NIGHT_FLOOR (+25 % is red on its first night); or
#   - the previous night: the same figure out of band (suspect or regression) then too, both nights beyond the band
#     drawn with the robust spread (below) and the window's mean beyond the tolerance; or
#   - a window, for a figure beyond the tolerance tonight (out of band, or "noise": inside its one-night band): the
#     mean of the last WINDOW nights' changes (tonight's included), each night clipped to within WINDOW_CLIP sigma
#     of the three's median so one tail night neither makes nor hides a step, beyond WINDOW_K standard deviations
#     of that mean (the robust spread / WINDOW, plus the reference's own error) and the tolerance: the slow
#     step (+5 %) whose single nights flicker in and out of the band. The window's changes are measured from the
#     reference as it stood before the window's nights (a step's first night that passed is not in it) and from
#     its Hodges-Lehmann centre (the median of the nights' pairwise means: robust like the median, and nearly as
#     exact as the mean on normal drift, variance HL_VAR sigma^2 / n). A figure whose own sampling error outweighs
#     the nights' drift (a p99 of few calls), whose interval overlaps the reference's, or a host figure before
#     MIN_NIGHTS nights is not made red by the window.
# The robust spread: the larger of the MAD's sigma^2 and the nights' variance winsorized at SPREAD_CLIP MAD sigmas
# (heavy-tailed drift is wider than its MAD says), or tonight's sampling variance when larger. Tuned with
# scripts/bench/gate_model.py and measured with scripts/bench/gate_noise.py (docs/nightly.md).
WINDOW = 3
WINDOW_K = 2.5
WINDOW_CLIP = 1.5
SPREAD_CLIP = 2.5
FIRST_NIGHT_SIGMAS = 4.0
FIRST_NIGHT_FLOOR = 0.12
LOG_MIN = math.log(1e-300)  # values below this (denormals) are clamped: a change stays finite



def quantile_interval(result, q):
    """(low, high) of the 95 % confidence interval of quantile ``q`` (0..1) of a benchmark row, or None
    without ``percentiles_ms``. An end the calls cannot bound (p99 of 100 calls: the interval runs past
    the largest call) is infinite: such a figure is judged by the history alone."""
    pct = result.get("percentiles_ms")
    n = result.get("iterations")
    if not pct or len(pct) != 101 or not n:
        return None
    n = float(min(n, 10 ** 15))  # 10^400 calls parse (an int) but do not convert to a float
    half = Z95 * math.sqrt(q * (1 - q) / n)
    low, high = q - half, q + half + 1.0 / n  # + one call: the rank above n*q
    return (_at(pct, low * 100) if low >= 0 else -math.inf), (_at(pct, high * 100) if high <= 1 else math.inf)


def mean_interval(result, value):
    """(low, high) of the 95 % interval of a figure proportional to the mean call (the measured throughput,
    ``value``): the mean's relative standard error, std / mean / sqrt(calls); None when not recorded."""
    mean, std, n = result.get("mean_ms"), result.get("std_ms"), result.get("iterations")
    if not value or not mean or std is None or not n or mean <= 0:
        return None
    rel = min(Z95 * std / mean / math.sqrt(float(min(n, 10 ** 15))), LOG_SPAN)
    return _exp(_ln(value) - rel), _exp(_ln(value) + rel)


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
    logs = [_ln(v) for v in values]
    sign = 1.0 if lower_is_better else -1.0
    d = sign * (_ln(current) - _ln(ref))
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
        night_var = night ** 2
        var = night ** 2 * MEDIAN_VAR / n + max(night ** 2, run_sigma ** 2)
        spread = "nights' spread ±{:.1%} over {} nights".format(_expm1(night), n)
    else:
        night_var = SIGMA_PRIOR ** 2
        var = SIGMA_PRIOR ** 2 * (1 + MEDIAN_VAR / n) + run_sigma ** 2
        spread = "{} reference night{}: nights' spread assumed ±{:.1%} until {}".format(
            n, "" if n == 1 else "s", SIGMA_PRIOR, MIN_NIGHTS)
    tol = math.log1p(tolerance)
    threshold = min(max(tol, k * math.sqrt(var)), LOG_SPAN)
    band = sorted((_exp(_ln(ref) - threshold), _exp(_ln(ref) + threshold)))
    if interval is not None and not any(math.isinf(v) for v in interval):
        half = (_ln(max(interval)) - _ln(min(interval))) / 2 if min(interval) > 0 else math.inf
        if half > tol:
            notes.append("its 95 % interval (±{:.1%}) is wider than the tolerance ({:.0%}): more calls would "
                         "judge it closer".format(_expm1(half), tolerance))
    overlap = _overlap(interval, ref_intervals, d > 0, lower_is_better)
    if abs(d) <= tol:
        status, why = "ok", "within {:.0%} of the reference".format(tolerance)
    elif abs(d) > threshold and overlap:
        status, why = "noise", "beyond {:.0%}, but tonight's 95 % interval overlaps the reference nights' ({})".format(
            tolerance, overlap)
    elif d > threshold:
        status, why = "regression", "worse by more than {:.1%} ({})".format(_expm1(threshold), spread)
        if not allow_regression:
            status = "noise"
            why += "; host CPU figures: a regression only against {} nights of history".format(MIN_NIGHTS)
    elif d < -threshold:
        status, why = "improved", "better by more than {:.1%} ({})".format(_expm1(threshold), spread)
    else:
        status, why = "noise", "beyond {:.0%} but within the noise, ±{:.1%} ({})".format(
            tolerance, _expm1(threshold), spread)
    row = _level_row(ref, band, current, status, "; ".join([why] + notes), threshold)
    row.update(d=d, night_var=night_var, var=var, n=n, tol=tol, run_var=run_sigma ** 2, logs=logs,
               allow=allow_regression, k=k)
    return row


def persistence_judgement(judged, current, recent, previous_status, lower_is_better=True, before=None):
    """Red means persistent. ``judged``: level_judgement's row for tonight's ``current``; ``recent``: this figure on the
    nights before tonight, newest last (None where a night did not measure it); ``previous_status``: its
    status on the previous night (that night's comparison.json), or None; ``before``: this figure on the reference
    nights as they stood before the window's nights (None: tonight's reference nights). A figure out of band
    ("regression" from level_judgement) stays a regression when confirmed (module comment above), else becomes
    "suspect"; a figure beyond the tolerance but within the noise ("noise") becomes a regression when the window
    confirms it."""
    status, d = judged["status"], judged.get("d")
    if status not in ("regression", "noise") or d is None:
        return judged
    if status == "regression":
        first = max(math.log1p(FIRST_NIGHT_FLOOR), FIRST_NIGHT_SIGMAS * math.sqrt(judged["var"]))
        if d > first:
            return dict(judged, note=judged["note"] + "; beyond {:.1%}: a regression on its first night".format(
                _expm1(first)))
    judged_by_window = status == "regression" or (
        judged["allow"] and 0 < d <= judged["threshold"] and judged["run_var"] <= judged["night_var"])
    window = _window(judged, current, recent, lower_is_better, before) if judged_by_window else None
    if status == "regression" and previous_status in OUT_OF_BAND:
        band = _robust_band(judged)
        last = _changes(judged, [v for v in recent[-1:] if v is not None and v > 0], lower_is_better)
        if d > band and (not last or last[0] > band) and (window is None or window[0] > judged["tol"]):
            return dict(judged, note=judged["note"] + "; out of band the night before too ({}): confirmed".format(
                previous_status))
    if window is not None and window[0] > window[1]:
        return dict(judged, status="regression", note=judged["note"] + "; the mean of the last {} nights is {:+.1%}, "
                    "beyond {:.1%}: confirmed".format(WINDOW, _expm1(window[0]), _expm1(window[1])))
    if status == "noise":
        return judged
    return dict(judged, status="suspect", note=judged["note"] + "; suspect: a regression only if it persists "
                "(out of band the next night, or the mean of {} nights beyond its band)".format(WINDOW))


def _changes(judged, values, lower_is_better):
    sign = 1.0 if lower_is_better else -1.0
    ref_log = _ln(judged["reference"])
    return [sign * (_ln(v) - ref_log) for v in values]


def _spread(judged):
    """The nights' variance for the confirmations: the MAD's, or the nights' variance winsorized at SPREAD_CLIP MAD
    sigmas when that is larger (heavy-tailed drift is wider than its MAD says), or tonight's sampling variance."""
    night_var, n = judged["night_var"], judged["n"]
    spread = night_var
    if n >= MIN_NIGHTS:
        logs = judged["logs"]
        centre, cut = statistics.median(logs), SPREAD_CLIP * math.sqrt(night_var)
        spread = max(spread, sum(min(max(v - centre, -cut), cut) ** 2 for v in logs) / (n - 1))
    return max(spread, judged["run_var"])


def _robust_band(judged):
    spread = _spread(judged)
    return max(judged["tol"], judged["k"] * math.sqrt(spread + judged["night_var"] * MEDIAN_VAR / judged["n"]))


def _window(judged, current, recent, lower_is_better, before=None):
    """(the robust mean of the last WINDOW nights' changes, its limit), or None without WINDOW nights' figures. The
    changes are from the Hodges-Lehmann centre of ``before`` (the reference nights before the window's; tonight's
    reference nights when None or empty)."""
    window = [v for v in recent[-(WINDOW - 1):] if v is not None and v > 0]
    if len(window) < WINDOW - 1:
        return None
    logs = [_ln(v) for v in before or () if v is not None and v > 0] or judged["logs"]
    centre, sign = hodges_lehmann(logs), 1.0 if lower_is_better else -1.0
    changes = [sign * (_ln(v) - centre) for v in window + [current]]
    night_var = judged["night_var"]
    clip = WINDOW_CLIP * math.sqrt(night_var)
    mid = statistics.median(changes)
    mean = sum(min(max(c, mid - clip), mid + clip) for c in changes) / WINDOW
    limit = max(judged["tol"], WINDOW_K * math.sqrt(_spread(judged) / WINDOW + night_var * HL_VAR / len(logs)))
    return mean, limit


def hodges_lehmann(values):
    """The median of the pairwise means of ``values`` (each value with itself included): a centre as robust as the
    median to a few tail nights (29 % of them), with the mean's precision on normal nights (95 %)."""
    return statistics.median((a + b) / 2 for i, a in enumerate(values) for b in values[i:])


LOG_SPAN = 700.0  # exp() of more overflows a float


def _ln(v):
    """ln of a figure > 0, finite for every float (a denormal is clamped at 1e-300)."""
    return max(math.log(v), LOG_MIN) if v > 0 else LOG_MIN


def _expm1(x):
    return math.expm1(max(min(x, LOG_SPAN), -LOG_SPAN))


def _exp(x):
    return math.exp(max(min(x, LOG_SPAN), -LOG_SPAN))


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
    return {"reference": ref, "band": band, "change": relative_change(current, ref), "status": status, "note": note,
            "threshold": threshold}


CHANGE_LIMIT = 1e6  # a relative change is reported within +-1e6 (a million times): finite, JSON-safe


def relative_change(current, ref):
    """current / ref - 1, finite: a denormal reference (5e-324) gives +1e6, not infinity."""
    try:
        change = current / ref - 1
    except (ZeroDivisionError, OverflowError):
        change = math.inf
    return max(-1.0, min(change, CHANGE_LIMIT)) if not math.isnan(change) else 0.0


def _interval_sigma(interval, value):
    """Tonight's sampling sigma of ln(figure) from its 95 % interval: 0 unknown, inf unbounded."""
    if interval is None:
        return 0.0
    lo, hi = min(interval), max(interval)
    if math.isinf(lo) or math.isinf(hi) or lo <= 0:
        return math.inf
    return (_ln(hi) - _ln(lo)) / (2 * Z95)
