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


def test_clocks_are_read_through_sudo_n_where_a_sudoers_drop_in_allows_it(tx2, tmp_path):
    """jetson_clocks --show needs root: as the agent's user it exits 1; a sudoers drop-in for that one
    command (docs/nightly.md) lets `sudo -n` read it, and without one sudo -n fails and the problem stands."""
    bin_dir = tmp_path / "bin"
    shown = _block("jetson_clocks_show.txt", "SOC family:tegra186", "SOC family")
    (bin_dir / "jetson_clocks").write_text("#!/bin/sh\nif [ \"$AS_ROOT\" = 1 ]; then cat <<'EOF'\n{}EOF\nexit 0\nfi\n"
                                           "echo 'must be run as root'\nexit 1\n".format(shown))
    (bin_dir / "sudo").write_text("#!/bin/sh\n[ \"$1\" = -n ] || exit 3\nshift\n"
                                  "[ -f \"$(dirname \"$0\")/sudoers-allows\" ] || {{ echo 'sudo: a password is required'; exit 1; }}\n"
                                  "AS_ROOT=1 exec \"$@\"\n".format())
    (bin_dir / "sudo").chmod(0o755)
    facts = Device(device_cfg(work_dir=str(tmp_path / "w"))).probe()
    assert facts["clocks_locked"] is None and any("jetson_clocks --show exited 1" in p for p in facts["problems"])
    (bin_dir / "sudoers-allows").write_text("")
    facts = Device(device_cfg(work_dir=str(tmp_path / "w2"))).probe()
    assert facts["clocks_locked"] is False and not any("jetson_clocks" in p for p in facts["problems"])


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
    assert report["not_target"] == ["this machine is Jetson (jetson_tx2) (targets/jetson_tx2.yaml), not target orin_nano"]
    assert as_json.returncode == 5  # EXIT_DEVICE, as `deploy run` on a board that is not the target's


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


# ------------------------------------------------------------------ --strict, desktop GPUs, the CUDA binding, child stdin


def _probe(config, *extra, cwd=None):
    return deploy("device", "probe", ROOT / "configs" / config, "--set", "device.transport=local",
                  "--set", "device.python={}".format(sys.executable), "--set", "device.work_dir={}".format(cwd), *extra)


def _fake_module(tmp_path, monkeypatch, files):
    """A fake package tree on PYTHONPATH (the agent runs with this environment)."""
    lib = tmp_path / "fake-lib"
    for name, text in files.items():
        (lib / name).parent.mkdir(parents=True, exist_ok=True)
        (lib / name).write_text(text)
    monkeypatch.setenv("PYTHONPATH", "{}{}{}".format(lib, os.pathsep, os.environ.get("PYTHONPATH", "")).rstrip(os.pathsep))
    return lib


def test_strict_exits_5_when_the_board_has_another_tensorrt(tx2, tmp_path, monkeypatch):
    """The right board (a TX2) with TensorRT 8.5.2 where the target says 8.2.1: --strict exits 5, and without
    --strict the probe still exits 0 and says why the machine is not the target."""
    _fake_module(tmp_path, monkeypatch, {"tensorrt/__init__.py": "__version__ = '8.5.2.2'\n"})
    res = _probe("jetson_tx2.yaml", cwd=tmp_path / "w")
    assert res.returncode == 0, res.stderr
    assert "differs  tensorrt: board has 8.5.2.2, jetson_tx2 says 8.2.1" in res.stdout
    assert "strict     tensorrt: board has 8.5.2.2" in res.stdout
    res = _probe("jetson_tx2.yaml", "--strict", cwd=tmp_path / "w")
    assert res.returncode == 5, res.stderr


def _desktop(tmp_path, monkeypatch, line="NVIDIA GeForce RTX 4090, 550.54.14", cuda="12.6.77"):
    """A workstation: no /etc/nv_tegra_release, nvidia-smi on PATH (it records its argv and its stdin)."""
    root = tmp_path / "root"
    (root / "usr" / "local" / "cuda").mkdir(parents=True)
    (root / "usr" / "local" / "cuda" / "version.json").write_text(
        '{"cuda" : {"name" : "CUDA SDK", "version" : "%s"}}\n' % cuda)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "$@" >> "{log}"\nif read -r got; then echo "stdin: $got" >> "{log}"; fi\n'
                   'echo "{line}"\n'.format(log=tmp_path / "smi.log", line=line))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", "{}{}{}".format(bin_dir, os.pathsep, os.environ["PATH"]))
    monkeypatch.setenv("DEPLOY_DEVICE_ROOT", str(root))
    return root


def test_a_desktop_gpu_is_labelled_and_never_a_jetson_target(tmp_path, monkeypatch):
    from pipeline.device.client import fingerprint, hardware_label

    _desktop(tmp_path, monkeypatch)
    facts = Device(device_cfg(work_dir=str(tmp_path / "w"))).probe()
    assert facts["kind"] == "desktop-gpu" and facts["gpu"] == "NVIDIA GeForce RTX 4090"
    assert facts["gpu_driver"] == "550.54.14" and facts["board"] is None and facts["cuda"] == "12.6.77"
    assert (tmp_path / "smi.log").read_text().splitlines() == ["--query-gpu=name,driver_version --format=csv,noheader"]
    fp = fingerprint(facts)
    assert fp["kind"] == "desktop-gpu" and fp["gpu"] == "NVIDIA GeForce RTX 4090"
    assert hardware_label(fp) == "desktop GPU (NVIDIA GeForce RTX 4090), not a Jetson"
    res = _probe("jetson_tx2.yaml", cwd=tmp_path / "w2")
    assert res.returncode == 0, res.stderr  # without --strict: says so, exits 0
    assert "kind       desktop GPU (NVIDIA GeForce RTX 4090), not a Jetson; driver 550.54.14" in res.stdout
    assert "no target file matches this machine" in res.stdout
    strict = _probe("jetson_tx2.yaml", "--json", "--strict", cwd=tmp_path / "w2")
    report = json.loads(strict.stdout)
    assert report["matches"] is None and strict.returncode == 5
    assert report["not_target"] == ["this machine is desktop GPU (NVIDIA GeForce RTX 4090), not a Jetson, not target "
                                    "jetson_tx2"]


