"""The runner: runs a config's stages in order, with caching, atomic outputs, manifests and a lock.

Each stage writes into ``<run dir>/.tmp-<stage>-<pid>/``; when it succeeds the runner hashes the
outputs, writes ``manifest.json`` and renames the directory to ``<run dir>/<stage>/``. A crash,
``kill -9`` or Ctrl-C mid-stage leaves only a ``.tmp-*`` directory, removed by the next run, which
redoes the stage. A stage is a cache hit when its manifest records the same key: a hash of the
stage's name and version, its config section, the config sections it uses and its inputs' hashes.
"""

import hashlib
import json
import os
import platform
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List

from pipeline import files
from pipeline.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_STAGE_FAILED, DeployError
from pipeline.lock import RunLock
from pipeline.stages import StageContext, registry

MANIFEST = "manifest.json"
_TOOLS = ("tensorflow-cpu", "tensorflow", "keras", "tf2onnx", "onnx", "onnxruntime", "numpy")


@dataclass
class StageResult:
    name: str
    status: str  # ran | cached | failed | pending | skipped | not run
    seconds: float = 0.0
    results: Dict[str, Any] = field(default_factory=dict)
    message: str = ""
    code: int = EXIT_OK


@dataclass
class RunReport:
    run_dir: Path
    stages: List[StageResult]

    @property
    def exit_code(self):
        codes = [s.code for s in self.stages if s.status == "failed"]
        return max(codes) if codes else EXIT_OK


def tool_versions():
    """Versions of the tools that shape the artifacts (read from package metadata, no imports)."""
    from importlib import metadata

    versions = {"python": platform.python_version(), "deploy": _deploy_version()}
    for name in _TOOLS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def _deploy_version():
    from pipeline import __version__

    return __version__


def external_artifacts(config):
    """Artifacts given by ``model.source`` (the stages that would make them are skipped)."""
    source = config.model.source
    if source is None:
        return {}
    path = Path(source)
    if not path.exists():
        raise DeployError("model.source: {} not found".format(source))
    if path.is_dir():
        if not (path / "saved_model.pb").exists():
            raise DeployError("model.source: {} is a directory without saved_model.pb; give a SavedModel directory, a .keras/.h5 file or a frozen .pb".format(source))
        return {"saved_model": path}
    suffix = path.suffix.lower()
    if suffix in (".keras", ".h5"):
        train = getattr(config.stages, "train", None)
        if train is not None and train.init_from:
            return {}  # the train stage fine-tunes this model from init_from (pipeline.train.restore.config_model)
        return {"keras_model": path}
    if suffix in (".pb", ".pbtxt"):
        return {"frozen_graph": path}
    raise DeployError("model.source: {} is not a .keras/.h5 file, a SavedModel directory or a frozen .pb".format(source))


def _select(names, from_stage, until, only):
    for flag, value in (("--from", from_stage), ("--until", until), ("--only", only)):
        if value is not None and value not in names:
            raise DeployError("{} {}: not a stage of this config (stages: {})".format(flag, value, ", ".join(names)))
    if from_stage is not None and until is not None and names.index(from_stage) > names.index(until):
        raise DeployError("--from {} --until {}: {} comes after {} (stages run in this order: {})".format(
            from_stage, until, from_stage, until, ", ".join(names)))
    if only is not None and (from_stage is not None or until is not None):
        raise DeployError("--only {}: runs one stage; drop --from/--until".format(only))
    if only is not None:
        return {only}
    start = names.index(from_stage) if from_stage else 0
    end = names.index(until) + 1 if until else len(names)
    return set(names[start:end])


