"""The nightly workflow (.github/workflows/nightly-jetson.yml): valid against GitHub's schema, every
deploy command it runs exists with the flags it passes, and its baseline/history/gate steps run for
real here, night after night, with the real `deploy` on synthetic runs: GitHub's expressions in the
steps are substituted and their `if:` conditions evaluated (the subset this workflow uses)."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from reportkit import make_run

WORKFLOW = ROOT / ".github" / "workflows" / "nightly-jetson.yml"


def load():
    return yaml.safe_load(WORKFLOW.read_text())


def tool(name):
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("{} is not installed (pip install -e '.[test]')".format(name))
        pytest.skip("{} is not installed (pip install -e '.[test]')".format(name))
    return found


def test_valid_against_githubs_workflow_schema():
    res = subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_triggers_jobs_and_runners():
    flow = load()
    triggers = flow[True] if True in flow else flow["on"]  # PyYAML reads the key `on` as True
    assert "schedule" in triggers and "workflow_dispatch" in triggers
    host, device = flow["jobs"]["host"], flow["jobs"]["device"]
    assert host["runs-on"].startswith("ubuntu") and device["needs"] == "host"
    labels = device["runs-on"]
    assert labels[:3] == ["self-hosted", "linux", "ARM64"] and labels[3] == "${{ matrix.label }}"
    boards = device["strategy"]["matrix"]["include"]
    assert {b["config"] for b in boards} == set(host["strategy"]["matrix"]["config"])
    for b in boards:
        assert (ROOT / "configs" / "{}.yaml".format(b["config"])).exists()
        assert (ROOT / "targets" / "{}.yaml".format(b["board"])).exists()
        assert b["jetpack"] in ("4.6", "5", "6")  # Dockerfile.jetson's lines


def deploy_calls(script):
    """Each `deploy VERB ...` line of a step's script, continuation lines joined."""
    joined = script.replace("\\\n", " ")
    for line in joined.splitlines():
        m = re.search(r"(?:^|[\s/])deploy (\w+(?: probe)?)(.*)", line)
        if m:
            yield m.group(1).split(), m.group(2)


def test_every_deploy_command_and_flag_exists():
    from pipeline.cli import build_parser

    parser = build_parser()
    verbs = parser._subparsers._group_actions[0].choices
    seen = 0
    for job in load()["jobs"].values():
        for step in job["steps"]:
            for words, rest in deploy_calls(step.get("run", "")):
                sub = verbs[words[0]]
                if len(words) > 1:
                    sub = sub._subparsers._group_actions[0].choices[words[1]]
                flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest))
                known = {o for a in sub._actions for o in a.option_strings}
                assert flags <= known, (words, flags - known)
                seen += 1
    assert seen >= 7


def test_every_step_script_is_valid_bash():
    for job in load()["jobs"].values():
        for step in job["steps"]:
            if "run" in step:
                script = re.sub(r"\$\{\{.*?\}\}", "X", step["run"])
                res = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
                assert res.returncode == 0, (step.get("name"), res.stderr)


# --- the gate steps, run night after night ------------------------------------------------------

GATE_STEPS = ("Compare with the baseline", "Report", "Keep tonight", "Add tonight to the history",
              "Make tonight the baseline", "Regression gate")


