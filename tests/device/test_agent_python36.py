"""The device agent runs on a TX2/Nano's Python 3.6 (JetPack 4.6): vermin proves its minimum version."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

AGENT = Path(__file__).resolve().parents[2] / "pipeline" / "device" / "agent"


def _vermin():
    exe = Path(sys.executable).with_name("vermin")
    return str(exe) if exe.exists() else shutil.which("vermin")


@pytest.mark.skipif(_vermin() is None, reason="vermin not installed (pip install -e '.[test]')")
def test_agent_needs_no_python_newer_than_3_6():
    res = subprocess.run([_vermin(), "--target=3.6-", "--violations", "--no-tips", "--eval-annotations", str(AGENT)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_agent_imports_nothing_of_deploy_outside_itself():
    for path in AGENT.rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if words[:1] in (["import"], ["from"]) and len(words) > 1 and words[1].startswith("pipeline"):
                assert words[1].startswith("pipeline.device.agent"), "{}: {}".format(path.name, line.strip())
