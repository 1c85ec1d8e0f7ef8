"""Reaching the device: the agent runs on this machine (``local``) or on a board over the system's
``ssh``/``scp`` (``ssh``), behind one interface.

- ``call(request)``: run the agent with a JSON request; its progress lines go to ``progress``.
- ``send(path)``: a file into the device's blob store, named by its sha256 — sent only when absent.
- ``fetch(remote, local)``: a file back (written to a temporary name, then renamed).

``LocalTransport`` is here; ``SshTransport`` is in ``pipeline.device.ssh``; ``pipeline.device.client``
opens the one a config names. Every failure becomes a one-line ``DeviceError`` saying what to do.
"""

import hashlib
import os
import shlex
import shutil
from pathlib import Path

from pipeline.device.errors import DeviceError
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

    def __init__(self, cfg, progress=None, python=None, run_dir=None):
        self.cfg = cfg
        self.progress = progress
        self.python = python or agent_python(cfg)
        self.run_dir = run_dir
        self._work = cfg.work_dir.rstrip("/") or "/"
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
            self._agent = AgentProcess(self._argv(self.agent_command()), self)
        answer = self._agent.ask(request, timeout, what)  # a dict with a boolean ok (process.parse_answer)
        if not answer["ok"]:
            from pipeline.device.errors import agent_failure

            if answer.get("kind") in MISSING_KINDS:  # name the interpreter that lacks it, and the setting
                answer = dict(answer, error="{} [the agent runs on {}: install it for that interpreter, or set "
                                            "device.python to a Python that has it]".format(
                                                answer.get("error"), self.python_setting()))
            raise agent_failure(answer, self.describe(), what)
        return answer["result"]

    def agent_command(self, exec_=True):
        """The shell command that serves the agent; ``exec_``: the shell becomes the agent (its exit status is the
        agent's), else it stays and reports it (the ssh transport: see ``SshTransport.agent_command``)."""
        return "cd {} && {}{} -m {} --serve".format(shlex.quote(self.agent_home), "exec " if exec_ else "",
                                                    shlex.quote(self.python), AGENT_PACKAGE)

    def end_remote(self, pid):
        """End the process group ``pid`` on the device (the agent, after a timeout); local: nothing to do (the
        agent's group is ended with its process)."""

    def agent_exited(self, code, stderr, what, running=None):
        """The error for an agent process that ended without answering (``code``: its exit status, -N or 128+N
        for signal N as Python or a shell reports it; ``running``: the native library its request was in)."""
        from pipeline.device.errors import signal_death, signal_of

        number = signal_of(code, shell=True)
        if number is not None:
            return signal_death(number, what, self.describe(), running)
        if not (stderr or "").strip() and code not in (126, 127):  # not a word: name the setting, the program, the code
            how = "was killed by signal {}".format(-code) if code is not None and code < 0 else \
                "exited with code {}".format(code)
            return DeviceError("{} {} without any output during {} on {} (the agent never answered): run it by hand "
                               "there ({} -c 'import sys; print(sys.version)') and set device.python to the board's "
                               "Python 3.6+".format(self.python_setting(), how, what, self.describe(),
                                                    shlex.quote(self.python)))
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
        # the answer is the positions of the missing files, never their names: a work_dir with spaces,
        # quotes or newlines cannot be split wrongly
        listing = " ".join(shlex.quote(remote) for _, remote in entries)
        res = self.exec("mkdir -p {}/blobs && i=0 && for f in {}; do [ -e \"$f\" ] || echo $i; i=$((i+1)); done".format(
            shlex.quote(self.work), listing), what="listing the device's files")
        if res.returncode != 0:
            raise DeviceError("cannot use device.work_dir {} on {}: {}".format(self.work, self.describe(),
                                                                               last_line(res.stderr)))
        missing = set(res.stdout.decode("ascii", "replace").split())
        for index, (path, remote) in enumerate(entries):
            if str(index) in missing:
                self.log("device: sending {} ({})".format(path.name, size_text(path)))
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

    def close(self, kill=False):
        self._stop_agent(kill)

    def _stop_agent(self, kill=False):
        if self._agent is not None:
            self._agent.stop(kill=kill)
            self._agent = None


class LocalTransport(Transport):
    """The agent on this machine: a Jetson runner, a workstation's GPU, or the host with ONNX Runtime."""

    kind = "local"

    def __init__(self, cfg, progress=None, python=None, run_dir=None):
        super().__init__(cfg, progress, python, run_dir)
        self._work = str(Path(os.path.expanduser(cfg.work_dir)).resolve())

    def describe(self):
        return "this machine (device.transport: local)"

    def _argv(self, command):
        return ["sh", "-c", command]

    def exec(self, command, stdin=None, timeout=None, what="a command", stream=False, stdin_path=None,
             stdout_path=None):
        return run_command(self._argv(command), stdin, timeout, what, self, stream, stdin_path, stdout_path)

    def _copy_to(self, local, remote):
        shutil.copyfile(local, remote)

    def _copy_from(self, remote, local):
        try:
            shutil.copyfile(remote, local)
        except OSError as e:
            raise DeviceError("could not read {}: {}".format(remote, e.strerror))


def size_text(path):
    n = Path(path).stat().st_size
    return "{:.1f} MB".format(n / 1e6) if n >= 1e5 else "{} bytes".format(n)
