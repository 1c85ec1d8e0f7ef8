"""Which Jetson this is: /etc/nv_tegra_release, /proc/device-tree/model, ``nvpmodel -q`` and
``jetson_clocks --show`` -> plain dicts, and L4T -> JetPack.

Runs on the board (Python 3.6, standard library only). Formats are those of the real captures in
tests/device/samples/identity/ (PROVENANCE.md there gives the sources). Every parser raises ParseError,
naming the text, when the input is not the file/command output it expects.
"""

import re

from . import ParseError

# ---------------------------------------------------------------------------------------------------------------
# L4T -> JetPack, built from the two tables in samples/identity/l4t_to_jetpack.txt: jetson-stats (jtop)
# NVIDIA_JETPACK @09d635b0 and jetson-containers get_jetpack_version() @6cbc91ae. Values are plain version
# strings so they compare with a target's ``jetpack`` ("6.2", "4.6.6"): the suffix " GA" is dropped,
# pre-release tags are kept ("5.0.1 DP", "6.0 EA"), and where one L4T shipped in several JetPacks they are
# listed ascending with "/" ("3.2.1/3.3"). Where the tables disagree:
#   36.4.2: jtop "6.1 (rev1)", containers "6.1.1" -> "6.1"  (a re-release of JetPack 6.1; no source here
#           for a JetPack named 6.1.1).
#   36.5.0: jtop "6.2.2", containers "6.2.1" -> "6.2.2" (also what the Orin Nano capture's repository states:
#           "JetPack 6.2.2 (L4T 36.5.0)"; 36.4.7 is 6.2.1 in both tables).
#   36.4.0: "6.1" vs "6.1 GA" -> "6.1"; 38.2.x "7.0" vs "7.0 GA" -> "7.0".
#   39.2.0 (jtop, "7.2 GA") and 39.1.0 (containers, "7.2 GA") -> both "7.2";
#   38.1.0 (containers only, "7.0 EA") and 35.6.3 (jtop only, "5.1.5") are kept.
#   36.4.7: both tables say 6.2.1 (a blog's "36.4.7 / JetPack 6.2" is not followed).
# ---------------------------------------------------------------------------------------------------------------
JETPACK_FOR_L4T = {
    # JetPack 7
    "39.2.0": "7.2", "39.1.0": "7.2", "39.0.0": "7.2 EA",
    "38.4.0": "7.1", "38.2.2": "7.0", "38.2.1": "7.0", "38.2.0": "7.0", "38.1.0": "7.0 EA",
    # JetPack 6
    "36.5.0": "6.2.2", "36.4.7": "6.2.1", "36.4.4": "6.2.1", "36.4.3": "6.2", "36.4.2": "6.1", "36.4.0": "6.1",
    "36.3.0": "6.0", "36.2.0": "6.0 DP", "36.0.0": "6.0 EA",
    # JetPack 5
    "35.6.4": "5.1.6", "35.6.3": "5.1.5", "35.6.2": "5.1.5", "35.6.1": "5.1.5", "35.6.0": "5.1.4",
    "35.5.0": "5.1.3", "35.4.1": "5.1.2", "35.3.1": "5.1.1", "35.3.0": "5.1.1 PRE", "35.2.1": "5.1",
    "35.1.0": "5.0.2", "34.1.1": "5.0.1 DP", "34.1.0": "5.0 DP", "34.0.1": "5.0 PRE-DP",
    # JetPack 4
    "32.7.6": "4.6.6", "32.7.5": "4.6.5", "32.7.4": "4.6.4", "32.7.3": "4.6.3", "32.7.2": "4.6.2",
    "32.7.1": "4.6.1", "32.6.1": "4.6", "32.5.2": "4.5.1", "32.5.1": "4.5.1", "32.5.0": "4.5",
    "32.4.4": "4.4.1", "32.4.3": "4.4", "32.4.2": "4.4 DP", "32.3.1": "4.3", "32.2.3": "4.2.3",
    "32.2.1": "4.2.2", "32.2.0": "4.2.1", "32.1.0": "4.2", "31.1.0": "4.1.1", "31.0.2": "4.1", "31.0.1": "4.0",
    # older (jtop only)
    "28.4.0": "3.3.3", "28.2.1": "3.2.1/3.3", "28.2.0": "3.2", "28.1.0": "3.1", "27.1.0": "3.0",
    "24.2.1": "2.3.1/3.0", "24.2.0": "2.3", "24.1.0": "2.2/2.2.1", "23.2.0": "2.1", "23.1.0": "2.0",
    "21.5.0": "2.3/2.3.1", "21.4.0": "1.2 DP/2.0/2.1/2.2", "21.3.0": "1.1 DP", "21.2.0": "1.0 DP",
}

