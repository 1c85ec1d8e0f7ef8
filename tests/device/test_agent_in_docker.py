"""scripts/jetson/agent-in-docker's container does not outlive the agent (issue 28, item 3).

No Docker here: a stand-in ``docker`` on PATH plays the CLI and the daemon as they behave for this script.
``docker run`` records its argv, creates a "container" -- the image's command in a session of its own,
which is how dockerd's containers stand apart from the CLI -- writes its id to ``--cidfile`` (refusing a
file that exists, as docker does), relays stdin/stdout/stderr (the container's stdin closes when the CLI
goes, its writes then fail), proxies TERM/INT to it (docker's default ``--sig-proxy``) and removes it on
exit (``--rm``). ``docker kill X`` (an id or a name) SIGKILLs the container, records the call, and says
"No such container" (exit 1) for one that is gone. The container's command is a busy agent: it reads its
first request and works on, never answering, as an agent in a long engine build does.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.device.client import Device
from pipeline.device.errors import DeviceError

from devicekit import device_cfg, ssh_cfg
from devicekit import sshd_server  # noqa: F401  (the `sshd` fixture)

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "scripts" / "jetson" / "agent-in-docker"

FAKE_DOCKER = r'''#!{python}
import json, os, signal, subprocess, sys, threading, uuid

state = os.environ["FAKE_DOCKER_STATE"]
argv = sys.argv[1:]
with open(os.path.join(state, "calls.log"), "a") as log:
    log.write(json.dumps({{"pid": os.getpid(), "argv": argv}}) + "\n")


def container_dir(ref):
    for cid in os.listdir(os.path.join(state, "containers")):
        folder = os.path.join(state, "containers", cid)
        with open(os.path.join(folder, "name")) as f:
            name = f.read()
        if ref in (cid, cid[:12], name):
            return folder
    return None


if argv[0] == "kill":
    folder = container_dir(argv[1])
    pid = None
    if folder is not None:
        with open(os.path.join(folder, "pid")) as f:
            pid = int(f.read())
    try:
        os.killpg(pid, signal.SIGKILL)
    except (TypeError, ProcessLookupError):
        sys.stderr.write("Error response from daemon: No such container: {{}}\n".format(argv[1]))
        sys.exit(1)
    print(argv[1])
    sys.exit(0)

assert argv[0] == "run", argv
options, i = {{}}, 1
while argv[i].startswith("-"):
    if argv[i] in ("--rm", "-i", "--init"):
        options[argv[i]] = True
        i += 1
    else:
        options.setdefault(argv[i], []).append(argv[i + 1])
        i += 2
command = argv[i + 1:]  # after the image
cidfile = options["--cidfile"][0] if "--cidfile" in options else None
if cidfile and os.path.exists(cidfile):
    sys.stderr.write("docker: Container ID file found, make sure the other container isn't running or delete "
                     "{{}}.\n".format(cidfile))
    sys.exit(125)
cid = uuid.uuid4().hex + uuid.uuid4().hex
folder = os.path.join(state, "containers", cid)
os.makedirs(folder)
with open(os.path.join(folder, "name"), "w") as f:
    f.write(options.get("--name", [cid[:12]])[0])
if cidfile:
    with open(cidfile, "w") as f:
        f.write(cid)
env = dict(os.environ, PATH=os.environ["FAKE_IMAGE_PATH"])
container = subprocess.Popen(command, env=env, cwd=options.get("-w", [None])[0], start_new_session=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
with open(os.path.join(folder, "pid"), "w") as f:
    f.write(str(container.pid))
with open(os.path.join(state, "cli.pid"), "w") as f:
    f.write(str(os.getpid()))


def proxy(number, frame):
    try:
        os.killpg(container.pid, number)
    except ProcessLookupError:
        pass


signal.signal(signal.SIGTERM, proxy)
signal.signal(signal.SIGINT, proxy)


def pump(source, sink, close=False):
    try:
        for chunk in iter(lambda: os.read(source.fileno(), 65536), b""):
            os.write(sink.fileno(), chunk)
    except OSError:
        pass
    if close:
        try:
            sink.close()
        except OSError:
            pass


threading.Thread(target=pump, args=(sys.stdin, container.stdin, True), daemon=True).start()
threading.Thread(target=pump, args=(container.stderr, sys.stderr), daemon=True).start()
pump(container.stdout, sys.stdout)
code = container.wait()
if options.get("--rm"):
    import shutil
    shutil.rmtree(folder, ignore_errors=True)
sys.exit(code if code >= 0 else 128 - code)
'''

BUSY_AGENT = r'''#!{python}
# the image's python3: an agent busy in a long build (reads its request, never answers, never reads again)
import os, sys, time
with open(os.path.join(os.environ["FAKE_DOCKER_STATE"], "container.pid"), "w") as f:
    f.write(str(os.getpid()))
sys.stdin.readline()
while True:
    time.sleep(0.1)
'''


@pytest.fixture
def docker(tmp_path):
    """(environment for the wrapper, state folder): the stand-in docker first on PATH."""
    state, bin_dir, image_bin = tmp_path / "docker-state", tmp_path / "bin", tmp_path / "image-bin"
    for folder in (state / "containers", bin_dir, image_bin):
        folder.mkdir(parents=True)
    for path, text in ((bin_dir / "docker", FAKE_DOCKER), (image_bin / "python3", BUSY_AGENT)):
        path.write_text(text.format(python=sys.executable))
        path.chmod(0o755)
    env = {"PATH": "{}:{}".format(bin_dir, os.environ.get("PATH", "/usr/bin:/bin")), "FAKE_DOCKER_STATE": str(state),
           "FAKE_IMAGE_PATH": str(image_bin), "DEPLOY_AGENT_IMAGE": "deploy-agent:test",
           "DEPLOY_GPU_NODES": "/nonexistent/gpu", "TMPDIR": str(tmp_path)}
    yield env, state
    pid_file = state / "container.pid"  # whatever a failing test left running goes
    if pid_file.exists():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def _calls(state):
    return [json.loads(line) for line in (state / "calls.log").read_text().splitlines()]


def _wait_for(path, seconds=20):
    deadline = time.monotonic() + seconds
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, "{} never appeared".format(path)
        time.sleep(0.05)
    return path.read_text()


def _gone(pid, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with open("/proc/{}/stat".format(pid)) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


def test_a_container_that_outlives_its_cli_is_killed_by_its_id(docker, tmp_path):
    """The docker CLI SIGKILLed (the OOM killer, a kill of the wrong process) leaves dockerd's container running;
    the wrapper sees its CLI end badly and kills the container by the id docker wrote to --cidfile."""
    env, state = docker
    home = tmp_path / "work" / "agent-0123456789abcdef"
    home.mkdir(parents=True)
    wrapper = subprocess.Popen(["sh", str(WRAPPER), "-m", "deploy_agent", "--serve"], cwd=str(home),
                               env=dict(env, HOME=str(tmp_path)), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        wrapper.stdin.write(b'{"command": "build"}\n')
        wrapper.stdin.flush()
        container = int(_wait_for(state / "container.pid"))
        os.kill(int(_wait_for(state / "cli.pid")), signal.SIGKILL)
        assert wrapper.wait(timeout=20) == 137
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
    assert _gone(container), "the container outlived its CLI and the wrapper"
    run, kill = [call["argv"] for call in _calls(state)]
    cidfile = run[run.index("--cidfile") + 1]
    (cid,) = os.listdir(str(state / "containers"))  # the killed container, not removed (its CLI was gone)
    assert kill == ["kill", cid]
    assert not os.path.exists(os.path.dirname(cidfile))  # the wrapper's cid folder is removed


def test_a_clean_exit_kills_nothing_and_leaves_no_cidfile(docker, tmp_path):
    env, state = docker
    image_bin = Path(env["FAKE_IMAGE_PATH"])
    (image_bin / "python3").write_text("#!/bin/sh\nread line\necho '{\"ok\": true, \"result\": {}}'\n")
    res = subprocess.run(["sh", str(WRAPPER), "-m", "deploy_agent", "--serve"], cwd=str(tmp_path), input=b"{}\n",
                         env=dict(env, HOME=str(tmp_path), DEPLOY_WORK_DIR=str(tmp_path / "w")), capture_output=True,
                         timeout=30)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"ok": True, "result": {}}
    assert [call["argv"][0] for call in _calls(state)] == ["run"]
    assert not list(tmp_path.glob("deploy-agent-cid.*"))


def _through(tmp_path, env):
    """device.python: a script that gives agent-in-docker this test's environment (an ssh session has its own)."""
    script = tmp_path / "agent-in-docker-here"
    exports = "".join("export {}={}\n".format(key, json.dumps(value)) for key, value in env.items())
    script.write_text("#!/bin/sh\n{}exec sh {} \"$@\"\n".format(exports, json.dumps(str(WRAPPER))))
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("route", ["ssh", "local"])
def test_deploy_stopping_a_busy_agent_stops_its_container(route, request, docker, tmp_path):
    """deploy's timeout on a busy agent behind agent-in-docker: the container goes too, on both routes (review N3:
    on the ssh route nothing killed it, and it kept the board's GPU busy into the next night)."""
    env, state = docker
    python = _through(tmp_path, env)
    if route == "ssh":
        cfg = ssh_cfg(request.getfixturevalue("sshd"), tmp_path / "work", python=python)
    else:
        cfg = device_cfg(work_dir=str(tmp_path / "work"), python=python)
    device = Device(cfg)
    try:
        with pytest.raises(DeviceError, match="took longer than 3 s"):
            device.call({"command": "build"}, timeout=3, what="the engine build")
    finally:
        device.transport.close()
    container = int(_wait_for(state / "container.pid"))
    assert _gone(container), "the agent's container outlived deploy's stop"
    assert any(call["argv"][0] == "kill" for call in _calls(state))