def _read_manifest(stage_dir):
    try:
        with open(stage_dir / MANIFEST) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _cache_hit(stage, stage_dir, key, progress=None):
    """The manifest of an up-to-date result whose outputs still hold what was written, else None.

    Each output's content is checked against the sha256 the manifest recorded; when its size,
    mtime and inode are what the manifest recorded too, the hash is trusted without reading the
    bytes (DVC's fast path). A malformed manifest is "not cached"."""
    manifest = _read_manifest(stage_dir)
    try:
        if not manifest or manifest.get("status") != "ok" or manifest.get("key") != key:
            return None
        outputs = manifest["outputs"]
        if set(outputs) != set(stage.outputs):
            return None
        for name, entry in outputs.items():
            path = stage_dir / entry["path"]
            if not path.exists() or stage_dir not in path.resolve().parents:
                return None
            if entry.get("stat") and files.stat_signature(path) == entry["stat"]:
                continue
            if files.sha256_path(path) != entry["sha256"]:
                if progress is not None:
                    progress.log("{:<9} {} changed since it was written (sha256 differs): running {} again".format(
                        stage.name, entry["path"], stage.name))
                    progress.event("stage", stage=stage.name, status="changed", message=entry["path"])
                return None
    except (KeyError, TypeError, AttributeError, ValueError):
        return None
    return manifest


def _clean_stale(run_dir):
    """Remove what interrupted runs left behind (we hold the lock, so none of it is live)."""
    for p in run_dir.glob(".tmp-*"):
        shutil.rmtree(p, ignore_errors=True)
    for p in run_dir.glob(".old-*"):
        shutil.rmtree(p, ignore_errors=True)


