"""Reaching the device: the agent runs on this machine (``local``) or on a board over the system's
``ssh``/``scp`` (``ssh``), behind one interface.

- ``call(request)``: run the agent with a JSON request; its progress lines go to ``progress``.
- ``send(path)``: a file into the device's blob store, named by its sha256 — sent only when absent.
- ``fetch(remote, local)``: a file back (written to a temporary name, then renamed).

SSH runs with ``BatchMode=yes`` (never a password prompt), ``StrictHostKeyChecking=yes`` (an unknown
or changed host key is an error, not a silent accept) and a shared master connection
(``ControlMaster``/``ControlPersist``), so the many short calls of a run pay the handshake once. Its
control socket lives in the run folder (``<run>/.ssh-control/<pid>/``, or a short hashed folder under
the user's runtime folder when that path is too long for a unix socket, recorded there); ``close``
ends the master (``ssh -O exit``), and a folder left by a killed run is cleaned by the next one.
``--`` comes before the destination; every path reaches the board's shell quoted, and files travel
through ``ssh cat`` (no scp, whose legacy protocol hands the remote path to a shell).
Every failure becomes a one-line ``DeviceError`` saying what to do.
"""

import hashlib
import math
import os
import shlex
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from pipeline.device.errors import DeviceError, classify_ssh_failure
from pipeline.device.process import REMOTE_PID, AgentProcess, last_line, run_command
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

    def agent_command(self):
        return "cd {} && exec {} -m {} --serve".format(shlex.quote(self.agent_home), shlex.quote(self.python),
                                                       AGENT_PACKAGE)

    def end_remote(self, pid):
        """End the process group ``pid`` on the device (the agent, after a timeout); local: nothing to do (the
        agent's group is ended with its process)."""

    def agent_exited(self, code, stderr, what):
        """The error for an agent process that ended without answering."""
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


CONTROL = ".ssh-control"  # in the run folder: one folder per deploy process holding its ssh control socket
SOCKET_MAX = 107 - 17  # a unix socket path's bytes (sun_path), less the ".XXXXXXXXXXXXXXXX" ssh adds while binding


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _runtime_dir():
    """The user's runtime folder ($XDG_RUNTIME_DIR) or the temporary folder: short paths, for sockets."""
    folder = os.environ.get("XDG_RUNTIME_DIR")
    if folder and os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
        return folder
    return tempfile.gettempdir()


