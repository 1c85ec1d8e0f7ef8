"""The estimate as a short block for other reports: deploy check's (text, JSON, markdown, zoo table) and the
run report's, beside the measured figures once a board has measured them.

    summary = check_summary("frozen.pb", "jetson_nano")     # None: the target has no estimate facts
    summary_line(summary)   # "estimate (fp16, batch 1, MAXN ...): 12.3 ms (8.21 to 18.5), 81 images/s, compute-bound"
    beside = run_summary(run_folder)   # the estimate of the run's graph beside its benchmark.json's p50s
    block = run_estimate(run_folder)   # the run report's block: beside the measurement, else for run.json's target

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
                     "inside": e["low_ms"] <= point.ms <= e["high_ms"], "calibration": e["calibration"],
                     "power_mode": e["power_mode"], "throughput": e["throughput"], "bound": e["bound"]})
    return rows


def run_estimate(run_folder):
    """The run report's estimate block: {"measured": bool, "target", "precision", "power_mode", "basis",
    "rows": [{batch, measured_ms, latency_ms, low_ms, high_ms, inside}]}. With on-target TensorRT figures the
    rows are run_summary's; else the run's graph is estimated on run.json's target at the batch sizes the run
    measured (1 if none), ``measured_ms`` None. None when there is nothing to estimate (no target with estimate
    facts, no graph); {"error": why} when the graph cannot be estimated. Never raises."""
    from pipeline import records
    from pipeline.estimate import board, estimate_layers
    from pipeline.estimate.layers import engine_layers
    from pipeline.estimate.runs import GRAPHS, engine_precision
    from pipeline.graph import read_model

    folder = Path(run_folder)
    measured = run_summary(folder)
    if measured:
        first = measured[0]
        return {"measured": True, "target": first["target"], "precision": first["precision"],
                "power_mode": first.get("power_mode"), "basis": first["calibration"], "rows": measured}
    try:
        run = records.read(folder / "run.json", "run") or {}
        bench = records.read(folder / "benchmark" / "benchmark.json", "benchmark") or {}
    except DeployError:
        return None
    target_name = run.get("target")
    graph_path = next((folder / g for g in GRAPHS if (folder / g).exists()), None)
    if not target_name or graph_path is None:
        return None
    try:
        target, _ = board(target_name, "fp32")
    except DeployError:
        return None  # a target without estimate facts (the host) or unknown: no estimate
    precision = str(engine_precision(folder) or ("fp16" if "fp16" in target.precisions else "fp32")).lower()
    batches = sorted({int(r["batch_size"]) for r in bench.get("results") or [] if r.get("batch_size")}) or [1]
    try:
        layers = engine_layers(read_model(graph_path), None, precision)
        found = [estimate_layers(layers, target.name, precision, b) for b in batches]
    except DeployError as error:
        return {"error": str(error), "target": target.name}
    rows = [{"target": e["target"], "precision": precision, "batch": e["batch"], "measured_ms": None,
             "latency_ms": e["latency_ms"], "low_ms": e["low_ms"], "high_ms": e["high_ms"], "inside": None,
             "throughput": e["throughput"], "bound": e["bound"]} for e in found]
    return {"measured": False, "target": target.name, "precision": precision, "power_mode": found[0]["power_mode"],
            "basis": found[0]["calibration"], "rows": rows}
