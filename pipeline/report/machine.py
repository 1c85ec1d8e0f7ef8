"""The machine a run measured: its fingerprint (the keys two runs must share for their latency to be
compared), the words a report uses for it, and why two fingerprints are not comparable."""

FINGERPRINT_KEYS = ("kind", "board", "gpu", "jetpack", "tensorrt", "runtime", "power_mode", "clocks")


def fingerprint(run):
    """The keys two runs must share for their latency to be compared (None: not known)."""
    where = (run.get("benchmark") or {}).get("where") or {}
    fp = where.get("fingerprint") or {}
    mode = fp.get("power_mode")
    kind = _kind(where, fp)
    clocks = fp.get("clocks_locked")
    return {"kind": kind, "board": fp.get("board") or fp.get("model"),
            "gpu": fp.get("gpu") if kind == "desktop-gpu" else None,
            "jetpack": fp.get("jetpack") or fp.get("l4t"), "tensorrt": fp.get("tensorrt"),
            "runtime": where.get("runtime"),
            "power_mode": mode.get("mode_name") if isinstance(mode, dict) else mode,
            "clocks": None if clocks is None else ("locked" if clocks else "not locked")}


def _kind(where, fp):
    """"jetson", "desktop-gpu" (an NVIDIA GPU that is not a Jetson's), "host-cpu" (the host in-process,
    or a device without a GPU), or None (no device figures)."""
    kind = fp.get("kind")
    if kind in ("jetson", "desktop-gpu"):
        return kind
    if kind or where.get("host"):
        return "host-cpu"
    if fp.get("board") or fp.get("l4t"):
        return "jetson"
    return None


def hardware(run):
    """{"kind", "label"}: what measured the run, in words a reader of the report needs."""
    where = (run.get("benchmark") or {}).get("where") or {}
    fp = where.get("fingerprint") or {}
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
        machine = host.get("machine") or fp.get("machine") or "CPU"
        label = "host CPU ({}, {}): not Jetson figures".format(machine, where.get("runtime") or "runtime unknown")
    else:
        label = "no device figures"
    return {"kind": kind, "label": label}


KIND_WORDS = {"jetson": "a Jetson", "desktop-gpu": "a desktop GPU", "host-cpu": "a host CPU"}


def fingerprint_reasons(base_fp, cur_fp, expect):
    """(reasons not comparable, notes of expected changes)."""
    differs = {key: (base_fp[key], cur_fp[key]) for key in FINGERPRINT_KEYS if base_fp[key] != cur_fp[key]}
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
