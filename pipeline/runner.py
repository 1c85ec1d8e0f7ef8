"""The runner: runs a config's stages in order, with caching, atomic outputs, manifests and a lock.

Each stage writes into ``<run dir>/.tmp-<stage>-<pid>/``; when it succeeds the runner hashes the
outputs, writes ``manifest.json`` and renames the directory to ``<run dir>/<stage>/``. A crash,
``kill -9`` or Ctrl-C mid-stage leaves only a ``.tmp-*`` directory, removed by the next run, which
redoes the stage. A stage is a cache hit when its manifest records the same key (``cache_key``): a
hash of the stage's name and version, its config section, the config sections it uses, its inputs'
hashes and the versions of the tools it declares.

    run(config, target, ...)  =  plan(...)      # which stages are selected, forced, skipped (flags checked)
                              +  execute(plan)  # per step: wait, pending, cached or run, in order
"""

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from pipeline import files, records
from pipeline.cache import MANIFEST, cache_hit, cache_key, inputs_key, made_elsewhere, read_manifest
from pipeline.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_STAGE_FAILED, DeployError
from pipeline.data.dataset import fingerprint_dataset, prepare_dataset
from pipeline.lock import RunLock
from pipeline.stages import StageContext, registry, source_artifacts
from pipeline.stages.tools import tool_versions


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


def _clean_stale(run_dir):
    """Remove what interrupted runs left behind (we hold the lock, so none of it is live)."""
    for p in run_dir.glob(".tmp-*"):
        shutil.rmtree(p, ignore_errors=True)
    for p in run_dir.glob(".old-*"):
        shutil.rmtree(p, ignore_errors=True)


@dataclass
class Step:
    """One stage in a run's plan: what the runner decided before anything ran."""

    name: str
    stage: Any  # pipeline.stages.Stage
    options: Any  # its validated config section
    skip: Optional[str] = None  # why it does not run at all (after the selected stages, model.source)
    selected: bool = True  # within --from/--until/--only: may run (else must be cached)
    forced: bool = False  # --force: run even when cached


@dataclass
class Plan:
    """The run decided up front (``plan``); ``execute`` walks it, each step seeing what ran before."""

    config: Any
    target: Any
    run_dir: Path
    steps: List[Step]
    external: Dict[str, Path]  # artifacts model.source gives
    keep_going: bool = False
    dataset_fingerprint: Optional[str] = None


def run(config, target, force=(), force_all=False, from_stage=None, until=None, only=None, keep_going=False, progress=None):
    """Run the config's stages. Returns a RunReport; raises DeployError for bad input found up front."""
    from pipeline.progress import Progress

    progress = progress or Progress()
    the_plan = plan(config, target, force, force_all, from_stage, until, only, keep_going)
    run_dir = the_plan.run_dir
    if run_dir.exists() and not run_dir.is_dir():
        raise DeployError("run.dir/run.name: {} is a file, not a folder; move it or choose another run.name".format(run_dir))
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DeployError("run.dir: cannot create {} ({}); choose a folder you can write to".format(
            run_dir, e.strerror or e))
    with RunLock(run_dir):
        _clean_stale(run_dir)
        if any("dataset" in s.stage.uses for s in the_plan.steps if s.selected and not s.skip):
            prepare_dataset(config, progress)
        the_plan.dataset_fingerprint = fingerprint_dataset(config)
        started = time.time()
        report = execute(the_plan, progress)
        write_run_record(report, config, target, started)
        return report


RUN_RECORD = "run.json"


