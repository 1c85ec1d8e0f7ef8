"""Fit the roofline's free parameters to measured latencies, and judge the fit leave-one-model-out.

    params = fit(points, facts_of)               # points: [Point(model, board, precision, batch, ms, layers)]
    table = leave_one_out(points, facts_of)      # [{"model", "board", "measured_ms", "estimate_ms", "error"}]

A grid search over the efficiencies, the launch cost per layer and a per-call overhead minimises the
sum of squared log errors (a 2x miss counts the same either way). The overhead is what a published
figure holds besides the engine's GPU time (TF-TRT's session run, a framework's call and copies): it is
fitted so it does not distort the engine's parameters, and left out of every estimate. ``spread`` (the range's log
half-width) is the 80th percentile of the absolute log errors of rows the fit never saw, held between ln 1.15 and
ln 2.5 / 2 so the range is never wider than 2.5x. Which rows: ``leave_one_out`` (how well one source's models
predict each other) and ``foreign_rows`` (published figures of other setups -- another TensorRT, JetPack, power
mode or timing method -- estimated by the fit without their model family: how far a published figure from a
setup the fit has not seen lands). With one point there is nothing to leave out: ``spread`` is ln 2.5 / 2.
"""

import math
from dataclasses import dataclass, field

from pipeline.estimate.roofline import BYTES, TENSOR_KINDS, Params, peaks, reduction_length

GRID = {
    "eff_conv": [0.04 * 1.2 ** i for i in range(18)] + [1.0],  # 0.04 .. 0.89, 1
    "eff_other": [0.002 * 1.3 ** i for i in range(22)],  # 0.002 .. 0.49
    # a physical prior: large streaming copies reach at least half the data-sheet bandwidth; a lower fitted value
    # (0.25 on the Nano) stood in for per-layer costs of small layers and made memory-heavy models 1.5x too slow
    "eff_mem": [0.5, 0.65, 0.8, 1.0],
    "launch_us": [0, 1, 2, 4, 7, 10, 15, 20, 30, 45, 60, 90, 130],
    # per call, outside the engine (a framework's session run, input copies): fitted, never estimated
    "overhead_ms": [0, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 4, 6, 8],
    # the reduction length at which a conv or matmul runs at half its efficiency (0: K does not matter)
    "k_half": [0, 16, 32, 64, 128, 256, 512],
}
MIN_SPREAD, MAX_SPREAD = math.log(1.15), math.log(2.5) / 2


@dataclass
class Point:
    model: str
    board: str
    precision: str
    batch: int
    ms: float  # the measured latency per batch
    layers: list = field(default_factory=list)  # pipeline.estimate.layers.Layer
    source: str = ""
    overhead: bool = True  # the figure holds a per-call time besides the engine's (a framework's session run)
    family: str = ""  # the model as left out together (resnet50 and resnet50_c3: one family); "" = model


def _family(point):
    return point.family or point.model


def _arrays(point, facts):
    """Per-layer (conv FLOP-seconds at eff 1, other FLOP-seconds, memory seconds at eff 1) as numpy arrays."""
    import numpy as np

    conv_peak, other_peak, bandwidth = peaks(facts, point.precision)
    size = BYTES[point.precision]
    known = [layer for layer in point.layers if layer.known]
    conv = np.array([layer.flops * point.batch / conv_peak if layer.kind in TENSOR_KINDS else 0.0 for layer in known])
    # the extra conv time per unit of k_half: flops / K (roofline.k_factor)
    short = np.array([c / reduction_length(layer) if c and reduction_length(layer) > 0 else 0.0
                      for c, layer in zip(conv, known)])
    other = np.array([0.0 if layer.kind in TENSOR_KINDS else layer.flops * point.batch / other_peak for layer in known])
    memory = np.array([(layer.weights + (layer.reads + layer.writes) * point.batch) * size / bandwidth
                       for layer in known])
    return conv, short, other, memory, len(known)


def _grid_errors(points, facts_of, overhead_grid, k_grid):
    """Squared log errors summed over ``points`` for every grid cell: [conv, other, mem, k_half, launch, overhead]."""
    import numpy as np

    ec = np.array(GRID["eff_conv"])[:, None, None, None]
    eo = np.array(GRID["eff_other"])[None, :, None, None]
    em = np.array(GRID["eff_mem"])[None, None, :, None]
    kh = np.array(k_grid, dtype=float)[None, None, None, :]
    launch = np.array(GRID["launch_us"]) * 1e-6
    overhead = np.array(overhead_grid) * 1e-3
    shape = (len(GRID["eff_conv"]), len(GRID["eff_other"]), len(GRID["eff_mem"]), len(k_grid))
    total = np.zeros(shape + (len(launch), len(overhead)))
    for point in points:
        conv, short, other, memory, count = _arrays(point, facts_of(point.board))
        work = np.zeros(shape)
        for c, s, o, m in zip(conv, short, other, memory):
            work += np.maximum((c + s * kh) / ec + o / eo, m / em)
        seconds = work[..., None, None] + (launch * count)[None, None, None, None, :, None] \
            + (overhead if point.overhead else overhead * 0)[None, None, None, None, None, :]
        total += (np.log(seconds * 1e3) - math.log(point.ms)) ** 2
    return total


