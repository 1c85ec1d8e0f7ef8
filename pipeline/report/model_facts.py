"""What the model of a run is, as plain data: its files and their size, parameters and FLOPs, the
engine's build settings, and whether the night failed. Reads defensively: what is not known is said
to be unknown, never guessed."""

import hashlib
import json
from pathlib import Path

# ---------------------------------------------------------------- the model

def model_facts(run, cache=None):
    """{"files": [(what, name, bytes)], "parameters", "parameters_source", "flops", "flops_note"}."""
    run_dir = Path(run.get("dir") or ".")
    files = []
    for stage, artifact, what in (("freeze", "frozen_graph", "frozen graph"), ("convert", "onnx", "ONNX model"),
                                  ("engine", "engine", "TensorRT engine")):
        out = _manifest_output(run_dir, stage, artifact)
        if out and out.get("size") is not None:
            files.append((what, out.get("path") or artifact, out["size"]))
    if not any(w == "TensorRT engine" for w, _, _ in files) and (run.get("engine") or {}).get("engine_bytes"):
        files.append(("TensorRT engine", "model.engine", run["engine"]["engine_bytes"]))
    model = (run.get("benchmark") or {}).get("model") or {}
    if model.get("bytes") and not any(n == model.get("name") for _, n, _ in files):
        files.append(("benchmarked model", model.get("name") or "?", model["bytes"]))
    params, source = onnx_parameters(run_dir / "convert" / "model.onnx", cache)
    flops, note = flops_of(run.get("check") or {})
    return {"files": files, "parameters": params, "parameters_source": source, "flops": flops, "flops_note": note}


LOOP_OPS = frozenset(["Enter", "Exit", "LoopCond", "NextIteration", "While", "StatelessWhile", "Loop", "Scan",
                      "TensorListReserve", "TensorArrayV3"])


def flops_of(check):
    """(FLOPs per image or None, what they are or why they are unknown) from check.json's TF-TRT share.
    A loop body counts once per iteration (pipeline.check.compute): a loop whose trip count the graph does
    not fix makes the total unknown. A check written before loops were counted, of a graph with loops
    (its findings name loop ops), is unknown too: its figure left the loop bodies out."""
    for route in check.get("routes") or []:
        share = route.get("share") if isinstance(route, dict) else None
        if not isinstance(share, dict) or "flops" not in share:
            continue
        loops = [loop for loop in share.get("loops") or [] if isinstance(loop, dict)]
        open_loops = [loop for loop in loops if loop.get("trip_count") is None]
        if open_loops:
            first = open_loops[0]
            return None, ("a loop runs a number of times fixed only at run time ({}: {:,} FLOPs per iteration of its "
                          "body{})".format(first.get("loop"), first.get("flops_per_iteration") or 0,
                                           "; {} more such loops".format(len(open_loops) - 1) if len(open_loops) > 1 else ""))
        if "loops" not in share and _has_loops(check):
            return None, ("the check that estimated them counted loop bodies once; run it again: deploy run --force check")
        if not share.get("flops"):
            continue
        counted = "; loop bodies counted once per iteration ({})".format(", ".join(
            "{} × {}".format(loop.get("loop"), loop.get("trip_count")) for loop in loops)) if loops else ""
        return share["flops"], ("per image, 2 × the multiply-adds of convolutions and matrix products (deploy check's "
                                "estimate{}{})".format(", some sizes guessed" if share.get("estimated") else "", counted))
    return None, None


def _has_loops(check):
    for route in check.get("routes") or []:
        for finding in (route.get("findings") or []) if isinstance(route, dict) else []:
            if isinstance(finding, dict) and finding.get("op") in LOOP_OPS:
                return True
    return False


