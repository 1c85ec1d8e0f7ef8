"""For the device tests: a real OpenSSH server on 127.0.0.1 playing the board (the `sshd` fixture:
`from devicekit import sshd_server` in a test module), and small ONNX models built with the onnx package (no TensorFlow: fast subset)."""

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest


def _sshd():
    for path in (shutil.which("sshd"), "/usr/sbin/sshd"):
        if path and Path(path).exists():
            return path
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


class SshServer:
    """A real sshd on 127.0.0.1 with generated host and client keys, in folder ``d``: start() / stop()."""

    def __init__(self, d):
        self.dir = Path(d)

    def start(self):
        exe = _sshd()
        if exe is None:
            raise RuntimeError("sshd is not installed (apt-get install openssh-server)")
        d = self.dir
        d.mkdir(parents=True, exist_ok=True)
        for name in ("host_key", "client_key", "other_key"):
            _keygen(d / name)
        (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
        self.port, self.user = _free_port(), getpass.getuser()
        (d / "sshd_config").write_text("\n".join([
            "Port {}".format(self.port), "ListenAddress 127.0.0.1", "HostKey {}".format(d / "host_key"),
            "PidFile {}".format(d / "sshd.pid"), "AuthorizedKeysFile {}".format(d / "authorized_keys"),
            "StrictModes no", "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
            "PermitRootLogin prohibit-password", "AllowUsers {}".format(self.user), "LogLevel ERROR",
            "Subsystem sftp internal-sftp", "MaxSessions 50", "MaxStartups 50",
        ]) + "\n")
        host_pub = (d / "host_key.pub").read_text().split()
        (d / "known_hosts").write_text("[127.0.0.1]:{} {} {}\n".format(self.port, host_pub[0], host_pub[1]))
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        self.proc = subprocess.Popen([exe, "-D", "-e", "-f", str(d / "sshd_config")], stdout=subprocess.DEVNULL,
                                     stderr=open(d / "sshd.log", "w"))
        self.pid = self.proc.pid
        self.key, self.other_key, self.known_hosts = d / "client_key", d / "other_key", d / "known_hosts"
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("sshd did not start: " + (d / "sshd.log").read_text())
                time.sleep(0.1)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


@pytest.fixture(scope="session", name="sshd")
def sshd_server(tmp_path_factory):
    """A real sshd on 127.0.0.1 (SshServer); skipped where sshd is missing, except in CI."""
    if _sshd() is None:
        if os.environ.get("CI"):
            pytest.fail("sshd is not installed; .ci/run installs openssh-server")
        pytest.skip("sshd not installed (apt-get install openssh-server)")
    server = SshServer(tmp_path_factory.mktemp("sshd"))
    try:
        server.start()
    except RuntimeError as e:
        pytest.fail(str(e))
    yield server
    server.stop()


def device_cfg(**kw):
    """A validated device: section (the config schema's own model); the agent runs on this test's
    Python (the board's python3 in real use), which has numpy and onnxruntime."""
    import sys

    from pipeline.config.schema import DeviceSection

    return DeviceSection(**dict({"python": sys.executable}, **kw))


def ssh_cfg(sshd, work, **kw):
    base = dict(transport="ssh", host="127.0.0.1", port=sshd.port, user=sshd.user, identity_file=str(sshd.key),
                known_hosts_file=str(sshd.known_hosts), work_dir=str(work), connect_timeout_s=5)
    base.update(kw)
    return device_cfg(**base)


def tiny_onnx(path, batch=None, classes=3, size=4):
    """An image classifier in miniature: NHWC float input -> reduce -> MatMul -> Softmax, dynamic batch."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = rng.standard_normal((3, classes)).astype(np.float32) / 100.0
    nodes = [
        helper.make_node("ReduceMean", ["input"], ["pooled"], axes=[1, 2], keepdims=0),
        helper.make_node("MatMul", ["pooled", "w"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch if batch else "N", size, size, 3])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [batch if batch else "N", classes])],
        [numpy_helper.from_array(weights, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return Path(path)
