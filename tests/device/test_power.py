"""Power during a benchmark: tegrastats sampled in the background by the agent. Here a stand-in
`tegrastats` on PATH replays a real TX2 capture (two lines, VDD_IN 3140 and 5297 mW, alternating) at the
interval it is given, so the sampling, the per-window means and energy per image run for real."""

import hashlib
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from pipeline.bench.report import power_figures
from pipeline.device.client import Device

from devicekit import device_cfg, tiny_onnx

SAMPLE = Path(__file__).parent / "samples" / "tegrastats" / "tx2_jp4.txt"
RAILS = {"VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_4V0_WIFI", "VDD_IN", "VDD_SYS_CPU", "VDD_SYS_DDR"}

FAKE = """#!{python}
import os, sys, time
lines = {lines!r}
interval = int(sys.argv[sys.argv.index("--interval") + 1]) / 1000.0
with open({stdin_log!r}, "w") as f:  # what the child was given as stdin (D12: /dev/null, never the protocol)
    f.write(os.readlink("/proc/self/fd/0") if os.path.exists("/proc/self/fd/0") else "?")
i = 0
while True:
    print(lines[i % 2], flush=True)
    i += 1
    time.sleep(interval)
"""


@pytest.fixture
def tegrastats(tmp_path, monkeypatch):
    lines = [line for line in SAMPLE.read_text().splitlines() if "VDD_IN 3140/3208" in line or "VDD_IN 5297/5297" in line]
    assert len(lines) == 2
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "tegrastats"
    stdin_log = tmp_path / "tegrastats.stdin"
    script.write_text(FAKE.format(python=sys.executable, lines=lines, stdin_log=str(stdin_log)))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", "{}{}{}".format(bin_dir, os.pathsep, os.environ["PATH"]))
    return stdin_log


def _bench(tmp_path, **request):
    device = Device(device_cfg(work_dir=str(tmp_path / "w")))
    try:
        remote = device.transport.send(tiny_onnx(tmp_path / "m.onnx"))
        return device.call(dict({"command": "benchmark", "model": remote, "backend": "onnxruntime"}, **request))
    finally:
        device.transport.close()


def test_benchmark_samples_power_per_batch_size(tegrastats, tmp_path):
    answer = _bench(tmp_path, batch_sizes=[1, 2], warmup=0, iterations=1, duration_s=0.2, power=True,
                    power_interval_ms=20)
    assert answer["power_available"] is True
    for entry in answer["results"]:
        power = entry["power"]
        assert power["unparsed"] == 0
        assert power["board_power_source"] == "VDD_IN"
        assert 3140 <= power["board_mw"] <= 5297  # the mean of the two captured values, whatever the mix
        assert set(power["rails_mw"]) == RAILS


def test_power_window_is_the_timed_loop_with_at_least_20_samples(tegrastats, tmp_path):
    """D6: one timed call per batch size would give a window of 0-1 samples; the loop is extended until the
    window lasts 20 intervals and holds 20 samples, and the window (seconds, samples) is in the answer."""
    answer = _bench(tmp_path, batch_sizes=[1, 2], warmup=3, iterations=1, power=True, power_interval_ms=20)
    for entry in answer["results"]:
        power, loop = entry["power"], entry["loop"]
        assert power["samples"] >= 20 and power["min_samples"] == 20 and power["interval_ms"] == 20
        assert power["min_window_s"] == pytest.approx(0.4)
        assert loop["seconds"] >= 0.4 and loop["calls"] > 1  # extended past the one timed call
        assert loop["seconds"] <= power["seconds"] < loop["seconds"] + 0.2  # the window is the loop, not the warm-up
        assert len(entry["times_ms"]["total_ms"]) == 1


def test_tegrastats_child_gets_no_stdin(tegrastats, tmp_path):
    """D12: the child must not inherit the agent's stdin (the protocol pipe)."""
    _bench(tmp_path, batch_sizes=[1], warmup=0, iterations=1, power=True, power_interval_ms=20)
    assert tegrastats.read_text() == "/dev/null"


