"""The agent protects itself from numpy 1.19.5's OpenBLAS on Jetson (review N4, numpy/numpy#18131: its CPU
detection dies with SIGILL on TX2/Nano unless OPENBLAS_CORETYPE is set): on aarch64 the entry point sets
OPENBLAS_CORETYPE=ARMV8 (a value the user set wins) before anything imports numpy. Run as on the board
(``python3 -m deploy_agent``) with a stand-in numpy that reports what it sees when imported."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

AGENT = Path(__file__).resolve().parents[2] / "pipeline" / "device" / "agent"
RUN = ("import platform, runpy, sys\n"
       "if sys.argv[1] == 'aarch64':\n    platform.machine = lambda: 'aarch64'\n"
       "runpy.run_module('deploy_agent', run_name='__main__')\n")


@pytest.fixture
def board(tmp_path):
    shutil.copytree(str(AGENT), str(tmp_path / "deploy_agent"), ignore=shutil.ignore_patterns("__pycache__"))
    numpy = tmp_path / "fake" / "numpy"
    numpy.mkdir(parents=True)
    (numpy / "__init__.py").write_text("import os, sys\nsys.stderr.write('numpy sees OPENBLAS_CORETYPE=%s\\n' % "
                                       "os.environ.get('OPENBLAS_CORETYPE'))\n__version__ = '1.19.5'\n")
    return tmp_path


def _run(board, machine, preset=None):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env["PYTHONPATH"] = str(board / "fake")
    if preset:
        env["OPENBLAS_CORETYPE"] = preset
    res = subprocess.run([sys.executable, "-c", RUN, machine], input='{"command": "infer"}', cwd=str(board), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    answer = json.loads(res.stdout)
    assert answer["kind"] == "bad-request"  # numpy imported (the infer command needs it), then no model
    return [line for line in res.stderr.splitlines() if line.startswith("numpy sees")]


def test_on_aarch64_numpy_is_imported_with_the_armv8_core_type(board):
    assert _run(board, "aarch64") == ["numpy sees OPENBLAS_CORETYPE=ARMV8"]


def test_a_core_type_the_user_set_wins(board):
    assert _run(board, "aarch64", preset="CORTEXA57") == ["numpy sees OPENBLAS_CORETYPE=CORTEXA57"]


def test_other_machines_are_left_alone(board):
    assert _run(board, "x86_64") == ["numpy sees OPENBLAS_CORETYPE=None"]
