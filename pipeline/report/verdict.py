"""What the nightly report says first, as plain data: the gate's verdict (``comparison.json``, written by
``deploy compare -o``), which commit and config made the run, how noisy its figures were, and what the
model is (size, parameters, FLOPs, engine settings).

Everything here reads defensively: ``comparison.json`` may be missing, from an older ``deploy compare``
(``passed``/``notes``/``metric``/``why``) or unreadable; a run may have no record of its commit. What is
not known is said to be unknown, never guessed.
"""

import hashlib
import json
import re
from pathlib import Path

GATE_FILE = "comparison.json"
VERDICTS = ("pass", "regression", "not comparable", "no data")
FIGURES = {  # figure key -> (label, unit, lower is better)
    "p50_ms": ("p50 latency", "ms", True),
    "p99_ms": ("p99 latency", "ms", True),
    "throughput_ips": ("throughput", "img/s", False),
    "accuracy": ("accuracy", "", False),
    "consistency": ("batch consistency", "", False),
    "check": ("check", "", False),
}
STATUS_ORDER = ("regression", "not compared", "noise", "improved", "ok")
NOISY_P99_RATIO = 2.0  # p99 more than twice the median: the spread is as wide as the median itself
NOISY_MEAN_RATIO = 1.5  # mean 1.5x the median: a few very slow calls (or two modes) carry the mean
NOISY_INTERVAL = 0.10  # the p50's 95 % interval wider than 10 % of it


# ---------------------------------------------------------------- the gate's verdict (contract A)

def find_gate(run_dir, explicit=None):
    """The comparison.json of ``run_dir``: ``explicit`` when given, else ``<run>/comparison.json``, else a
    ``comparison.json`` beside the run folder whose ``current`` names this run; None when there is none."""
    if explicit:
        return Path(explicit)
    run_dir = Path(run_dir)
    inside = run_dir / GATE_FILE
    if inside.is_file():
        return inside
    beside = run_dir.parent / GATE_FILE
    if beside.is_file():
        try:
            current = json.loads(beside.read_text(encoding="utf-8")).get("current")
        except (OSError, ValueError, AttributeError):
            return None
        names = _names(current)
        if run_dir.name in names or str(run_dir) in names or str(run_dir.resolve()) in names:
            return beside
    return None


def _names(current):
    if isinstance(current, str):
        return {current, Path(current).name}
    if isinstance(current, dict):
        out = set()
        for key in ("dir", "name", "run", "path"):
            if current.get(key):
                out |= {str(current[key]), Path(str(current[key])).name}
        return out
    return set()


def load_gate(path):
    """The gate's verdict from ``path``, normalized (see ``normalize``); a file that cannot be read is a
    "no data" verdict that says why (the page must never look like a pass because of it)."""
    if path is None:
        return None
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        return {"verdict": "no data", "reasons": ["{}: cannot be read ({})".format(path, getattr(e, "strerror", None) or e)],
                "rows": [], "reference": {}, "hardware": {}, "baseline": None, "path": str(path), "unreadable": True}
    gate = normalize(raw)
    gate["path"] = str(path)
    return gate


def gate_for(run, run_dir, explicit=None):
    """The gate's verdict for a loaded run: ``explicit`` file, else what load_run put in ``run["gate"]`` (if
    collect loads it), else the file find_gate finds; None when the run was not compared."""
    if not explicit and isinstance(run.get("gate"), dict):
        return normalize(run["gate"])
    return load_gate(find_gate(run_dir, explicit))


