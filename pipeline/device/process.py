"""Running the commands a transport needs: one command to its end (``run_command``) or the agent
serving a run (``AgentProcess``: a JSON line in, a JSON line out). The agent's progress lines on
stderr (``deploy-agent: ...``) go to the transport's progress log as they come; the rest is kept for
the error message.

Every command starts in a process group of its own (``start_new_session``): a timeout, a stop or a
kill ends the whole group, so nothing the agent started (a trtexec, a tegrastats sampler, a shell's
children) outlives it. The group gets SIGTERM first and SIGKILL only ``STOP_GRACE_S`` later: a wrapper
(``scripts/jetson/agent-in-docker``) traps the TERM and stops its container, which a SIGKILL of the
wrapper would leave running.

What the board's words reach the terminal as goes through ``errors.printable`` (no escape sequences).
"""

import json
import os
import signal
import subprocess
import threading

from pipeline.device.errors import DeviceError, native_library, printable

AGENT_PREFIX = "deploy-agent: "
REMOTE_PID = "deploy-agent-pid: "  # the ssh transport's first stderr line: the agent's process group on the board
REMOTE_EXIT = "deploy-agent-exit: "  # the ssh transport's last stderr line: the agent's exit status (128+N: signal N)
STOP_GRACE_S = 5.0  # between SIGTERM and SIGKILL when a stop or a timeout ends a group


def agent_progress(transport, line):
    """Log ``line`` as the device's progress if the agent wrote it; whether it did."""
    if not line.startswith(AGENT_PREFIX):
        return False
    transport.log("device: " + printable(line[len(AGENT_PREFIX):]))
    return True


def _popen(argv, **kw):
    return subprocess.Popen(argv, start_new_session=True, **kw)


def kill_group(proc, sig=signal.SIGKILL):
    """Send ``sig`` to ``proc``'s process group (its children included), then reap ``proc``. The group
    id is the leader's pid, which is not handed out again while any process of the group lives."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    if sig == signal.SIGKILL:
        proc.wait()


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(proc, grace=None):
    """End ``proc``'s process group: SIGTERM, then SIGKILL when anything of it is still there ``grace`` seconds
    later (default ``STOP_GRACE_S``); ``proc`` reaped. A wrapper gets the TERM it can trap (agent-in-docker stops
    its container); nothing of the group outlives this call."""
    import time

    grace = STOP_GRACE_S if grace is None else grace
    kill_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(proc.pid):
            return
        time.sleep(0.05)
    kill_group(proc, signal.SIGKILL)


def parse_answer(raw, where, what):
    """The agent's answer line as a dict with a boolean ``ok`` (and ``result`` when ok), or a one-line
    DeviceError: the line is the board's output, not to be trusted to have the shape."""
    shown = raw[:200] if isinstance(raw, bytes) else str(raw)[:200]
    try:
        answer = json.loads(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
    except (ValueError, RecursionError):
        raise DeviceError("the agent on {} answered {} with something that is not JSON: {!r}".format(where, what, shown))
    if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool) or (answer["ok"] and "result" not in answer):
        raise DeviceError("the agent on {} answered {} with JSON that is not an answer (an object with ok and result or "
                          "error): {!r}; is device.python running this deploy's agent?".format(where, what, shown))
    if not answer["ok"]:
        answer = dict(answer, kind=str(answer.get("kind") or "internal"),
                      error=printable(" ".join(str(answer.get("error") or "no message").split())[:2000]))
    return answer