class Night:
    """Runs the device job's gate steps for one night, as the runner would (bash -euo pipefail)."""

    def __init__(self, workdir, env, inputs, run_id):
        self.workdir, self.env, self.inputs, self.run_id = workdir, env, inputs, run_id
        self.steps = {}  # id -> {"outcome", "outputs"}
        self.failed = []

    def expr(self, text):
        def value(m):
            found = self.lookup(m.group(1).strip())
            return str(found).lower() if isinstance(found, bool) else str(found)  # GitHub renders true / false

        return re.sub(r"\$\{\{(.*?)\}\}", value, text)

    def lookup(self, path):
        parts = path.split(".")
        if parts[0] == "matrix":
            return {"board": "jetson_tx2", "config": "jetson_tx2", "jetpack": "4.6", "label": "jetson-tx2"}[parts[1]]
        if parts[0] == "inputs":
            return self.inputs.get(parts[1], "")
        if parts[0] == "env":
            return self.env[parts[1]]
        if parts[0] == "vars":
            return ""
        if parts[0] == "steps":
            step = self.steps.get(parts[1], {"outcome": "skipped", "outputs": {}})
            return step["outcome"] if parts[2] == "outcome" else step["outputs"].get(parts[3], "")
        raise AssertionError("expression not handled by this test: " + path)

    def condition(self, text):
        text = text.strip()
        if text.startswith("${{"):
            text = text[3:-2]
        py = text.replace("!cancelled()", "True").replace("&&", " and ").replace("||", " or ")
        py = re.sub(r"!(?!=)", " not ", py)
        py = re.sub(r"\b((?:steps|inputs|vars|matrix|env)(?:\.[\w-]+)+)", lambda m: repr(self.lookup(m.group(1))), py)
        return bool(eval(py, {"__builtins__": {}}, {"True": True, "False": False}))  # noqa: S307

    def run(self, step):
        if "if" in step and not self.condition(str(step["if"])):
            if "id" in step:
                self.steps[step["id"]] = {"outcome": "skipped", "outputs": {}}
            return
        output = self.workdir / "github_output"
        output.write_text("")
        env = dict(os.environ, **self.env, GITHUB_OUTPUT=str(output), GITHUB_SHA="0123456789abcdef",
                   GITHUB_RUN_ID=str(self.run_id), GITHUB_RUN_ATTEMPT="1")
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", self.expr(step["run"])], cwd=self.workdir, env=env,
                             capture_output=True, text=True, timeout=300)
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        if "id" in step:
            self.steps[step["id"]] = {"outcome": "success" if res.returncode == 0 else "failure", "outputs": outputs}
        if res.returncode != 0:
            self.failed.append((step["name"], res.stdout + res.stderr))


@pytest.fixture
def board(tmp_path):
    work = tmp_path / "checkout"
    (work / ".venv" / "bin").mkdir(parents=True)
    wrapper = work / ".venv" / "bin" / "deploy"
    wrapper.write_text("#!/bin/sh\nPYTHONPATH={} exec {} -m pipeline \"$@\"\n".format(shlex.quote(str(ROOT)),
                                                                                 shlex.quote(sys.executable)))
    wrapper.chmod(0o755)
    summary = tmp_path / "summary.md"
    env = {"RUN": str(work / "runs" / "jetson_tx2"), "NIGHTLY": str(tmp_path / "nightly" / "jetson_tx2"),
           "TOLERANCE": "0.05", "GITHUB_STEP_SUMMARY": str(summary)}
    steps = [s for s in load()["jobs"]["device"]["steps"] if s.get("name") in GATE_STEPS]
    assert [s["name"] for s in steps] == list(GATE_STEPS)

    def night(day, medians, update_baseline=False):
        run = Path(env["RUN"])
        shutil.rmtree(run, ignore_errors=True)
        make_run(run, medians=medians, seed=day, finished="2026-11-{:02d}T02:00:00+0000".format(day))
        n = Night(work, env, {"update_baseline": update_baseline}, run_id=1000 + day)
        for step in steps:
            n.run(step)
        return n

    night.nightly = Path(env["NIGHTLY"])
    night.summary = summary
    return night


@pytest.mark.slow
def test_nights_build_a_history_and_a_slow_night_fails_the_gate(board):
    first = board(1, {1: 4.0, 8: 20.0})
    assert first.failed == [] and first.steps["compare"]["outputs"] == {"code": "0", "baseline": "none"}
    assert (board.nightly / "baseline" / "run.json").exists()
    assert "No baseline for jetson_tx2 yet" in board.summary.read_text()
    for day in (2, 3, 4):
        n = board(day, {1: 4.0, 8: 20.0})
        assert n.failed == [] and n.steps["compare"]["outputs"]["code"] == "0", n.steps
    history = sorted(p.name for p in (board.nightly / "history").iterdir())
    assert len(history) == 4
    baseline_run = (board.nightly / "baseline" / "run.json").read_text()
    assert "2026-11-01" in baseline_run  # the first night stays the baseline

    slow = board(5, {1: 6.0, 8: 30.0})
    assert slow.steps["compare"]["outputs"]["code"] == "4"
    assert [name for name, _ in slow.failed] == ["Regression gate"]
    assert len(list((board.nightly / "history").iterdir())) == 4  # a regressed night is not history
    assert "**regression**" in board.summary.read_text()
    assert (Path(board.nightly).parent.parent / "checkout" / "reports" / "report.html").exists()

    accepted = board(6, {1: 6.0, 8: 30.0}, update_baseline=True)  # someone looked and accepts the slower model
    assert [name for name, _ in accepted.failed] == ["Regression gate"]
    assert "2026-11-06" in (board.nightly / "baseline" / "run.json").read_text()
    after = board(7, {1: 6.0, 8: 30.0})
    assert after.failed == [] and after.steps["compare"]["outputs"]["code"] == "0"