# Target names (targets/<name>.yaml) for the model strings in samples/identity/device_tree_model.txt.
BOARDS = ("jetson_tx2", "jetson_nano", "xavier_nx", "agx_xavier", "orin_nano", "orin_nx", "agx_orin")

_RELEASE = re.compile(r"^# R(\d+) \(release\), REVISION: (\d+)\.(\d+)(?:\.(\d+))?(?:,|$)")
_L4T = re.compile(r"^R?(\d+)\.(\d+)(?:\.(\d+))?$")
_SYNTHETIC_GCID = "12345678"  # jetson-containers' nv_tegra_release() writes it when the file is missing


def parse_nv_tegra_release(text):
    """/etc/nv_tegra_release -> {l4t "32.7.1", major 32, revision "7.1", board "t186ref", gcid "29689809",
    eabi, date, kernel_variant ("oot" on R36+, else None), synthetic (GCID 12345678: jetson-containers'
    stand-in file, not the board's)}. Only the first line carries the release (vendors append lines)."""
    text = _text(text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    match = _RELEASE.match(first)
    if match is None:
        raise ParseError("not an /etc/nv_tegra_release line (expected '# R<major> (release), REVISION: "
                         "<minor>.<patch>, GCID: ..., BOARD: ...'): {!r}".format(first[:200]))
    fields = {}
    for part in first.split(", ")[1:]:
        key, sep, value = part.partition(": ")
        if sep:
            fields[key.strip()] = value.strip()
    revision = "{}.{}".format(match.group(2), match.group(3)) + (".{}".format(match.group(4)) if match.group(4) else "")
    variant = None
    for line in lines[1:]:
        if line.startswith("# KERNEL_VARIANT:"):
            variant = line.split(":", 1)[1].strip()
    gcid = fields.get("GCID")
    return {
        "l4t": "{}.{}".format(match.group(1), revision),
        "major": int(match.group(1)),
        "revision": revision,
        "board": fields.get("BOARD"),
        "gcid": gcid,
        "eabi": fields.get("EABI"),
        "date": fields.get("DATE"),
        "kernel_variant": variant,
        "synthetic": gcid == _SYNTHETIC_GCID,
    }


def jetpack_for_l4t(l4t):
    """The JetPack release of an L4T version ("32.7.1" -> "4.6.1"; "R36.4.3" and "36.4" forms accepted).

    Exact table hit: that value. An L4T not in the table: the JetPack major.minor the table gives for its
    major.minor line when that is unique ("32.7.9" -> "4.6", "39.2.1" -> "7.2"), else the candidates joined
    with "/" ("36.4.5" -> "6.1/6.2": JetPack 6.1 and 6.2 both ship L4T 36.4.x, and a revision not in the
    tables cannot say which). The same rule on the major alone when the major.minor line is unknown
    ("38.3.0" -> "7.0/7.1"). None for an unknown major or a string that is not a version.
    """
    match = _L4T.match(str(l4t or "").strip())
    if match is None:
        return None
    major, minor, patch = match.group(1), match.group(2), match.group(3) or "0"
    exact = JETPACK_FOR_L4T.get("{}.{}.{}".format(major, minor, patch))
    if exact is not None:
        return exact
    for prefix in ("{}.{}.".format(major, minor), "{}.".format(major)):
        lines = set()
        for key, value in JETPACK_FOR_L4T.items():
            if key.startswith(prefix):
                for candidate in value.split("/"):
                    lines.add(".".join(candidate.split(" ")[0].split(".")[:2]))
        if lines:
            return "/".join(sorted(lines, key=lambda v: [int(p) for p in v.split(".")]))
    return None


def parse_device_tree_model(text):
    """/proc/device-tree/model -> {model: the string without its trailing NUL/whitespace, board: a target
    name from BOARDS or None (TX1, Thor, anything unknown)}.

    The string is free text and changed across L4T releases ('jetson-xavier' on 32.1, 'Jetson-AGX' on 32.2,
    'quill' on TX2 L4T 32, 'NVIDIA Orin Jetson-Small Developer Kit' on an AGX Orin devkit with JetPack 5.0
    pre-DP -- the same capture lists 12 CPUs, which only AGX Orin has). Orin is matched before Nano/AGX.
    """
    model = _text(text).replace("\x00", " ").strip()
    if not model:
        raise ParseError("/proc/device-tree/model is empty")
    if any(ord(c) < 32 for c in model):
        raise ParseError("not a device-tree model string (it has control characters or several lines): "
                         "{!r}".format(model[:200]))
    return {"model": model, "board": _board(model)}


def _board(model):
    low = model.lower()
    words = set(re.split(r"[^a-z0-9]+", low))
    if "orin" in words:
        if "agx" in words or "jetson-small" in low:
            return "agx_orin"
        if "nx" in words:
            return "orin_nx"
        if "nano" in words:
            return "orin_nano"
        return None
    if "xavier" in words:
        return "xavier_nx" if "nx" in words else "agx_xavier"
    if low == "jetson-agx":  # L4T 32.2's string for AGX Xavier (before Orin existed)
        return "agx_xavier"
    if "tx2" in words or low in ("quill", "storm", "lightning"):
        return "jetson_tx2"
    if "nano" in words:
        return "jetson_nano"
    return None


def parse_nvpmodel_q(text):
    """``nvpmodel -q`` -> {mode_name, mode_id (int, the line after the name; None if absent), is_max (the
    name starts with MAXN: MAXN, MAXN_SUPER)}. Lines before it ("NVPM WARN: ...", "NV Fan Mode:...") are
    skipped."""
    lines = [line.strip() for line in _text(text).splitlines()]
    for index, line in enumerate(lines):
        match = re.match(r"^NV Power Mode\s*:\s*(\S.*)$", line)
        if match is None:
            continue
        name = match.group(1).strip()
        mode_id = None
        rest = [rest_line for rest_line in lines[index + 1:] if rest_line]
        if rest and re.match(r"^\d+$", rest[0]):
            mode_id = int(rest[0])
        return {"mode_name": name, "mode_id": mode_id, "is_max": name.upper().startswith("MAXN")}
    raise ParseError("no 'NV Power Mode: <name>' line in nvpmodel -q output: {!r}".format(_text(text)[:200]))


_CLOCK_KEYS = ("MinFreq", "MaxFreq", "CurrentFreq")


def parse_jetson_clocks_show(text):
    """``jetson_clocks --show`` -> {soc_family, machine, online_cpus [int], cpus [{index, online, governor,
    min_khz, max_khz, current_khz}] (by index; the tool sorts cpu10 before cpu2), gpu {min_hz, max_hz,
    current_hz}|None, emc {min_hz, max_hz, current_hz, freq_override}|None, fan_speed (int)|None,
    nvpmodel_mode (str)|None, locked}.

    ``locked`` is what ``sudo jetson_clocks`` leaves: every online CPU and the GPU at their MaxFreq.
    False as soon as one online CPU or the GPU is below its max; True when all are at max and the GPU line
    is there; None when the output is cut before it can tell (no CPU lines, or no GPU line while all CPUs
    shown are at max). CPU frequencies are kHz, GPU/EMC Hz. ``Online=`` is missing on L4T R28 (TX1): the
    "Online CPUs:" list is used then.
    """
    text = _text(text)
    result = {"soc_family": None, "machine": None, "online_cpus": None, "cpus": [], "gpu": None, "emc": None,
              "fan_speed": None, "nvpmodel_mode": None, "locked": None}
    recognised = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        match = re.match(r"^SOC family:\s*(\S+)\s+Machine:\s*(.*)$", line)
        if match:
            result["soc_family"], result["machine"] = match.group(1), match.group(2).strip()
            recognised = True
            continue
        match = re.match(r"^Online CPUs:\s*([\d,\-\s]+)$", line)
        if match:
            result["online_cpus"] = _cpu_list(match.group(1), line)
            recognised = True
            continue
        match = re.match(r"^cpu(\d+):\s+(.*)$", line)
        if match:
            values = _pairs(match.group(2))
            _need(values, _CLOCK_KEYS, line)
            online = values.get("Online")
            result["cpus"].append({
                "index": int(match.group(1)),
                "online": None if online is None else online == "1",
                "governor": values.get("Governor", values.get("Gonvernor")),  # R28's jetson_clocks.sh typo
                "min_khz": int(values["MinFreq"]), "max_khz": int(values["MaxFreq"]),
                "current_khz": int(values["CurrentFreq"])})
            recognised = True
            continue
        match = re.match(r"^(GPU|EMC)\s+(MinFreq=.*)$", line)
        if match:
            values = _pairs(match.group(2))
            _need(values, _CLOCK_KEYS, line)
            clock = {"min_hz": int(values["MinFreq"]), "max_hz": int(values["MaxFreq"]),
                     "current_hz": int(values["CurrentFreq"])}
            if match.group(1) == "EMC":
                override = values.get("FreqOverride")
                clock["freq_override"] = int(override) if override is not None and override.isdigit() else None
            result[match.group(1).lower()] = clock
            recognised = True
            continue
        match = re.match(r"^Fan:\s*speed=(\d+)", line)
        if match:
            result["fan_speed"] = int(match.group(1))
            continue
        match = re.match(r"^NV Power Mode:\s*(\S.*)$", line)
        if match:
            result["nvpmodel_mode"] = match.group(1).strip()
    if not recognised:
        raise ParseError("not jetson_clocks --show output (no 'SOC family:', 'cpuN:' or 'GPU MinFreq=' line): "
                         "{!r}".format(text.strip()[:200]))
    result["cpus"].sort(key=lambda cpu: cpu["index"])
    for cpu in result["cpus"]:
        if cpu["online"] is None:
            cpu["online"] = result["online_cpus"] is None or cpu["index"] in result["online_cpus"]
    result["locked"] = _locked(result)
    return result


def _locked(result):
    online = [cpu for cpu in result["cpus"] if cpu["online"]]
    gpu = result["gpu"]
    if any(cpu["current_khz"] < cpu["max_khz"] for cpu in online):
        return False
    if gpu is not None and gpu["current_hz"] < gpu["max_hz"]:
        return False
    if not online or gpu is None:
        return None
    return True


def _pairs(text):
    return dict(re.findall(r"(\w+)=(\S+)", text))


def _need(values, keys, line):
    for key in keys:
        if not values.get(key, "").isdigit():
            raise ParseError("jetson_clocks --show line is cut or garbled (no integer {}=): {!r}".format(key, line))


def _cpu_list(spec, line):
    cpus = []
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ParseError("bad 'Online CPUs:' list: {!r}".format(line))
        cpus.extend(range(int(low), int(high) + 1) if dash else [int(low)])
    return cpus


def _text(text):
    if isinstance(text, bytes):
        return text.decode("utf-8", "replace")
    if text is None:
        return ""
    return text


# ---------------------------------------------------------------------------------------------------------------
# Which kind of machine: a Jetson, a machine with an NVIDIA GPU that is not a Jetson (a workstation, a server:
# "desktop-gpu"), or neither ("cpu"). JetPack 6 has an nvidia-smi whose GPU is "Orin (nvgpu)" (Jetson Thor:
# "NVIDIA Thor"), so a GPU name alone does not make a machine a desktop GPU.
# ---------------------------------------------------------------------------------------------------------------
KINDS = ("jetson", "desktop-gpu", "cpu")
_TEGRA_GPU = re.compile(r"nvgpu|\borin\b|\bxavier\b|\bthor\b|\btegra\b|\bgv11b\b|\bga10b\b|\bgp10b\b|\bgm20b\b", re.I)


def parse_nvidia_smi_query(text):
    """``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader`` -> [{name, driver}], one per GPU
    ("NVIDIA GeForce RTX 4090, 550.54.14"). A driver that is not loaded makes nvidia-smi print a sentence
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver ..."): ParseError."""
    gpus = []
    for raw in _text(text).splitlines():
        line = raw.strip()
        if not line:
            continue
        name, sep, driver = line.rpartition(",")
        if not sep or not name.strip() or not re.match(r"^\s*[0-9][0-9.]*\s*$", driver):
            raise ParseError("not an nvidia-smi --query-gpu=name,driver_version --format=csv,noheader line "
                             "(expected '<name>, <driver version>'): {!r}".format(line[:200]))
        gpus.append({"name": name.strip(), "driver": driver.strip()})
    if not gpus:
        raise ParseError("nvidia-smi listed no GPU")
    return gpus


def is_tegra_gpu(name):
    """Whether an nvidia-smi GPU name is a Jetson's integrated GPU ("Orin (nvgpu)")."""
    return bool(name) and _TEGRA_GPU.search(name) is not None


def machine_kind(l4t, board, gpu):
    """"jetson" (an L4T release, a Jetson board or a Tegra GPU), "desktop-gpu" (another NVIDIA GPU) or "cpu"."""
    if l4t or board or is_tegra_gpu(gpu):
        return "jetson"
    return "desktop-gpu" if gpu else "cpu"
