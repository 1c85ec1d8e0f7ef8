"""``deploy device probe``: the board's identity, the target file it matches, and what differs.

The board comes from /proc/device-tree/model (its target file has the same name, e.g. jetson_tx2);
its TensorRT, CUDA, cuDNN and JetPack are compared with that file and with the config's target.
"""

from pipeline.device.client import device_for, same_version
from pipeline.errors import DeployError

COMPARED = ("tensorrt", "cuda", "cudnn", "jetpack", "python")


def probe_report(config):
    """{probe, device, matches: target name or None, differences: [..], config_target, problems}."""
    from pipeline.targets import load_target

    if config.device is None:
        raise DeployError("{}: the config has no device: section; add one (transport: local on the board, or ssh with "
                          "host, user, identity_file), or pass --set device.transport=local".format(config.path))
    device = device_for(config)
    facts = device.probe()
    report = {"device": device.describe(), "probe": facts, "config_target": config.target, "matches": None,
              "differences": []}
    board = facts.get("board")
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
    return report


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
        "model      {}".format(f.get("model") or "(no /proc/device-tree/model: not a Jetson)"),
        "board      {}".format(f.get("board") or "unknown"),
        "L4T        {}   JetPack {}".format(f.get("l4t") or "-", f.get("jetpack") or "-"),
        "TensorRT   {}   CUDA {}   cuDNN {}".format(f.get("tensorrt") or "-", f.get("cuda") or "-", f.get("cudnn") or "-"),
        "Python     {} ({})   numpy {}   onnxruntime {}".format(f.get("python"), f.get("executable"), f.get("numpy") or "-",
                                                              f.get("onnxruntime") or "-"),
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
    return "\n".join(lines)