def prepare_dataset(config, progress):
    """Generate the config's dataset when it is missing and ``dataset.generate`` says how.

    Several runs may share one generated dataset (the shipped configs all use data/shapes): the
    first takes a lock beside the folder and generates it; the others wait for the lock, then find
    the folder there and use it. Temporary folders a killed generation left are removed first."""
    ds = config.dataset
    if ds is None or Path(ds.path).exists() or ds.format != "folder":
        return
    if ds.generate is None:
        raise DeployError(
            "dataset.path: {} not found; point it at an image folder, or set dataset.generate: shapes "
            "to generate a small synthetic one (deploy data shapes {})".format(ds.path, ds.path)
        )
    from pipeline.data.shapes import generate_shapes
    from pipeline.lock import wait_for_lock

    path = Path(ds.path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DeployError("dataset.path: cannot create {} ({})".format(path.parent, e.strerror or e))
    with wait_for_lock(path.parent / ".{}.lock".format(path.name), progress,
                       "dataset  waiting for another run generating {}".format(path)):
        for stale in path.parent.glob(".{}.tmp-*".format(path.name)):  # a killed generation's leftovers
            shutil.rmtree(stale, ignore_errors=True)
        if path.exists():  # another run made it while we waited
            return
        progress.log("dataset  generating '{}' images at {}".format(ds.generate, ds.path))
        summary = generate_shapes(path, train_per_class=ds.train_per_class, val_per_class=ds.val_per_class, seed=ds.seed)
    progress.log("dataset  {} classes, {} train / {} val images".format(len(summary["classes"]), summary["train"], summary["val"]))


def _fingerprint_dataset(config):
    import glob

    from pipeline.data.folder import fingerprint_dataset

    ds = config.dataset
    if ds is None:
        return None
    exists = Path(ds.path).exists() if ds.format == "folder" else bool(glob.glob(ds.path))
    return fingerprint_dataset(ds.path) if exists else "missing"


def run(config, target, force=(), force_all=False, from_stage=None, until=None, only=None, keep_going=False, progress=None):
    """Run the config's stages. Returns a RunReport; raises DeployError for bad input found up front."""
    from pipeline.progress import Progress

    progress = progress or Progress()
    stages = registry()
    names = config.selected_stages()
    if not names:
        raise DeployError("{}: stages: lists no stage to run (stages: {})".format(config.path, ", ".join(stages)))
    for name in force:
        if name not in names:
            raise DeployError("--force {}: not a stage of this config (stages: {})".format(name, ", ".join(names)))
    selected = _select(names, from_stage, until, only)
    external = external_artifacts(config)

    run_dir = Path(config.run.dir) / config.run.name
    if run_dir.exists() and not run_dir.is_dir():
        raise DeployError("run.dir/run.name: {} is a file, not a folder; move it or choose another run.name".format(run_dir))
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DeployError("run.dir: cannot create {} ({}); choose a folder you can write to".format(
            run_dir, e.strerror or e))
    with RunLock(run_dir):
        _clean_stale(run_dir)
        if any("dataset" in stages[n].uses for n in names if n in selected):
            prepare_dataset(config, progress)
        dataset_fp = _fingerprint_dataset(config)
        return _run_locked(config, target, stages, names, selected, external, run_dir, dataset_fp,
                           set(force), force_all, keep_going, progress)


def _run_locked(config, target, stages, names, selected, external, run_dir, dataset_fp, force, force_all, keep_going, progress):
    artifacts = {name: (Path(path), files.sha256_path(path)) for name, path in external.items()}
    unavailable = {}  # artifact -> why it is not there (pending / failed upstream)
    report = RunReport(run_dir=run_dir, stages=[])
    tools = tool_versions()
    stopped = False
    # model.source skips every stage before the first one that reads what it gives
    consumers = [i for i, n in enumerate(names) if set(stages[n].inputs) & set(external)]
    skip_until = consumers[0] if consumers else 0
    last_selected = max(names.index(n) for n in selected)
    for index, name in enumerate(names):
        stage = stages[name]
        options = getattr(config.stages, name)
        if stopped:
            report.stages.append(StageResult(name, "not run", message="an earlier stage failed"))
            continue
        if index > last_selected:
            report.stages.append(StageResult(name, "skipped", message="after the selected stages"))
            continue
        if index < skip_until:
            report.stages.append(StageResult(name, "skipped", message="model.source gives the model"))
            continue
        missing = [a for a in stage.inputs if a not in artifacts and a in unavailable]
        if missing:
            why = unavailable[missing[0]]
            for out in stage.outputs:
                unavailable[out] = why
            status = "pending" if why.startswith("pending") else "not run"
            report.stages.append(StageResult(name, status, message="waits for {} ({})".format(stage.inputs[missing[0]], why)))
            continue
        inputs = {a: artifacts[a][0] for a in stage.inputs if a in artifacts}
        input_hashes = {a: artifacts[a][1] for a in stage.inputs if a in artifacts}
        key_data = {
            "stage": name,
            "version": stage.version,
            "options": options.model_dump(mode="json"),
            "uses": {u: _section(config, target, u) for u in stage.uses},
            "dataset": dataset_fp if "dataset" in stage.uses else None,
            "inputs": input_hashes,
        }
        key = hashlib.sha256(json.dumps(key_data, sort_keys=True).encode()).hexdigest()
        stage_dir = run_dir / name
        ctx = StageContext(name=name, out_dir=stage_dir, inputs=inputs, options=options, config=config,
                           target=target, progress=progress, run_dir=run_dir)
        if stage.pending_reason is not None:
            reason = stage.pending_reason(ctx)
            if reason:
                for out in stage.outputs:
                    unavailable[out] = "pending: " + reason
                report.stages.append(StageResult(name, "pending", message=reason))
                progress.log("{:<9} pending: {}".format(name, reason))
                progress.event("stage", stage=name, status="pending", message=reason)
                continue
        forced = name in force or (force_all and name in selected)  # --force with --from X: X and after
        manifest = None if forced else _cache_hit(stage, stage_dir, key, progress)
        if manifest is not None:
            for out, entry in manifest["outputs"].items():
                artifacts[out] = (stage_dir / entry["path"], entry["sha256"])
            result = StageResult(name, "cached", results=manifest.get("results", {}))
            report.stages.append(result)
            progress.log("{:<9} cached  {}".format(name, _headline(result)))
            progress.event("stage", stage=name, status="cached", results=result.results)
            continue
        if name not in selected:
            raise DeployError(
                "stage '{}' has no up-to-date result in {} (its config or inputs changed); "
                "run it first, e.g. without --from/--only".format(name, stage_dir)
            )
        result = _run_stage(stage, ctx, key, key_data, tools, progress)
        report.stages.append(result)
        if result.status == "ok":
            result.status = "ran"
            manifest = _read_manifest(stage_dir)
            for out, entry in manifest["outputs"].items():
                artifacts[out] = (stage_dir / entry["path"], entry["sha256"])
        else:
            for out in stage.outputs:
                unavailable[out] = "{} failed".format(name)
            if not keep_going:
                stopped = True
    return report


def _section(config, target, name):
    if name == "target":
        return target.model_dump(mode="json") if hasattr(target, "model_dump") else str(target)
    value = getattr(config, name)
    return value.model_dump(mode="json") if value is not None else None


def _run_stage(stage, ctx, key, key_data, tools, progress):
    """Run one stage into a temp dir; on success, manifest + rename into place."""
    run_dir, final = ctx.run_dir, ctx.out_dir
    tmp = run_dir / ".tmp-{}-{}".format(stage.name, os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    ctx.out_dir = tmp
    started = time.time()
    progress.log("{:<9} running".format(stage.name))
    progress.event("stage", stage=stage.name, status="running")
    try:
        results = stage.func(ctx) or {}
        missing = [a for a, rel in stage.outputs.items() if not (tmp / rel).exists()]
        if missing:
            raise RuntimeError("stage {} did not write its outputs: {}".format(stage.name, ", ".join(missing)))
        seconds = time.time() - started
        manifest = {
            "stage": stage.name,
            "version": stage.version,
            "status": "ok",
            "key": key,
            "config_digest": hashlib.sha256(json.dumps(key_data["options"], sort_keys=True).encode()).hexdigest(),
            "options": key_data["options"],
            "inputs": {a: {"path": str(ctx.inputs[a]), "sha256": h} for a, h in key_data["inputs"].items()},
            "dataset_fingerprint": key_data["dataset"],
            "outputs": {
                a: {"path": rel, "sha256": files.sha256_path(tmp / rel), "size": files.size_of(tmp / rel)}
                for a, rel in stage.outputs.items()
            },
            "tools": tools,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
            "duration_s": round(seconds, 3),
            "results": results,
        }
        _swap_into_place(tmp, final)
        for a, rel in stage.outputs.items():  # the fast-path signature of the files where they now live
            manifest["outputs"][a]["stat"] = files.stat_signature(final / rel)
        files.write_json(final / MANIFEST, manifest)
    except DeployError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        seconds = time.time() - started
        progress.log("{:<9} failed after {:.1f}s".format(stage.name, seconds))
        progress.event("stage", stage=stage.name, status="failed", message=e.message, code=e.code)
        return StageResult(stage.name, "failed", seconds, message=e.message, code=e.code)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        ctx.out_dir = final
    result = StageResult(stage.name, "ok", seconds, results=results)
    progress.log("{:<9} done in {:.1f}s  {}".format(stage.name, seconds, _headline(result)))
    progress.event("stage", stage=stage.name, status="ran", seconds=round(seconds, 3), results=results)
    return result


def _swap_into_place(tmp, final):
    old = final.parent / ".old-{}-{}".format(final.name, os.getpid())
    if final.exists():
        os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def _headline(result):
    return str(result.results.get("summary", "")) if result.results else ""


def format_summary(report):
    """The end-of-run table: stage, status, time, key result."""
    rows = [("stage", "status", "time", "result")]
    for s in report.stages:
        seconds = "{:.1f}s".format(s.seconds) if s.status in ("ran", "failed") else "-"
        detail = _headline(s) if s.status in ("ran", "cached") else s.message
        rows.append((s.name, s.status, seconds, detail))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * 6)
    return "\n".join(line.rstrip() for line in lines)


__all__ = ["run", "RunReport", "StageResult", "format_summary", "EXIT_BAD_INPUT", "EXIT_STAGE_FAILED"]
