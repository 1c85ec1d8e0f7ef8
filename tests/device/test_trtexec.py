"""The trtexec log parser on every captured log (tests/device/samples/trtexec/, copied from
public issues, PRs and repositories: PROVENANCE.md names each), with the values each capture shows."""

import json
from pathlib import Path

import pytest

from pipeline.device.agent import ParseError
from pipeline.device.agent.trtexec import parse_log

SAMPLES = Path(__file__).parent / "samples" / "trtexec"
LOGS = sorted(SAMPLES.glob("*.log"))


def test_every_capture_is_here():
    assert len(LOGS) == 11 and not list(SAMPLES.glob("*.json"))  # deploy reads no --exportTimes/--exportProfile JSON


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_every_log_parses_to_json(path):
    result = parse_log(path.read_text())
    json.dumps(result, allow_nan=False)
    assert result["format"] in ("7.x", "8.0-8.2", "8.4", "8.5+", "header-only")
    if result["summary"] is not None:
        latency = result["summary"]["latency_ms"]
        assert latency["min"] <= latency["median"] <= latency["max"]


# file -> (format, TensorRT, device, passed, throughput qps, latency mean ms, latency p99 ms)
EXPECTED = {
    "7.1.3_jetson-agx-xavier.log": ("7.x", None, None, None, 145.5, 6.84532, 8.90259),
    "7.x_trace-format_gpu-unknown.log": ("7.x", None, None, None, 0.0, 1.66069, 1.67065),
    "8.0.1_jetson-nano.log": ("8.0-8.2", "8.0.1", "NVIDIA Tegra X1", True, 24.5583, 40.6326, 40.8591),
    "8.2-format_jetson-xavier-nx.log": ("8.0-8.2", None, None, None, 27207.0, 0.573891, 0.587769),
    "8.4.0_jetson-agx-xavier.log": ("8.4", "8.4.0", None, True, 41087.7, 0.402238, 0.420288),
    "8.5.2_jetson-agx-xavier.log": ("8.5+", None, None, None, 43073.6, 0.386481, 0.404907),
    "8.5-format_jetson-agx-orin-dla.log": ("8.5+", None, None, None, 0.406047, 2241.14, 2241.41),
    "10.16.0_rtx6000ada.log": ("8.5+", "10.16.0", "NVIDIA RTX 6000 Ada Generation", True, 18392.0, 0.0431899, 0.144043),
    "10.16.0_rtx6000ada_dumpProfile.log": ("header-only", "10.16.0", None, True, None, None, None),
    "10.16.2_jetson-orin-nx.header.log": ("header-only", "10.16.2", "Orin", None, None, None, None),
    "10.3.0_jetson-orin-nx.header.log": ("header-only", "10.3.0", None, None, None, None, None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_values_of_each_capture(name):
    fmt, version, device, passed, qps, mean, p99 = EXPECTED[name]
    result = parse_log((SAMPLES / name).read_text())
    assert (result["format"], result["tensorrt_version"], result["device"], result["passed"]) == (fmt, version, device, passed)
    if qps is None:
        assert result["summary"] is None
    else:
        s = result["summary"]
        assert (s["throughput_qps"], s["latency_ms"]["mean"], s["latency_ms"]["p99"]) == (qps, mean, p99)


def test_version_tags_and_build_tags():
    nano = parse_log((SAMPLES / "8.0.1_jetson-nano.log").read_text())
    assert nano["version_tag"] == 8001 and nano["compute_capability"] == "5.3"
    orin = parse_log((SAMPLES / "10.16.2_jetson-orin-nx.header.log").read_text())
    assert orin["version_tag"] == 101602 and orin["build_tag"] == 10 and orin["compute_capability"] == "8.7"
    assert orin["command"].startswith("/usr/src/tensorrt/bin/trtexec --onnx=/videos/tinyyolov2-8.onnx")


def test_8_x_blocks_and_totals():
    s = parse_log((SAMPLES / "8.2-format_jetson-xavier-nx.log").read_text())["summary"]
    assert s["end_to_end_ms"]["mean"] == 0.586663 and s["enqueue_ms"]["p99"] == 0.182129
    assert s["h2d_ms"]["median"] == 0.0065918 and s["d2h_ms"]["max"] == 0.00341797
    assert s["gpu_compute_ms"]["mean"] == 0.564682
    assert (s["total_host_walltime_s"], s["total_gpu_compute_s"]) == (3.00158, 2.88214)
    full = parse_log((SAMPLES / "10.16.0_rtx6000ada.log").read_text())
    assert full["summary"]["latency_ms"]["p90"] == 0.0480957
    assert any(w.startswith("* GPU compute time is unstable, with coefficient of variance = 62.0202%") for w in full["warnings"])


def test_a_capture_cut_mid_value_keeps_what_parses():
    result = parse_log((SAMPLES / "8.5.2_jetson-agx-xavier.log").read_text())
    assert "Enqueue Time" in result["truncated"]
    enqueue = result["summary"]["enqueue_ms"]
    assert enqueue["p95"] == 0.22229 and enqueue["p99"] is None  # the poster's copy ends "percentile(99%) = 0.2551s"


@pytest.mark.parametrize("text", ["", "   \n", "hello world\nnot trtexec\n", "\x00\x01binary"])
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_log(text)


def test_a_log_cut_right_after_the_summary_header_is_a_parse_error():
    text = (SAMPLES / "8.2-format_jetson-xavier-nx.log").read_text()
    cut = text[:text.index("=== Performance summary ===") + len("=== Performance summary ===")] + "\n"
    with pytest.raises(ParseError, match="cut right after"):
        parse_log(cut)
