"""The agent behind both transports: on this machine (``local``) and through a real sshd on 127.0.0.1
(``ssh``), with its ONNX Runtime backend. And the one-line errors of a board that cannot be used."""

import json
import subprocess
import threading
import time

import numpy as np
import pytest

from pipeline.backends.device import DeviceSession
from pipeline.device.client import Device
from pipeline.device.errors import DeviceError
from pipeline.errors import EXIT_DEVICE

from devicekit import device_cfg, ssh_cfg, tiny_onnx
from devicekit import sshd_server  # noqa: F401  (the `sshd` fixture)


class Log:
    def __init__(self):
        self.lines = []

    def log(self, message):
        self.lines.append(message)


@pytest.fixture(params=["local", "ssh"])
def device(request, tmp_path):
    if request.param == "local":
        dev = Device(device_cfg(work_dir=str(tmp_path / "work")), Log())
    else:
        dev = Device(ssh_cfg(request.getfixturevalue("sshd"), tmp_path / "work"), Log())
    yield dev
    dev.transport.close()


def test_ping_says_which_libraries_the_device_has(device):
    ping = device.ping()
    assert ping["protocol"] == 1
    assert ping["has"]["onnxruntime"] is True and ping["has"]["numpy"] is True
    assert ping["has"]["tensorrt"] is False  # this machine: no TensorRT
    assert device.backend() == "onnxruntime"


def test_benchmark_and_inference_through_the_agent(device, tmp_path):
    model = tiny_onnx(tmp_path / "m.onnx")
    remote = device.transport.send(model)
    assert remote.endswith(".onnx") and len(remote.rsplit("/", 1)[1]) == 64 + 5
    answer = device.call({"command": "benchmark", "model": remote, "backend": "onnxruntime", "batch_sizes": [1, 4],
                          "warmup": 1, "iterations": 7})
    assert [r["batch_size"] for r in answer["results"]] == [1, 4]
    assert all(len(r["times_ms"]["total_ms"]) == 7 and min(r["times_ms"]["total_ms"]) > 0 for r in answer["results"])
    assert answer["label"]["runtime"] == "onnxruntime"
    session = DeviceSession(device, remote, "onnxruntime")
    assert session.inputs == [("input", (None, 4, 4, 3), "float32")]
    batch = np.random.default_rng(1).uniform(0, 255, (3, 4, 4, 3)).astype(np.float32)
    out = session.run({"input": batch})[0]
    from pipeline.backends import load_onnx

    np.testing.assert_allclose(out, load_onnx(model).run({"input": batch})[0], rtol=1e-6)


def test_a_file_is_sent_once(device, tmp_path):
    model = tiny_onnx(tmp_path / "m.onnx")
    first = device.transport.send(model)
    sent = [line for line in device.transport.progress.lines if line.startswith("device: sending")]
    assert len(sent) == 1
    assert device.transport.send(model) == first
    assert [line for line in device.transport.progress.lines if line.startswith("device: sending")] == sent


def test_a_home_relative_work_dir_is_made_absolute_once(sshd, tmp_path):
    """The default work_dir is ~/.cache/deploy-device: under the login's home, which the agent (it runs
    from inside its own folder) must get as an absolute path."""
    import os
    import shutil
    import uuid

    name = ".cache/deploy-test-{}".format(uuid.uuid4().hex[:12])
    dev = Device(ssh_cfg(sshd, "~/" + name), Log())
    try:
        model = tiny_onnx(tmp_path / "m.onnx")
        remote = dev.transport.send(model)
        assert remote.startswith(os.path.expanduser("~/" + name) + "/blobs/")  # sshd's user is this test's user
        answer = dev.call({"command": "describe", "model": remote, "backend": "onnxruntime"})
        assert answer["inputs"][0]["name"] == "input"
    finally:
        dev.transport.close()
        shutil.rmtree(os.path.expanduser("~/" + name), ignore_errors=True)


