"""The estimate as a short block for other reports: deploy check's (text, JSON, markdown, zoo table) and the
run report's, beside the measured figures once a board has measured them.

    summary = check_summary("frozen.pb", "jetson_nano")     # None: the target has no estimate facts
    summary_line(summary)   # "estimate (fp16, batch 1, MAXN ...): 12.3 ms (8.21 to 18.5), 81 images/s, compute-bound"
    beside = run_summary(run_folder)   # the estimate of the run's graph beside its benchmark.json's p50s

Neither raises for a model it cannot estimate: the summary says why instead (``{"error": "..."}``), so a
check or a report never fails on account of the estimate.
"""

from pathlib import Path

from pipeline.errors import DeployError


def check_summary(path, target_name, precision=None, batch=1, signature=None):
    """{"latency_ms", "low_ms", "high_ms", "throughput", "bound", "precision", "batch", "power_mode",
    "calibration"} of the model on the target at its fastest precision (int8 left out: not calibrated), or
    {"error": why}; None when the target has no estimate facts."""
    from pipeline.estimate import estimate_layers, layers_of
    from pipeline.targets.device import load_target

    target = load_target(target_name)
    if target.estimate is None:
        return None
    if precision is None:
        precision = "fp16" if "fp16" in target.precisions else "fp32"
    try:
        _, layers = layers_of(path, None, precision, signature)
        e = estimate_layers(layers, target.name, precision, batch)
    except DeployError as error:
        return {"error": str(error)}
    keep = ("latency_ms", "low_ms", "high_ms", "throughput", "bound", "precision", "batch", "power_mode", "calibration")
    return {k: e[k] for k in keep}


def summary_line(summary):
    if not summary:
        return ""
    if "error" in summary:
        return "estimate: not made ({})".format(summary["error"])
    line = "estimate ({}, batch {}, {}): {:.3g} ms ({:.3g} to {:.3g}), {:.4g} images/s, {}-bound".format(
        summary["precision"], summary["batch"], summary["power_mode"], summary["latency_ms"], summary["low_ms"],
        summary["high_ms"], summary["throughput"] or 0, summary["bound"])
    if summary.get("measured_ms"):
        line += "; measured {:.3g} ms ({:+.0%})".format(summary["measured_ms"],
                                                      summary["measured_ms"] / summary["latency_ms"] - 1)
    return line


def run_summary(run_folder):
    """[{batch, measured_ms, latency_ms, low_ms, high_ms, inside}] of a run folder's benchmark rows beside the
    estimate of the run's own graph on the board it measured; [] when the run has no on-target TensorRT figures."""
    from pipeline.estimate.runs import run_points
    from pipeline.estimate import estimate_layers

    try:
        found = run_points([Path(run_folder)])
    except DeployError:
        return []
    rows = []
    for target, point in found:
        try:
            e = estimate_layers(point.layers, target, point.precision, point.batch)
        except DeployError:
            continue
        rows.append({"target": target, "precision": point.precision, "batch": point.batch, "measured_ms": point.ms,
                     "latency_ms": e["latency_ms"], "low_ms": e["low_ms"], "high_ms": e["high_ms"],
                     "inside": e["low_ms"] <= point.ms <= e["high_ms"], "calibration": e["calibration"]})
    return rows
