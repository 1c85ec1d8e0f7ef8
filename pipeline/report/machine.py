"""The machine a run measured, in one place. The device records its facts (``pipeline.device.client.fingerprint``:
benchmark.json's ``where.fingerprint``, by ``FINGERPRINT_FIELDS``); here they are read once (``recorded``) and
everything else is derived from that reading:

    fingerprint(run)              the keys two runs must share for their latency to be compared (the gate's)
    fingerprint_items(run, gate)  [(label, value)] the report prints: board, L4T, JetPack, TensorRT, CUDA, ...
    is_host_only(run), host_cpu   whether the figures are the host's CPU's, and that CPU in words
    hardware(run)                 what measured the run, in words
    fingerprint_reasons(a, b, e)  why two fingerprints are not comparable
    converters(run)               the converter versions that made the run's ONNX model (its convert manifest)
"""

import functools
from pathlib import Path

from pipeline.device.client import FINGERPRINT_FIELDS

# the gate's keys; pipeline/cli/verbs/compare.py keeps a copy for --expect-change's choices, held equal by
# tests/report/test_machine.py (this package's import would cost every verb's --help pydantic)
FINGERPRINT_KEYS = ("kind", "board", "gpu", "jetpack", "tensorrt", "runtime", "power_mode", "clocks", "converters")
CONVERTERS = ("tensorflow", "tf2onnx", "onnx", "onnxruntime")  # the convert stage's tools (its manifest's stage_tools)
OPTIONAL_KEYS = ("converters",)  # not recorded on one side (an older run): not a difference


def _where(run):
    return (run.get("benchmark") or {}).get("where") or {}


def recorded(where):
    """``where.fingerprint`` as the device wrote it, every one of FINGERPRINT_FIELDS present (None: not
    recorded), the power mode by its name. A reader asking for a key the device does not record fails
    (KeyError) instead of reading None for ever."""
    raw = where.get("fingerprint") or {}
    fp = {key: raw.get(key) for key in FINGERPRINT_FIELDS}
    mode = fp["power_mode"]
    fp["power_mode"] = mode.get("mode_name") if isinstance(mode, dict) else mode
    return fp


def _clocks(locked, unlocked="not locked"):
    return None if locked is None else ("locked" if locked else unlocked)


def fingerprint(run):
    """The keys two runs must share for their latency to be compared (None: not known)."""
    where = _where(run)
    fp = recorded(where)
    kind = _kind(where, fp)
    return {"kind": kind, "board": fp["board"] or fp["model"],
            "gpu": fp["gpu"] if kind == "desktop-gpu" else None,
            "jetpack": fp["jetpack"] or fp["l4t"], "tensorrt": fp["tensorrt"],
            "runtime": where.get("runtime"), "power_mode": fp["power_mode"], "clocks": _clocks(fp["clocks_locked"]),
            "converters": converters(run)}


def converters(run):
    """"tensorflow 2.21.0, tf2onnx 1.17.0, onnx 1.17.0, onnxruntime 1.20.1": the versions the run's convert stage
    ran with (``<run>/convert/manifest.json``'s stage_tools), or None when not recorded. A converter that changes
    changes the ONNX graph, and so the engine TensorRT builds from it."""
    path = Path(run.get("dir") or ".") / "convert" / "manifest.json"
    try:
        stamp = path.stat().st_mtime_ns if path.is_file() else None
    except OSError:
        stamp = None
    return None if stamp is None else _converters(str(path), stamp)


@functools.lru_cache(maxsize=256)
def _converters(path, stamp):
    from pipeline import records
    from pipeline.errors import DeployError

    try:
        manifest = records.read(Path(path), "manifest") or {}
    except DeployError:
        return None  # the reader (deploy report, load_run) names a bad manifest; the fingerprint says "not recorded"
    tools = manifest.get("stage_tools")
    if not isinstance(tools, dict):
        return None
    found = ["{} {}".format(name, tools[name]) for name in CONVERTERS if isinstance(tools.get(name), str)]
    return ", ".join(found) or None


def _kind(where, fp):
    """"jetson", "desktop-gpu" (an NVIDIA GPU that is not a Jetson's), "host-cpu" (the host in-process,
    or a device without a GPU), or None (no device figures). Not ``is_host_only``: a device without a GPU
    is "host-cpu" here (CPU figures) but its figures are still the device's."""
    kind = fp["kind"]
    if kind in ("jetson", "desktop-gpu"):
        return kind
    if kind or where.get("host"):
        return "host-cpu"
    if fp["board"] or fp["l4t"]:
        return "jetson"
    return None


