"""D8: which interpreter runs the agent. ``transport: local`` defaults to the board's system Python
(/usr/bin/python3, which sees JetPack's TensorRT), not ``python3`` on PATH (deploy's own venv); a relative
``device.python`` counts from the folder of the config file that sets it (or is refused with a hint); an
interpreter that lacks numpy, onnxruntime or TensorRT is named, with device.python, in the one-line error."""

import os
import sys
from pathlib import Path

import pytest

from pipeline.config import load_config
from pipeline.config.schema import DeviceSection
from pipeline.device.client import Device, python_for
from pipeline.device.errors import DeviceError
from pipeline.errors import EXIT_DEVICE, DeployError

from conftest import ROOT, deploy
from devicekit import tiny_onnx

SYSTEM_PYTHON = "/usr/bin/python3"


def _wrapper(path, body):
    """An executable shell script at ``path`` (a stand-in interpreter)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason="no /usr/bin/python3 on this machine")
def test_local_transport_runs_the_system_python_not_python3_on_path(tmp_path, monkeypatch):
    """deploy runs from a venv whose bin/ is first on PATH: the agent must still start on /usr/bin/python3."""
    venv_bin = tmp_path / "venv-bin"
    venv_bin.mkdir()
    (venv_bin / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", "{}{}{}".format(venv_bin, os.pathsep, os.environ["PATH"]))
    device = Device(DeviceSection(transport="local", work_dir=str(tmp_path / "w")))
    try:
        assert device.ping()["executable"] == SYSTEM_PYTHON
    finally:
        device.transport.close()
    ssh = DeviceSection(transport="ssh", host="board")
    assert python_for(type("C", (), {"device": ssh})()) == "python3"  # ssh: the login's python3, as before


def test_an_interpreter_without_numpy_is_one_line_naming_it(tmp_path):
    """The default interpreter on a workstation may have no numpy: the error names it and device.python."""
    bare = _wrapper(tmp_path / "bare-python", 'exec "{}" -S "$@"'.format(sys.executable))  # -S: no site-packages
    device = Device(DeviceSection(transport="local", python=str(bare), work_dir=str(tmp_path / "w")))
    try:
        with pytest.raises(DeviceError) as err:
            device.backend()
        message = str(err.value)
        assert "\n" not in message and err.value.code == EXIT_DEVICE
        assert "device.python: {}".format(bare) in message and "has no numpy" in message
        with pytest.raises(DeviceError) as err:  # the agent's own answer names the interpreter too
            device.call({"command": "benchmark", "model": str(tiny_onnx(tmp_path / "m.onnx")), "backend": "onnxruntime",
                         "batch_sizes": [1], "warmup": 0, "iterations": 1})
        assert "device.python: {}".format(bare) in str(err.value) and "\n" not in str(err.value)
    finally:
        device.transport.close()


def test_pip_install_onnxruntime_names_the_interpreter(tmp_path):
    """numpy but no onnxruntime: 'pip install onnxruntime' says for which interpreter (and device.python)."""
    import numpy

    lib = tmp_path / "only-numpy"
    lib.mkdir()
    site = Path(numpy.__file__).resolve().parent.parent
    for name in ("numpy", "numpy.libs"):
        if (site / name).exists():
            (lib / name).symlink_to(site / name)
    python = _wrapper(tmp_path / "numpy-python", 'PYTHONPATH="{}" exec "{}" -S "$@"'.format(lib, sys.executable))
    device = Device(DeviceSection(transport="local", python=str(python), work_dir=str(tmp_path / "w")))
    try:
        assert device.ping()["has"]["numpy"] and not device.ping()["has"]["onnxruntime"]
        with pytest.raises(DeviceError) as err:
            device.call({"command": "benchmark", "model": str(tiny_onnx(tmp_path / "m.onnx")), "backend": "onnxruntime",
                         "batch_sizes": [1], "warmup": 0, "iterations": 1})
    finally:
        device.transport.close()
    message = str(err.value)
    assert "onnxruntime" in message and "device.python: {}".format(python) in message and "\n" not in message


def _config(folder, python, work):
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "board.yaml"
    config.write_text("extends: {}\ndevice:\n  transport: local\n  python: {}\n  work_dir: {}\n".format(
        ROOT / "configs" / "jetson_tx2.yaml", python, work))
    return config


def test_a_relative_device_python_counts_from_the_config_file(tmp_path):
    folder = tmp_path / "project" / "configs"
    log = tmp_path / "ran.log"
    _wrapper(folder / "scripts" / "agent-python", 'echo "$0" >> "{}"\nexec "{}" "$@"'.format(log, sys.executable))
    config = _config(folder, "scripts/agent-python", tmp_path / "w")
    assert python_for(load_config(config)) == str(folder / "scripts" / "agent-python")
    res = deploy("device", "probe", config, "--json", cwd=tmp_path)  # run from elsewhere: the config's folder counts
    assert res.returncode == 0, res.stderr
    assert log.read_text().split() == [str(folder / "scripts" / "agent-python")]


def test_a_relative_device_python_that_is_not_there_is_refused_with_a_hint(tmp_path):
    config = _config(tmp_path / "configs", ".venv36/bin/python", tmp_path / "w")
    with pytest.raises(DeployError) as err:
        python_for(load_config(config))
    message = str(err.value)
    assert "board.yaml:" in message and "device.python: .venv36/bin/python is not there" in message
    assert str(tmp_path / "configs") in message
    res = deploy("device", "probe", config)
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "relative device.python counts from" in res.stderr
