"""Reaching the device: the agent runs on this machine (``local``) or on a board over the system's
``ssh``/``scp`` (``ssh``), behind one interface.

- ``call(request)``: run the agent with a JSON request; its progress lines go to ``progress``.
- ``send(path)``: a file into the device's blob store, named by its sha256 — sent only when absent.
- ``fetch(remote, local)``: a file back (written to a temporary name, then renamed).

SSH runs with ``BatchMode=yes`` (never a password prompt), ``StrictHostKeyChecking=yes`` (an unknown
or changed host key is an error, not a silent accept) and a shared master connection
(``ControlMaster``/``ControlPersist``), so the many short calls of a run pay the handshake once.
Every failure becomes a one-line ``DeviceError`` saying what to do.
"""

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from pipeline.device.errors import DeviceError, classify_ssh_failure
from pipeline.device.process import AgentProcess, last_line, run_command
from pipeline.errors import DeployError
from pipeline.files import sha256_path

AGENT_DIR = Path(__file__).resolve().parent / "agent"
AGENT_PACKAGE = "deploy_agent"
SYSTEM_PYTHON = "/usr/bin/python3"  # a Jetson's system Python: the one python3-libnvinfer (TensorRT) is built for
MISSING_KINDS = ("no-numpy", "no-onnxruntime", "no-tensorrt")  # the agent's answers for a library its Python lacks


def agent_python(cfg, base=None, where="device.python"):
    """The interpreter that runs the agent: ``device.python``, or by default the board's system Python
    (/usr/bin/python3) for ``transport: local`` -- not ``python3`` on PATH, which is deploy's own venv
    when deploy runs from one and does not see JetPack's TensorRT -- and ``python3`` on the login's PATH
    for ``ssh``. A relative path (``scripts/jetson/agent-in-docker``, ``.venv36/bin/python``) counts from
    ``base`` (the folder of the config file that sets it) and must exist; a bare name is looked up on PATH.
    ``where`` names the setting in errors (``configs/x.yaml:12``)."""
    python = getattr(cfg, "python", None)
    if not python:
        if cfg.transport == "ssh":
            return "python3"
        return SYSTEM_PYTHON if os.path.exists(SYSTEM_PYTHON) else "python3"
    if "/" not in python or python.startswith("/"):
        return python
    if cfg.transport == "ssh":
        if python.startswith("~/"):
            return python
        raise DeployError("{} device.python: {} is a relative path; with transport: ssh give the board's absolute path "
                          "(e.g. /home/nvidia/deploy/scripts/jetson/agent-in-docker) or a name on its PATH".format(
                              where, python))
    if python.startswith("~"):
        return os.path.expanduser(python)
    folder = Path(base) if base is not None else Path.cwd()
    path = os.path.abspath(os.path.join(str(folder), python))  # not resolve(): a venv's bin/python is a symlink
    if not os.path.exists(path):
        raise DeployError("{} device.python: {} is not there ({}: a relative device.python counts from {}, the folder "
                          "of the config file that sets it); give a path from that folder or an absolute one".format(
                              where, python, path, os.path.abspath(str(folder))))
    return path


def agent_files():
    """(relative name, bytes) of the agent's sources, in a fixed order."""
    return [(p.name, p.read_bytes()) for p in sorted(AGENT_DIR.glob("*.py"))]


def agent_digest():
    h = hashlib.sha256()
    for name, data in agent_files():
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()[:16]


