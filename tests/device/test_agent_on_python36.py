"""The agent on a TX2's Python: CPython 3.6 with numpy 1.19.5 (JetPack 4.6's) and onnxruntime 1.10, in
`.venv36` (made by .ci/run where this machine has a Python 3.6). vermin proves the floor statically;
these run it: the protocol through both transports, a benchmark, inference, the probe of a captured
TX2, and every parser on every captured sample giving the same answers as on this Python."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.backends.device import DeviceSession
from pipeline.device.client import Device

from devicekit import device_cfg, ssh_cfg, tiny_onnx
from devicekit import sshd_server  # noqa: F401  (the `sshd` fixture)

ROOT = Path(__file__).resolve().parents[2]
PY36 = ROOT / ".venv36" / "bin" / "python"
SAMPLES = Path(__file__).parent / "samples"
AGENT = ROOT / "pipeline" / "device" / "agent"


def _python36_somewhere():
    return shutil.which("python3.6") or next(iter(sorted(Path.home().glob(".pyenv/versions/3.6*/bin/python3.6"))), None)


if not PY36.exists():
    if os.environ.get("CI") and _python36_somewhere():
        pytest.fail(".venv36 is missing although this machine has a Python 3.6: .ci/run makes it", pytrace=False)
    pytest.skip("no .venv36 (a Python 3.6 with numpy 1.19.5 and onnxruntime 1.10; see .ci/run)", allow_module_level=True)


@pytest.fixture(params=["local", "ssh"])
def device(request, tmp_path):
    if request.param == "local":
        dev = Device(device_cfg(work_dir=str(tmp_path / "work"), python=str(PY36)))
    else:
        dev = Device(ssh_cfg(request.getfixturevalue("sshd"), tmp_path / "work", python=str(PY36)))
    yield dev
    dev.transport.close()


def test_the_agent_runs_on_python_3_6(device, tmp_path):
    ping = device.ping()
    assert ping["python"].startswith("3.6.") and ping["has"]["numpy"] and ping["has"]["onnxruntime"]
    remote = device.transport.send(tiny_onnx(tmp_path / "m.onnx"))
    answer = device.call({"command": "benchmark", "model": remote, "backend": "onnxruntime", "batch_sizes": [1, 4],
                          "warmup": 1, "iterations": 5})
    assert [len(r["times_ms"]["total_ms"]) for r in answer["results"]] == [5, 5]
    assert answer["label"]["version"] == "1.10.0"
    import numpy as np

    session = DeviceSession(device, remote, "onnxruntime")
    batch = np.random.default_rng(2).uniform(0, 255, (2, 4, 4, 3)).astype(np.float32)
    from pipeline.backends import load_onnx

    np.testing.assert_allclose(session.run({"input": batch})[0], load_onnx(tmp_path / "m.onnx").run({"input": batch})[0],
                               rtol=1e-5)
    facts = device.probe()
    assert facts["python"].startswith("3.6.") and facts["numpy"] == "1.19.5"


def _parse_on(python, module, function, text, cwd, per_line=False):
    """``function(text)`` (or, per_line, of each line not starting with '#') run on ``python``, as JSON."""
    code = ("import json, sys\nfrom deploy_agent.{} import {} as f\ntext = sys.stdin.read()\n"
            "def one(t):\n    try:\n        return f(t)\n    except ValueError as e:\n        return {{'ParseError': str(e)}}\n"
            "out = [one(l) for l in text.splitlines() if l.strip() and not l.startswith('#')] if {} else one(text)\n"
            "print(json.dumps(out, sort_keys=True))\n").format(module, function, per_line)
    res = subprocess.run([str(python), "-c", code], input=text, capture_output=True, text=True, cwd=str(cwd), timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _cases():
    """(module, function, sample file) for every captured sample the agent parses whole."""
    cases = []
    for path in sorted((SAMPLES / "trtexec").glob("*.log")):
        cases.append(("trtexec", "parse_log", path))
    for path in sorted((SAMPLES / "tegrastats").glob("*.txt")):
        cases.append(("tegrastats", "parse_line", path))
    return cases


@pytest.fixture(scope="module")
def agent_copy(tmp_path_factory):
    d = tmp_path_factory.mktemp("agent36")
    shutil.copytree(AGENT, d / "deploy_agent", ignore=shutil.ignore_patterns("__pycache__"))
    return d


@pytest.mark.parametrize("module,function,path", _cases(), ids=lambda c: getattr(c, "name", str(c)))
def test_every_parser_gives_the_same_answer_on_python_3_6(module, function, path, agent_copy):
    text = path.read_text()
    per_line = module == "tegrastats"  # one sample per line
    here = _parse_on(sys.executable, module, function, text, agent_copy, per_line)
    there = _parse_on(PY36, module, function, text, agent_copy, per_line)
    assert there == here
    if per_line and "templates" not in path.name:  # jtop's templates hold shell placeholders: ParseError alike
        assert sum("ParseError" not in r for r in here) >= 1  # the file's lines parse, not just fail alike


# -- a TensorRT engine on JetPack 4.6's Python with nothing from pip: libcudart through ctypes -------------------

# JetPack 4.6's own numpy is Ubuntu 18.04's python3-numpy 1:1.13.3-2ubuntu1 (docs/device.md, "Preparing a
# board"); .venv36 has 1.19.5 (the last wheel for 3.6, what pip gives). A Python 3.6 with numpy 1.13.3 alone
# (python3.6 -m venv .venv36-apt && .venv36-apt/bin/pip install numpy==1.13.3) runs the engine test too.
PY36_APT = Path(os.environ.get("DEPLOY_PY36_APT_PYTHON") or ROOT / ".venv36-apt" / "bin" / "python")


@pytest.mark.parametrize("python", ["venv36", "apt-numpy"])
def test_an_engine_runs_on_python_3_6_with_no_pycuda_and_no_cuda_python(tmp_path, monkeypatch, python):
    """A stock TX2 (issue 27): Python 3.6, numpy 1.19.5 (.venv36) or JetPack 4.6's apt numpy 1.13.3 (.venv36-apt
    where made), TensorRT 8.2's Python API (a stand-in
    that reads and writes the device addresses: tests/device/trt_standin.py) and the CUDA runtime library
    (a stand-in libcudart.so.10.2 built here: tests/device/cudart_standin.py) -- no pycuda, no cuda-python.
    The agent benchmarks the engine (CUDA-event split per call), infers, and the host's batch consistency
    check runs on its answers; the outputs match ONNX Runtime on the same model."""
    import numpy as np

    import cudart_standin
    import trt_standin
    from pipeline.numeric.consistency import batch_consistency

    if cudart_standin.compiler() is None:
        pytest.skip("no C compiler (gcc) to build the stand-in libcudart")
    py = PY36
    if python == "apt-numpy":
        if not PY36_APT.exists():
            pytest.skip("no {} (a Python 3.6 with numpy 1.13.3 alone, JetPack 4.6's apt numpy)".format(PY36_APT))
        py = PY36_APT
    found = subprocess.run([str(py), "-c", "import importlib.util as u; print([n for n in ('pycuda', 'cuda') "
                            "if u.find_spec(n)])"], stdout=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert found.stdout.strip() == "[]", "the Python 3.6 venv must not have pycuda or cuda-python for this test"
    library = cudart_standin.build(tmp_path / "cuda-10.2" / "lib")
    trt_standin.write(tmp_path / "dist-packages", "8.2.1")
    monkeypatch.setenv("DEPLOY_LIBCUDART", str(library))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "dist-packages"))
    onnx_path = tiny_onnx(tmp_path / "m.onnx")
    engine = tmp_path / "m.engine"
    engine.write_bytes(trt_standin.engine_bytes(onnx_path, max_batch=8))
    device = Device(device_cfg(work_dir=str(tmp_path / "work"), python=str(py)))
    try:
        ping = device.ping()
        assert ping["python"].startswith("3.6.") and not ping["has"]["pycuda"] and not ping["has"]["cuda"]
        remote = device.transport.send(engine)
        answer = device.call({"command": "benchmark", "model": remote, "backend": "tensorrt", "batch_sizes": [1, 4],
                              "warmup": 2, "iterations": 5})
        assert answer["label"]["runtime"] == "tensorrt" and answer["label"]["cuda"] == "libcudart"
        for result in answer["results"]:
            times = result["times_ms"]
            assert len(times["total_ms"]) == 5 and set(times) == {"h2d_ms", "compute_ms", "d2h_ms", "total_ms"}
            for total, h2d, compute, d2h in zip(times["total_ms"], times["h2d_ms"], times["compute_ms"], times["d2h_ms"]):
                assert total >= h2d + compute + d2h - 1e-3
            assert result["loop"]["calls"] == 5 and result["loop"]["seconds"] > 0
        session = DeviceSession(device, remote, "tensorrt")
        images = np.random.RandomState(3).uniform(0, 255, (6, 4, 4, 3)).astype(np.float32)
        from pipeline.backends import load_onnx

        np.testing.assert_allclose(session.run({"input": images})[0],
                                   load_onnx(onnx_path).run({"input": images})[0], rtol=1e-5, atol=1e-7)
        report = batch_consistency(session, images, (2, 4), tolerance=1e-5, rtol=1e-4, model=str(engine))
        assert report.passed, report.to_dict()
        facts = device.probe()
        assert facts["cuda_binding"]["binding"] == "libcudart" and facts["cuda_binding"]["version"] == "10.2"
    finally:
        device.transport.close()
