"""Issue 22, point 4: device settings validated and quoted end to end -- timeouts as real numbers,
work_dir with any characters over local and ssh, host/user never read as ssh options, identity-file
problems named as such, a silent device.python named, nothing the agent starts outliving a timeout,
and the ssh control socket in the run's own folder, closed at the end and cleaned after a kill -9."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.device.client import Device
from pipeline.device.errors import DeviceError
from pipeline.device.ssh import SshTransport, connect_timeout_option
from pipeline.errors import EXIT_DEVICE

from devicekit import device_cfg, ssh_cfg, tiny_onnx
from devicekit import sshd_server  # noqa: F401  (the `sshd` fixture)

ROOT = Path(__file__).resolve().parents[2]


def _one_line_error(call):
    with pytest.raises(DeviceError) as err:
        call()
    message = str(err.value)
    assert "\n" not in message and err.value.code == EXIT_DEVICE
    return message


def _script(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


# ------------------------------------------------------------------ the schema


def _config_problems(tmp_path, device_yaml):
    from pipeline.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text("run: {name: x}\nmodel: {zoo: small_cnn}\ndataset: {path: data}\ntarget: jetson_tx2\n"
                    "stages: {check: {}}\ndevice: " + device_yaml + "\n")
    try:
        load_config(path, [])
    except Exception as e:  # ConfigError: the list of problems, one line each
        return list(getattr(e, "problems", [str(e)]))
    return []


@pytest.mark.parametrize("key, value", [("host", "-oProxyCommand=touch /tmp/x"), ("user", "-oProxyCommand=x"),
                                        ("host", "board one"), ("user", "")])
def test_host_and_user_that_ssh_would_read_as_an_option_are_refused(tmp_path, key, value):
    device = {"transport": "ssh", "host": "board"}
    device[key] = value
    problems = [p for p in _config_problems(tmp_path, json.dumps(device)) if "device." + key in p]
    assert problems and "\n" not in problems[0], _config_problems(tmp_path, json.dumps(device))


@pytest.mark.parametrize("value", ['""', '"   "'])
def test_an_empty_work_dir_is_refused(tmp_path, value):
    problems = [p for p in _config_problems(tmp_path, "{work_dir: " + value + "}") if "device.work_dir" in p]
    assert problems and "current folder" in problems[0]


@pytest.mark.parametrize("value", ["0", "-1", ".nan"])
def test_a_connect_timeout_at_or_below_zero_is_refused(tmp_path, value):
    assert [p for p in _config_problems(tmp_path, "{connect_timeout_s: " + value + "}") if "connect_timeout_s" in p]


# ------------------------------------------------------------------ ssh's arguments


def test_connect_timeout_is_rounded_up_never_to_zero(tmp_path):
    assert [connect_timeout_option(t) for t in (0.001, 0.5, 1, 1.0, 2.1, 10)] == [1, 1, 1, 1, 3, 10]
    cfg = device_cfg(transport="ssh", host="board", connect_timeout_s=0.5, work_dir="/w")
    transport = SshTransport(cfg, run_dir=tmp_path)
    assert "ConnectTimeout=1" in transport.options  # int(0.5) was 0: ssh reads 0 as "no timeout"


def test_the_destination_follows_a_double_dash(tmp_path):
    transport = SshTransport(device_cfg(transport="ssh", host="board", user="nvidia", work_dir="/w"), run_dir=tmp_path)
    try:
        argv = transport._argv("true")
        assert argv[-3:] == ["--", "nvidia@board", "true"]
    finally:
        transport.close()


def test_a_sub_second_timeout_to_a_silent_port_ends_in_time(sshd, tmp_path):
    """A port that accepts and never speaks: before, ConnectTimeout=0 (int(0.5)) hung the run for good."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    caught = {}

    def ping():
        dev = Device(ssh_cfg(sshd, tmp_path / "w", port=silent.getsockname()[1], connect_timeout_s=0.5))
        try:
            dev.ping()
        except DeviceError as e:
            caught["error"] = e
        finally:
            dev.transport.close()

    started = time.monotonic()
    thread = threading.Thread(target=ping, daemon=True)
    thread.start()
    thread.join(timeout=20)
    silent.close()
    assert not thread.is_alive(), "a 0.5 s connect timeout hung"
    assert time.monotonic() - started < 5
    message = str(caught["error"])
    assert "timed out" in message and "device.connect_timeout_s" in message and "\n" not in message


# ------------------------------------------------------------------ work_dir with any characters


WEIRD = "dev work/it's \"q\" $(touch {canary}) `touch {canary}` ;&|*"