def fingerprint_items(run, gate=None):
    """[(label, value)] of what the figures depend on: board, L4T/JetPack, TensorRT, CUDA, power mode, clocks;
    or the host's CPU for a host-only run. A run without a benchmark shows what the gate's reference was
    measured on (its ``fingerprint``: the gate's keys)."""
    where = _where(run)
    if not where:
        ref = (gate or {}).get("reference") or {}
        fp = ref.get("fingerprint") or {}
        items = [("board", fp.get("board")), ("GPU", fp.get("gpu")), ("JetPack", fp.get("jetpack")),
                 ("TensorRT", fp.get("tensorrt")), ("power mode", fp.get("power_mode")),
                 ("clocks", "NOT locked" if fp.get("clocks") == "not locked" else fp.get("clocks")),
                 ("converters", fp.get("converters"))]
        return [(k, str(v)) for k, v in items if v not in (None, "")]
    if is_host_only(run):
        items = []
    else:
        fp = recorded(where)
        items = [("board", fp["board"] or fp["model"]), ("GPU", fp["gpu"]), ("L4T", fp["l4t"]),
                 ("JetPack", fp["jetpack"]), ("TensorRT", fp["tensorrt"]), ("CUDA", fp["cuda"]),
                 ("power mode", fp["power_mode"]), ("clocks", _clocks(fp["clocks_locked"], "NOT locked")),
                 ("converters", converters(run))]
        items = [(k, str(v)) for k, v in items if v not in (None, "")]
    if not items:
        cpu = host_cpu(where)
        items = [("host CPU", cpu or "not recorded")] + ([("figures", "host CPU's, not a Jetson's")] if is_host_only(run) else [])
        if where.get("runtime"):
            items.append(("runtime", "{} {}".format(where.get("runtime"), where.get("version") or "").strip()))
    return items


def is_host_only(run):
    """The figures are this host's CPU's, not a target device's (no device fingerprint, not on the target,
    not TensorRT)."""
    where = _where(run)
    if not where:
        return False
    fp = recorded(where)
    if fp["kind"] in ("jetson", "desktop-gpu") or fp["board"] or fp["l4t"] or fp["gpu"]:
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


def hardware(run):
    """{"kind", "label"}: what measured the run, in words a reader of the report needs."""
    where = _where(run)
    f = fingerprint(run)
    kind = f["kind"]
    if kind == "jetson":
        bits = ["JetPack " + str(f["jetpack"]) if f["jetpack"] else None,
                "TensorRT " + str(f["tensorrt"]) if f["tensorrt"] else None,
                "power mode " + str(f["power_mode"]) if f["power_mode"] else None,
                "clocks " + f["clocks"] if f["clocks"] else "clocks unknown"]
        label = "Jetson {} ({})".format(f["board"] or "board", ", ".join(b for b in bits if b))
    elif kind == "desktop-gpu":
        label = "desktop GPU {}: not a Jetson".format(f["gpu"] or "(unnamed)")
    elif kind == "host-cpu":
        host = where.get("host") or {}
        machine = host.get("machine") or recorded(where)["machine"] or "CPU"
        label = "host CPU ({}, {}): not Jetson figures".format(machine, where.get("runtime") or "runtime unknown")
    else:
        label = "no device figures"
    return {"kind": kind, "label": label}


KIND_WORDS = {"jetson": "a Jetson", "desktop-gpu": "a desktop GPU", "host-cpu": "a host CPU"}


def fingerprint_differs(base_fp, cur_fp):
    """{key: (baseline's, current's)} of the gate's keys that differ (a converter version not recorded on one
    side is not a difference)."""
    return {key: (base_fp.get(key), cur_fp.get(key)) for key in FINGERPRINT_KEYS if base_fp.get(key) != cur_fp.get(key)
            and not (key in OPTIONAL_KEYS and None in (base_fp.get(key), cur_fp.get(key)))}


def fingerprint_reasons(base_fp, cur_fp, expect):
    """(reasons not comparable, notes of expected changes)."""
    differs = fingerprint_differs(base_fp, cur_fp)
    if not differs:
        return [], []
    text = "; ".join("{} {} vs {}".format(key, a, b) for key, (a, b) in differs.items())
    unexpected = [key for key in differs if key not in expect]
    if not unexpected:
        return [], ["expected change (--expect-change): {}; figures compared with the old reference. Make a night "
                    "on the new setup the baseline once you have looked".format(text)]
    if "kind" in differs and "desktop-gpu" in differs["kind"]:
        words = ["{}{}".format(KIND_WORDS.get(k, "an unknown machine"), " ({})".format(g) if g else "")
                 for k, g in zip(differs["kind"], (base_fp["gpu"], cur_fp["gpu"]))]
        return ["latency not compared: the baseline ran on {}, the current run on {}; a desktop GPU's figures say "
                "nothing about a Jetson's (compare desktop-GPU runs with desktop-GPU runs)".format(*words)], []
    return ["not comparable: measured on different hardware or runtime ({}); if this change is intended, pass "
            "--expect-change {} (then make a night on the new setup the baseline)".format(text, " ".join(unexpected))], []
