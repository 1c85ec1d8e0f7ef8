"""The gate's statistics: a benchmark quantile's 95 % interval, the nights' spread, and the judgement
of one figure against the reference nights (``level_judgement``: ok, noise, regression, improved).
The rule in words is pipeline.report.compare's docstring; the comparison of two runs is compare_runs there."""

import math
import statistics

Z95 = 1.96
MAD_SIGMA = 1.4826
MIN_NIGHTS = 5  # below this the MAD of the nights says little about their spread
SIGMA_PRIOR = 0.02  # night-to-night sigma (of ln figure) assumed until MIN_NIGHTS nights say otherwise
SIGMA_FLOOR = 0.01  # the MAD of a few quiet nights can be near zero by chance
MEDIAN_VAR = math.pi / 2  # variance of a median of n normal values: (pi / 2) sigma^2 / n
COMPARED = ("ok", "regression", "improved", "noise")  # the statuses of a figure that was compared



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
