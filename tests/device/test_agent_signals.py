"""An agent that dies of a signal, and an agent deploy stops, on both routes: through a real sshd on
127.0.0.1 (the board) and on this machine.

- ssh drops the remote exit-signal, so the remote shell must stay and report the agent's 128+N: a kill by
  the OOM killer (9), numpy's OpenBLAS SIGILL on TX2/Nano (4) and a native crash (11) each read as what
  they are, with what to do, never "lost the connection";
- deploy stops an agent with SIGTERM first (a wrapper traps it: agent-in-docker stops its container), then
  SIGKILL for what ignores it.
"""

import os
import signal
import stat
import sys
import time

import pytest

from pipeline.device.client import Device
from pipeline.device.errors import DeviceError, printable
from pipeline.errors import EXIT_DEVICE

from devicekit import device_cfg, ssh_cfg
from devicekit import sshd_server  # noqa: F401  (the `sshd` fixture)

BUILD = {"command": "build", "builder": "python", "precision": "fp16"}


def _executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def dying_agent(folder, number):
    """A board Python whose agent reads its request, then kills itself with signal ``number`` (no handler:
    the kernel's default action, as an OOM kill, an illegal instruction or a segfault would end it)."""
    return _executable(folder / "python-dies-of-{}".format(number), (
        "#!{}\nimport os, sys\nsys.stdin.readline()\nos.kill(os.getpid(), {})\nimport time\ntime.sleep(30)\n"
    ).format(sys.executable, number))


def dying_wrapper(folder, number):
    """device.python as a shell wrapper (agent-in-docker's shape): its child dies of the signal and the
    wrapper exits with the shell's 128+N."""
    child = dying_agent(folder, number)
    return _executable(folder / "wrapper-dies-of-{}".format(number), "#!/bin/sh\n{} \"$@\"\n".format(child))


def _cfg(route, sshd_or_none, tmp_path, python):
    if route == "ssh":
        return ssh_cfg(sshd_or_none, tmp_path / "work", python=python)
    return device_cfg(work_dir=str(tmp_path / "work"), python=python)


def _death(route, request, tmp_path, python, ask=BUILD, what="the engine build"):
    """The one-line error of a call whose agent ends without answering (``request``: pytest's, for the sshd)."""
    sshd = request.getfixturevalue("sshd") if route == "ssh" else None
    device = Device(_cfg(route, sshd, tmp_path, python))
    try:
        with pytest.raises(DeviceError) as err:
            device.call(dict(ask), timeout=60, what=what)
    finally:
        device.transport.close()
    message = str(err.value)
    assert "\n" not in message and err.value.code == EXIT_DEVICE
    assert "lost the connection" not in message and "ssh exited 255" not in message
    return message


@pytest.mark.parametrize("route", ["ssh", "local"])
def test_an_oom_kill_reads_as_memory_with_what_to_lower(route, request, tmp_path):
    message = _death(route, request, tmp_path, dying_agent(tmp_path, signal.SIGKILL))
    assert "SIGKILL (signal 9, exit 137) during the engine build" in message
    assert "out of memory" in message and "workspace_mb" in message and "max_batch_size" in message


@pytest.mark.parametrize("route", ["ssh", "local"])
def test_sigill_reads_as_openblas_on_tx2_and_nano(route, request, tmp_path):
    message = _death(route, request, tmp_path, dying_agent(tmp_path, signal.SIGILL), ask={"command": "ping"},
                     what="ping")
    assert "SIGILL (signal 4, exit 132) during ping" in message and "OPENBLAS_CORETYPE=ARMV8" in message


@pytest.mark.parametrize("route", ["ssh", "local"])
def test_a_segfault_names_the_native_library_that_was_running(route, request, tmp_path):
    message = _death(route, request, tmp_path, dying_agent(tmp_path, signal.SIGSEGV))
    assert "SIGSEGV (signal 11, exit 139)" in message and "native library (TensorRT's builder, building fp16)" in message
    bench = dict(command="benchmark", backend="onnxruntime")
    message = _death(route, request, tmp_path, dying_agent(tmp_path, signal.SIGSEGV), ask=bench, what="the benchmark")
    assert "during the benchmark: a crash in a native library (ONNX Runtime)" in message


@pytest.mark.parametrize("route", ["ssh", "local"])
def test_a_wrapper_that_reports_128_plus_n_maps_the_same(route, request, tmp_path):
    """device.python as a wrapper script (agent-in-docker): the signal reaches deploy as the shell's 137."""
    message = _death(route, request, tmp_path, dying_wrapper(tmp_path, signal.SIGKILL))
    assert "SIGKILL (signal 9, exit 137)" in message and "out of memory" in message


