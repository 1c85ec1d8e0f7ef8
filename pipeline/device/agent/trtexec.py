"""What NVIDIA's trtexec prints, parsed for every format from TensorRT 7.x to 10.x
(every captured sample, with its source, is in tests/device/samples/trtexec/: PROVENANCE.md).

``parse_log(text)`` -> {tensorrt_version "8.2.1" | None, version_tag int | None, build_tag int | None,
device, compute_capability, format, passed True/False/None, command, summary | None, warnings, errors}

``format`` is one of:
  "7.x"         no "=== Performance summary ===": a "Host Latency" block of ``min: X ms (end to end Y ms)``
                lines, ``percentile: X ms at 99%``, lowercase ``throughput: X qps`` and ``walltime: X s``
  "8.0-8.2"     the summary block with one ``percentile(99%)`` and an ``End-to-End Host Latency`` line
  "8.4"         as 8.0-8.2 without the end-to-end line, one percentile
  "8.5+"        ``percentile(90%)``, ``percentile(95%)``, ``percentile(99%)`` (8.5 to 10.x print the same block)
  "header-only" a log with no summary (a build with --skipInference, a run cut short, --dumpProfile
                without --separateProfileRun on 8.4+)

``summary`` = {throughput_qps, latency_ms, end_to_end_ms, enqueue_ms, h2d_ms, gpu_compute_ms, d2h_ms,
total_host_walltime_s, total_gpu_compute_s}; each ``*_ms`` is {min, max, mean, median, p90, p95, p99}
in milliseconds (None for what the version does not print, or a value the capture cut) or None when the
line is absent. trtexec prints milliseconds everywhere except Throughput (queries/s) and the Total lines
(seconds); values may be in exponent form (``2.5563e+06``). ``latency_ms`` is trtexec's "Latency": the event
sum H2D + GPU compute + D2H per query (samples/common/sampleReporting.cpp @8.2.1: "the summation of H2D
Latency, GPU Compute Time, and D2H Latency"), comparable with the agent's ``phases_mean_ms`` summed, not
with its p50 (the host wall time per call: copies, execute and the sync). With implicit batch (``--batch=N``, TRT <= 8.x)
a query is N samples. Lines of a capture cut mid-value are kept as far as they parse (``truncated``).
A text that is not trtexec output raises ParseError naming what was expected.

Only the log is read: deploy runs trtexec to build (``trtexec_build``), never with ``--exportTimes`` or
``--exportProfile`` (the agent's own runtime times the engine, ``trt_runtime``).
"""

import re

from . import ParseError

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_PREFIX = re.compile(r"^\[[^\]]*\] \[([IWEVF])\] ?(.*)$")  # [MM/DD/YYYY-HH:MM:SS] [I] text
_AMP = re.compile(r"^&&&& (RUNNING|PASSED|FAILED|WAIVED) TensorRT\.trtexec(?: \[TensorRT v(\d+)\])?(?: \[b(\d+)\])? # (.*)$")
_STAT = re.compile(r"(min|max|mean|median|percentile\((\d+(?:\.\d+)?)%\)) = ({num})(?= ms(?:,|$))".format(num=_NUM))
_SUMMARY_LINES = (
    ("Latency", "latency_ms"), ("End-to-End Host Latency", "end_to_end_ms"), ("Enqueue Time", "enqueue_ms"),
    ("H2D Latency", "h2d_ms"), ("GPU Compute Time", "gpu_compute_ms"), ("D2H Latency", "d2h_ms"),
)
_STAT_KEYS = ("min", "max", "mean", "median", "p90", "p95", "p99")