class Transport:
    """What both transports share: the work folder layout and the agent call."""

    kind = "?"

    def __init__(self, cfg, progress=None, python=None):
        self.cfg = cfg
        self.progress = progress
        self.python = python or agent_python(cfg)
        self._work = cfg.work_dir.rstrip("/")
        self._agent_ready = False
        self._agent = None

    @property
    def work(self):
        """The work folder on the device, an absolute path (the agent runs from inside it)."""
        return self._work

    def python_setting(self):
        """``device.python: X`` as the user set it, or the default and why (for error messages)."""
        if getattr(self.cfg, "python", None):
            return "device.python: {}".format(self.python)
        return "device.python: {} (the default with transport: {}; set device.python to choose another)".format(
            self.python, self.kind)

    @property
    def agent_home(self):
        return "{}/agent-{}".format(self.work, agent_digest())

    # -- what a transport implements
    def exec(self, command, stdin=None, timeout=None, what="a command"):
        raise NotImplementedError

    def _copy_to(self, local, remote):
        raise NotImplementedError

    def _copy_from(self, remote, local):
        raise NotImplementedError

    # -- shared
    def describe(self):
        raise NotImplementedError

    def ensure_agent(self):
        """Install the agent once per agent version (a folder named by the hash of its sources)."""
        if self._agent_ready:
            return
        marker = "{}/{}/.complete".format(self.agent_home, AGENT_PACKAGE)
        res = self.exec("test -f {}".format(shlex.quote(marker)), what="looking for the agent")
        if res.returncode != 0:
            self._install_agent()
        self._agent_ready = True

    def _install_agent(self):
        import io
        import tarfile

        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, data in agent_files() + [(".complete", b"")]:
                info = tarfile.TarInfo("{}/{}".format(AGENT_PACKAGE, name))
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))
        tmp = "{}.tmp{}".format(self.agent_home, os.getpid())
        script = "set -e; rm -rf {t}; mkdir -p {t}; tar -xf - -C {t}; rm -rf {h}; mv {t} {h}".format(
            t=shlex.quote(tmp), h=shlex.quote(self.agent_home))
        res = self.exec(script, stdin=buffer.getvalue(), what="installing the agent")
        if res.returncode != 0:
            raise DeviceError("could not install the deploy agent in {} on {}: {}; check device.work_dir".format(
                self.agent_home, self.describe(), last_line(res.stderr)))

    def call(self, request, timeout=None, what=None):
        """The agent's answer to ``request`` (its ``result``), or a DeviceError.

        One agent process serves the whole run (``--serve``: a JSON line in, a JSON line out), so a
        call costs the work, not an interpreter start and imports on the board; it keeps models it
        loaded. It is started on the first call and stopped by ``close``."""
        self.ensure_agent()
        what = what or request.get("command", "a request")
        if self._agent is None or self._agent.poll() is not None:
            command = "cd {} && exec {} -m {} --serve".format(shlex.quote(self.agent_home), shlex.quote(self.python),
                                                              AGENT_PACKAGE)
            self._agent = AgentProcess(self._argv(command), self)
        answer = self._agent.ask(request, timeout, what)
        if not answer.get("ok"):
            from pipeline.device.errors import agent_failure

            if answer.get("kind") in MISSING_KINDS:  # name the interpreter that lacks it, and the setting
                answer = dict(answer, error="{} [the agent runs on {}: install it for that interpreter, or set "
                                            "device.python to a Python that has it]".format(
                                                answer.get("error"), self.python_setting()))
            raise agent_failure(answer, self.describe(), what)
        return answer["result"]

    def agent_exited(self, code, stderr, what):
        """The error for an agent process that ended without answering."""
        if code in (126, 127) or "No module named" in stderr or "not found" in stderr:
            return DeviceError("{} could not run the agent on {} ({}); set device.python to the board's Python "
                               "3.6+".format(self.python_setting(), self.describe(), last_line(stderr)))
        return DeviceError("the agent on {} ended during {} (exit {}): {}".format(self.describe(), what, code,
                                                                                 last_line(stderr)))

    def blob_path(self, digest, suffix):
        return "{}/blobs/{}{}".format(self.work, digest, suffix)

    def send(self, path, suffix=None):
        """The device path of ``path``'s content (sent only when the board does not have it yet)."""
        return self.send_many([(Path(path), suffix)])[0]

    def send_many(self, items):
        """Device paths for [(local path, suffix or None)]; one round trip finds what is missing."""
        entries = []
        for path, suffix in items:
            path = Path(path)
            entries.append((path, self.blob_path(sha256_path(path), suffix if suffix is not None else path.suffix)))
        listing = " ".join(shlex.quote(remote) for _, remote in entries)
        res = self.exec("mkdir -p {}/blobs && for f in {}; do [ -e \"$f\" ] || echo \"$f\"; done".format(
            shlex.quote(self.work), listing), what="listing the device's files")
        if res.returncode != 0:
            raise DeviceError("cannot use device.work_dir {} on {}: {}".format(self.work, self.describe(),
                                                                               last_line(res.stderr)))
        missing = set(res.stdout.decode().split())
        for path, remote in entries:
            if remote in missing:
                self.log("device: sending {} ({})".format(path.name, _size(path)))
                tmp = "{}.part{}".format(remote, os.getpid())
                self._copy_to(path, tmp)
                moved = self.exec("mv {} {}".format(shlex.quote(tmp), shlex.quote(remote)), what="storing " + path.name)
                if moved.returncode != 0:
                    raise DeviceError("could not store {} on {}: {}".format(path.name, self.describe(),
                                                                            last_line(moved.stderr)))
        return [remote for _, remote in entries]

    def fetch(self, remote, local):
        """Copy a device file to ``local`` (atomically: a temporary name, then a rename)."""
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(local.name + ".part")
        self._copy_from(remote, tmp)
        os.replace(tmp, local)
        return local

    def log(self, message):
        if self.progress is not None:
            self.progress.log(message)

    def close(self):
        self._stop_agent()

    def _stop_agent(self):
        if self._agent is not None:
            self._agent.stop()
            self._agent = None