def normalize(raw):
    """{"verdict", "reasons", "rows", "reference", "hardware", "baseline", "current", "schema"} from a
    comparison.json of contract A (``deploy.comparison/2``) or of the older compare (``passed``, ``notes``,
    rows with ``metric``/``verdict``/``why``)."""
    rows = [_row(r) for r in raw.get("rows") or [] if isinstance(r, dict)]
    reasons = [str(r) for r in (raw.get("reasons") or raw.get("notes") or []) if r]
    notes = [str(n) for n in raw.get("notes") or [] if n and raw.get("reasons") and str(n) not in reasons] \
        if isinstance(raw.get("notes"), list) else []
    verdict = raw.get("verdict")
    if verdict not in VERDICTS:
        if verdict is not None:
            reasons.insert(0, "comparison.json says {!r}, which is not a verdict deploy knows".format(verdict))
            verdict = "no data"
        elif "passed" in raw:  # the compare before contract A
            verdict = "pass" if raw["passed"] else "regression"
        else:
            verdict = "no data"
            reasons.insert(0, "comparison.json holds no verdict")
    if verdict == "pass" and rows and not any(r["status"] not in ("not compared", "missing") for r in rows):
        verdict = "no data"  # a comparison that compared no figure is never a pass
        reasons.insert(0, "no figure was compared (comparison.json said pass)")
    if verdict == "no data" and not rows and not reasons:
        reasons.append("the comparison compared no figure")
    return {"schema": raw.get("schema"), "verdict": verdict, "reasons": reasons, "notes": notes, "rows": rows,
            "reference": raw.get("reference") if isinstance(raw.get("reference"), dict) else {},
            "hardware": raw.get("hardware") if isinstance(raw.get("hardware"), dict) else {},
            "baseline": raw.get("baseline"), "current": raw.get("current"), "tolerance": raw.get("tolerance")}


def _row(r):
    figure, batch = r.get("figure"), r.get("batch_size")
    if figure is None and r.get("metric"):  # "p50 b1 (ms)", "throughput b8 (img/s)", "engine top-1 agreement"
        metric = str(r["metric"])
        m = re.match(r"(p50|p99|throughput)\s+b(\d+)", metric)
        if m:
            figure = {"p50": "p50_ms", "p99": "p99_ms", "throughput": "throughput_ips"}[m.group(1)]
            batch = int(m.group(2))
        else:
            figure = metric
    status = r.get("status") or r.get("verdict") or "not compared"
    if status == "missing":
        status = "not compared"
    return {"figure": figure, "label": str(r["label"]) if r.get("label") else None, "batch_size": batch, "baseline": _num(r.get("baseline")), "current": _num(r.get("current")),
            "reference": _num(r.get("reference")), "band": _pair(r.get("band")),
            "interval": _pair(r.get("interval") or r.get("interval_current")), "change": _num(r.get("change")),
            "status": status, "note": str(r.get("note") or r.get("why") or ""),
            "raw_baseline": r.get("baseline"), "raw_current": r.get("current")}


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _pair(v):
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(_num(x) is not None or x is None for x in v):
        return [v[0], v[1]]
    return None


def figure_label(row):
    """"p50 latency", "throughput", …; a figure without a batch size by the gate's own label ("engine top-1
    agreement") when it gives one."""
    label, _, _ = FIGURES.get(row["figure"], (str(row["figure"]), "", False))
    if row.get("batch_size") is None and row.get("label"):
        return row["label"]
    return label


def figure_unit(figure):
    return FIGURES.get(figure, ("", "", False))[1]


def sorted_rows(rows):
    """Regressions first, then what was not compared, noise, improvements, the rest (stable)."""
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    return sorted(rows, key=lambda r: rank.get(r["status"], len(STATUS_ORDER)))


def headline(gate):
    """One sentence: the verdict and its first why."""
    verdict = gate["verdict"]
    bad = [r for r in gate["rows"] if r["status"] == "regression"]
    if verdict == "regression":
        worst = ", ".join(_what(r) for r in sorted_rows(bad)[:3]) + (" …" if len(bad) > 3 else "")
        return "{} figure{} worse than the reference{}".format(
            len(bad) or "some", "" if len(bad) == 1 else "s", ": " + worst if worst else "")
    if verdict == "pass":
        compared = [r for r in gate["rows"] if r["status"] != "not compared"]
        return "no figure worse than the reference ({} compared)".format(len(compared))
    return gate["reasons"][0] if gate["reasons"] else ("not comparable with the reference" if verdict == "not comparable"
                                                       else "no figure was compared")


def other_reasons(gate):
    """The reasons the headline does not already say (the gate's own "N regressions: …" is the headline)."""
    head = headline(gate)
    return [r for r in gate["reasons"] if r != head and not (gate["verdict"] == "regression"
                                                             and re.match(r"\d+ regressions?: ", r))]


def _what(r):
    where = " at batch {}".format(r["batch_size"]) if r["batch_size"] is not None else ""
    change = "" if r["change"] is None else " " + change_text(r)
    return "{}{}{}".format(figure_label(r), where, change)


