"""The estimate as a short block for other reports: deploy check's (text, JSON, markdown, zoo table) and the
run report's, beside the measured figures once a board has measured them.

    summary = check_summary("frozen.pb", "jetson_nano")     # None: the target has no estimate facts
    summary_line(summary)   # "estimate (fp16, batch 1, MAXN ...): 12.3 ms (8.21 to 18.5), 81 images/s, compute-bound"
    beside = run_summary(run_folder)   # the estimate of the run's graph beside its benchmark.json's p50s
    block = run_estimate(run_folder)   # the run report's block: beside the measurement, else for run.json's target

    block = check_estimate("frozen.pb", "agx_xavier", nodes=1200)   # deploy check's block (its JSON "estimate")
    block = cached_check_estimate(answers, "frozen.pb", "agx_xavier")  # the same, kept beside the check cache

Neither raises for a model it cannot estimate: the summary says why instead (``{"error": "..."}``,
``{"made": false, "reason": "..."}``), so a check or a report never fails on account of the estimate.
"""

import hashlib
import json
from pathlib import Path

from pipeline.errors import DeployError

# deploy check estimates a graph of up to this many nodes unless told (--estimate): reading it again and estimating
# costs about 0.03 ms a node (20,000 nodes: +0.5 s CPU on a 1.2 s --no-convert check, measured on a loaded 2-core
# machine; MobileNetV2, ResNet50, EfficientNetB0 frozen: +0.01 to 0.2 s), a 200,000-node graph several seconds
GATE_NODES = 20000
_KEEP = ("latency_ms", "low_ms", "high_ms", "throughput", "bound", "precision", "batch", "power_mode", "calibration")


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
    return {k: e[k] for k in _KEEP}


def check_estimate(path, target, signature=None, nodes=None, mode=None):
    """deploy check's estimate of the model at ``path`` on ``target`` (a name or .yaml path): batch 1 at the
    target's fastest calibrated precision (fp16, else fp32). ``nodes``: the check's node count, to skip a graph
    over GATE_NODES unless ``mode`` is True (--estimate); ``mode`` False (--no-estimate): None.

    {"made": True, "target", "board", "precision", "batch", "latency_ms", "low_ms", "high_ms", "throughput",
    "bound", "power_mode", "calibration", "unknown_layers"} or {"made": False, "reason": a few words}. Never
    raises: a graph it cannot estimate is a reason, never an error of the check. The same bytes give the same
    block (no timing in it: deploy check's JSON stays reproducible; the verb times it)."""
    if mode is False:
        return None
    try:
        block = _estimate(path, target, signature, nodes, mode)
    except DeployError as error:
        block = {"made": False, "reason": _short(error.message)}
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except Exception as error:  # noqa: BLE001 - a bug of the estimate must not cost the check its answer
        block = {"made": False, "reason": "deploy failed estimating it ({}: {}); please report this".format(
            type(error).__name__, _short(str(error)))}
    return block


def _estimate(path, target_name, signature, nodes, mode):
    from pipeline.estimate import estimate_layers
    from pipeline.estimate.layers import engine_layers
    from pipeline.files import gc_paused
    from pipeline.graph import read_model
    from pipeline.targets.device import load_target

    if nodes is not None and nodes > GATE_NODES and mode is not True:
        return {"made": False, "reason": "skipped: {:,} nodes, over {:,} (--estimate to include; it adds seconds)"
                .format(nodes, GATE_NODES)}
    target = load_target(target_name)
    if target.estimate is None:
        return {"made": False, "reason": "none for {}: its target file has no estimate facts".format(target.name)}
    precision = "fp16" if "fp16" in target.precisions else "fp32"
    graph = read_model(path, signature)
    from pipeline.graph.frames import loop_ops  # a loop's body runs a number of times no offline count knows

    loops = loop_ops(graph)
    if loops:
        return {"made": False, "reason": "the graph has a loop ({}): its iterations cannot be counted offline"
                .format(", ".join(loops))}
    with gc_paused():
        layers = engine_layers(graph, None, precision)
    from pipeline.estimate import nothing_costed, too_little_costed

    if too_little_costed(layers):
        return {"made": False, "reason": nothing_costed(graph, layers)}
    e = estimate_layers(layers, target.name, precision, 1)
    block = {"made": True, "target": target.name, "board": target.family.split(" (")[0] or target.name}
    block.update((k, e[k]) for k in _KEEP)
    block["unknown_layers"] = e["unknown_count"]
    return block


def _short(text):
    """The first line of an error, at most 200 characters: a reason, not a report."""
    line = (str(text).strip().splitlines() or [""])[0]
    return line if len(line) <= 200 else line[:197] + "..."


def cached_check_estimate(answers, path, target, signature=None, nodes=None, mode=None, answer_key=None):
    """check_estimate, kept beside the check's answer cache (``answers``: a pipeline.check.cache.AnswerCache, or
    None): a re-check of the same bytes reads it back instead of reading the graph again. Its key is the
    answer's key (model bytes, target files, deploy's checking code, options) and a digest of what makes the
    estimate and is not in it: pipeline/estimate's code, targets/estimate/'s calibration and the user's own
    (--calibrate) files. A skipped (gated) or failed estimate is not kept. ``answer_key``: the answer's key when
    the caller has it (a re-check answered from the cache: its entry's name), so the model is not hashed twice."""
    if mode is False:
        return None
    if answers is None:
        return check_estimate(path, target, signature, nodes, mode)
    try:
        key = hashlib.sha256(((answer_key or answers.key(path)) + estimate_digest()).encode()).hexdigest()
        where = Path(answers.folder) / "estimate" / (key + ".json")
    except (OSError, DeployError, ValueError):
        return check_estimate(path, target, signature, nodes, mode)
    try:
        with open(str(where), "rb") as handle:
            entry = json.loads(handle.read().decode("utf-8"))
        if entry.get("key") == key and isinstance(entry.get("estimate"), dict) and entry["estimate"].get("made"):
            from pipeline.files import touch

            touch(where)  # used now: the answer cache's pruning keeps it (pipeline.check.cache.prune)
            return entry["estimate"]
    except (OSError, ValueError):
        pass  # a miss
    block = check_estimate(path, target, signature, nodes, mode)
    if block and block.get("made"):
        _store(where, {"key": key, "estimate": block})
    return block


def _store(where, entry):
    from pipeline.files import write_json

    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        write_json(where, entry)
    except OSError:
        pass  # a read-only cache: the estimate is made again next time


def estimate_digest():
    """SHA-256 of what makes an estimate beyond the check's own inputs: pipeline/estimate/*.py, the shipped
    calibration (targets/estimate/) and the user's calibration folder (pipeline.estimate.calibration.user_dir)."""
    from pipeline.estimate.calibration import user_dir
    from pipeline.targets.files import targets_dir

    digest = hashlib.sha256()
    here = Path(__file__).resolve().parent
    files = [("code", f) for f in sorted(here.glob("*.py"))]
    files += [("shipped", f) for f in sorted((targets_dir() / "estimate").rglob("*")) if f.is_file()]
    mine = Path(user_dir())
    if mine.is_dir():
        files += [("user", f) for f in sorted(mine.rglob("*")) if f.is_file()]
    for label, full in files:
        digest.update("{}:{}\0".format(label, full.name).encode())
        try:
            digest.update(full.read_bytes())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()


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