class LocalTransport(Transport):
    """The agent on this machine: a Jetson runner, a workstation's GPU, or the host with ONNX Runtime."""

    kind = "local"

    def __init__(self, cfg, progress=None, python=None):
        super().__init__(cfg, progress, python)
        self._work = str(Path(os.path.expanduser(cfg.work_dir)).resolve())

    def describe(self):
        return "this machine (device.transport: local)"

    def _argv(self, command):
        return ["sh", "-c", command]

    def exec(self, command, stdin=None, timeout=None, what="a command", stream=False):
        return run_command(self._argv(command), stdin, timeout, what, self, stream)

    def _copy_to(self, local, remote):
        shutil.copyfile(local, remote)

    def _copy_from(self, remote, local):
        try:
            shutil.copyfile(remote, local)
        except OSError as e:
            raise DeviceError("could not read {}: {}".format(remote, e.strerror))


class SshTransport(Transport):
    """The agent on a board, through the system's ssh and scp."""

    kind = "ssh"

    def __init__(self, cfg, progress=None, python=None):
        super().__init__(cfg, progress, python)
        self._home_relative = None if self._work.startswith("/") else self._work[2:] if self._work.startswith("~/") \
            else self._work  # ~/x or x: under the login's home, asked once (a quoted ~ would not expand)
        self.control_dir = tempfile.mkdtemp(prefix="deploy-ssh-")
        options = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout={}".format(
            int(cfg.connect_timeout_s)), "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
            "-o", "ControlMaster=auto", "-o", "ControlPath={}/%C".format(self.control_dir),
            "-o", "ControlPersist=120", "-o", "LogLevel=ERROR"]
        if cfg.identity_file:
            options += ["-o", "IdentitiesOnly=yes", "-i", os.path.expanduser(cfg.identity_file)]
        if cfg.known_hosts_file:
            options += ["-o", "UserKnownHostsFile={}".format(os.path.expanduser(cfg.known_hosts_file))]
        self.options = options
        self.destination = "{}@{}".format(cfg.user, cfg.host) if cfg.user else cfg.host

    def describe(self):
        return "{}:{}".format(self.destination, self.cfg.port)

    @property
    def work(self):
        if self._home_relative is not None:  # the agent cds into its folder: every path it gets must be absolute
            res = self.exec('printf "%s" "$HOME"', what="finding the login's home folder")
            home = res.stdout.decode(errors="replace").strip()
            if res.returncode != 0 or not home.startswith("/"):
                raise DeviceError("device.work_dir {}: cannot find the home folder of {} ({}); give an absolute "
                                  "device.work_dir".format(self.cfg.work_dir, self.describe(), last_line(res.stderr)))
            self._work = "{}/{}".format(home.rstrip("/"), self._home_relative) if self._home_relative else home
            self._home_relative = None
        return self._work

    def _argv(self, command):
        return ["ssh"] + self.options + ["-p", str(self.cfg.port), self.destination, command]

    def exec(self, command, stdin=None, timeout=None, what="a command", stream=False):
        res = run_command(self._argv(command), stdin, timeout, what, self, stream)
        if res.returncode == 255:
            raise classify_ssh_failure(res.stderr, self, what)
        return res

    def agent_exited(self, code, stderr, what):
        if code == 255:
            return classify_ssh_failure(stderr, self, what)
        return super().agent_exited(code, stderr, what)

    def _scp(self, source, dest, what):
        argv = ["scp", "-q"] + self.options + ["-P", str(self.cfg.port), source, dest]
        res = run_command(argv, None, None, what, self, False)
        if res.returncode != 0:
            raise classify_ssh_failure(res.stderr, self, what)

    def _copy_to(self, local, remote):
        self._scp(str(local), "{}:{}".format(self.destination, remote), "sending " + Path(local).name)

    def _copy_from(self, remote, local):
        self._scp("{}:{}".format(self.destination, remote), str(local), "fetching " + remote.rsplit("/", 1)[-1])

    def close(self):
        """Stop the agent, the master connection, and remove its socket folder."""
        self._stop_agent()
        subprocess.run(["ssh", "-o", "ControlPath={}/%C".format(self.control_dir), "-O", "exit", "-p",
                        str(self.cfg.port), self.destination], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.control_dir, ignore_errors=True)


def _size(path):
    n = Path(path).stat().st_size
    return "{:.1f} MB".format(n / 1e6) if n >= 1e5 else "{} bytes".format(n)


def open_transport(cfg, progress=None, python=None):
    """The transport of a device: section; ``python`` is the agent's interpreter (``agent_python``)."""
    return (SshTransport if cfg.transport == "ssh" else LocalTransport)(cfg, progress, python)
