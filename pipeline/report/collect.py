"""Read a run folder (``runs/<name>/``) into one plain dict: what ``deploy report`` and ``deploy compare`` use.

Every piece is optional: a run that stopped at check has no benchmark, a host-only run no engine.
The stage table comes from ``run.json`` (the last ``deploy run``: ran, cached, pending, failed) and
each stage's ``manifest.json`` (when the result was made and how long it took). A file that exists
but does not parse is bad input, named with its path, and so is one that parses but holds what no
run writes (``check_benchmark`` and friends: NaN, infinite, negative or zero times, a string where a
boolean belongs, a list where an object belongs): one line naming the file and the key, exit 1.

A night is *failed* (``run["failed"]``: the reason, else None) when its folder holds a ``FAILED``
marker (the nightly workflow writes one when a step failed), its ``run.json`` exit code is not 0, or
it has no benchmark figures. ``run["gate"]`` is the gate's verdict on it (``<run>/comparison.json``,
what ``deploy compare -o`` writes), or None.
"""

import json
import math
from pathlib import Path

from pipeline.errors import DeployError

STAGES = ("train", "export", "freeze", "check", "rewrite", "convert", "engine", "benchmark")
FILES = {  # key -> path inside the run folder
    "history": "train/history.json",
    "check": "check/check.json",
    "rewrite": "rewrite/rewrite.json",
    "comparison": "convert/comparison.json",
    "benchmark": "benchmark/benchmark.json",
}


def _read_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise DeployError("{}: cannot read {} ({}); run the stage again (deploy run --force STAGE)".format(
            path, what, getattr(e, "strerror", None) or e))


def is_run_dir(path):
    path = Path(path)
    return path.is_dir() and ((path / "run.json").is_file() or (path / MARKER).is_file()
                              or any((path / s / "manifest.json").is_file() for s in STAGES))