def change_text(r):
    """A row's change: relative (%) for latency and throughput, absolute for the rest."""
    if r["change"] is None:
        return "–"
    if r["figure"] in ("p50_ms", "p99_ms", "throughput_ips"):
        return "{:+.1%}".format(r["change"])
    return "{:+.3g}".format(r["change"])


def reference_sentence(gate):
    """What the figures were compared with: the median of N nights on the baseline's fingerprint."""
    ref = gate.get("reference") or {}
    base = gate.get("baseline")
    parts = []
    nights = ref.get("nights")
    if nights is not None:
        failed = ref.get("failed_nights") or 0
        parts.append("the median of {} night{} on the baseline's fingerprint{}".format(
            nights, "" if nights == 1 else "s", " ({} failed, flagged and kept in the band)".format(failed) if failed else ""))
    if base:
        name = base if isinstance(base, str) else (base.get("name") or base.get("dir") or base.get("run"))
        when = None if isinstance(base, str) else (base.get("when") or base.get("finished"))
        if name:
            parts.append("baseline {}{}".format(Path(str(name)).name, " ({})".format(str(when)[:10]) if when else ""))
    if gate.get("tolerance") is not None:
        try:
            parts.append("tolerance {:.0%}".format(float(gate["tolerance"])))
        except (TypeError, ValueError):
            pass
    return "; ".join(parts)


# ---------------------------------------------------------------- provenance

_NIGHT = re.compile(r"-([0-9a-f]{7,40})-\d+(?:\.\d+)?$")


def provenance(run):
    """{"commit", "commit_source", "config_digest", "digest_source", "ci"}: which commit and config made the run."""
    record = run.get("record") or {}
    env = record.get("env") if isinstance(record.get("env"), dict) else {}
    git = record.get("git") if isinstance(record.get("git"), dict) else {}
    commit, source = None, None
    for value, where in ((record.get("commit"), record.get("commit_source") or "run.json"),
                         (git.get("commit") or git.get("sha"), "run.json (git)"),
                         (record.get("github_sha") or record.get("GITHUB_SHA") or env.get("GITHUB_SHA"), "GITHUB_SHA")):
        if value:
            commit, source = str(value), where
            break
    if commit is None:
        m = _NIGHT.search(Path(run.get("dir") or "").name)
        if m:
            commit, source = m.group(1), "the night folder's name"
    digest, digest_source = record.get("config_digest"), "run.json"
    if not digest:
        stage_digests = _stage_digests(run.get("dir"))
        if stage_digests:
            digest = hashlib.sha256(json.dumps(stage_digests, sort_keys=True).encode()).hexdigest()
            digest_source = "the stages' options ({})".format(", ".join(sorted(stage_digests)))
        else:
            digest_source = None
    ci = record.get("ci") if isinstance(record.get("ci"), dict) else {}
    return {"commit": commit, "commit_source": source, "config_digest": digest, "digest_source": digest_source, "ci": ci}