def write_run_record(report, config, target, started):
    """``<run dir>/run.json``: what the last ``deploy run`` did, stage by stage (ran, cached, pending,
    failed, with times and messages). ``deploy report`` and ``deploy compare`` read it."""
    stamp = "%Y-%m-%dT%H:%M:%S%z"
    commit, source = _commit(getattr(config, "path", None))
    record = {
        "run": report.run_dir.name,
        "config": str(getattr(config, "path", "") or ""),
        "overrides": list(getattr(config, "_overrides", ()) or ()),
        "target": getattr(target, "name", None),
        "started": time.strftime(stamp, time.localtime(started)),
        "finished": time.strftime(stamp, time.localtime()),
        "exit_code": report.exit_code,
        "commit": commit, "commit_source": source,
        "stages": [{"name": s.name, "status": s.status, "seconds": round(s.seconds, 3), "message": s.message,
                    "results": s.results} for s in report.stages],
    }
    record.update(_config_facts(config))
    if os.environ.get("GITHUB_RUN_ID"):
        record["ci"] = {"run_url": "{}/{}/actions/runs/{}".format(os.environ.get("GITHUB_SERVER_URL", ""),
                                                                 os.environ.get("GITHUB_REPOSITORY", ""),
                                                                 os.environ["GITHUB_RUN_ID"]),
                        "runner": os.environ.get("RUNNER_NAME")}
    records.write(report.run_dir / RUN_RECORD, record, "run")  # schema deploy.run/1 (pipeline.records)


