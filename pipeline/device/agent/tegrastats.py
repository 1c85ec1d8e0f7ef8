"""tegrastats lines -> plain dicts, and the power/energy figures a benchmark window needs.

Runs on the board (Python 3.6, standard library only). The formats are those of the real captures in
tests/device/samples/tegrastats/ (PROVENANCE.md there documents every field): fields are found by name,
never by position, because the field set differs per board, JetPack and uid (root adds EMC/GR3D MHz).

Handled forms:
- optional leading timestamp ``MM-DD-YYYY HH:MM:SS`` (JetPack 5.0-era Orin, JP6, JP7), kept as printed;
- ``RAM u/tMB (lfb NxZMB)``, optional ``SWAP u/tMB (cached cMB)`` and ``IRAM u/tkB(lfb fkB)``;
- ``CPU [a%@MHz,off,...]`` and the L4T R28 form ``cpu [a%,b%]@MHz`` (one shared frequency);
- ``EMC_FREQ x%`` / ``x%@MHz`` and R28 ``EMC x%@MHz``;
- ``GR3D_FREQ x%``, ``x%@MHz``, ``x%@[MHz,...]`` (one entry per GPC), ``@[MHz,...]`` without a load (Thor);
  R28 ``GR3D x%@MHz``; ``GR3D2_FREQ`` (second GPC on JetPack 5.0-era AGX Orin) goes to ``gpu2``;
- temperatures ``name@45.5C`` and JP7 ``name@52.968C/52.968C`` (the first value is kept);
- rails ``NAME now/avg`` with or without ``mW``, and JP7's ``now/avg/x`` (the third value's meaning is not
  documented in any source found: it is dropped).

Choices (documented because a reader of the numbers needs them):
- GPU frequency with a bracket list: ``freq_mhz`` is the FIRST entry; the whole list is in ``gpc_freqs_mhz``
  (every captured multi-GPC line has equal entries; jtop takes the max instead).
- Temperatures of -256C (and below) mean "sensor not available" (AGX Orin CV0/CV1/CV2/GPU) and are skipped.
  PMIC@100C / PMIC@50C on R32 boards is a fixed value printed by tegrastats, kept as printed.
- Rails named ``NC`` ("not connected", printed twice at 0mW on AGX Orin) are skipped.
- A known field that is present but cut or garbled (``RAM 1690/38``, ``CPU [11%@2035,of``, ``GR3D_FREQ $X%``)
  raises ParseError; an unknown token is ignored, so a line cut between two fields parses as far as it goes.
"""

import re

from . import ParseError

_TIMESTAMP = re.compile(r"(\d{1,2}-\d{1,2}-\d{4} \d{1,2}:\d{2}:\d{2})")
_RAM = re.compile(r"(?<![\w])RAM (\d+)/(\d+)([kMG]?)B(?: ?\(lfb (\d+)x(\d+)([kMG]?)B\))?")
_SWAP = re.compile(r"(?<![\w])SWAP (\d+)/(\d+)([kMG]?)B(?: ?\(cached (\d+)([kMG]?)B\))?")
_IRAM = re.compile(r"(?<![\w])IRAM (\d+)/(\d+)([kMG]?)B(?: ?\(lfb (\d+)([kMG]?)B\))?")
_CPU = re.compile(r"(?<![\w])CPU \[([^\]\s]*)\]")
_CPU_R28 = re.compile(r"(?<![\w])cpu \[([^\]\s]*)\](?:@(\d+))?")
_CPU_ENTRY = re.compile(r"^(\d+)%(?:@(\d+))?$")
_LOAD_FREQ = re.compile(r"^(?:(\d+)%)?(?:@(?:(\d+)|\[(\d+(?:,\d+)*)\]))?$")
_TEMP = re.compile(r"^([A-Za-z][\w]*)@(-?\d+(?:\.\d+)?)C(?:/(-?\d+(?:\.\d+)?)C)?$")
_RAIL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_RAIL_VALUE = re.compile(r"^(\d+)(?:mW)?/(\d+)(?:mW)?(?:/(\d+)(?:mW)?)?$")

_NOT_RAILS = ("RAM", "SWAP", "IRAM", "NC")
_ABSENT_SENSOR_C = -256.0

# Rails that measure the whole module's input, in order of preference (see input_rail).
INPUT_RAILS = ("VDD_IN", "POM_5V_IN")


