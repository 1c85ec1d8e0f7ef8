"""Read a run folder (``runs/<name>/``) into one plain dict: what ``deploy report`` and ``deploy compare`` use.

Every piece is optional: a run that stopped at check has no benchmark, a host-only run no engine.
The stage table comes from ``run.json`` (the last ``deploy run``: ran, cached, pending, failed) and
each stage's ``manifest.json`` (when the result was made and how long it took). Every file is read
through its schema (pipeline.records: the same models the writers write with): a file that does not
parse, holds what no run writes (NaN, infinite, negative or zero times, a string where a boolean
belongs, a list where an object belongs) or comes from a newer deploy is one line naming the file
and the key, exit 1.

A night is *failed* (``run["failed"]``: the reason, else None) when its folder holds a ``FAILED``
marker (the nightly workflow writes one when a step failed), its ``run.json`` exit code is not 0, or
it has no benchmark figures. ``run["gate"]`` is the gate's verdict on it (``<run>/comparison.json``,
what ``deploy compare -o`` writes), or None.

The stages a run folder may hold, and the order of a table without run.json, are
``pipeline.stages.pipeline_order()``'s (it imports the light stage modules, nothing heavy).
"""

from pathlib import Path

from pipeline import records
from pipeline.errors import DeployError
from pipeline.stages import pipeline_order

FILES = {  # key -> (path inside the run folder, its record kind)
    "history": ("train/history.json", "history"),
    "check": ("check/check.json", "check"),
    "rewrite": ("rewrite/rewrite.json", "rewrite"),
    "comparison": ("convert/comparison.json", "conversion"),
    "benchmark": ("benchmark/benchmark.json", "benchmark"),
}


def is_run_dir(path):
    path = Path(path)
    return path.is_dir() and ((path / "run.json").is_file() or (path / MARKER).is_file()
                              or any((path / s / "manifest.json").is_file() for s in pipeline_order()))


def load_run(run_dir):
    """Everything a report shows about ``run_dir``, as plain data."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise DeployError("{}: no such run folder; give runs/<run name> (run.dir/run.name of a config)".format(run_dir))
    if not is_run_dir(run_dir):
        raise DeployError("{}: not a deploy run folder (no run.json and no stage manifest); give runs/<run name>, "
                          "the folder deploy run writes".format(run_dir))
    record = records.read(run_dir / "run.json", "run") or {}
    manifests = {s: records.read(run_dir / s / "manifest.json", "manifest") for s in pipeline_order()}
    data = {key: records.read(run_dir / rel, kind) for key, (rel, kind) in FILES.items()}
    gate = records.read(run_dir / GATE, "comparison")
    run = {
        "dir": str(run_dir),
        "name": record.get("run") or run_dir.name,
        "record": record,
        "stages": _stage_table(record, manifests),
        "engine": (manifests.get("engine") or {}).get("results") or None,
        "when": record.get("finished") or _latest_started(manifests),
        "gate": gate if isinstance(gate, dict) else None,
        **data,
    }
    run["failed"] = failed_reason(run)
    return run


GATE = "comparison.json"  # deploy compare -o <run>/comparison.json (the run-root file, not convert/comparison.json)
MARKER = "FAILED"  # the nightly workflow's flag on a night whose steps did not all succeed


def failed_reason(run):
    """Why ``run`` is a failed or incomplete night, or None: a FAILED marker, a non-zero exit code,
    no benchmark figures."""
    d = Path(run["dir"])
    if (d / MARKER).is_file():
        text = (d / MARKER).read_text(encoding="utf-8", errors="replace").strip().splitlines()
        return "flagged FAILED by the workflow{}".format(": " + text[0][:200] if text else "")
    code = (run.get("record") or {}).get("exit_code")
    if code not in (None, 0):
        return "its run exited with code {}".format(code)
    if not results_by_batch(run):
        return "it has no benchmark figures"
    return None


# --- what a run folder may hold: each file is read through its schema (pipeline.records), which returns the
# data or raises one line naming the file, the key and what was expected


def check_benchmark(bench, path):
    """benchmark.json's data as the benchmark stage writes it (its schema, deploy.benchmark/1), else a
    DeployError naming the key. None stays None (no benchmark)."""
    return None if bench is None else records.check(bench, "benchmark", path)


def _stage_table(record, manifests):
    """One row per stage: the last run's status and message, and when/how long the result took to make."""
    rows, seen = [], set()
    for entry in record.get("stages") or []:
        name = entry.get("name")
        manifest = manifests.get(name) or {}
        made = entry.get("status") in ("ran", "cached")  # else an older manifest is not what this run has
        rows.append({
            "name": name, "status": entry.get("status"), "message": entry.get("message") or "",
            "summary": _summary(entry.get("results")) or (_summary(manifest.get("results")) if made else ""),
            "seconds": manifest.get("duration_s") if made else None,
            "made": manifest.get("started") if made else None,
        })
        seen.add(name)
    for name, manifest in manifests.items():  # no run record (an older run, or a copied folder): what the manifests say
        if name not in seen and manifest:
            rows.append({"name": name, "status": "done" if manifest.get("status") == "ok" else manifest.get("status"),
                         "message": "", "summary": _summary(manifest.get("results")),
                         "seconds": manifest.get("duration_s"), "made": manifest.get("started")})
    return rows


def _summary(results):
    return str(results.get("summary", "")) if isinstance(results, dict) else ""


def _latest_started(manifests):
    stamps = [m.get("started") for m in manifests.values() if m and m.get("started")]
    return max(stamps) if stamps else None


def results_by_batch(run):
    """{batch size: result row} of a run's benchmark (empty when there is none)."""
    bench = run.get("benchmark") or {}
    return {r["batch_size"]: r for r in bench.get("results") or [] if isinstance(r, dict) and "batch_size" in r}


def accuracy_of(run):
    """The accuracy figures a run has: engine top-1 agreement and max difference against ONNX Runtime,
    TF-vs-ONNX max difference, and the last epoch's validation accuracy."""
    out = {}
    bench = run.get("benchmark") or {}
    acc = bench.get("accuracy") or {}
    if acc:
        out["engine_top1_agreement"] = acc.get("top1_agreement")
        out["engine_max_abs_diff"] = acc.get("max_abs_diff")
        out["precision"] = (acc.get("tolerance") or {}).get("precision")
    comparison = run.get("comparison") or {}
    if comparison.get("max_abs_diff") is not None:
        out["onnx_max_abs_diff"] = comparison["max_abs_diff"]
    epochs = (run.get("history") or {}).get("epochs") or []
    if epochs and epochs[-1].get("val_accuracy") is not None:
        out["val_accuracy"] = epochs[-1]["val_accuracy"]
    return out


def expand_history(paths):
    """Run folders from ``--history`` arguments: each a run folder, or a folder of run folders (a
    nightly archive). Ordered oldest first by when each run finished."""
    runs = []
    for p in paths:
        p = Path(p)
        if is_run_dir(p):
            runs.append(p)
        elif p.is_dir():
            found = sorted(c for c in p.iterdir() if is_run_dir(c))
            if not found:
                raise DeployError("--history {}: holds no deploy run folder (runs/<name> with run.json)".format(p))
            runs.extend(found)
        else:
            raise DeployError("--history {}: no such folder".format(p))
    unique = {}
    for r in runs:  # a night named twice (--history DIR --history DIR/night) is one night
        unique.setdefault(str(r.resolve()), r)
    loaded = [load_run(r) for r in unique.values()]
    return sorted(loaded, key=lambda r: (r.get("when") or "", r["dir"]))
