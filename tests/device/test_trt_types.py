"""The TensorRT code of the agent type-checked with mypy against tensorrt-stubs (TensorRT 10.x's API).

tensorrt-stubs is installed by .ci/run with --no-deps (its dependency is TensorRT itself, which has no
wheel for this machine). Its generated stubs carry a few lines that are not Python (a parameter named
``in``, a parameter without default after defaulted ones); they are copied to a temporary folder and
those signatures loosened to ``(*args, **kwargs)`` keeping their return types — every other class,
attribute and signature is checked as published. TensorRT 8.x-only calls go through getattr in the
code, named with their version, so the 10.x stubs check everything else."""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = [ROOT / "pipeline" / "device" / "agent" / name for name in ("trt_engine.py", "trt_dla.py", "trt_calibration.py",
                                                                  "trt_runtime.py", "cuda.py", "cuda_binding.py",
                                                                  "cudart_ctypes.py", "trt_precision.py", "trtexec_build.py")]


def _stub_dirs():
    try:
        from importlib.metadata import PackageNotFoundError, distribution
    except ImportError:  # pragma: no cover
        return None
    try:
        dist = distribution("tensorrt-stubs")
    except PackageNotFoundError:
        return None
    base = Path(dist.locate_file(""))
    dirs = [base / "tensorrt", base / "tensorrt_bindings"]
    return dirs if all(d.is_dir() for d in dirs) else None


def _loosen(text):
    """Lines that do not parse (a def whose parameters are not valid Python) -> (*args, **kwargs)."""
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("def ") and stripped.endswith(":"):
            try:
                ast.parse(stripped + " ...")
            except SyntaxError:
                match = re.match(r"^(\s*)def (\w+)\((.*)\)( -> .+)?:$", line)
                if match:
                    indent, name, _, ret = match.groups()
                    self_arg = "self, " if indent else ""
                    line = "{}def {}({}*args: Any, **kwargs: Any){}:".format(indent, name, self_arg, ret or "")
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    dirs = _stub_dirs()
    if dirs is None:
        if __import__("os").environ.get("CI"):
            pytest.fail("tensorrt-stubs is not installed: .ci/run installs it (pip install --no-deps tensorrt-stubs)")
        pytest.skip("tensorrt-stubs not installed (pip install --no-deps tensorrt-stubs)")
    out = tmp_path_factory.mktemp("trt-stubs")
    for d in dirs:
        shutil.copytree(d, out / d.name)
        for stub in (out / d.name).glob("*.pyi"):
            text = stub.read_text()
            loosened = _loosen(text)
            if loosened != text + "\n" and loosened != text:
                loosened = "from typing import Any\n" + loosened
            stub.write_text(loosened)
    return out


def _mypy(stubs, *files):
    pytest.importorskip("mypy")
    config = stubs / "mypy.ini"  # the generated stubs are read, their own errors are not ours to report
    config.write_text("[mypy]\nmypy_path = {}\n[mypy-tensorrt.*]\nignore_errors = True\n"
                      "[mypy-tensorrt_bindings.*]\nignore_errors = True\n".format(stubs))
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config), "--no-incremental",
                           "--ignore-missing-imports", "--follow-imports=silent", "--check-untyped-defs",
                           *map(str, files)],
                          capture_output=True, text=True, timeout=600)


def test_the_tensorrt_code_type_checks_against_the_stubs(stubs):
    res = _mypy(stubs, *CHECKED)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_check_is_real(stubs, tmp_path):
    """A misspelt TensorRT call fails it: the stubs are read, tensorrt is not Any."""
    broken = tmp_path / "broken.py"
    broken.write_text("import tensorrt as trt\n\n\ndef f(config):\n    # type: (trt.IBuilderConfig) -> None\n"
                      "    config.set_memory_pool_limt(trt.MemoryPoolType.WORKSPACE, 1)\n")
    res = _mypy(stubs, broken)
    assert res.returncode == 1 and "set_memory_pool_limt" in res.stdout