def _private_dir(path):
    """Make ``path`` (mode 700) or reuse it when it is this user's real folder; a DeviceError otherwise."""
    try:
        os.mkdir(str(path), 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise DeviceError("cannot make the ssh control folder {}: {}".format(path, e.strerror))
    info = os.lstat(str(path))
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise DeviceError("{} is not a folder of this user (a link, a file or someone else's); deploy keeps its ssh "
                          "control socket there: remove it and re-run".format(path))
    return Path(path)


class SshTransport(Transport):
    """The agent on a board, through the system's ssh."""

    kind = "ssh"

    def __init__(self, cfg, progress=None, python=None, run_dir=None):
        super().__init__(cfg, progress, python, run_dir)
        self._home_relative = None if self._work.startswith("/") else self._work[2:] if self._work.startswith("~/") \
            else self._work  # ~/x or x: under the login's home, asked once (a quoted ~ would not expand)
        self.control_dir = None  # this process's folder (made on the first ssh command), the socket in it or elsewhere
        self.control_path = None
        self._short_dir = None
        self._ready = False
        timeout = float(cfg.connect_timeout_s)
        # ssh takes whole seconds, and reads 0 as "no timeout": round up, never to 0 (the sub-second part is
        # enforced by deploy's own connection check before ssh runs, see _reach)
        options = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout={}".format(
            connect_timeout_option(timeout)), "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
            "-o", "ControlMaster=auto", "-o", "ControlPersist=120", "-o", "LogLevel=ERROR"]
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

    # -- before the first ssh command: the key, the connection's deadline, the control socket

    def _prepare(self):
        if self._ready:
            return
        self._check_files()
        self._open_control()
        self._reach()
        self._ready = True

    def _check_files(self):
        """An identity or known-hosts file that ssh cannot use, named as such (ssh would only warn and go on,
        and the board's refusal would read as a key it does not know)."""
        for key, value, secret in (("identity_file", self.cfg.identity_file, True),
                                   ("known_hosts_file", self.cfg.known_hosts_file, False)):
            if not value:
                continue
            path = os.path.expanduser(value)
            try:
                info = os.stat(path)
                if stat.S_ISDIR(info.st_mode):
                    raise DeviceError("device.{} {}: is a folder, not a file; give the {} file".format(
                        key, value, "private key" if secret else "known_hosts"))
                with open(path, "rb"):
                    pass
            except FileNotFoundError:
                raise DeviceError("device.{} {}: no such file ({}); give the path of {}".format(
                    key, value, path, "the private key (ssh-keygen makes one, ssh-copy-id installs its .pub on the "
                                      "board)" if secret else "a known_hosts file holding the board's host key"))
            except OSError as e:
                raise DeviceError("device.{} {}: cannot read it ({}); check its owner and mode".format(
                    key, value, e.strerror))
            if secret and info.st_uid == os.getuid() and info.st_mode & 0o077:
                raise DeviceError("device.identity_file {}: others can read it (mode {:o}), and ssh refuses such a "
                                  "key: chmod 600 {}".format(value, stat.S_IMODE(info.st_mode), shlex.quote(path)))

    def _reach(self):
        """Enforce device.connect_timeout_s to the fraction of a second ssh cannot take: a TCP connection and the
        server's first line within it (where ssh -G shows no proxy; otherwise ssh's rounded-up value rules)."""
        timeout = float(self.cfg.connect_timeout_s)
        if timeout == math.ceil(timeout):
            return  # whole seconds: ssh's ConnectTimeout is exact
        try:
            shown = subprocess.run(["ssh", "-G", "-p", str(self.cfg.port), "--", self.destination],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return
        settings = {}
        for line in shown.stdout.decode("utf-8", "replace").splitlines():
            key, _, value = line.partition(" ")
            settings.setdefault(key.lower(), value.strip())
        if shown.returncode != 0 or settings.get("proxycommand", "none") != "none" or \
                settings.get("proxyjump", "none") != "none":
            return
        host, port = settings.get("hostname", self.cfg.host), int(settings.get("port", self.cfg.port))
        deadline = time.monotonic() + timeout
        try:
            with socket.create_connection((host, port), timeout=timeout) as conn:
                conn.settimeout(max(0.001, deadline - time.monotonic()))
                if not conn.recv(1):
                    return  # closed at once: ssh says why
        except socket.timeout:
            raise DeviceError("device {}: connection to {}:{} timed out after {} s: is the board on and reachable, and "
                              "is it sshd on device.port? (device.connect_timeout_s)".format(
                                  self.describe(), host, port, timeout))
        except OSError:
            return  # refused, unresolvable, unreachable: ssh's own message names it

    def _open_control(self):
        """This process's control folder in the run folder (or under the runtime folder when the run folder's path
        is too long for a socket, recorded in the run folder), after ending the connections of killed runs."""
        if self.run_dir is not None and os.path.isdir(str(self.run_dir)):
            from pipeline.files import refuse_link

            refuse_link(Path(self.run_dir) / CONTROL)
            base = _private_dir(Path(os.path.abspath(str(self.run_dir))) / CONTROL)
        else:
            base = _private_dir(Path(_runtime_dir()) / "deploy-ssh-{}".format(os.getuid()))
        self.clean_stale(base)
        mine = _private_dir(base / str(os.getpid()))
        path = mine / "cm"
        if len(os.fsencode(str(path))) > SOCKET_MAX:
            self._short_dir = _private_dir(Path(_runtime_dir()) / _short_name(mine))
            path = self._short_dir / "cm"
            with open(str(mine / "socket"), "w") as handle:  # where it is, for close() and for the next run's cleanup
                handle.write(str(path) + "\n")
        self.control_dir, self.control_path = mine, str(path)

    def clean_stale(self, base):
        """End the master connection and remove the folder of every process in ``base`` that is gone (a run
        killed with kill -9 leaves its master for ControlPersist's 120 s and its folder for good)."""
        try:
            names = os.listdir(str(base))
        except OSError:
            return
        for name in names:
            if not name.isdigit() or int(name) == os.getpid() or _alive(int(name)):
                continue
            folder = Path(base) / name
            self._end_master(*_socket_of(folder))
            self.log("device: removed the ssh control socket of process {}, which ended without closing it".format(name))

    def _end_master(self, socket_path, folder, short_dir):
        if socket_path and os.path.exists(socket_path):
            try:
                subprocess.run(["ssh", "-o", "ControlPath={}".format(socket_path), "-O", "exit", "-p",
                                str(self.cfg.port), "--", self.destination], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        for path in (short_dir, folder):
            if path is not None and not os.path.islink(str(path)):
                shutil.rmtree(str(path), ignore_errors=True)

    def _argv(self, command):
        self._prepare()
        return ["ssh"] + self.options + ["-o", "ControlPath={}".format(self.control_path), "-p", str(self.cfg.port),
                                         "--", self.destination, command]

    def exec(self, command, stdin=None, timeout=None, what="a command", stream=False, stdin_path=None,
             stdout_path=None):
        res = run_command(self._argv(command), stdin, timeout, what, self, stream, stdin_path, stdout_path)
        if res.returncode == 255:
            raise classify_ssh_failure(res.stderr, self, what)
        return res

    def agent_command(self):
        # sshd starts the login shell as a session leader: $$ is the agent's pid and process group after exec
        return 'echo "{}$$" >&2; {}'.format(REMOTE_PID, super().agent_command())

    def end_remote(self, pid):
        """Kill the agent's process group on the board: ssh going away does not stop a busy agent or its children."""
        try:
            self.exec("kill -KILL -- -{} 2>/dev/null; true".format(int(pid)), timeout=30, what="ending the agent")
        except DeployError:
            pass  # the board is gone too: nothing more to do from here

    def agent_exited(self, code, stderr, what):
        if code == 255:
            return classify_ssh_failure(stderr, self, what)
        return super().agent_exited(code, stderr, what)

    def _copy_to(self, local, remote):
        name = Path(local).name
        res = self.exec("cat > {}".format(shlex.quote(remote)), what="sending " + name, stdin_path=local)
        if res.returncode != 0:
            raise DeviceError("could not send {} to {} ({}): {}".format(name, self.describe(), remote,
                                                                       last_line(res.stderr)))

    def _copy_from(self, remote, local):
        res = self.exec("cat {}".format(shlex.quote(remote)), what="fetching " + remote.rsplit("/", 1)[-1],
                        stdout_path=local)
        if res.returncode != 0:
            raise DeviceError("could not read {} on {}: {}".format(remote, self.describe(), last_line(res.stderr)))

    def close(self):
        """Stop the agent and the master connection, and remove the control folder."""
        self._stop_agent()
        if self.control_dir is not None:
            self._end_master(self.control_path, self.control_dir, self._short_dir)
            try:
                os.rmdir(str(self.control_dir.parent))  # the run folder's .ssh-control, when no other run uses it
            except OSError:
                pass
            self.control_dir = None
            self._ready = False


def connect_timeout_option(seconds):
    """ssh's ConnectTimeout for ``seconds``: whole seconds, rounded up, at least 1 (ssh reads 0 as no timeout)."""
    return max(1, int(math.ceil(seconds)))


def _short_name(folder):
    """The runtime folder's name for the control socket of ``folder`` (a process's folder in a run folder)."""
    return "deploy-ssh-{}".format(hashlib.sha256(os.fsencode(str(folder))).hexdigest()[:12])


def _socket_of(folder):
    """(socket path, folder, short folder or None) of a process's control folder."""
    record = Path(folder) / "socket"
    if record.is_file() and not record.is_symlink():
        path = record.read_text(encoding="utf-8", errors="replace").strip()
        short = os.path.dirname(path)
        if os.path.basename(short) == _short_name(folder) and os.path.isdir(short) and not os.path.islink(short) \
                and os.stat(short).st_uid == os.getuid():  # only the folder deploy would make for it: no link, no other
            return path, Path(folder), Path(short)
        return None, Path(folder), None  # not one deploy made: leave it alone
    return str(Path(folder) / "cm"), Path(folder), None


def _size(path):
    n = Path(path).stat().st_size
    return "{:.1f} MB".format(n / 1e6) if n >= 1e5 else "{} bytes".format(n)


def open_transport(cfg, progress=None, python=None, run_dir=None):
    """The transport of a device: section; ``python`` is the agent's interpreter (``agent_python``); ``run_dir``
    the run folder (ssh keeps its control socket there)."""
    return (SshTransport if cfg.transport == "ssh" else LocalTransport)(cfg, progress, python, run_dir)