@pytest.mark.parametrize("route", ["ssh", "local"])
def test_a_real_exit_status_is_not_read_as_a_signal(route, request, tmp_path):
    python = _executable(tmp_path / "python-exits-3", "#!/bin/sh\necho 'agent: broken install' >&2\nexit 3\n")
    message = _death(route, request, tmp_path, python)
    assert "exit 3" in message and "broken install" in message and "signal" not in message


def trapping_agent(folder):
    """A board Python whose agent answers nothing, ignores its stdin closing, and writes ``<folder>/got-TERM`` when
    it gets SIGTERM (as agent-in-docker's trap stops its container), then exits."""
    marker = folder / "got-TERM"
    return _executable(folder / "python-traps-term", (
        "#!{}\nimport signal, sys, time\n"
        "def term(*_):\n    open({!r}, 'w').write('TERM')\n    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, term)\nsys.stdin.readline()\n"
        "while True:\n    time.sleep(0.1)\n").format(sys.executable, str(marker))), marker


@pytest.mark.parametrize("route", ["ssh", "local"])
def test_a_stopped_agent_gets_sigterm_before_sigkill(route, request, tmp_path):
    """deploy's timeout stops the agent's group with SIGTERM first on both routes (on the board too), so a wrapper
    can stop its container; the agent ends either way."""
    python, marker = trapping_agent(tmp_path)
    sshd = request.getfixturevalue("sshd") if route == "ssh" else None
    device = Device(_cfg(route, sshd, tmp_path, python))
    started = time.monotonic()
    try:
        with pytest.raises(DeviceError, match="took longer than 2 s"):
            device.call({"command": "ping"}, timeout=2, what="ping")
    finally:
        device.transport.close()
    deadline = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists() and marker.read_text() == "TERM"
    assert time.monotonic() - started < 30


def stubborn_agent(folder):
    """An agent that ignores SIGTERM (and its stdin closing) and records its pid: only SIGKILL ends it."""
    return _executable(folder / "python-ignores-term", (
        "#!{}\nimport os, signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "open({!r}, 'w').write(str(os.getpid()))\nsys.stdin.readline()\nwhile True:\n    time.sleep(0.1)\n"
    ).format(sys.executable, str(folder / "pid")))


@pytest.mark.parametrize("route", ["ssh", "local"])
def test_an_agent_that_ignores_sigterm_is_killed(route, request, tmp_path, monkeypatch):
    from pipeline.device import process

    monkeypatch.setattr(process, "STOP_GRACE_S", 1.0)
    sshd = request.getfixturevalue("sshd") if route == "ssh" else None
    device = Device(_cfg(route, sshd, tmp_path, stubborn_agent(tmp_path)))
    try:
        with pytest.raises(DeviceError, match="took longer than 2 s"):
            device.call({"command": "ping"}, timeout=2, what="ping")
    finally:
        device.transport.close()
    pid = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (its parent, sshd's session, not yet reaped) is dead
        with open("/proc/{}/stat".format(pid)) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_control_characters_from_the_board_are_escaped():
    """29.4: an agent's error text reaches the terminal without its raw ANSI escapes, BEL or carriage return."""
    from pipeline.device.errors import agent_failure
    from pipeline.device.process import parse_answer

    raw = '{"ok": false, "kind": "build-failed", "error": "\\u001b[2J\\u001b]0;pwned\\u0007boom\\rfake\\u009b"}'
    answer = parse_answer(raw, "board", "the build")
    message = str(agent_failure(answer, "board", "the build"))
    assert not any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f for c in message)
    assert "\\x1b[2J\\x1b]0;pwned\\x07boom fake\\x9b" in message
    assert printable("tab\tand newline\nstay") == "tab\tand newline\nstay"
    assert printable("plain words, ünïcode") == "plain words, ünïcode"


@pytest.mark.parametrize("route", ["ssh", "local"])
def test_an_interrupted_run_stops_its_busy_agent_at_once(route, request, tmp_path):
    """Ctrl-C, or deploy's SIGTERM (the nightly's `timeout`; pipeline.cli raises it as a KeyboardInterrupt), while a
    busy agent works: leaving the device's block sends the agent SIGTERM at once, not after the 10 s a stdin close
    is given to an idle agent."""
    python, marker = trapping_agent(tmp_path)
    sshd = request.getfixturevalue("sshd") if route == "ssh" else None

    interrupted = []

    def interrupt(*_):
        interrupted.append(time.time())
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            with Device(_cfg(route, sshd, tmp_path, python)) as device:
                device.transport.ensure_agent()
                signal.setitimer(signal.ITIMER_REAL, 2.0)
                device.call({"command": "build"}, timeout=60, what="the engine build")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    deadline = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the busy agent never got SIGTERM"
    assert marker.stat().st_mtime - interrupted[0] < 8  # a stdin close and its 10 s wait would come first
