"""``deploy device probe``: the board's identity, the target file it matches, and what differs.

The board comes from /proc/device-tree/model (its target file has the same name, e.g. jetson_tx2);
its TensorRT, CUDA, cuDNN and JetPack are compared with that file and with the config's target. A
machine that is not a Jetson (a workstation's NVIDIA GPU: kind "desktop-gpu"; or no GPU: "cpu")
matches no Jetson target. ``not_target`` says why the machine is not the config's target (what
``--strict`` exits non-zero on): another board, or the board's TensorRT differing from the target's.
"""

from pipeline.device.client import hardware_label, open_device, same_version
from pipeline.errors import DeployError

COMPARED = ("tensorrt", "cuda", "cudnn", "jetpack", "python")


def probe_report(config):
    """{probe, device, matches: target name or None, differences: [..], config_target, problems}."""
    from pipeline.targets import load_target

    if config.device is None:
        raise DeployError("{}: the config has no device: section; add one (transport: local on the board, or ssh with "
                          "host, user, identity_file), or pass --set device.transport=local".format(config.path))
    with open_device(config) as device:
        facts = device.probe()
    report = {"device": device.describe(), "probe": facts, "config_target": config.target, "matches": None,
              "differences": []}
    board = facts.get("board") if facts.get("kind", "jetson") == "jetson" else None
    target = None
    if board:
        try:
            target = load_target(board)
        except DeployError:
            target = None
    if target is not None:
        report["matches"] = target.name
        report["differences"] = differences(facts, target)
    if config.target != report["matches"]:
        try:
            wanted = load_target(config.target)
        except DeployError:
            wanted = None
        if wanted is not None:
            report["config_differences"] = differences(facts, wanted)
    report["not_target"] = not_target(report, facts)
    return report


def not_target(report, facts):
    """Why this machine is not the config's target ([] when it is): another board (or no Jetson at all),
    or the right board with another TensorRT (an engine is only valid for the TensorRT it was built with).
    A host target (no TensorRT: host_cpu) is any machine that is not a Jetson."""
    from pipeline.targets import load_target

    wanted = report["config_target"]
    try:
        target = load_target(wanted)
    except DeployError:
        target = None
    if target is not None and not target.tensorrt and not target.jetpack:
        return [] if facts.get("kind") != "jetson" else ["this machine is a Jetson ({}), target {} is a host".format(
            facts.get("board") or facts.get("model"), wanted)]
    if report["matches"] != wanted:
        what = hardware_label(facts) or "an unknown machine"
        if report["matches"]:
            what = "{} (targets/{}.yaml)".format(what, report["matches"])
        return ["this machine is {}, not target {}".format(what, wanted)]
    return [d for d in report["differences"] if d.startswith("tensorrt:")]


def differences(facts, target):
    out = []
    for key in COMPARED:
        found, expected = facts.get(key), getattr(target, key, None)
        if found and expected and not same_version(found, expected):
            out.append("{}: board has {}, {} says {}".format(key, found, target.name, expected))
    return out


def format_probe(report):
    f = report["probe"]
    mode = f.get("power_mode") or {}
    mem = f.get("memory_mb") or {}
    temps = f.get("temperatures_c") or {}
    lines = [
        "device     {}".format(report["device"]),
        "kind       {}".format(_kind_line(f)),
        "model      {}".format(f.get("model") or "(no /proc/device-tree/model: not a Jetson)"),
        "board      {}".format(f.get("board") or "unknown"),
        "L4T        {}   JetPack {}".format(f.get("l4t") or "-", f.get("jetpack") or "-"),
        "TensorRT   {}   CUDA {}   cuDNN {}".format(f.get("tensorrt") or "-", f.get("cuda") or "-", f.get("cudnn") or "-"),
        "Python     {} ({})   numpy {}   onnxruntime {}".format(f.get("python"), f.get("executable"), f.get("numpy") or "-",
                                                              f.get("onnxruntime") or "-"),
        "binding    {}".format(_binding_line(f.get("cuda_binding") or {})),
        "power      {}   clocks locked: {}".format(
            "{} (id {})".format(mode.get("mode_name"), mode.get("mode_id")) if mode else "-",
            {True: "yes", False: "no", None: "unknown"}[f.get("clocks_locked")]),
        "memory     {} MB available of {} MB".format(mem.get("available", "-"), mem.get("total", "-")),
    ]
    if temps:
        lines.append("temps      " + ", ".join("{} {:.1f}C".format(k, v) for k, v in sorted(temps.items())))
    lines.append("target     {}".format("matches targets/{}.yaml".format(report["matches"]) if report["matches"]
                                        else "no target file matches this machine"))
    for d in report["differences"]:
        lines.append("  differs  " + d)
    if report["config_target"] != report["matches"]:
        lines.append("config     target {} is not this board{}".format(
            report["config_target"], ": " + "; ".join(report.get("config_differences", [])) if report.get("config_differences") else ""))
    for p in f.get("problems", []):
        lines.append("note       " + p)
    for reason in report.get("not_target", []):
        lines.append("strict     " + reason + " (deploy device probe --strict exits 5)")
    return "\n".join(lines)


def _kind_line(f):
    label = hardware_label(f) or "unknown"
    if f.get("kind") == "desktop-gpu" and f.get("gpu_driver"):
        label += "; driver {}".format(f["gpu_driver"])
    if len(f.get("gpus") or []) > 1:
        label += "; {} GPUs: {}".format(len(f["gpus"]), ", ".join(g["name"] for g in f["gpus"]))
    return label


def _binding_line(b):
    """The CUDA binding the agent's TensorRT code uses and its version: libcudart through ctypes (the default,
    what JetPack ships), else the optional pycuda or cuda-python."""
    if not b.get("binding"):
        return "no CUDA runtime (libcudart; pycuda / cuda-python optional)" + (": see note" if b.get("problem") else "")
    return "{} {}{}".format(b["binding"], b.get("version") or "(version unknown)",
                            " ({})".format(b["module"]) if b.get("module") else "")