def load_run(run_dir):
    """Everything a report shows about ``run_dir``, as plain data."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise DeployError("{}: no such run folder; give runs/<run name> (run.dir/run.name of a config)".format(run_dir))
    if not is_run_dir(run_dir):
        raise DeployError("{}: not a deploy run folder (no run.json and no stage manifest); give runs/<run name>, "
                          "the folder deploy run writes".format(run_dir))
    record = check_record(_read_json(run_dir / "run.json", "the run record"), run_dir / "run.json") or {}
    manifests = {s: check_manifest(_read_json(run_dir / s / "manifest.json", "the {} manifest".format(s)),
                                   run_dir / s / "manifest.json") for s in STAGES}
    data = {key: _read_json(run_dir / rel, key) for key, rel in FILES.items()}
    for key, check in CHECKS.items():
        data[key] = check(data[key], run_dir / FILES[key])
    gate = _read_json(run_dir / GATE, "the gate's verdict")
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


# --- what a run folder may hold: each reader below returns the data or raises one line naming file and key


def _bad(path, key, expected, value):
    shown = repr(value)
    return DeployError("{}: {}: expected {}, found {}; this is not what deploy writes (run the stage again: "
                       "deploy run --force STAGE)".format(path, key, expected, shown if len(shown) < 80 else shown[:77] + "..."))


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _positive(v, path, key, allow_none=True, zero=False):
    if v is None and allow_none:
        return
    if not _is_num(v) or not math.isfinite(v) or v < 0 or (v == 0 and not zero):
        raise _bad(path, key, "a finite number {} 0".format(">=" if zero else ">"), v)


def _bool(v, path, key):
    if v is not None and not isinstance(v, bool):
        raise _bad(path, key, "true or false (a JSON boolean)", v)


def _obj(v, path, key, allow_none=True):
    if v is None and allow_none:
        return {}
    if not isinstance(v, dict):
        raise _bad(path, key, "an object", v)
    return v


def _list(v, path, key):
    if v is None:
        return []
    if not isinstance(v, list):
        raise _bad(path, key, "a list", v)
    return v


LATENCY_KEYS = ("mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms")  # min_ms may be 0 (one call below the clock)


def check_benchmark(bench, path):
    """benchmark.json as the benchmark stage writes it, else a DeployError naming the key."""
    if bench is None:
        return None
    _obj(bench, path, "(the file)", allow_none=False)
    for i, row in enumerate(_list(bench.get("results"), path, "results")):
        key = "results[{}]".format(i)
        _obj(row, path, key, allow_none=False)
        bs = row.get("batch_size")
        if not isinstance(bs, int) or isinstance(bs, bool) or bs < 1:
            raise _bad(path, key + ".batch_size", "a positive whole number", bs)
        for k in LATENCY_KEYS + ("throughput_ips",):
            _positive(row.get(k), path, "{}.{}".format(key, k))
        _positive(row.get("std_ms"), path, key + ".std_ms", zero=True)
        _positive(row.get("min_ms"), path, key + ".min_ms", zero=True)
        n = row.get("iterations")
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise _bad(path, key + ".iterations", "a positive whole number", n)
        pct = row.get("percentiles_ms")
        if pct is not None:
            if (not isinstance(pct, list) or len(pct) != 101 or not all(_is_num(v) and math.isfinite(v) and v >= 0 for v in pct)
                    or any(b < a for a, b in zip(pct, pct[1:]))):
                raise _bad(path, key + ".percentiles_ms", "101 ascending finite numbers (the 0th..100th percentiles)",
                           pct if not isinstance(pct, list) else "{} values".format(len(pct)) if len(pct) != 101 else pct)
    where = _obj(bench.get("where"), path, "where")
    fp = _obj(where.get("fingerprint"), path, "where.fingerprint")
    _bool(fp.get("clocks_locked"), path, "where.fingerprint.clocks_locked")
    _obj(where.get("host"), path, "where.host")
    for i, w in enumerate(_list(where.get("warnings"), path, "where.warnings")):
        if not isinstance(w, str):
            raise _bad(path, "where.warnings[{}]".format(i), "a string", w)
    consistency = _obj(bench.get("consistency"), path, "consistency")
    _bool(consistency.get("passed"), path, "consistency.passed")
    acc = _obj(bench.get("accuracy"), path, "accuracy")
    top1 = acc.get("top1_agreement")
    if top1 is not None and (not _is_num(top1) or not 0 <= top1 <= 1):
        raise _bad(path, "accuracy.top1_agreement", "a number from 0 to 1", top1)
    images = acc.get("images")
    if images is not None and (not isinstance(images, int) or isinstance(images, bool) or images < 1):
        raise _bad(path, "accuracy.images", "a positive whole number", images)
    _obj(acc.get("tolerance"), path, "accuracy.tolerance")
    return bench


def check_check(check, path):
    if check is None:
        return None
    _obj(check, path, "(the file)", allow_none=False)
    _bool(check.get("deployable"), path, "deployable")
    return check


def check_history(history, path):
    if history is None:
        return None
    _obj(history, path, "(the file)", allow_none=False)
    for i, e in enumerate(_list(history.get("epochs"), path, "epochs")):
        _obj(e, path, "epochs[{}]".format(i), allow_none=False)
        v = e.get("val_accuracy")
        if v is not None and (not _is_num(v) or not math.isfinite(v)):
            raise _bad(path, "epochs[{}].val_accuracy".format(i), "a finite number", v)
    return history


def check_comparison(comparison, path):
    if comparison is None:
        return None
    _obj(comparison, path, "(the file)", allow_none=False)
    return comparison


def check_rewrite(rewrite, path):
    if rewrite is None:
        return None
    return _obj(rewrite, path, "(the file)", allow_none=False)


def check_record(record, path):
    if record is None:
        return None
    _obj(record, path, "(the file)", allow_none=False)
    for i, st in enumerate(_list(record.get("stages"), path, "stages")):
        _obj(st, path, "stages[{}]".format(i), allow_none=False)
    for key in ("finished", "started", "run"):
        if record.get(key) is not None and not isinstance(record[key], str):
            raise _bad(path, key, "a string", record[key])
    code = record.get("exit_code")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        raise _bad(path, "exit_code", "a whole number", code)
    return record


def check_manifest(manifest, path):
    if manifest is None:
        return None
    _obj(manifest, path, "(the file)", allow_none=False)
    _positive(manifest.get("duration_s"), path, "duration_s", zero=True)
    if manifest.get("started") is not None and not isinstance(manifest["started"], str):
        raise _bad(path, "started", "a string", manifest["started"])
    return manifest


CHECKS = {"history": check_history, "check": check_check, "rewrite": check_rewrite, "comparison": check_comparison,
          "benchmark": check_benchmark}


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
    for name in STAGES:  # no run record (an older run, or a copied folder): what the manifests say
        manifest = manifests.get(name)
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
    loaded = [load_run(r) for r in runs]
    return sorted(loaded, key=lambda r: (r.get("when") or "", r["dir"]))