def parse_line(line):
    """One tegrastats line -> dict (keys in the module docstring and below); ParseError when it has no
    RAM field (not tegrastats) or a known field is cut/garbled.

    Keys: timestamp (str|None), ram_mb {used,total}, swap_mb {used,total,cached}|None, iram_kb {used,total}|None,
    cpus [{online, load_pct|None, freq_mhz|None}], gpu {load_pct|None, freq_mhz|None, gpc_freqs_mhz}|None,
    gpu2 (same, GR3D2_FREQ)|None, emc {load_pct|None, freq_mhz|None}|None, temps_c {name: float},
    rails_mw {name: {"now": int, "avg": int}}.
    """
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    text = line.strip()
    ram = _RAM.search(text)
    if ram is None:
        if re.search(r"(?<![\w])RAM\b", text):
            raise ParseError("tegrastats RAM field is cut or garbled (expected 'RAM used/totalMB (lfb NxSMB)'): "
                             "{!r}".format(_short(text)))
        raise ParseError("not a tegrastats line (no 'RAM used/totalMB' field): {!r}".format(_short(text)))
    spans = [ram.span()]
    stamp = _TIMESTAMP.search(text, 0, ram.start())
    result = {
        "timestamp": stamp.group(1) if stamp else None,
        "ram_mb": {"used": _mb(ram.group(1), ram.group(3)), "total": _mb(ram.group(2), ram.group(3))},
        "swap_mb": None, "iram_kb": None, "cpus": [], "gpu": None, "gpu2": None, "emc": None,
        "temps_c": {}, "rails_mw": {},
    }
    if stamp:
        spans.append(stamp.span())

    swap = _SWAP.search(text)
    if swap:
        spans.append(swap.span())
        result["swap_mb"] = {"used": _mb(swap.group(1), swap.group(3)), "total": _mb(swap.group(2), swap.group(3)),
                             "cached": _mb(swap.group(4), swap.group(5)) if swap.group(4) is not None else None}
    elif re.search(r"(?<![\w])SWAP\b", text):
        raise ParseError("tegrastats SWAP field is cut or garbled: {!r}".format(_short(text)))

    iram = _IRAM.search(text)
    if iram:
        spans.append(iram.span())
        result["iram_kb"] = {"used": _kb(iram.group(1), iram.group(3)), "total": _kb(iram.group(2), iram.group(3))}

    cpu = _CPU.search(text)
    legacy = None if cpu else _CPU_R28.search(text)
    if cpu:
        spans.append(cpu.span())
        result["cpus"] = _cpus(cpu.group(1), None, text)
    elif legacy:
        spans.append(legacy.span())
        result["cpus"] = _cpus(legacy.group(1), legacy.group(2), text)
    elif re.search(r"(?<![\w])(?:CPU|cpu) \[", text):
        raise ParseError("tegrastats CPU list is cut or garbled (expected 'CPU [a%@MHz,...]'): {!r}".format(
            _short(text)))

    rest = _blank(text, spans).split()
    i = 0
    while i < len(rest):
        token = rest[i]
        following = rest[i + 1] if i + 1 < len(rest) else None
        if token in ("EMC_FREQ", "EMC", "GR3D_FREQ", "GR3D", "GR3D2_FREQ"):
            value = _load_freq(token, following, text)
            if token.startswith("EMC"):
                result["emc"] = {"load_pct": value["load_pct"], "freq_mhz": value["freq_mhz"]}
            else:
                result["gpu2" if token == "GR3D2_FREQ" else "gpu"] = value
            i += 2
            continue
        temp = _TEMP.match(token)
        if temp:
            celsius = float(temp.group(2))
            if celsius > _ABSENT_SENSOR_C:
                result["temps_c"][temp.group(1)] = celsius
            i += 1
            continue
        if following is not None and _RAIL_NAME.match(token):
            rail = _RAIL_VALUE.match(following)
            if rail:
                if token not in _NOT_RAILS and token not in result["rails_mw"]:
                    result["rails_mw"][token] = {"now": int(rail.group(1)), "avg": int(rail.group(2))}
                i += 2
                continue
        i += 1
    return result


def input_rail(rails):
    """The rail that measures the whole module's input power, or None when the board has none.

    ``rails`` is any mapping or iterable of rail names (parse_line's rails_mw, or a dict of means).
    VDD_IN (TX2, Xavier NX, Orin Nano/NX) and POM_5V_IN (Nano) are the module input: on every capture they
    exceed the sum of the other rails. AGX Xavier (GPU CPU SOC CV VDDRQ SYS5V) and AGX Orin (VDD_GPU_SOC
    VDD_CPU_CV VIN_SYS_5V0 VDDQ_VDD2_1V8AO) have NO input rail: SYS5V / VIN_SYS_5V0 are the 5 V system
    (I/O) rail, not the total -- the captures show it (AGX Orin JP7.2: VIN_SYS_5V0 5500 mW while VDD_GPU_SOC
    + VDD_CPU_CV = 8407 mW; AGX Xavier: SYS5V 3306 < GPU+CPU+SOC 4017), and rbonghi/jetson_stats#51/#344
    (citing NVIDIA's forum) say the module total there is the SUM of all rails. Use board_power_mw for that.
    """
    names = set(rails)
    for name in INPUT_RAILS:
        if name in names:
            return name
    return None


def board_power_mw(rails):
    """(mW, source) for one sample: the input rail's value when the board has one (source = its name), else
    the sum of all rails (source "sum_of_rails": the module total on AGX Xavier / AGX Orin, whose rails are
    disjoint; it leaves out the carrier board). ``rails`` maps a name to {"now": mW} or to a number.
    (None, None) when there are no rails (TX1, a TX2 4GB-class board, Thor lines)."""
    if not rails:
        return None, None
    name = input_rail(rails)
    if name is not None:
        return _now(rails[name]), name
    return sum(_now(v) for v in rails.values()), "sum_of_rails"


