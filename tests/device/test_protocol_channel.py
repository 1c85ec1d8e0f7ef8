"""D3: the agent's JSON answers have a channel of their own. NVIDIA's uff converter prints to stdout
(its TensorFlow-version notes), TensorRT's logger and CUDA write to fd 1 from C++, and a child process
inherits fd 1: none of it may reach the stream the host reads its answers from.

The agent runs as on a board (its folder alone, ``python -m deploy_agent --serve``) with stand-ins for
``uff`` and ``tensorrt`` first on its PYTHONPATH that are as noisy as the real ones can be: they print at
import, and during the conversion write to fd 1 through os.write, through libc's write() (ctypes) and
from a child process. The protocol must stay in step over several requests: one JSON line per request,
each the answer to its own request."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

AGENT = Path(__file__).resolve().parents[2] / "pipeline" / "device" / "agent"

NOISY_UFF = '''
import ctypes
import os
import subprocess
import sys

print("NOTE: UFF has been tested with TensorFlow 1.15.0.")  # what uff 0.6.9 prints, at import here
sys.stdout.flush()


def from_tensorflow_frozen_model(frozen_file, output_nodes, output_filename=None, quiet=False, **kwargs):
    print("WARNING: The version of TensorFlow installed on this system is not guaranteed to work with UFF.")
    sys.stdout.flush()
    os.write(1, b"C-LEVEL os.write(1) noise\\n")
    message = b"C-LEVEL libc write(1) noise\\n"
    ctypes.CDLL(None).write(1, message, len(message))
    subprocess.call([sys.executable, "-c", "print('CHILD PROCESS noise')"])
    with open(output_filename, "wb") as f:
        f.write(b"uff")
'''

NOISY_TENSORRT = '''
import os
import sys

print("[TensorRT] INFO: printed at import")
sys.stdout.flush()
os.write(1, b"[TensorRT] C++ logger line on fd 1\\n")
__version__ = "10.3.0"  # no UffParser: the build answers build-failed, after the conversion ran
'''


def _agent(tmp_path):
    home = tmp_path / "home"
    shutil.copytree(str(AGENT), str(home / "deploy_agent"), ignore=shutil.ignore_patterns("__pycache__"))
    noise = tmp_path / "noise"
    (noise / "uff").mkdir(parents=True)
    (noise / "uff" / "__init__.py").write_text(NOISY_UFF)
    (noise / "tensorrt").mkdir()
    (noise / "tensorrt" / "__init__.py").write_text(NOISY_TENSORRT)
    return home, noise


def test_prints_and_fd1_writes_of_libraries_never_reach_the_answers(tmp_path):
    home, noise = _agent(tmp_path)
    frozen = tmp_path / "model.pb"
    frozen.write_bytes(b"graph")
    build_uff = {"command": "build_uff", "frozen": str(frozen), "outputs": ["probabilities"], "uff": str(tmp_path / "m.uff"),
                 "engine": str(tmp_path / "m.engine"), "input": "input", "input_shape": [4, 4, 3], "precision": "fp16",
                 "log": str(tmp_path / "build.log")}
    requests = [{"command": "ping"}, build_uff, {"command": "ping"}, build_uff, {"command": "nope"},
                {"command": "ping"}]
    env = {"PYTHONPATH": str(noise), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    res = subprocess.run([sys.executable, "-m", "deploy_agent", "--serve"], cwd=str(home), env=env, timeout=120,
                         input="".join(json.dumps(r) + "\n" for r in requests).encode(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = res.stdout.decode(), res.stderr.decode()
    assert res.returncode == 0, err
    lines = out.splitlines()
    assert len(lines) == len(requests), out
    answers = [json.loads(line) for line in lines]  # every line the host reads is an answer
    ping1, uff1, ping2, uff2, unknown, ping3 = answers
    for ping in (ping1, ping2, ping3):
        assert ping["ok"] and ping["result"]["protocol"] == 1
    for uff in (uff1, uff2):  # the conversion ran (noisily), then the build said why it cannot go on
        assert not uff["ok"] and uff["kind"] == "build-failed" and "no UFF parser" in uff["error"], uff
    assert not unknown["ok"] and unknown["kind"] == "bad-request" and "'nope'" in unknown["error"]
    assert (tmp_path / "m.uff").read_bytes() == b"uff"
    for noise_line in ("NOTE: UFF has been tested", "WARNING: The version of TensorFlow", "os.write(1) noise",
                       "libc write(1) noise", "CHILD PROCESS noise", "[TensorRT] INFO", "C++ logger line"):
        assert noise_line not in out
        assert noise_line in err  # still shown: stderr is the agent's log
    assert err.count("libc write(1) noise") == 2  # once per conversion


def test_one_shot_mode_answers_on_the_protocol_stream_too(tmp_path):
    home, noise = _agent(tmp_path)
    env = {"PYTHONPATH": str(noise), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    res = subprocess.run([sys.executable, "-m", "deploy_agent"], cwd=str(home), env=env, timeout=60,
                         input=b'{"command": "ping"}', stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert res.returncode == 0 and json.loads(res.stdout.decode())["result"]["protocol"] == 1
