"""The probe on this machine (no Jetson: facts missing, each said) and on a board root assembled from
captured files (a TX2 on L4T 32.7.1), through the agent and through `deploy device probe`."""

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from pipeline.device.client import Device

from conftest import ROOT, deploy
from devicekit import device_cfg

SAMPLES = Path(__file__).parent / "samples" / "identity"


def _verbatim(name):
    return [line for line in (SAMPLES / name).read_text().splitlines() if not line.startswith("##")]


def _block(name, first, stop):
    """The captured block from the line starting with ``first`` up to (not including) the next ``stop`` line."""
    lines = _verbatim(name)
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(stop)), len(lines))
    return "\n".join(lines[start:end]) + "\n"


def _script(path, text, code=0):
    path.write_text("#!/bin/sh\ncat <<'EOF'\n{}EOF\nexit {}\n".format(text, code))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def tx2(tmp_path, monkeypatch):
    """A TX2's identity: /etc/nv_tegra_release (R32.7.1, t186ref), /proc/device-tree/model ('quill' + NUL),
    nvpmodel -q (MAXN) and jetson_clocks --show (the TX2 capture: GPU at its minimum, not locked)."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "nv_tegra_release").write_text(_block("nv_tegra_release.txt", "# R32 (release), REVISION: 7.1, GCID: 29689809", "#"))
    (root / "proc" / "device-tree").mkdir(parents=True)
    (root / "proc" / "device-tree" / "model").write_bytes(b"quill\x00")
    (root / "proc" / "meminfo").write_text("MemTotal:        8038432 kB\nMemFree:         5123456 kB\nMemAvailable:    6123456 kB\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "nvpmodel", _block("nvpmodel_q.txt", "NV Power Mode: MAXN", "#"))
    _script(bin_dir / "jetson_clocks", _block("jetson_clocks_show.txt", "SOC family:tegra186", "SOC family"))
    monkeypatch.setenv("PATH", "{}{}{}".format(bin_dir, os.pathsep, os.environ["PATH"]))
    monkeypatch.setenv("DEPLOY_DEVICE_ROOT", str(root))
    return root


def test_probe_of_this_machine_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.delenv("DEPLOY_DEVICE_ROOT", raising=False)
    if Path("/etc/nv_tegra_release").exists():
        pytest.skip("this machine is a Jetson")
    facts = Device(device_cfg(work_dir=str(tmp_path / "w"))).probe()
    assert facts["board"] is None and facts["l4t"] is None and facts["tensorrt"] is None
    assert facts["python"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert facts["onnxruntime"] and facts["numpy"]
    assert any("not a Jetson" in p for p in facts["problems"])
    assert facts["memory_mb"]["total"] > 0


def test_probe_of_a_captured_tx2(tx2, tmp_path):
    facts = Device(device_cfg(work_dir=str(tmp_path / "w"))).probe()
    assert facts["l4t"] == "32.7.1" and facts["jetpack"].startswith("4.6")
    assert facts["model"] == "quill" and facts["board"] == "jetson_tx2"
    assert facts["power_mode"]["mode_name"] == "MAXN" and facts["power_mode"]["mode_id"] == 0
    assert facts["clocks_locked"] is False  # the capture's GPU runs at 114.75 MHz of 1134.75
    assert facts["memory_mb"] == {"total": 7850, "available": 5979}
    json.dumps(facts)


def test_deploy_device_probe_matches_the_target_file(tx2, tmp_path):
    res = deploy("device", "probe", ROOT / "configs" / "jetson_tx2.yaml", "--set", "device.transport=local",
                 "--set", "device.python={}".format(sys.executable), "--set", "device.work_dir={}".format(tmp_path / "w"))
    assert res.returncode == 0, res.stderr
    assert "board      jetson_tx2" in res.stdout and "matches targets/jetson_tx2.yaml" in res.stdout
    assert "clocks locked: no" in res.stdout and "MAXN (id 0)" in res.stdout
    as_json = deploy("device", "probe", ROOT / "configs" / "jetson_tx2.yaml", "--set", "device.transport=local",
                     "--set", "target=orin_nano",
                     "--set", "device.python={}".format(sys.executable), "--set", "device.work_dir={}".format(tmp_path / "w"),
                     "--json", "--strict")
    report = json.loads(as_json.stdout)
    assert report["matches"] == "jetson_tx2" and report["config_target"] == "orin_nano"
    assert any(d.startswith("jetpack: board has 4.6") for d in report["config_differences"])
    assert as_json.returncode == 1


def test_probe_without_device_section_says_to_add_one(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("extends: {}\n".format(ROOT / "configs" / "jetson_tx2.yaml"))
    res = deploy("device", "probe", config)
    assert res.returncode == 1 and "no device: section" in res.stderr and res.stderr.count("\n") == 1


def test_unreachable_board_is_one_line_exit_5(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    res = deploy("device", "probe", ROOT / "configs" / "jetson_tx2.yaml", "--set", "device.transport=ssh",
                 "--set", "device.host=127.0.0.1", "--set", "device.port={}".format(closed), "--set", "device.connect_timeout_s=5")
    assert res.returncode == 5, res.stderr
    assert res.stderr.count("\n") == 1 and "connection refused" in res.stderr and "Traceback" not in res.stderr
