"""A user's own measurements (benchmark.json in run folders) as fit points: ``deploy estimate --calibrate``.

Only on-target TensorRT measurements count: a benchmark.json whose ``where.runtime`` is not TensorRT or
that was not measured on the target device (``where.on_target_device``), such as ONNX Runtime on the
host, is refused by name. The graph measured is the run's own (``rewrite/`` or ``freeze/``'s frozen
graph, else ``convert/model.onnx``); each result row (batch size, p50 latency) is one point.
"""

from pathlib import Path

from pipeline.errors import DeployError

GRAPHS = ("rewrite/frozen.pb", "freeze/frozen.pb", "convert/model.onnx")


def run_points(folders, precision_default="fp16"):
    """[(target, Point)] of the run folders' on-target TensorRT measurements; DeployError for one without any."""
    from pipeline import records
    from pipeline.estimate.fit import Point
    from pipeline.estimate.layers import engine_layers
    from pipeline.graph import read_model

    found = []
    for folder in folders:
        folder = Path(folder)
        path = folder / "benchmark" / "benchmark.json"
        data = records.read(path, "benchmark", missing_ok=False)
        where = data.get("where") or {}
        runtime = str(where.get("runtime") or "").lower()
        if "tensorrt" not in runtime or not where.get("on_target_device"):
            raise DeployError("{}: measured with {} {}; only TensorRT on the target board calibrates the estimate "
                              "(ONNX Runtime on the host never does)".format(
                                  path, where.get("runtime") or "an unknown runtime",
                                  "on the target" if where.get("on_target_device") else "off the target"))
        target = where.get("target")
        if not target:
            raise DeployError("{}: where.target is missing; the board measured must be named".format(path))
        graph_path = next((folder / g for g in GRAPHS if (folder / g).exists()), None)
        if graph_path is None:
            raise DeployError("{}: no graph to estimate ({}); calibrate from a complete run folder".format(
                folder, ", ".join(GRAPHS)))
        precision = str(engine_precision(folder) or precision_default).lower()
        layers = engine_layers(read_model(graph_path), None, precision)
        rows = [r for r in data.get("results") or [] if r.get("batch_size") and r.get("p50_ms")]
        if not rows:
            raise DeployError("{}: no result rows with batch_size and p50_ms".format(path))
        for row in rows:
            found.append((target, Point(model=str(folder), board=target, precision=precision,
                                        batch=int(row["batch_size"]), ms=float(row["p50_ms"]), layers=layers,
                                        source=str(path), overhead=False)))
    return found


def calibrate(folders):
    """Refit each measured board's parameters on its runs (with the shipped figures of that board, if any);
    write each to the user's file. Returns [(target, path, Params, points)]."""
    from pipeline.estimate import board
    from pipeline.estimate.calibration import write_user
    from pipeline.estimate.fit import MAX_SPREAD, fit, leave_one_out, spread_from

    found = run_points(folders)
    written = []
    for target in sorted({t for t, _ in found}):
        points = [p for t, p in found if t == target]
        _, facts = board(target, points[0].precision)
        facts_of = (lambda _board, facts=facts: facts)
        # deploy's benchmark times the engine on the board: no per-call overhead to fit
        spread = spread_from(leave_one_out(points, facts_of, overhead=False)) if len({p.model for p in points}) > 1 \
            else MAX_SPREAD
        params = fit(points, facts_of, spread, overhead=False)
        runs = sorted({p.source for p in points})
        written.append((target, write_user(target, params, runs), params, len(points)))
    return written


def engine_precision(folder):
    """The precision the run built its engine at (run.json's settings.engine.precision), else None."""
    from pipeline import records

    run = records.read(Path(folder) / "run.json", "run") or {}
    engine = (run.get("settings") or {}).get("engine") or {}
    return engine.get("precision")