def _decode_tag(value):
    v = int(value)
    if v >= 10000:
        return "{}.{}.{}".format(v // 10000, v // 100 % 100, v % 100)
    return "{}.{}.{}".format(v // 1000, v // 100 % 10, v % 100)


def _lines(text):
    if not isinstance(text, str):
        raise ParseError("trtexec output must be text, got {}".format(type(text).__name__))
    return [line.rstrip("\r") for line in text.splitlines() if not line.startswith("#")]


def _stats(body):
    """{min, max, mean, median, p90, p95, p99} from ``min = X ms, ..., percentile(99%) = X ms``."""
    out = dict.fromkeys(_STAT_KEYS)
    for match in _STAT.finditer(body):
        name, pct, value = match.group(1), match.group(2), float(match.group(3))
        if pct is not None:
            p = float(pct)
            name = "p{}".format(int(p)) if p == int(p) else "p{}".format(pct)
        out[name] = value
    return out


def _float(pattern, text):
    match = re.search(pattern, text)
    return float(match.group(1)) if match else None


def parse_log(text):
    lines = _lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError("empty trtexec output")
    result = {"tensorrt_version": None, "version_tag": None, "build_tag": None, "device": None,
              "compute_capability": None, "format": "header-only", "passed": None, "command": None, "summary": None,
              "warnings": [], "errors": [], "truncated": []}
    body = []  # (level, text) of the timestamped lines
    recognised = False
    for line in lines:
        amp = _AMP.match(line)
        if amp:
            recognised = True
            state, tag, build, command = amp.groups()
            if tag:
                result["version_tag"] = int(tag)
                result["tensorrt_version"] = result["tensorrt_version"] or _decode_tag(tag)
            if build:
                result["build_tag"] = int(build)
            if state == "RUNNING":
                result["command"] = command.strip()
            elif state == "PASSED":
                result["passed"] = True
            elif state == "FAILED":
                result["passed"] = False
            continue
        prefixed = _PREFIX.match(line)
        if prefixed:
            recognised = True
            body.append(prefixed.groups())
    if not recognised:
        raise ParseError("not trtexec output: no '&&&& RUNNING TensorRT.trtexec' line and no '[date] [I] ...' lines")
    for level, message in body:
        if level == "W":
            result["warnings"].append(message.strip())
        elif level in ("E", "F"):
            result["errors"].append(message.strip())
        elif message.startswith("Selected Device: "):
            result["device"] = message[len("Selected Device: "):].strip()
        elif message.startswith("Compute Capability: "):
            result["compute_capability"] = message[len("Compute Capability: "):].strip()
        elif message.startswith("TensorRT version: "):
            value = message[len("TensorRT version: "):].strip()
            if re.match(r"^\d+$", value):  # 8.0 printed getInferLibVersion(): 8001
                value = _decode_tag(value)
            if re.match(r"^\d+\.\d+\.\d+", value):
                result["tensorrt_version"] = value
    messages = [m for level, m in body if level == "I"]
    if any(m.strip() == "=== Performance summary ===" for m in messages):
        _summary(result, messages)
    elif any(m.strip() == "Host Latency" for m in messages):
        _summary_7(result, messages)
    return result


def _summary(result, messages):
    start = max(i for i, m in enumerate(messages) if m.strip() == "=== Performance summary ===")
    block = messages[start + 1:]
    summary = {"throughput_qps": None, "total_host_walltime_s": None, "total_gpu_compute_s": None}
    for _, key in _SUMMARY_LINES:
        summary[key] = None
    names = dict(_SUMMARY_LINES)
    for message in block:
        if message.startswith("==="):
            break
        if message.startswith("Throughput:"):
            summary["throughput_qps"] = _float(r"^Throughput: ({}) qps".format(_NUM), message)
            continue
        if message.startswith("Total Host Walltime:"):
            summary["total_host_walltime_s"] = _float(r"^Total Host Walltime: ({}) s".format(_NUM), message)
            continue
        if message.startswith("Total GPU Compute Time:"):
            summary["total_gpu_compute_s"] = _float(r"^Total GPU Compute Time: ({}) s".format(_NUM), message)
            continue
        name, sep, rest = message.partition(": ")
        if sep and name in names:
            summary[names[name]] = _stats(rest)
            if not re.search(r" ms$", rest.strip()):
                result["truncated"].append(name)
    if summary["throughput_qps"] is None and summary["latency_ms"] is None:
        raise ParseError("trtexec summary block without Throughput or Latency lines: the log is cut right after "
                         "'=== Performance summary ==='")
    latency = summary["latency_ms"] or {}
    if summary["end_to_end_ms"] is not None:
        result["format"] = "8.0-8.2"
    elif latency.get("p90") is not None or (summary["enqueue_ms"] or {}).get("p90") is not None:
        result["format"] = "8.5+"
    else:
        result["format"] = "8.4"
    result["summary"] = summary


def _summary_7(result, messages):
    """TRT 7.x: 'Host Latency' then min/max/mean/median/percentile lines with '(end to end Y ms)'."""
    start = max(i for i, m in enumerate(messages) if m.strip() == "Host Latency")
    latency, end_to_end = dict.fromkeys(_STAT_KEYS), dict.fromkeys(_STAT_KEYS)
    summary = {"throughput_qps": None, "total_host_walltime_s": None, "total_gpu_compute_s": None,
               "latency_ms": latency, "end_to_end_ms": end_to_end, "enqueue_ms": None, "h2d_ms": None,
               "gpu_compute_ms": None, "d2h_ms": None}
    for message in messages[start + 1:]:
        m = re.match(r"^(min|max|mean|median): ({n}) ms \(end to end ({n}) ms\)".format(n=_NUM), message)
        if m:
            latency[m.group(1)], end_to_end[m.group(1)] = float(m.group(2)), float(m.group(3))
            continue
        m = re.match(r"^percentile: ({n}) ms at (\d+)% \(end to end ({n}) ms at \d+%\)".format(n=_NUM), message)
        if m:
            key = "p" + m.group(2)
            if key in latency:
                latency[key], end_to_end[key] = float(m.group(1)), float(m.group(3))
            continue
        if message.startswith("throughput:"):
            summary["throughput_qps"] = _float(r"^throughput: ({}) qps".format(_NUM), message)
        elif message.startswith("walltime:"):
            summary["total_host_walltime_s"] = _float(r"^walltime: ({}) s".format(_NUM), message)
        elif message.strip() in ("Enqueue Time", "GPU Compute"):
            break  # blocks the captures do not carry in full; the host latency is what 7.x reports first
    if latency["mean"] is None and summary["throughput_qps"] is None:
        raise ParseError("TensorRT 7.x 'Host Latency' block without its min/max/mean lines")
    result["format"] = "7.x"
    result["summary"] = summary
