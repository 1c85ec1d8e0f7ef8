"""One-line errors for what goes wrong with a device: what happened, on which board, what to do.

``DeviceError`` exits with code 5 (README, "Exit codes"); a stage that fails because of the device
reports the same line.
"""

import re
import signal

from pipeline.errors import EXIT_DEVICE, DeployError

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class DeviceError(DeployError):
    def __init__(self, message):
        super().__init__(message, code=EXIT_DEVICE)


# ssh's own messages (OpenSSH 7.6 on JetPack 4 to 9.x) -> what to do; the first match wins
_SSH = (
    ("Permission denied", "the board refused the key{key}: add its .pub to ~/.ssh/authorized_keys of {user} on "
                          "the board (ssh-copy-id), or set device.identity_file"),
    ("Host key verification failed", "the board's host key is not in known_hosts (or changed): connect once with "
                                     "`ssh -p {port} {dest}` to check and accept it, or set device.known_hosts_file"),
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "the board's host key changed: check it, then remove the old key "
                                               "with ssh-keygen -R"),
    ("Connection refused", "connection refused: is sshd running on the board, and is device.port ({port}) right?"),
    ("Could not resolve hostname", "cannot resolve device.host {host}: check the name or use the board's IP"),
    ("No route to host", "no route to device.host {host}: is the board on this network?"),
    ("timed out", "connection to {host}:{port} timed out: is the board on and reachable? (device.connect_timeout_s)"),
    ("Network is unreachable", "network unreachable for device.host {host}"),
    ("Identity file", "device.identity_file{key} is not readable: check the path"),
    ("no such identity", "device.identity_file{key} is not readable: check the path"),
    ("bad permissions", "device.identity_file{key} has permissions ssh refuses: chmod 600 it"),
    ("UNPROTECTED PRIVATE KEY", "device.identity_file{key} has permissions ssh refuses: chmod 600 it"),
    ("closed by remote host", "the board closed the connection during {what}: re-run (finished stages are cached)"),
    ("Connection reset", "the connection to the board was reset during {what}: re-run (finished stages are cached)"),
    ("Broken pipe", "lost the connection to the board during {what}: re-run (finished stages are cached)"),
    ("closed", "lost the connection to the board during {what}: re-run (finished stages are cached)"),
)


def classify_ssh_failure(stderr, transport, what):
    """The DeviceError for an ssh/scp exit 255 (or scp failure), from ssh's own message."""
    cfg = transport.cfg
    text = stderr or ""
    fields = {"port": cfg.port, "host": cfg.host, "user": cfg.user or "your user", "dest": transport.destination,
              "what": what, "key": " ({})".format(cfg.identity_file) if cfg.identity_file else ""}
    for needle, advice in _SSH:
        if needle.lower() in text.lower():
            return DeviceError("device {}: {}".format(transport.describe(), advice.format(**fields)))
    last = [line.strip() for line in text.splitlines() if line.strip()]
    if not last:  # ssh killed or its connection dropped without a word
        return DeviceError("device {}: lost the connection during {} (ssh exited 255 without a message); check the "
                           "board and re-run (finished stages are cached)".format(transport.describe(), what))
    return DeviceError("device {}: ssh failed during {}: {}".format(transport.describe(), what, printable(last[-1])))




def printable(text):
    """``text`` (a board's words: an agent's error, ssh's stderr) safe to show on a terminal: every control
    character but tab and newline -- ESC, BEL, backspace, carriage return, DEL, the C1 range -- written
    as an escape (``\\x1b``), so an answer cannot recolour, retitle or rewrite the user's terminal."""
    return _CONTROL.sub(lambda m: "\\x{:02x}".format(ord(m.group())), str(text))


# What a signal death of the agent means on a Jetson, and what to do; the rest are named as they are.
_SIGNAL_ADVICE = {
    signal.SIGKILL: "most likely out of memory (the kernel's OOM killer; `dmesg` on the board says): lower "
                    "stages.engine.workspace_mb / stages.engine.max_batch_size (and the benchmark's batch sizes), or "
                    "stop what else uses the board's memory",
    signal.SIGILL: "an illegal instruction, the known death of numpy's OpenBLAS on TX2/Nano: set OPENBLAS_CORETYPE=ARMV8 "
                   "for device.python on the board (a line OPENBLAS_CORETYPE=ARMV8 in /etc/environment reaches ssh "
                   "sessions; docs/device.md)",
    signal.SIGSEGV: "a crash in a native library ({running}); re-run it, and if it dies again report it with the board's "
                    "JetPack and the build log",
    signal.SIGBUS: "a crash in a native library ({running}) (a bus error: often a full disk or memory under device.work_dir)",
    signal.SIGABRT: "aborted by a native library ({running}): its message, if any, is above",
}


def signal_of(code, shell=False):
    """The signal that ended a process with exit ``code``: -N from Python's subprocess, or 128+N as a shell
    reports a child's death (``shell``: the code came from a shell, as over ssh or from a wrapper script)."""
    if code is None:
        return None
    if code < 0:
        return -code
    if shell and 128 < code < 128 + 65:
        return code - 128
    return None


def native_library(request):
    """The native library a request runs in on the board, in words (for a crash's message)."""
    request = request if isinstance(request, dict) else {}
    command = request.get("command")
    if command == "build":
        return "TensorRT's builder{}, building {}".format(" through trtexec" if request.get("builder") == "trtexec" else "",
                                                           request.get("precision") or "the engine")
    if command == "build_uff":
        return "NVIDIA's uff converter or TensorRT's builder"
    if command in ("benchmark", "infer", "describe"):
        return "ONNX Runtime" if request.get("backend") == "onnxruntime" else "TensorRT's runtime or CUDA"
    if command in ("ping", "probe"):
        return "the import of numpy or TensorRT's Python bindings"
    return None


def signal_death(number, what, where, running=None):
    """The DeviceError for an agent killed by signal ``number`` during ``what`` on ``where``; ``running``
    names the native library the request was in (TensorRT's builder, ONNX Runtime...)."""
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "signal {}".format(number)
    advice = _SIGNAL_ADVICE.get(number)
    head = "device {}: the agent was killed by {} (signal {}, exit {}) during {}".format(
        where, name, number, 128 + number, what)
    if advice is None:
        return DeviceError("{}{}; check the board (dmesg) and re-run".format(
            head, " (in {})".format(running) if running else ""))
    return DeviceError("{}: {}".format(head, advice.format(running=running or "TensorRT, CUDA or numpy")))


def agent_failure(answer, where, what):
    """The error for an agent's ``{"ok": false}`` answer: a DeviceError for the device's own state,
    a StageFailed-style code 3 for a build or run that failed on a healthy device."""
    from pipeline.errors import EXIT_STAGE_FAILED

    kind, message = answer.get("kind", "internal"), answer.get("error", "no message")
    line = "device {}: {}: {}".format(where, what, printable(message))
    if kind in ("build-failed", "bad-batch", "bad-model", "tensorrt", "run-failed"):
        return DeployError(line, EXIT_STAGE_FAILED)
    if kind == "internal":
        return DeviceError(line + " (an agent error: please report it)")
    return DeviceError(line)
