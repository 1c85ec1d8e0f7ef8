"""The board over the system's ``ssh`` (``device.transport: ssh``), behind ``transport.Transport``.

SSH runs with ``BatchMode=yes`` (never a password prompt), ``StrictHostKeyChecking=yes`` (an unknown
or changed host key is an error, not a silent accept) and a shared master connection
(``ControlMaster``/``ControlPersist``), so the many short calls of a run pay the handshake once. Its
control socket lives in the run folder (``<run>/.ssh-control/<pid>/``, or a short hashed folder under
the user's runtime folder when that path is too long for a unix socket, recorded there); ``close``
ends the master (``ssh -O exit``), and a folder left by a killed run is cleaned by the next one.
``--`` comes before the destination; every path reaches the board's shell quoted, and files travel
through ``ssh cat`` (no scp, whose legacy protocol hands the remote path to a shell).
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
from pipeline.device.process import REMOTE_EXIT, REMOTE_PID, STOP_GRACE_S, last_line, run_command
from pipeline.device.transport import Transport
from pipeline.errors import DeployError

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
        """sshd starts the login shell as a session leader: $$ is the process group of the shell and the agent.
        Not ``exec``: ssh drops the remote exit-signal (OpenSSH's client reads only exit-status), so an agent
        killed by the OOM killer, SIGILL or SIGSEGV would read as a lost connection (ssh exits 255); the shell
        stays, sees the agent's 128+N and says it on stderr and in its own exit status."""
        return 'echo "{pid}$$" >&2; {agent}; status=$?; echo "{exit}$status" >&2; exit $status'.format(
            pid=REMOTE_PID, agent=super().agent_command(exec_=False), exit=REMOTE_EXIT)

    def end_remote(self, pid):
        """Stop the agent's process group on the board -- ssh going away does not stop a busy agent or its children:
        SIGTERM (a wrapper such as agent-in-docker traps it and stops its container), then SIGKILL for what is left
        after ``STOP_GRACE_S``."""
        group = "-{}".format(int(pid))
        script = ("kill -TERM -- {g} 2>/dev/null || exit 0; i=0; while kill -0 -- {g} 2>/dev/null && [ $i -lt {n} ]; "
                  "do sleep 0.2 2>/dev/null || sleep 1; i=$((i+1)); done; kill -KILL -- {g} 2>/dev/null; true").format(
                      g=group, n=int(STOP_GRACE_S * 5))
        try:
            self.exec(script, timeout=30 + STOP_GRACE_S * 5, what="ending the agent")
        except DeployError:
            pass  # the board is gone too: nothing more to do from here

    def agent_exited(self, code, stderr, what, running=None):
        if code == 255:
            return classify_ssh_failure(stderr, self, what)
        return super().agent_exited(code, stderr, what, running)

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

    def close(self, kill=False):
        """Stop the agent (at once with ``kill``) and the master connection, and remove the control folder."""
        self._stop_agent(kill)
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