@pytest.mark.parametrize("transport", ["local", "ssh"])
def test_a_work_dir_with_spaces_quotes_and_substitutions(request, tmp_path, transport):
    canary = tmp_path / "EXECUTED"
    work = tmp_path / WEIRD.format(canary=canary)
    if transport == "local":
        dev = Device(device_cfg(work_dir=str(work)))
    else:
        dev = Device(ssh_cfg(request.getfixturevalue("sshd"), work), run_dir=tmp_path)
    try:
        model = tiny_onnx(tmp_path / "m.onnx")
        remote = dev.transport.send(model)
        assert remote.startswith(str(work) + "/blobs/")
        assert dev.transport.send(model) == remote  # found there the second time: the listing reads the name right
        answer = dev.call({"command": "describe", "model": remote, "backend": "onnxruntime"})
        assert answer["inputs"][0]["name"] == "input"
        back = dev.transport.fetch(remote, tmp_path / "back.onnx")
        assert back.read_bytes() == model.read_bytes()
    finally:
        dev.transport.close()
    assert (work / "blobs").is_dir() and Path(remote).is_file()  # the folder has that exact name
    assert not canary.exists() and not (tmp_path / "touch").exists()  # nothing was executed


# ------------------------------------------------------------------ identity files


def test_a_missing_identity_file_is_named_not_a_refused_key(sshd, tmp_path):
    dev = Device(ssh_cfg(sshd, tmp_path / "w", identity_file=str(tmp_path / "nope_key")))
    try:
        message = _one_line_error(dev.ping)
    finally:
        dev.transport.close()
    assert "device.identity_file" in message and "no such file" in message and "refused" not in message


def test_an_identity_file_that_is_a_folder_is_named(sshd, tmp_path):
    dev = Device(ssh_cfg(sshd, tmp_path / "w", identity_file=str(tmp_path)))
    try:
        message = _one_line_error(dev.ping)
    finally:
        dev.transport.close()
    assert "device.identity_file" in message and "folder" in message and "refused" not in message


def test_an_identity_file_others_can_read_is_named(sshd, tmp_path):
    key = tmp_path / "open_key"
    key.write_bytes(Path(sshd.key).read_bytes())
    key.chmod(0o644)
    dev = Device(ssh_cfg(sshd, tmp_path / "w", identity_file=str(key)))
    try:
        message = _one_line_error(dev.ping)
    finally:
        dev.transport.close()
    assert "device.identity_file" in message and "chmod 600" in message and "refused the key" not in message


# ------------------------------------------------------------------ device.python and the agent's answers


def test_a_python_that_exits_without_output_names_the_key_program_and_code(tmp_path):
    python = _script(tmp_path / "silent-python", "exit 3\n")
    dev = Device(device_cfg(work_dir=str(tmp_path / "work"), python=str(python)))
    try:
        message = _one_line_error(dev.ping)
    finally:
        dev.transport.close()
    assert "device.python" in message and str(python) in message and "code 3" in message


@pytest.mark.parametrize("line", ['[1, 2]', 'null', '"ok"', '{"ok": "yes", "result": 1}', '{"ok": true}',
                                  '{"ok": false, "error": ["a", "list"], "kind": 7}', '{"a": 1' + '}' * 3,
                                  '[' * 100000])
def test_a_malformed_agent_line_is_one_line(tmp_path, line):
    answer = tmp_path / "answer"
    answer.write_text(line + "\n")
    python = _script(tmp_path / "odd-agent", 'read request\ncat "{}"\nread more\n'.format(answer))
    dev = Device(device_cfg(work_dir=str(tmp_path / "work"), python=str(python)))
    try:
        message = _one_line_error(dev.ping)
    finally:
        dev.transport.close()
    assert "agent" in message or "ping" in message


# ------------------------------------------------------------------ nothing outlives a timeout


def _gone(pid, within=10):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open("/proc/{}/stat".format(pid)) as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True  # dead, waiting for its reaper
        except OSError:
            return True
        time.sleep(0.1)
    return False


def test_the_agents_children_do_not_outlive_a_timeout(tmp_path):
    pidfile = tmp_path / "child.pid"
    python = _script(tmp_path / "busy-agent", "sleep 300 &\necho $! > '{}'\nsleep 300\n".format(pidfile))
    dev = Device(device_cfg(work_dir=str(tmp_path / "work"), python=str(python)))
    try:
        started = time.monotonic()
        message = _one_line_error(lambda: dev.call({"command": "ping"}, timeout=1, what="ping"))
        assert "took longer than 1 s" in message and time.monotonic() - started < 8
        child = int(pidfile.read_text())
        assert _gone(child), "the agent's child {} is still running after the timeout".format(child)
    finally:
        dev.transport.close()


def test_a_commands_children_do_not_outlive_its_timeout(tmp_path):
    pidfile = tmp_path / "child.pid"
    dev = Device(device_cfg(work_dir=str(tmp_path / "work")))
    try:
        _one_line_error(lambda: dev.transport.exec("sleep 300 & echo $! > '{}'; sleep 300".format(pidfile), timeout=1))
        assert _gone(int(pidfile.read_text()))
    finally:
        dev.transport.close()


# ------------------------------------------------------------------ the ssh control socket


