"""Running the commands a transport needs: one command to its end (``run_command``) or the agent
serving a run (``AgentProcess``: a JSON line in, a JSON line out). The agent's progress lines on
stderr (``deploy-agent: ...``) go to the transport's progress log as they come; the rest is kept for
the error message.
"""

import json
import subprocess
import threading

from pipeline.device.errors import DeviceError

AGENT_PREFIX = "deploy-agent: "


def agent_progress(transport, line):
    """Log ``line`` as the device's progress if the agent wrote it; whether it did."""
    if not line.startswith(AGENT_PREFIX):
        return False
    transport.log("device: " + line[len(AGENT_PREFIX):])
    return True


class AgentProcess:
    """A running ``--serve`` agent: one JSON line per request and per answer; its stderr progress
    lines (``deploy-agent: ...``) go to the progress log as they come."""

    def __init__(self, argv, transport):
        import queue

        self.transport = transport
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            raise DeviceError("cannot run {}: {}; install it (apt install openssh-client)".format(argv[0], e.strerror))
        self.answers = queue.Queue()
        self.errors = []
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
            if not agent_progress(self.transport, line) and line:
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
            self.stop()
            raise DeviceError("{} on {} took longer than {} s; check the board (tegrastats) and re-run".format(
                what, self.transport.describe(), timeout))
        if raw is None:
            code = self.proc.wait()
            self.stderr_reader.join(timeout=5)
            raise self.transport.agent_exited(code, "\n".join(self.errors), what)
        try:
            return json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            raise DeviceError("the agent on {} answered {} with something that is not JSON: {}".format(
                self.transport.describe(), what, raw[:200]))

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_command(argv, stdin, timeout, what, transport, stream):
    """Run ``argv``; stderr lines from the agent (``deploy-agent: ...``) go to the progress log as they come."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        raise DeviceError("cannot run {} for {}: {}; install it (apt install openssh-client)".format(
            argv[0], what, e.strerror))
    errors, chunks = [], []

    def read_stderr():
        for raw in iter(proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            if not (stream and agent_progress(transport, line)):
                errors.append(line)

    readers = [threading.Thread(target=read_stderr, daemon=True),
               threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        try:
            if stdin:
                proc.stdin.write(stdin)
            proc.stdin.close()
        except BrokenPipeError:
            pass  # the command ended without reading: its exit code and stderr say why
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise DeviceError("{} on {} took longer than {} s; check the board (tegrastats) and re-run".format(
            what, transport.describe(), timeout))
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    for reader in readers:
        reader.join()
    out = b"".join(chunks)
    return Result(proc.returncode, out, "\n".join(errors))


def last_line(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