def _commit(config_path):
    """(commit, where it came from): $GITHUB_SHA in CI, else ``git rev-parse HEAD`` of the config's folder,
    else (None, None). Which commit made a night is what a nightly report is read for."""
    if os.environ.get("GITHUB_SHA"):
        return os.environ["GITHUB_SHA"], "GITHUB_SHA"
    import subprocess

    git = shutil.which("git")
    if git is None or not config_path:
        return None, None
    try:
        done = subprocess.run([git, "rev-parse", "HEAD"], cwd=str(Path(config_path).resolve().parent),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None, None
    commit = done.stdout.decode("ascii", "replace").strip()
    return (commit, "git") if done.returncode == 0 and len(commit) == 40 else (None, None)


def _config_facts(config):
    """The config's digest (what was run, --set included) and the settings a report shows even while a
    stage is pending: engine, benchmark, device."""
    dump = getattr(config, "model_dump", None)
    if dump is None:
        return {}
    data = dump(mode="json")
    stages = data.get("stages") or {}
    device = data.get("device") or None
    return {"config_digest": hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest(),
            "settings": {"engine": stages.get("engine"), "benchmark": stages.get("benchmark"),
                         "device": {"backend": device.get("backend"), "transport": device.get("transport")}
                         if device else None}}


def plan(config, target, force=(), force_all=False, from_stage=None, until=None, only=None, keep_going=False):
    """The steps of a run: which stages are selected, forced or skipped. Checks the flags; runs nothing."""
    stages = registry()
    names = config.selected_stages()
    if not names:
        raise DeployError("{}: stages: lists no stage to run (stages: {})".format(config.path, ", ".join(stages)))
    for name in force:
        if name not in names:
            raise DeployError("--force {}: not a stage of this config (stages: {})".format(name, ", ".join(names)))
    selected = _select(names, from_stage, until, only)
    external = source_artifacts(config)
    # model.source skips every stage before the first one that reads what it gives
    consumers = [i for i, n in enumerate(names) if set(stages[n].inputs) & set(external)]
    skip_until = consumers[0] if consumers else 0
    last_selected = max(names.index(n) for n in selected)
    steps = []
    for index, name in enumerate(names):
        skip = ("after the selected stages" if index > last_selected else
                "model.source gives the model" if index < skip_until else None)
        steps.append(Step(name, stages[name], getattr(config.stages, name), skip, name in selected,
                          name in force or (force_all and name in selected)))  # --force with --from X: X and after
    return Plan(config, target, Path(config.run.dir) / config.run.name, steps, external, keep_going)


def execute(the_plan, progress):
    """Walk the plan: each step is skipped, waits for a failed or pending input, is pending on this
    machine, is a cache hit, or runs. Returns the RunReport."""
    artifacts = {name: (Path(path), files.sha256_path(path)) for name, path in the_plan.external.items()}
    unavailable = {}  # artifact -> why it is not there (pending / failed upstream)
    report = RunReport(run_dir=the_plan.run_dir, stages=[])
    stopped = False
    for step in the_plan.steps:
        stage, name = step.stage, step.name
        if stopped or step.skip:
            report.stages.append(StageResult(name, "not run", message="an earlier stage failed") if stopped
                                 else StageResult(name, "skipped", message=step.skip))
            continue
        missing = [a for a in stage.inputs if a not in artifacts and a in unavailable
                   and not (a in stage.optional and unavailable[a].startswith("pending"))]
        if missing:
            why = unavailable[missing[0]]
            unavailable.update(dict.fromkeys(stage.outputs, why))
            report.stages.append(StageResult(name, "pending" if why.startswith("pending") else "not run",
                                             message="waits for {} ({})".format(stage.inputs[missing[0]], why)))
            continue
        inputs = {a: artifacts[a][0] for a in stage.inputs if a in artifacts}
        key, key_data = cache_key(the_plan, step, {a: artifacts[a][1] for a in stage.inputs if a in artifacts})
        stage_dir = the_plan.run_dir / name
        ctx = StageContext(name=name, out_dir=stage_dir, inputs=inputs, options=step.options, config=the_plan.config,
                           target=the_plan.target, progress=progress, run_dir=the_plan.run_dir)
        try:  # asking whether it is pending can reach the device (exit 5): a failed stage in the table, not a crash
            reason = stage.pending_reason(ctx) if stage.pending_reason is not None else None
        except DeployError as e:
            progress.log("{:<9} failed: {}".format(name, e.message.splitlines()[0]))
            progress.event("stage", stage=name, status="failed", message=e.message, code=e.code)
            report.stages.append(StageResult(name, "failed", message=e.message, code=e.code))
            unavailable.update(dict.fromkeys(stage.outputs, "{} failed".format(name)))
            stopped = not the_plan.keep_going
            continue
        if reason:
            unavailable.update(dict.fromkeys(stage.outputs, "pending: " + reason))
            report.stages.append(StageResult(name, "pending", message=reason))
            progress.log("{:<9} pending: {}".format(name, reason))
            progress.event("stage", stage=name, status="pending", message=reason)
            continue
        manifest = None if step.forced else cache_hit(stage, stage_dir, key, progress)
        if manifest is None and not step.selected:
            manifest = made_elsewhere(stage, stage_dir, key_data, progress)
        if manifest is not None:
            result = StageResult(name, "cached", results=manifest.get("results", {}))
            progress.log("{:<9} cached  {}".format(name, _headline(result)))
            progress.event("stage", stage=name, status="cached", results=result.results)
        elif not step.selected:
            raise DeployError(
                "stage '{}' has no up-to-date result in {} (its config or inputs changed); "
                "run it first, e.g. without --from/--only".format(name, stage_dir)
            )
        else:
            result = _run_stage(stage, ctx, key, key_data, progress)
            manifest = read_manifest(stage_dir) if result.status == "ok" else None
            result.status = "ran" if result.status == "ok" else result.status
        report.stages.append(result)
        if manifest is not None:
            for out, entry in manifest["outputs"].items():
                artifacts[out] = (stage_dir / entry["path"], entry["sha256"])
        else:
            unavailable.update(dict.fromkeys(stage.outputs, "{} failed".format(name)))
            stopped = not the_plan.keep_going
    return report


def _run_stage(stage, ctx, key, key_data, progress):
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
        with files.gc_paused(stage.pause_gc):
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
            "inputs_key": inputs_key(key_data),
            "config_digest": hashlib.sha256(json.dumps(key_data["options"], sort_keys=True).encode()).hexdigest(),
            "options": key_data["options"],
            "inputs": {a: {"path": str(ctx.inputs[a]), "sha256": h} for a, h in key_data["inputs"].items()},
            "dataset_fingerprint": key_data["dataset"],
            "outputs": {
                a: {"path": rel, "sha256": files.sha256_path(tmp / rel), "size": files.size_of(tmp / rel)}
                for a, rel in stage.outputs.items()
            },
            "tools": tool_versions(),
            "stage_tools": key_data["tools"],  # the versions in the key (a stage's "tensorflow": tensorflow-cpu ...)
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
            "duration_s": round(seconds, 3),
            "results": results,
        }
        _swap_into_place(tmp, final)
        for a, rel in stage.outputs.items():  # the fast-path signature of the files where they now live
            manifest["outputs"][a]["stat"] = files.stat_signature(final / rel)
        records.write(final / MANIFEST, manifest, "manifest")  # schema deploy.manifest/1
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


__all__ = ["run", "write_run_record", "RUN_RECORD", "RunReport", "StageResult", "format_summary", "EXIT_BAD_INPUT", "EXIT_STAGE_FAILED"]