def _master_running(sshd, socket_path):
    return subprocess.run(["ssh", "-o", "ControlPath={}".format(socket_path), "-O", "check", "-p", str(sshd.port),
                           "--", "127.0.0.1"], capture_output=True).returncode == 0


def test_the_control_socket_is_in_the_run_folder_and_closed_at_the_end(sshd, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    dev = Device(ssh_cfg(sshd, tmp_path / "w"), run_dir=run)
    dev.ping()
    socket_path = dev.transport.control_path
    assert socket_path == str(run / ".ssh-control" / str(os.getpid()) / "cm") and Path(socket_path).is_socket()
    assert _master_running(sshd, socket_path)
    dev.transport.close()
    assert not _master_running(sshd, socket_path)
    assert not (run / ".ssh-control").exists()


def test_a_run_folder_too_deep_for_a_socket_records_a_short_one(sshd, tmp_path):
    run = tmp_path / ("r" * 60) / ("u" * 60)
    run.mkdir(parents=True)
    dev = Device(ssh_cfg(sshd, tmp_path / "w"), run_dir=run)
    try:
        dev.ping()
        socket_path = dev.transport.control_path
        assert len(socket_path) < 90 and Path(socket_path).is_socket()
        assert (run / ".ssh-control" / str(os.getpid()) / "socket").read_text().strip() == socket_path
    finally:
        dev.transport.close()
    assert not Path(socket_path).parent.exists() and not (run / ".ssh-control").exists()


def test_a_control_folder_that_is_a_link_is_refused(sshd, tmp_path):
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run.mkdir()
    elsewhere.mkdir()
    (run / ".ssh-control").symlink_to(elsewhere)
    dev = Device(ssh_cfg(sshd, tmp_path / "w"), run_dir=run)
    try:
        with pytest.raises(Exception) as err:
            dev.ping()
    finally:
        dev.transport.close()
    assert "symbolic link" in str(err.value) and list(elsewhere.iterdir()) == []


KILLED_RUN = """
import os, sys
sys.path.insert(0, {root!r})
from pipeline.config.schema import DeviceSection
from pipeline.device.client import Device
dev = Device(DeviceSection(**{cfg!r}), run_dir={run!r})
dev.ping()
print(dev.transport.control_path, flush=True)
os.kill(os.getpid(), 9)
"""


def test_a_kill_9_runs_master_and_folder_are_cleaned_by_the_next_run(sshd, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    cfg = dict(transport="ssh", host="127.0.0.1", port=sshd.port, user=sshd.user, identity_file=str(sshd.key),
               known_hosts_file=str(sshd.known_hosts), work_dir=str(tmp_path / "w"), python=sys.executable)
    killed = subprocess.run([sys.executable, "-c", KILLED_RUN.format(root=str(ROOT), cfg=cfg, run=str(run))],
                            capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    stale = killed.stdout.strip()
    assert Path(stale).is_socket() and _master_running(sshd, stale)  # what a kill -9 leaves behind
    dev = Device(ssh_cfg(sshd, tmp_path / "w"), run_dir=run)
    try:
        dev.ping()
        assert not _master_running(sshd, stale) and not Path(stale).parent.exists()
        assert [p.name for p in (run / ".ssh-control").iterdir()] == [str(os.getpid())]
    finally:
        dev.transport.close()


def test_over_ssh_the_agent_and_its_children_do_not_outlive_a_timeout(sshd, tmp_path):
    """The board's sshd runs this test's user on this machine: the stand-in agent's processes are visible here."""
    pidfile = tmp_path / "child.pid"
    python = _script(tmp_path / "busy-agent", "sleep 300 &\necho $! > '{}'\necho $$ >> '{}'\nsleep 300\n".format(
        pidfile, pidfile))
    dev = Device(ssh_cfg(sshd, tmp_path / "w", python=str(python)), run_dir=tmp_path)
    try:
        message = _one_line_error(lambda: dev.call({"command": "ping"}, timeout=3, what="ping"))
        assert "took longer than 3 s" in message
        pids = [int(p) for p in pidfile.read_text().split()]
        assert len(pids) == 2 and all(_gone(pid) for pid in pids), "left running on the board: {}".format(pids)
    finally:
        dev.transport.close()


def test_a_recorded_socket_path_outside_deploys_own_is_not_followed(sshd, tmp_path):
    """A run folder travels between machines: a dead process's record that points at another folder is removed,
    the folder it names is left alone."""
    run, victim = tmp_path / "run", tmp_path / "deploy-ssh-victim"
    victim.mkdir(parents=True)
    (victim / "keep").write_text("x")
    stale = run / ".ssh-control" / "999999999"
    stale.mkdir(parents=True)
    (stale / "socket").write_text(str(victim / "cm") + "\n")
    dev = Device(ssh_cfg(sshd, tmp_path / "w"), run_dir=run)
    try:
        dev.ping()
    finally:
        dev.transport.close()
    assert not stale.exists() and (victim / "keep").read_text() == "x"