class AgentProcess:
    """A running ``--serve`` agent: one JSON line per request and per answer; its stderr progress
    lines (``deploy-agent: ...``) go to the progress log as they come."""

    def __init__(self, argv, transport):
        import queue

        self.transport = transport
        try:
            self.proc = _popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            raise DeviceError("cannot run {}: {}; install it (apt install openssh-client)".format(argv[0], e.strerror))
        self.answers = queue.Queue()
        self.errors = []
        self.remote_pid = None
        self.remote_exit = None  # over ssh: the agent's exit status as the board's shell saw it
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self.stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.stderr_reader.start()

    def _read_stdout(self):
        for raw in iter(self.proc.stdout.readline, b""):
            self.answers.put(raw)
        self.answers.put(None)

    def _read_stderr(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            if line.startswith(REMOTE_PID) and self.remote_pid is None and line[len(REMOTE_PID):].isdigit():
                self.remote_pid = int(line[len(REMOTE_PID):])
            elif line.startswith(REMOTE_EXIT) and line[len(REMOTE_EXIT):].isdigit():
                self.remote_exit = int(line[len(REMOTE_EXIT):])
            elif not agent_progress(self.transport, line) and line:
                self.errors.append(line)

    def poll(self):
        return self.proc.poll()

    def ask(self, request, timeout, what):
        import queue

        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it ended: the answer queue says so below
        try:
            raw = self.answers.get(timeout=timeout)
        except queue.Empty:
            self.stop(kill=True)
            raise DeviceError("{} on {} took longer than {} s; check the board (tegrastats) and re-run".format(
                what, self.transport.describe(), timeout))
        if raw is None:
            code = self.proc.wait()
            self.stderr_reader.join(timeout=5)
            stop_group(self.proc)  # what it started goes with it
            if self.remote_exit is not None:  # over ssh: the board's shell said how the agent ended (ssh itself cannot)
                code = self.remote_exit
            raise self.transport.agent_exited(code, "\n".join(self.errors), what, running=native_library(request))
        return parse_answer(raw, self.transport.describe(), what)

    def stop(self, kill=False):
        """End the agent: its stdin closed (it leaves its loop) or, with ``kill`` or after 10 s, its whole
        process group stopped (SIGTERM, then SIGKILL: ``stop_group``); what it started and left behind is ended
        either way, on the board too."""
        ended = self.proc.poll() is not None
        if not ended and not kill:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
                ended = True
            except (OSError, subprocess.TimeoutExpired):
                pass
        stop_group(self.proc, 0 if ended else None)
        if not ended and self.remote_pid is not None:  # over ssh the agent runs on: end it there too
            self.transport.end_remote(self.remote_pid)


def run_command(argv, stdin, timeout, what, transport, stream, stdin_path=None, stdout_path=None):
    """Run ``argv`` to its end: a subprocess.CompletedProcess (stdout bytes, stderr text); stderr lines from the
    agent (``deploy-agent: ...``) go to the progress log as they come. ``stdin_path``/``stdout_path``: a file
    streamed in or written (a model sent or fetched), not held in memory."""
    opened = []
    try:
        source = open(str(stdin_path), "rb") if stdin_path is not None else subprocess.PIPE
        if stdin_path is not None:
            opened.append(source)
        sink = open(str(stdout_path), "wb") if stdout_path is not None else subprocess.PIPE
        if stdout_path is not None:
            opened.append(sink)
        proc = _popen(argv, stdin=source, stdout=sink, stderr=subprocess.PIPE)
    except OSError as e:
        for handle in opened:
            handle.close()
        if e.filename in (str(stdin_path), str(stdout_path)):
            raise DeviceError("cannot {} {}: {}".format("read" if e.filename == str(stdin_path) else "write",
                                                        e.filename, e.strerror))
        raise DeviceError("cannot run {} for {}: {}; install it (apt install openssh-client)".format(
            argv[0], what, e.strerror))
    for handle in opened:
        handle.close()  # the child has its own copies
    errors, chunks = [], []

    def read_stderr():
        for raw in iter(proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            if not (stream and agent_progress(transport, line)):
                errors.append(line)

    readers = [threading.Thread(target=read_stderr, daemon=True)]
    if stdout_path is None:
        readers.append(threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True))
    for reader in readers:
        reader.start()
    try:
        if stdin_path is None:
            try:
                if stdin:
                    proc.stdin.write(stdin)
                proc.stdin.close()
            except BrokenPipeError:
                pass  # the command ended without reading: its exit code and stderr say why
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        raise DeviceError("{} on {} took longer than {} s; check the board (tegrastats) and re-run".format(
            what, transport.describe(), timeout))
    except BaseException:
        stop_group(proc)
        raise
    for reader in readers:
        reader.join()
    out = b"".join(chunks)
    return subprocess.CompletedProcess(argv, proc.returncode, out, "\n".join(errors))


def last_line(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return printable(lines[-1]) if lines else "no message"
