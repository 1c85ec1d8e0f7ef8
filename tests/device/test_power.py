"""Power during a benchmark: tegrastats sampled in the background by the agent. Here a stand-in
`tegrastats` on PATH replays a real TX2 capture (two lines, VDD_IN 3140 and 5297 mW, alternating) at the
interval it is given, so the sampling, the per-window means and energy per image run for real."""

import hashlib
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
