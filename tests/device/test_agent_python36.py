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


def test_agent_imports_nothing_of_deploy():
    """The folder runs alone on the board as ``deploy_agent``: its own modules by relative import only."""
    for path in AGENT.rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if words[:1] in (["import"], ["from"]) and len(words) > 1:
                assert not words[1].startswith("pipeline"), "{}: {}".format(path.name, line.strip())


def test_agent_runs_as_its_own_package(tmp_path):
    """Copied alone under the name the transports give it, the agent answers a ping."""
    import json
    import shutil

    shutil.copytree(AGENT, tmp_path / "deploy_agent", ignore=shutil.ignore_patterns("__pycache__"))
    res = subprocess.run([sys.executable, "-m", "deploy_agent"], input='{"command": "ping"}', cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=60)
    answer = json.loads(res.stdout)
    assert answer["ok"] is True and answer["result"]["protocol"] == 1