def summarize(lines, interval_ms):
    """Many tegrastats lines (a str or an iterable of str) -> one dict.

    Blank lines and lines starting with '#' are skipped; a line that fails to parse (a log's cut last line)
    is counted in ``unparsed``; ParseError when no line parses. Keys: samples, unparsed, interval_ms,
    duration_s (samples x interval: tegrastats' own timestamps have 1 s resolution), first_timestamp,
    last_timestamp, rails_mean_mw {rail: mean of "now"}, gpu_load_mean_pct (None when no line has a load),
    temps_max_c {sensor: max}, input_rail, board_mean_mw, board_power_source (see board_power_mw).
    Energy is worked out in one place, ``energy_per_inference_mj``, from a benchmark loop's wall time.
    """
    if isinstance(lines, (str, bytes)):
        lines = (lines.decode("utf-8", "replace") if isinstance(lines, bytes) else lines).splitlines()
    seen, unparsed, first_error = 0, 0, None
    parsed = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        seen += 1
        try:
            parsed.append(parse_line(line))
        except ParseError as e:
            unparsed += 1
            if first_error is None:
                first_error = str(e)
    if not parsed:
        raise ParseError("no tegrastats line among {} non-comment line(s){}".format(
            seen, ": " + first_error if first_error else ""))
    sums, counts, temps, loads, board = {}, {}, {}, [], []
    source = None
    for sample in parsed:
        for name, value in sample["rails_mw"].items():
            sums[name] = sums.get(name, 0) + value["now"]
            counts[name] = counts.get(name, 0) + 1
        gpu = sample["gpu"]
        if gpu is not None and gpu["load_pct"] is not None:
            loads.append(gpu["load_pct"])
        for name, celsius in sample["temps_c"].items():
            if name not in temps or celsius > temps[name]:
                temps[name] = celsius
        mw, where = board_power_mw(sample["rails_mw"])
        if mw is not None:
            board.append(mw)
            source = source or where
    duration_s = len(parsed) * float(interval_ms) / 1000.0
    rails_mean = {name: sums[name] / float(counts[name]) for name in sums}
    board_mean = sum(board) / float(len(board)) if board else None
    return {
        "samples": len(parsed),
        "unparsed": unparsed,
        "interval_ms": interval_ms,
        "duration_s": duration_s,
        "first_timestamp": parsed[0]["timestamp"],
        "last_timestamp": parsed[-1]["timestamp"],
        "rails_mean_mw": rails_mean,
        "gpu_load_mean_pct": sum(loads) / float(len(loads)) if loads else None,
        "temps_max_c": temps,
        "input_rail": input_rail(rails_mean),
        "board_mean_mw": board_mean,
        "board_power_source": source,
    }


def energy_per_inference_mj(mean_mw, duration_s, inferences):
    """Energy of one inference in mJ: mean power (mW) x wall time (s) / inferences (mW x s = mJ)."""
    if inferences <= 0:
        raise ValueError("inferences must be > 0, got {}".format(inferences))
    if duration_s < 0 or mean_mw < 0:
        raise ValueError("mean_mw and duration_s must be >= 0, got {} and {}".format(mean_mw, duration_s))
    return float(mean_mw) * float(duration_s) / float(inferences)


def _cpus(body, shared_freq, text):
    cpus = []
    for entry in body.split(","):
        if entry == "off":
            cpus.append({"online": False, "load_pct": None, "freq_mhz": None})
            continue
        match = _CPU_ENTRY.match(entry)
        if match is None:
            raise ParseError("tegrastats CPU entry {!r} is not 'load%@MHz', 'load%' or 'off': {!r}".format(
                entry, _short(text)))
        freq = match.group(2) or shared_freq
        cpus.append({"online": True, "load_pct": int(match.group(1)), "freq_mhz": int(freq) if freq else None})
    return cpus


def _load_freq(name, token, text):
    match = _LOAD_FREQ.match(token or "")
    if not token or match is None or not (match.group(1) or match.group(2) or match.group(3)):
        raise ParseError("tegrastats {} value {!r} is not 'x%', 'x%@MHz' or 'x%@[MHz,...]': {!r}".format(
            name, token, _short(text)))
    freqs = [int(f) for f in match.group(3).split(",")] if match.group(3) else []
    if match.group(2):
        freqs = [int(match.group(2))]
    return {"load_pct": int(match.group(1)) if match.group(1) else None, "freq_mhz": freqs[0] if freqs else None,
            "gpc_freqs_mhz": freqs}


def _blank(text, spans):
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _mb(value, unit):
    value = int(value)
    if unit == "k":
        return value / 1024.0
    if unit == "G":
        return value * 1024
    return value


def _kb(value, unit):
    value = int(value)
    if unit == "M":
        return value * 1024
    if unit == "G":
        return value * 1024 * 1024
    return value


def _now(value):
    return value["now"] if isinstance(value, dict) else value


def _short(text, limit=200):
    return text if len(text) <= limit else text[:limit] + "..."