def test_a_jetson_gpu_in_nvidia_smi_is_not_a_desktop_gpu(tmp_path, monkeypatch):
    """JetPack 6 has nvidia-smi ("Orin (nvgpu)"); in a container without the host's nv_tegra_release it is
    still a Jetson."""
    _desktop(tmp_path, monkeypatch, line="Orin (nvgpu), 540.4.0")
    facts = Device(device_cfg(work_dir=str(tmp_path / "w"))).probe()
    assert facts["kind"] == "jetson" and facts["gpu"] == "Orin (nvgpu)"


def test_the_probe_says_which_cuda_binding_and_what_to_install(tmp_path, monkeypatch):
    """cuda-python 13 (no cuda.cudart; built for CUDA 13) on a CUDA 12.6 machine: the probe names the version
    and says to install cuda-python<13."""
    _desktop(tmp_path, monkeypatch)
    monkeypatch.setenv("DEPLOY_LIBCUDART", str(tmp_path / "no-libcudart.so"))  # past the default binding
    _fake_module(tmp_path, monkeypatch, {
        "cuda/bindings/__init__.py": "__version__ = '13.0.1'\n", "cuda/bindings/runtime.py": "",
        "cuda_bindings-13.0.1.dist-info/METADATA": "Name: cuda-bindings\nVersion: 13.0.1\n",
        "cuda_python-13.0.1.dist-info/METADATA": "Name: cuda-python\nVersion: 13.0.1\n"})
    facts = Device(device_cfg(work_dir=str(tmp_path / "w"))).probe()
    binding = facts["cuda_binding"]
    assert binding["binding"] == "cuda-python" and str(binding["version"]).startswith("13"), binding
    assert binding["problem"] and "<13" in binding["problem"], binding
    assert facts["cuda_python"] is True  # ``cuda`` is a namespace package in 12.6+/13: found all the same
    assert any(p.startswith("CUDA binding: ") for p in facts["problems"])
    res = _probe("jetson_tx2.yaml", cwd=tmp_path / "w2")
    assert "binding    cuda-python 13" in res.stdout and "note       CUDA binding: " in res.stdout, res.stdout


def test_the_binding_lookup_without_binding_info_imports_nothing(tmp_path, monkeypatch):
    """The probe's own stand-in for cuda.binding_info: files on sys.path, nothing imported."""
    from pipeline.device.agent import probe as agent_probe

    lib = _fake_module(tmp_path, monkeypatch, {
        "cuda/bindings/__init__.py": "raise RuntimeError('imported')\n", "cuda/bindings/runtime.py": "",
        "cuda_bindings-12.6.2.dist-info/METADATA": ""})
    monkeypatch.syspath_prepend(str(lib))
    found = agent_probe._binding_on_disk()
    assert found["binding"] == "cuda-python" and found["version"] == "12.6.2"
    assert found["module"] == "cuda.bindings.runtime" and found["problem"] is None
    assert "cuda.bindings" not in sys.modules or "imported" not in str(sys.modules.get("cuda.bindings"))
    assert agent_probe._binding_problem(dict(found, version="13.0.1"), "12.6", "/usr/bin/python3") == (
        "cuda-python 13.0.1 is built for CUDA 13, this machine has CUDA 12.6: pip3 install 'cuda-python>=12,<13' "
        "(CUDA 12.x)")
    missing = agent_probe._binding_problem({"binding": None}, "10.2", "/usr/bin/python3")
    assert "libcudart" in missing and "DEPLOY_LIBCUDART" in missing and "optional instead: pip3 install pycuda" in missing


def test_children_of_the_probe_never_read_the_agents_stdin(tx2, tmp_path):
    """D12: nvpmodel, jetson_clocks, nvcc and nvidia-smi get /dev/null as stdin, never the host's request pipe.
    Each stand-in reads a line from stdin; the probe runs with a pending 'request' on its own stdin."""
    import subprocess

    log = tmp_path / "stdin.log"
    bin_dir = tmp_path / "bin"
    for tool in ("nvpmodel", "jetson_clocks", "nvcc", "nvidia-smi"):
        script = bin_dir / tool
        script.write_text('#!/bin/sh\nif read -r got; then echo "{t}: $got" >> "{log}"; fi\necho "{t} ran" >> "{log}"\n'
                          'exit 1\n'.format(t=tool, log=log))
        script.chmod(0o755)
    env = dict(os.environ, DEPLOY_DEVICE_ROOT=str(tmp_path / "empty"))
    res = subprocess.run([sys.executable, "-c", "from pipeline.device.agent.probe import probe; probe('{}')".format(
        tmp_path / "empty")], input=b'{"command": "benchmark"}\n', stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, cwd=str(ROOT), timeout=120)
    assert res.returncode == 0, res.stderr
    ran = log.read_text().splitlines()
    assert sorted(ran) == ["jetson_clocks ran", "nvcc ran", "nvidia-smi ran", "nvpmodel ran"], ran