def test_no_tegrastats_no_power(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    answer = _bench(tmp_path, batch_sizes=[1], warmup=0, iterations=3, power=True)
    assert answer["power_available"] is False and "power" not in answer["results"][0]


def test_board_and_host_feed_the_same_pixels(tmp_path):
    """One feed generator: the same request through the transport and in this process digests the same."""
    import numpy as np

    from pipeline.device.agent import commands

    model = tiny_onnx(tmp_path / "h.onnx")
    request = {"command": "benchmark", "backend": "onnxruntime", "batch_sizes": [1, 3], "warmup": 0, "iterations": 2,
               "seed": 7, "input_range": [0.0, 255.0]}
    board = _bench(tmp_path, **request)
    try:
        host = commands.benchmark(dict(request, model=str(model), providers=["CPUExecutionProvider"]))
    finally:
        commands.forget_models()
    digests = [e["feed_sha256"] for e in board["results"]]
    assert digests == [e["feed_sha256"] for e in host["results"]]
    pixels = np.random.RandomState(7).uniform(0.0, 255.0, size=(3, 4, 4, 3)).astype(np.float32)
    assert digests[1] == hashlib.sha256(pixels.tobytes()).hexdigest()


def test_energy_per_image_is_mean_power_times_loop_wall_time():
    """D6: energy = board power x the loop's wall seconds / its images (not the summed per-call GPU time)."""
    power = {"samples": 25, "unparsed": 0, "seconds": 2.01, "rails_mw": {"VDD_IN": 5000.0}, "board_mw": 5000.0,
             "board_power_source": "VDD_IN", "interval_ms": 100, "min_samples": 20}
    out = power_figures(power, {"calls": 250, "seconds": 2.0}, batch_size=4)
    assert out["energy_per_image_mj"] == pytest.approx(10.0)  # 5 W for 2 s over 1000 images = 10 mJ each
    assert out["window_s"] == 2.01 and out["samples"] == 25 and "warning" not in out
    assert "energy_per_image_mj" not in power_figures(dict(power, samples=0), {"calls": 250, "seconds": 2.0}, 4)
    assert "5 tegrastats samples" in power_figures(dict(power, samples=5), {"calls": 250, "seconds": 2.0}, 4)["warning"]


ORIN_NANO = Path(__file__).parent / "samples" / "tegrastats" / "orin-nano_jp6.txt"


def _orin_inference_lines():
    """The capture's three lines of TensorRT inference (GR3D 99 %, GPU 1010/1005/1010 MHz), as root prints them."""
    lines = [line for line in ORIN_NANO.read_text().splitlines() if "GR3D_FREQ 99%" in line]
    assert len(lines) == 3
    return lines


def test_the_window_keeps_the_hottest_reading_and_the_clocks_it_saw():
    """Issue 28 item 3: tegrastats' temperatures and clocks recorded per window (old: power only)."""
    from pipeline.device.agent.power import summarize_window
    from pipeline.device.agent.tegrastats import parse_line

    lines = _orin_inference_lines()
    window = summarize_window(lines, 0.3)
    temps = [parse_line(line)["temps_c"] for line in lines]
    assert window["temps_max_c"] == {name: max(t[name] for t in temps) for name in temps[0]}
    assert set(window["temps_max_c"]) == {"cpu", "soc2", "soc0", "gpu", "tj", "soc1"}
    assert window["clocks_mhz"] == {"gpu": {"min": 1005, "max": 1010}, "emc": {"min": 3199, "max": 3199}}
    assert window["samples"] == 3 and window["board_power_source"] == "VDD_IN"


def test_without_root_tegrastats_prints_no_mhz_and_the_window_no_clocks():
    from pipeline.device.agent.power import summarize_window

    lines = [line for line in SAMPLE.read_text().splitlines() if "VDD_IN 3140/3208" in line]  # non-sudo TX2
    window = summarize_window(lines, 0.1)
    assert "clocks_mhz" not in window and window["temps_max_c"]["GPU"] == 41.0


def test_the_sampler_window_reads_tegrastats_clocks_and_temperatures(tegrastats, tmp_path):
    """PowerSampler.window itself (the agent's code path): the stand-in replays a non-sudo TX2 line (no MHz)
    and a sudo one (EMC 1866 MHz, GR3D 114 MHz) in turn; the window of at least 20 samples holds both."""
    answer = _bench(tmp_path, batch_sizes=[1], warmup=0, iterations=1, duration_s=0.2, power=True,
                    power_interval_ms=20)
    power = answer["results"][0]["power"]
    assert power["temps_max_c"]["GPU"] == 41.0 and power["temps_max_c"]["PMIC"] == 100.0
    assert power["clocks_mhz"] == {"gpu": {"min": 114, "max": 114}, "emc": {"min": 1866, "max": 1866}}


def _night(folder, day, median, lines):
    """A night (reportkit's run folder) whose benchmark row carries the power figures of ``lines`` as the agent's
    window and the host's power_figures make them, read back through the records schema."""
    from pipeline.device.agent.power import summarize_window
    from reportkit import edit_json, make_run

    folder = make_run(folder, medians={1: median}, spread=0.02, n=1000, seed=day,
                      finished="2026-11-{:02d}T02:00:00+0000".format(day))
    figures = power_figures(summarize_window(lines, 0.3), {"calls": 300, "seconds": 0.3}, 1)

    def put(bench):
        for row in bench["results"]:
            row["power"] = figures
    edit_json(folder / "benchmark" / "benchmark.json", put)
    return folder


def test_a_night_whose_gpu_clock_moved_is_throttled_at_the_gate(tmp_path):
    """End to end, names included: tegrastats lines -> the agent's window -> benchmark.json's power (records)
    -> deploy compare's "throttled" verdict. The real inference lines (1005-1010 MHz, within 3 %) are judged;
    the same lines with one sample's GPU clock lowered to 612 MHz are flagged, not judged, though 30 % slower."""
    import json

    from pipeline.cli import main

    lines = _orin_inference_lines()
    hot = lines[:1] + [lines[1].replace("GR3D_FREQ 99%@[1005]", "GR3D_FREQ 99%@[612]")] + lines[2:]
    assert hot[1] != lines[1]
    baseline = _night(tmp_path / "baseline", 1, 4.0, lines)
    verdicts = {}
    for name, day, median, window in (("steady", 2, 4.0, lines), ("hot", 3, 5.2, hot)):
        night = _night(tmp_path / "history" / name, day, median, window)
        code = main(["compare", str(baseline), str(night), "--format", "json", "-o", str(night / "comparison.json")])
        verdicts[name] = (code, json.loads((night / "comparison.json").read_text()))
    code, steady = verdicts["steady"]
    assert code == 0 and steady["verdict"] == "pass"
    code, result = verdicts["hot"]
    assert code == 0 and result["verdict"] == "throttled" and result["regressions"] == 0
    assert "the GPU clock moved from 1010 to 612 MHz" in result["reasons"][0]
    bench = json.loads((tmp_path / "history" / "hot" / "benchmark" / "benchmark.json").read_text())
    assert bench["results"][0]["power"]["clocks_mhz"]["gpu"] == {"min": 612, "max": 1010}


def test_the_records_schema_refuses_a_clock_that_is_not_a_number(tmp_path):
    from pipeline import records
    from pipeline.errors import DeployError

    night = _night(tmp_path / "n", 1, 4.0, _orin_inference_lines())
    path = night / "benchmark" / "benchmark.json"
    records.read(path, "benchmark")  # as written: taken
    data = json.loads(path.read_text())
    data["results"][0]["power"]["clocks_mhz"]["gpu"]["min"] = "fast"
    path.write_text(json.dumps(data))
    with pytest.raises(DeployError, match="clocks_mhz"):
        records.read(path, "benchmark")
