"""Power during a benchmark: tegrastats sampled in the background by the agent. Here a stand-in
`tegrastats` on PATH replays a real TX2 capture (two lines, VDD_IN 3140 and 5297 mW, alternating)
so the sampling, the per-window means and energy per image run for real."""

import os
import stat
import sys
from pathlib import Path

import pytest

from pipeline.device.benchmark import _energy
from pipeline.device.client import Device

from devicekit import device_cfg, tiny_onnx

SAMPLE = Path(__file__).parent / "samples" / "tegrastats" / "tx2_jp4.txt"


@pytest.fixture
def tegrastats(tmp_path, monkeypatch):
    lines = [line for line in SAMPLE.read_text().splitlines() if "VDD_IN 3140/3208" in line or "VDD_IN 5297/5297" in line]
    assert len(lines) == 2
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "tegrastats"
    script.write_text("#!{}\nimport sys, time\nlines = {!r}\ni = 0\nwhile True:\n    print(lines[i % 2], flush=True)\n"
                      "    i += 1\n    time.sleep(0.02)\n".format(sys.executable, lines))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", "{}{}{}".format(bin_dir, os.pathsep, os.environ["PATH"]))


def test_benchmark_samples_power_per_batch_size(tegrastats, tmp_path):
    device = Device(device_cfg(work_dir=str(tmp_path / "w")))
    try:
        remote = device.transport.send(tiny_onnx(tmp_path / "m.onnx"))
        answer = device.call({"command": "benchmark", "model": remote, "backend": "onnxruntime", "batch_sizes": [1, 2],
                              "warmup": 0, "iterations": 1, "duration_s": 0.5, "power": True})
    finally:
        device.transport.close()
    assert answer["power_available"] is True
    for entry in answer["results"]:
        power = entry["power"]
        assert power["samples"] >= 5 and power["unparsed"] == 0
        assert power["board_power_source"] == "VDD_IN"
        assert 3140 <= power["board_mw"] <= 5297  # the mean of the two captured values, whatever the mix
        assert set(power["rails_mw"]) == {"VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_4V0_WIFI", "VDD_IN", "VDD_SYS_CPU", "VDD_SYS_DDR"}


def test_no_tegrastats_no_power(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    device = Device(device_cfg(work_dir=str(tmp_path / "w")))
    try:
        remote = device.transport.send(tiny_onnx(tmp_path / "m.onnx"))
        answer = device.call({"command": "benchmark", "model": remote, "backend": "onnxruntime", "batch_sizes": [1],
                              "warmup": 0, "iterations": 3, "power": True})
    finally:
        device.transport.close()
    assert answer["power_available"] is False and "power" not in answer["results"][0]


def test_energy_per_image():
    power = {"samples": 10, "rails_mw": {"VDD_IN": 5000.0}, "board_mw": 5000.0, "board_power_source": "VDD_IN"}
    out = _energy(power, busy_s=2.0, images=1000)
    assert out["energy_per_image_mj"] == pytest.approx(10.0)  # 5 W for 2 s over 1000 images = 10 mJ each
    assert "energy_per_image_mj" not in _energy(dict(power, samples=0), 2.0, 1000)