def _stage_digests(run_dir):
    from pipeline.report.collect import STAGES

    out = {}
    if not run_dir:
        return out
    for s in STAGES:
        try:
            manifest = json.loads((Path(run_dir) / s / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and manifest.get("config_digest"):
            out[s] = manifest["config_digest"]
    return out


def fingerprint(run, gate=None):
    """[(label, value)] of what the figures depend on: board, L4T/JetPack, TensorRT, CUDA, power mode, clocks;
    or the host's CPU for a host-only run."""
    where = (run.get("benchmark") or {}).get("where") or {}
    fp = where.get("fingerprint") or {}
    if not where and gate:  # no benchmark tonight: what the reference was measured on
        fp = (gate.get("reference") or {}).get("fingerprint") or {}
    if is_host_only(run):
        fp = {}
    mode = fp.get("power_mode")
    mode = mode.get("mode_name") if isinstance(mode, dict) else mode
    clocks = fp.get("clocks_locked")
    items = [("board", fp.get("board") or fp.get("model")), ("GPU", fp.get("gpu")), ("L4T", fp.get("l4t")),
             ("JetPack", fp.get("jetpack")), ("TensorRT", fp.get("tensorrt")), ("CUDA", fp.get("cuda")),
             ("power mode", mode), ("clocks", None if clocks is None else "locked" if clocks else "NOT locked")]
    items = [(k, str(v)) for k, v in items if v not in (None, "")]
    if not items and where:
        cpu = host_cpu(where)
        items = [("host CPU", cpu or "not recorded")] + ([("figures", "host CPU's, not a Jetson's")] if is_host_only(run) else [])
        if where.get("runtime"):
            items.append(("runtime", "{} {}".format(where.get("runtime"), where.get("version") or "").strip()))
    return items


def is_host_only(run):
    where = (run.get("benchmark") or {}).get("where") or {}
    if not where:
        return False
    fp = where.get("fingerprint") or {}
    kind = fp.get("kind")
    if kind in ("jetson", "desktop-gpu") or fp.get("board") or fp.get("l4t") or fp.get("gpu"):
        return False
    return not where.get("on_target_device") and where.get("runtime") != "tensorrt"


def host_cpu(where):
    """The host's CPU in words: model, cores, machine, system (what benchmark.json recorded)."""
    host = where.get("host") or {}
    if not isinstance(host, dict):
        return str(host) if host else None
    model = host.get("cpu") or host.get("processor")
    cores = host.get("cpu_count") or host.get("cores")
    bits = [str(model) if model else "an unnamed CPU"]
    extra = [x for x in ("{} cores".format(cores) if cores else None, host.get("machine"), host.get("system")) if x]
    if extra:
        bits.append("({})".format(", ".join(str(x) for x in extra)))
    return " ".join(bits) if (model or extra) else None


# ---------------------------------------------------------------- noise

def noise_notes(run, gate=None):
    """Sentences for each batch size whose spread is far wider than its median: p99 ≥ 2× p50, mean ≥ 1.5× p50,
    or a p50 whose 95 % interval (from the gate) is wider than 10 % of it."""
    from pipeline.report.collect import results_by_batch

    notes = []
    intervals = {r["batch_size"]: r for r in (gate or {}).get("rows") or [] if r["figure"] == "p50_ms" and r["interval"]}
    for bs, r in sorted(results_by_batch(run).items()):
        p50, p99, mean = r.get("p50_ms"), r.get("p99_ms"), r.get("mean_ms")
        if not p50:
            continue
        said = []
        if p99 is not None and p99 >= NOISY_P99_RATIO * p50:
            said.append("p99 is {:.1f}× the p50 ({:.3g} vs {:.3g} ms)".format(p99 / p50, p99, p50))
        if mean is not None and mean >= NOISY_MEAN_RATIO * p50:
            said.append("the mean is {:.1f}× the p50: a few calls far slower than the rest, or two modes (throughput "
                        "follows the mean)".format(mean / p50))
        row = intervals.get(bs)
        if row and all(v is not None for v in row["interval"]) and row["current"]:
            lo, hi = row["interval"]
            if (hi - lo) / row["current"] > NOISY_INTERVAL:
                said.append("the p50's 95 % interval [{:.3g}, {:.3g}] ms is {:.0%} of it".format(lo, hi, (hi - lo) / row["current"]))
        if said:
            notes.append("batch {}: noisy run: {}".format(bs, "; ".join(said)))
    return notes


def quantile_interval(result, q):
    """(low, high) of the 95 % interval of quantile q from a benchmark row's 101 percentiles and call count
    (binomial order statistics); an end the calls cannot bound is None. None without percentiles."""
    import math

    pct, n = result.get("percentiles_ms"), result.get("iterations")
    if not pct or len(pct) != 101 or not n:
        return None
    half = 1.96 * math.sqrt(q * (1 - q) / n)
    low, high = q - half, q + half + 1.0 / n

    def at(p):
        i = min(int(p * 100), 99)
        return pct[i] + (pct[i + 1] - pct[i]) * (p * 100 - i)

    return (at(low) if low >= 0 else None), (at(high) if high <= 1 else None)


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
    flops, note = None, None
    for route in (run.get("check") or {}).get("routes") or []:
        share = route.get("share") if isinstance(route, dict) else None
        if isinstance(share, dict) and share.get("flops"):
            flops = share["flops"]
            note = ("per image, 2 × the multiply-adds of convolutions and matrix products (deploy check's estimate{})"
                    .format(", some sizes guessed" if share.get("estimated") else ""))
            break
    return {"files": files, "parameters": params, "parameters_source": source, "flops": flops, "flops_note": note}


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