def _manifest_output(run_dir, stage, artifact):
    try:
        manifest = json.loads((run_dir / stage / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    out = ((manifest or {}).get("outputs") or {}).get(artifact) if isinstance(manifest, dict) else None
    return out if isinstance(out, dict) else None


def onnx_parameters(path, cache=None):
    """(parameter count, where it came from): the elements of the ONNX model's initializers, read with the
    onnx package (nothing executed, external data not loaded); (None, why) without a model or onnx.
    Kept in ``cache`` by the file's size and mtime so a report does not parse the model every time."""
    path = Path(path)
    if not path.is_file():
        return None, "no ONNX model in the run folder"
    st = path.stat()
    key = hashlib.sha256("{}:{}:{}".format(path.resolve(), st.st_size, st.st_mtime_ns).encode()).hexdigest()[:24]
    memo = Path(cache) / "params-{}.json".format(key) if cache is not None else None
    if memo is not None and memo.is_file():
        try:
            saved = json.loads(memo.read_text(encoding="utf-8"))
            import os

            os.utime(memo)  # used now: the report's prune keeps it
            return saved["parameters"], saved["source"]
        except (OSError, ValueError, KeyError):
            pass
    try:
        import onnx
    except ImportError:
        return None, "the onnx package is not installed"
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # a damaged file: say so, the report still renders
        return None, "{} cannot be read ({})".format(path.name, str(e).splitlines()[0] if str(e) else type(e).__name__)
    count = 0
    for init in model.graph.initializer:
        n = 1
        for d in init.dims:
            n *= int(d)
        count += n
    source = "elements of the {} initializers of {}".format(len(model.graph.initializer), path.name)
    if memo is not None:
        try:
            from pipeline import files as _files

            memo.parent.mkdir(parents=True, exist_ok=True)
            _files.write_text(memo, json.dumps({"parameters": count, "source": source}))
        except OSError:
            pass
    return count, source


def engine_settings(run):
    """{"precision", "profile", "workspace_mb", "builder", "dla_core", "batch_sizes", "source", "state"}: the
    engine's settings, also while the engine is pending: from the engine's own record when it was built,
    else run.json's config snapshot, else the stage manifests' options, else the config file run.json names
    (as it reads now: --set overrides are not in it)."""
    run_dir = Path(run.get("dir") or ".")
    record = run.get("record") or {}
    state = next((s.get("status") for s in run.get("stages") or [] if s.get("name") == "engine"), None)
    engine, bench, source = None, None, None
    settings = record.get("settings") if isinstance(record.get("settings"), dict) else {}
    manifest = _manifest(run_dir, "engine")
    if manifest.get("options") and state in ("ran", "cached", "done", None):
        engine, source = manifest["options"], "the engine stage's manifest"
    elif settings.get("engine"):
        engine, source = settings["engine"], "run.json"
    bench = settings.get("benchmark") or _manifest(run_dir, "benchmark").get("options")
    if engine is None:
        engine, bench_cfg, source = _from_config(record.get("config"), run_dir)
        bench = bench or bench_cfg
    if engine is None:
        return None
    sizes = list((bench or {}).get("batch_sizes") or [])
    built = _built_profile(run_dir)
    if built:
        profile = built
    else:
        top = engine.get("max_batch_size")
        if engine.get("dla_core") is not None:
            static = sizes[0] if len(sizes) == 1 else top
            profile = "static batch {} (DLA)".format(static)
        else:
            profile = "batch min 1 · opt {} · max {}".format(max(sizes) if sizes else "?", top)
    return {"precision": engine.get("precision"), "profile": profile, "workspace_mb": engine.get("workspace_mb"),
            "builder": engine.get("builder"), "dla_core": engine.get("dla_core"), "batch_sizes": sizes,
            "source": source, "state": state}


def _manifest(run_dir, stage):
    try:
        m = json.loads((run_dir / stage / "manifest.json").read_text(encoding="utf-8"))
        return m if isinstance(m, dict) else {}
    except (OSError, ValueError):
        return {}


def _built_profile(run_dir):
    try:
        profile = json.loads((run_dir / "engine" / "engine.json").read_text(encoding="utf-8")).get("profile")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(profile, dict) or not profile:
        return None
    return "; ".join("{}: min {} · opt {} · max {}".format(name, *(shapes.get(k) for k in ("min", "opt", "max")))
                     for name, shapes in sorted(profile.items()) if isinstance(shapes, dict))


def _from_config(path, run_dir):
    """(engine options, benchmark options, source) from the config file run.json names, or (None, None, None)."""
    if not path:
        return None, None, None
    candidates = [Path(path)] if Path(path).is_absolute() else [Path(path), run_dir.parent.parent / path]
    for p in candidates:
        if p.is_file():
            try:
                from pipeline.config import load_config

                config = load_config(p)
            except Exception:  # a config that no longer loads: the page says the settings are unknown
                return None, None, None
            engine = config.stages.engine
            bench = config.stages.benchmark
            return (engine.model_dump(mode="json") if engine is not None else None,
                    bench.model_dump(mode="json") if bench is not None else None,
                    "{} as it reads now (run.json keeps no snapshot; --set overrides are not in it)".format(path))
    return None, None, None


def failed_night(run):
    """A night the workflow flagged (a FAILED marker in its folder) or whose run did not finish cleanly
    (collect's ``run["failed"]`` when it says)."""
    if "failed" in run:
        return bool(run["failed"])
    d = Path(run.get("dir") or ".")
    if (d / "FAILED").exists():
        return True
    code = (run.get("record") or {}).get("exit_code")
    return code not in (None, 0)
