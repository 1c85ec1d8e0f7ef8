"""The README's commands, run as a user would (from a fresh working directory)."""

import json
import re

import pytest

from conftest import ROOT, deploy

README = (ROOT / "README.md").read_text()


def test_readme_setup_commands_are_the_ci_commands():
    blocks = re.findall(r"```sh\n(.*?)\n```", README, re.S)
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest" in blocks
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest" in ci
    assert any(b.endswith(".venv/bin/deploy run configs/jetson_tx2.yaml") for b in blocks)


@pytest.mark.parametrize("command", sorted(set(re.findall(r"`deploy (validate|schema|targets)([^`]*)`", README))))
def test_light_readme_commands_run(command):
    verb, rest = command
    args = [a for a in rest.split() if a not in ("CONFIG", "[NAME]")]
    if verb == "validate" and not args:
        args = ["configs/jetson_tx2.yaml"]
    res = deploy(verb, *args)
    assert res.returncode == 0, res.stderr


@pytest.mark.tf
@pytest.mark.slow
def test_main_job_runs_as_documented(tmp_path):
    """`deploy run configs/jetson_tx2.yaml` unshrunk, in a fresh directory: data generated, all stages."""
    res = deploy("run", ROOT / "configs" / "jetson_tx2.yaml", "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout.splitlines()[-1])
    assert {s["name"]: s["status"] for s in summary["stages"]} == {
        "train": "ran", "export": "ran", "freeze": "ran", "check": "ran", "rewrite": "ran", "convert": "ran", "engine": "pending",
        "benchmark": "ran"}
    assert (tmp_path / "data" / "shapes" / "train" / "circle").is_dir()
    assert (tmp_path / "runs" / "jetson_tx2" / "benchmark" / "benchmark.json").exists()
    again = deploy("run", ROOT / "configs" / "jetson_tx2.yaml", "--quiet", cwd=tmp_path)
    assert again.returncode == 0 and again.stderr == ""