def fit(points, facts_of, spread=MAX_SPREAD, overhead=True):
    """The grid's best Params for ``points`` (``facts_of(board)``: the board's EstimateFacts). ``overhead``
    False: the figures are the engine's own (deploy's benchmark on the board), no per-call overhead."""
    import numpy as np

    if not points:
        raise ValueError("fit needs at least one measured point")
    overhead_grid = GRID["overhead_ms"] if overhead else [0.0]
    errors = _grid_errors(points, facts_of, overhead_grid, GRID["k_half"])
    i, j, k, q, m, n = np.unravel_index(int(np.argmin(errors)), errors.shape)
    return Params(eff_conv=GRID["eff_conv"][i], eff_other=GRID["eff_other"][j], eff_mem=GRID["eff_mem"][k],
                  launch_us=float(GRID["launch_us"][m]), spread=spread, overhead_ms=float(overhead_grid[n]),
                  k_half=float(GRID["k_half"][q]))


def predict_ms(point, facts, params, overhead=True):
    """The estimate of a point; with ``overhead`` plus the fitted per-call overhead (what the measurement
    holds besides the engine), as the fit compares it."""
    from pipeline.estimate.roofline import estimate_latency

    ms = estimate_latency(point.layers, facts, params, point.precision, point.batch)["latency_ms"]
    return ms + (params.overhead_ms if overhead and point.overhead else 0.0)


def leave_one_out(points, facts_of, overhead=True):
    """One row per point: fitted on the other models (of every board), the error on this one. The point's
    model family is out of the fit on every board (resnet50 from one source and resnet50_c3 from another)."""
    return _held_out_rows(points, points, facts_of, overhead, engine_only=False)


def foreign_rows(fitted, foreign, facts_of, overhead=True):
    """One row per ``foreign`` point (a published figure of a setup the fit does not use): fitted on ``fitted``
    without the point's model family, the error of the engine's estimate (no per-call overhead: what the foreign
    setup adds besides the engine is part of the disagreement this row measures)."""
    return _held_out_rows(foreign, fitted, facts_of, overhead, engine_only=True)


def _held_out_rows(judged, fitted, facts_of, overhead, engine_only):
    """A row per point of ``judged``: the fit on ``fitted`` without its model family, its estimate and error."""
    rows = []
    for point in judged:
        rest = [p for p in fitted if _family(p) != _family(point)]
        if not rest:
            continue
        params = fit(rest, facts_of, overhead=overhead)
        estimate = predict_ms(point, facts_of(point.board), params, overhead=not engine_only)
        rows.append({"model": point.model, "board": point.board, "precision": point.precision, "batch": point.batch,
                     "measured_ms": point.ms, "estimate_ms": round(estimate, 3),
                     "error": round(estimate / point.ms - 1, 4), "source": point.source})
    return rows


def spread_from(rows):
    """The range's log half-width from rows the fit never saw (leave-one-out and foreign; see the module doc)."""
    if not rows:
        return MAX_SPREAD
    logs = sorted(abs(math.log(1 + r["error"])) for r in rows)
    q = logs[min(len(logs) - 1, int(math.ceil(0.8 * len(logs))) - 1)]
    return min(MAX_SPREAD, max(MIN_SPREAD, q))


def goal_statistics(rows, spread):
    """The issue's goal statistics of rows with measured and estimated ms, at a range of +-spread."""
    if not rows:
        return {}
    errors = sorted(abs(r["error"]) for r in rows)
    mid = len(errors) // 2
    median = errors[mid] if len(errors) % 2 else (errors[mid - 1] + errors[mid]) / 2
    factor = math.exp(spread)
    inside = sum(1 for r in rows if r["estimate_ms"] / factor <= r["measured_ms"] <= r["estimate_ms"] * factor)
    return {"points": len(rows), "median_abs_error": round(median, 4),
            "within_50pct": round(sum(1 for e in errors if e <= 0.5) / len(errors), 4),
            "inside_range": round(inside / len(rows), 4), "range_ratio": round(factor * factor, 3)}