def test_fetch_is_atomic_and_complete(device, tmp_path):
    model = tiny_onnx(tmp_path / "m.onnx")
    remote = device.transport.send(model)
    back = device.transport.fetch(remote, tmp_path / "back" / "m.onnx")
    assert back.read_bytes() == model.read_bytes()
    assert not list((tmp_path / "back").glob("*.part"))


def test_agent_errors_are_one_line(device, tmp_path):
    with pytest.raises(DeviceError) as err:
        device.call({"command": "benchmark", "model": str(tmp_path / "nope.onnx"), "backend": "onnxruntime"})
    assert "is not on the device" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(DeviceError, match="unknown command"):
        device.call({"command": "dance"})


def test_a_missing_interpreter_names_device_python(tmp_path):
    dev = Device(device_cfg(work_dir=str(tmp_path / "work"), python="python2.4-not-here"))
    with pytest.raises(DeviceError) as err:
        dev.ping()
    assert "device.python" in str(err.value) and err.value.code == EXIT_DEVICE


# ------------------------------------------------------------------ ssh faults, each a one-line error


def _error(cfg):
    dev = Device(cfg)
    try:
        with pytest.raises(DeviceError) as err:
            dev.ping()
    finally:
        dev.transport.close()
    message = str(err.value)
    assert "\n" not in message and err.value.code == EXIT_DEVICE
    return message


def test_wrong_port_is_connection_refused(sshd, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    message = _error(ssh_cfg(sshd, tmp_path / "w", port=closed))
    assert "connection refused" in message and "device.port" in message


def test_wrong_key_is_refused(sshd, tmp_path):
    message = _error(ssh_cfg(sshd, tmp_path / "w", identity_file=str(sshd.other_key)))
    assert "refused the key" in message and "authorized_keys" in message


def test_unknown_host_key_is_not_accepted_silently(sshd, tmp_path):
    (tmp_path / "empty_known_hosts").write_text("")
    message = _error(ssh_cfg(sshd, tmp_path / "w", known_hosts_file=str(tmp_path / "empty_known_hosts")))
    assert "host key" in message and "known_hosts" in message


def test_a_connection_killed_mid_benchmark_is_a_lost_connection(sshd, tmp_path):
    dev = Device(ssh_cfg(sshd, tmp_path / "w"))
    remote = dev.transport.send(tiny_onnx(tmp_path / "m.onnx"))
    caught = {}

    def bench():
        try:
            dev.call({"command": "benchmark", "model": remote, "backend": "onnxruntime", "batch_sizes": [1],
                      "warmup": 0, "iterations": 1, "duration_s": 30})
        except DeviceError as e:
            caught["error"] = e

    thread = threading.Thread(target=bench)
    thread.start()
    time.sleep(3)  # the agent is timing by now
    subprocess.run(["pkill", "-KILL", "-P", str(sshd.pid)])  # every session of the board's sshd
    thread.join(timeout=60)
    dev.transport.close()
    assert not thread.is_alive()
    message = str(caught["error"])
    assert "\n" not in message and caught["error"].code == EXIT_DEVICE
    assert "connection" in message and "re-run" in message


def test_agent_answer_is_json_on_stdout_only(tmp_path):
    """The agent run directly: JSON in, one JSON line out, progress on stderr."""
    import sys

    model = tiny_onnx(tmp_path / "m.onnx")
    request = {"command": "benchmark", "model": str(model), "backend": "onnxruntime", "batch_sizes": [2], "warmup": 0,
               "iterations": 3}
    res = subprocess.run([sys.executable, "-m", "pipeline.device.agent"], input=json.dumps(request), text=True,
                         capture_output=True, timeout=120)
    answer = json.loads(res.stdout)
    assert res.returncode == 0 and answer["ok"] is True
    assert "deploy-agent: benchmark batch 2" in res.stderr
    bad = subprocess.run([sys.executable, "-m", "pipeline.device.agent"], input="{not json", text=True,
                         capture_output=True, timeout=60)
    assert json.loads(bad.stdout) == {"ok": False, "kind": "bad-request", "error": json.loads(bad.stdout)["error"]}
