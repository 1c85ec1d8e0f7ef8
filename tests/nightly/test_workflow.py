"""The nightly workflow (.github/workflows/nightly-jetson.yml): valid against GitHub's schema, every
deploy command it runs exists with the flags it passes, and its baseline/history/gate steps run for
real here, night after night, with the real `deploy` on synthetic runs: GitHub's expressions in the
steps are substituted and their `if:` conditions evaluated (the subset this workflow uses)."""

import json
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


def device_job():
    return load()["jobs"]["device"]


def boards():
    return device_job()["strategy"]["matrix"]["include"]


def step(name, job="device"):
    (found,) = [s for s in load()["jobs"][job]["steps"] if s.get("name") == name]
    return found


def test_triggers_jobs_and_runners():
    flow = load()
    triggers = flow[True] if True in flow else flow["on"]  # PyYAML reads the key `on` as True
    assert "schedule" in triggers and "workflow_dispatch" in triggers
    assert set(triggers["workflow_dispatch"]["inputs"]) == {"update_baseline", "expect_change", "tolerance"}
    host, device = flow["jobs"]["host"], flow["jobs"]["device"]
    assert host["runs-on"].startswith("ubuntu") and device["needs"] == "host"
    # the board's label alone picks the machine: the board itself (route local) or the runner machine that
    # drives it over ssh, which may be x86-64 (no ARM64 label required)
    assert device["runs-on"] == ["self-hosted", "linux", "${{ matrix.label }}"]
    assert {b["config"] for b in boards()} == set(host["env"]["CONFIGS"].split())
    for b in boards():
        assert (ROOT / "configs" / "{}.yaml".format(b["config"])).exists()
        assert (ROOT / "targets" / "{}.yaml".format(b["board"])).exists()
        assert b["jetpack"] in ("4.6", "5", "6")  # Dockerfile.jetson's lines
        assert b["route"] in ("ssh", "local")


def test_jetpack_46_boards_are_driven_over_ssh_from_a_current_runner():
    """C1: on Ubuntu 18.04 (glibc 2.27) the runner's Node 20/24 cannot start actions/checkout or the artifact
    actions, so no JetPack 4.6 board is a runner: its job runs on a runner machine and reaches it over ssh.
    Only JetPack 5/6 boards (glibc 2.31/2.35) host the runner themselves."""
    for b in boards():
        if b["jetpack"] == "4.6":
            assert b["route"] == "ssh", b
        if b["route"] == "local":
            assert b["jetpack"] in ("5", "6"), b
    assert {b["board"] for b in boards() if b["route"] == "ssh"} == {"jetson_tx2", "jetson_nano"}
    resolve = step("Which board")["run"]
    assert "nightly-board resolve" in resolve
    for name in ("Probe the board", "Engine and benchmark through the agent"):
        assert "nightly-board args" in step(name)["run"]


def test_uv_comes_from_its_standalone_installer_not_from_the_boards_pip():
    """C2: every uv needs Python >= 3.8 (JetPack 4.6 has 3.6); the installer's aarch64 binary needs glibc 2.28
    (below that it takes the static musl build). Issue 28 item 5: the installer leaves shell rc files alone
    (UV_NO_MODIFY_PATH) and a uv of another version on PATH is replaced, not used."""
    text = WORKFLOW.read_text()
    assert not re.search(r"pip3? install[^\n]*\buv\b", text)
    install = step("Install deploy")["run"]
    assert 'https://astral.sh/uv/$UV_VERSION/install.sh' in install
    assert step("Install deploy")["env"]["UV_NO_MODIFY_PATH"] == "1"
    assert '!= "$UV_VERSION"' in install and "glibc 2.17+" not in text
    docs = (ROOT / "docs" / "nightly.md").read_text()
    assert "glibc 2.28" in docs and "UV_NO_MODIFY_PATH" in docs
    assert re.fullmatch(r"\d+\.\d+\.\d+", load()["env"]["UV_VERSION"])
    # JetPack 6: deploy's venv is the board's Python 3.10 with its site-packages, so TensorRT imports in pytest
    # and tests/device's in-process tests run there (M7); numpy 1.x beside TensorRT 10.3
    (orin,) = [b for b in boards() if b["jetpack"] == "6"]
    assert orin["python"] == "/usr/bin/python3" and orin["venv"] == "--system-site-packages"
    assert '"numpy<2"' in install


def test_one_concurrency_group_per_board_and_no_workflow_wide_one():
    """M3: a board that is off holds back only its own nights."""
    flow = load()
    assert "concurrency" not in flow
    group = device_job()["concurrency"]
    assert group["group"] == "nightly-jetson-${{ matrix.board }}" and group["cancel-in-progress"] is False
    assert device_job()["timeout-minutes"] > 120  # a backstop above NIGHT_TIMEOUT
    assert device_job()["env"]["NIGHT_TIMEOUT"] == "120m"


def test_every_artifact_upload_overwrites_on_a_rerun():
    """M4: "Re-run failed jobs" uploads again under the same name; v4 refuses that without overwrite."""
    uploads = [s for job in load()["jobs"].values() for s in job["steps"]
               if s.get("uses", "").startswith("actions/upload-artifact")]
    assert len(uploads) == 2
    for upload in uploads:
        assert upload["with"]["overwrite"] is True, upload


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


# --- the device job's steps, run for real ----------------------------------------------------------

GATE_STEPS = ("What the dispatch asks of this board", "Compare with the reference", "Keep tonight", "Report",
              "Make tonight the baseline", "Stop this run's agent containers", "Regression gate")
SIMULATED = ("probe", "night", "onboard")  # the steps that need a board: their outcome is set by the test


def matrix_of(board):
    (entry,) = [b for b in boards() if b["board"] == board]
    return entry


class Night:
    """Runs device-job steps for one board and night, as the runner would (bash -euo pipefail): GitHub's
    expressions substituted, `if:` conditions evaluated (the subset this workflow uses), job and step `env:`
    applied, step outputs read back from GITHUB_OUTPUT and variables from GITHUB_ENV."""

    def __init__(self, workdir, env, inputs, run_id, matrix, attempt=1, outcomes=None):
        self.workdir, self.inputs, self.run_id, self.matrix, self.attempt = workdir, inputs, run_id, matrix, attempt
        self.steps = {}  # id -> {"outcome", "outputs"}
        for sid, outcome in (outcomes or {}).items():
            self.steps[sid] = {"outcome": outcome, "outputs": {}}
        self.failed = []
        self.logs = {}
        self.env = {}
        for key, value in device_job()["env"].items():
            self.env[key] = self.expr(str(value))
        self.env.update(env)

    def expr(self, text):
        def value(m):
            found = self.evaluate(m.group(1).strip())
            return str(found).lower() if isinstance(found, bool) else ("" if found is None else str(found))

        return re.sub(r"\$\{\{(.*?)\}\}", value, text)

    def lookup(self, path):
        parts = path.split(".")
        if parts[0] == "matrix":
            return self.matrix[parts[1]]
        if parts[0] == "inputs":
            return self.inputs.get(parts[1])
        if parts[0] == "env":
            return self.env[parts[1]]
        if parts[0] in ("vars", "secrets"):
            return None
        if parts[0] == "github":
            return {"run_id": self.run_id, "run_attempt": self.attempt, "sha": "0123456789abcdef"}[parts[1]]
        if parts[0] == "steps":
            found = self.steps.get(parts[1], {"outcome": "skipped", "outputs": {}})
            return found["outcome"] if parts[2] == "outcome" else found["outputs"].get(parts[3], "")
        raise AssertionError("expression not handled by this test: " + path)

    def evaluate(self, text):
        if text.strip() == "toJSON(steps)":  # GitHub's steps context: every step with an id that ran or was skipped
            return json.dumps({sid: {"outcome": v["outcome"], "conclusion": v["outcome"], "outputs": v["outputs"]}
                               for sid, v in self.steps.items()}, indent=2)
        py = text.replace("!cancelled()", "True").replace("always()", "True").replace("&&", " and ")
        py = py.replace("||", " or ")
        py = re.sub(r"!(?!=)", " not ", py)
        py = re.sub(r"\b((?:steps|inputs|vars|secrets|matrix|env|github)(?:\.[\w-]+)+)",
                    lambda m: repr(self.lookup(m.group(1))), py)
        # GitHub's `a || b`: the first truthy operand (Python's `or` does the same)
        return eval(py, {"__builtins__": {}}, {"True": True, "False": False, "true": True, "false": False, "null": None})  # noqa: S307

    def condition(self, text):
        text = text.strip()
        if text.startswith("${{"):
            text = text[3:-2]
        return bool(self.evaluate(text))

    def run(self, step):
        if "if" in step and not self.condition(str(step["if"])):
            if "id" in step:
                self.steps[step["id"]] = {"outcome": "skipped", "outputs": {}}
            return None
        output, github_env = self.workdir / "github_output", self.workdir / "github_env"
        output.write_text("")
        github_env.write_text("")
        env = dict(os.environ, **self.env, GITHUB_OUTPUT=str(output), GITHUB_ENV=str(github_env),
                   GITHUB_SHA="0123456789abcdef", GITHUB_RUN_ID=str(self.run_id), GITHUB_RUN_ATTEMPT=str(self.attempt))
        for key, value in (step.get("env") or {}).items():
            env[key] = self.expr(str(value))
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", self.expr(step["run"])], cwd=self.workdir, env=env,
                             capture_output=True, text=True, timeout=300)
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        self.env.update(dict(line.split("=", 1) for line in github_env.read_text().splitlines() if "=" in line))
        if "id" in step:
            self.steps[step["id"]] = {"outcome": "success" if res.returncode == 0 else "failure", "outputs": outputs}
        self.logs[step["name"]] = res.stdout + res.stderr
        if res.returncode != 0:
            self.failed.append((step["name"], res.stdout + res.stderr))
        return res


def deploy_wrapper(path):
    """.venv/bin/deploy and .venv/bin/python of a checkout: this repository's deploy on this test's Python
    (scripts, not symlinks: a venv's python finds its venv by its path)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nPYTHONPATH={} exec {} -m pipeline \"$@\"\n".format(shlex.quote(str(ROOT)),
                                                                              shlex.quote(sys.executable)))
    path.chmod(0o755)
    python = path.parent / "python"
    python.write_text("#!/bin/sh\nPYTHONPATH={} exec {} \"$@\"\n".format(shlex.quote(str(ROOT)), shlex.quote(sys.executable)))
    python.chmod(0o755)


@pytest.fixture
def farm(tmp_path):
    """night(board, day, medians, ...) runs one board's gate steps for one night in that board's checkout,
    with the real `deploy` (this repository) as the checkout's .venv/bin/deploy. The nightly home has a blank
    in its path (the history's pruning must not split on it)."""
    return make_farm(tmp_path)


def make_farm(tmp_path):
    """The farm fixture's night(), its checkouts, nightly home and job summaries under ``tmp_path``."""
    home = tmp_path / "nightly home"
    summaries = {}

    def night(board, day, medians=None, update_baseline="", expect_change="", outcomes=None, attempt=1,
              incomplete=False, power_mode="MAXN"):
        matrix = matrix_of(board)
        work = tmp_path / board
        if not (work / ".venv" / "bin" / "deploy").exists():
            deploy_wrapper(work / ".venv" / "bin" / "deploy")
            shutil.copytree(str(ROOT / "scripts"), str(work / "scripts"))
        summary = summaries.setdefault(board, tmp_path / "summary-{}.md".format(board))
        run = work / "runs" / matrix["config"]
        shutil.rmtree(str(run), ignore_errors=True)
        make_run(run, medians=medians or {1: 4.0, 8: 20.0}, seed=day, board=board,
                 finished="2026-11-{:02d}T02:00:00+0000".format(day))
        if power_mode != "MAXN":
            bench = run / "benchmark" / "benchmark.json"
            data = json.loads(bench.read_text())
            data["where"]["fingerprint"]["power_mode"] = {"mode_name": power_mode, "mode_id": 1, "is_max": False}
            bench.write_text(json.dumps(data))
        if incomplete:
            (run / "benchmark" / "benchmark.json").unlink()
        env = {"NIGHTLY": str(home / board), "GITHUB_STEP_SUMMARY": str(summary), "TOLERANCE": "0.05",
               "DEPLOY_AGENT_OWNER": "nightly-test"}
        done = {sid: "success" for sid in SIMULATED}
        done.update(outcomes or {})
        n = Night(work, env, {"update_baseline": update_baseline, "expect_change": expect_change},
                  run_id=1000 + day, matrix=matrix, attempt=attempt, outcomes=done)
        for gate_step in [s for s in device_job()["steps"] if s.get("name") in GATE_STEPS]:
            n.run(gate_step)
        n.summary = summary
        return n

    night.home = home
    return night


def test_the_gate_steps_are_in_this_order():
    names = [s.get("name") for s in device_job()["steps"] if s.get("name") in GATE_STEPS]
    assert names == list(GATE_STEPS)
    ids = {s.get("id") for s in device_job()["steps"]}
    assert set(SIMULATED) <= ids and {"compare", "keep"} <= ids


def failed_steps(n):
    return [name for name, _ in n.failed]


def history(home, board):
    return sorted(p.name for p in (home / board / "history").iterdir())


GREEN_BOARDS = ("jetson_tx2", "agx_orin")  # one over ssh, one on the board


@pytest.fixture(scope="module")
def green_nights(tmp_path_factory):
    """Nights 1-4 of jetson_tx2, then of agx_orin, as usual (the farm's default medians), their gate steps run
    for real once for the module: what test_each_board_builds_its_own_reference... and both
    test_one_slow_night_is_a_warning... begin with. Returns the farm's folder (each test continues in a copy,
    farm_after_green) and, a board, its Night objects with each board's history and baseline as they were
    right after its first night."""
    from types import SimpleNamespace

    root = tmp_path_factory.mktemp("green nights")
    night = make_farm(root)
    seen = {}
    for board in GREEN_BOARDS:
        first = night(board, 1)
        after_first = SimpleNamespace(history=history(night.home, board),
                                      baseline=(night.home / board / "baseline" / "run.json").exists())
        seen[board] = SimpleNamespace(first=first, after_first=after_first, nights=[first] + [night(board, d) for d in (2, 3, 4)])
    return root, seen


@pytest.fixture
def farm_after_green(tmp_path, green_nights):
    """The farm, continuing in a copy of green_nights' folder (both boards after night 4); .seen: those nights."""
    root, seen = green_nights
    shutil.copytree(str(root), str(tmp_path), symlinks=True, dirs_exist_ok=True)
    night = make_farm(tmp_path)
    night.seen = seen
    return night


@pytest.mark.slow
def test_each_board_builds_its_own_reference_and_a_slow_night_fails_the_gate(farm_after_green):
    farm = farm_after_green  # nights 1-4 of each board: green_nights'
    for board in GREEN_BOARDS:  # one over ssh, one on the board: the same gate steps
        first = farm.seen[board].first
        assert first.failed == [] and first.steps["compare"]["outputs"] == {"code": "none", "baseline": "none"}
        assert farm.seen[board].after_first.baseline
        assert farm.seen[board].after_first.history == []  # the baseline counts as one night: not also in the history
        for n in farm.seen[board].nights[1:]:  # days 2, 3, 4
            assert n.failed == [] and n.steps["compare"]["outputs"]["code"] == "0", n.logs
            assert n.steps["keep"]["outputs"]["ran_ok"] == "true"
        assert len(history(farm.home, board)) == 3
        assert not any((farm.home / board / "history" / h / "FAILED").exists() for h in history(farm.home, board))
        kept = farm.home / board / "history" / history(farm.home, board)[-1]
        assert (kept / "comparison.json").exists()  # deploy compare -o wrote it into the run, the night keeps it
        assert "2026-11-01" in (farm.home / board / "baseline" / "run.json").read_text()

    slow = farm("jetson_tx2", 5, {1: 6.0, 8: 30.0})
    assert slow.steps["compare"]["outputs"]["code"] == "4"
    assert failed_steps(slow) == ["Regression gate"]
    assert "regression" in slow.logs["Regression gate"]
    # the regressed night is recorded, flagged: deploy compare counts it in the band, never as the baseline
    last = farm.home / "jetson_tx2" / "history" / history(farm.home, "jetson_tx2")[-1]
    assert "gate: deploy compare exit 4" in (last / "FAILED").read_text()
    assert len(history(farm.home, "jetson_tx2")) == 4
    assert len(history(farm.home, "agx_orin")) == 3  # the other board's reference is untouched
    assert (farm.home.parent / "jetson_tx2" / "reports" / "report.html").exists()

    other = farm("agx_orin", 6, update_baseline="jetson_nano")  # a dispatch for another board: this one keeps its own
    assert other.failed == [] and "2026-11-01" in (farm.home / "agx_orin" / "baseline" / "run.json").read_text()
    accepted = farm("jetson_tx2", 6, {1: 6.0, 8: 30.0}, update_baseline="agx_orin jetson_tx2")  # looked, accepts it
    assert failed_steps(accepted) == ["Regression gate"]
    assert "2026-11-06" in (farm.home / "jetson_tx2" / "baseline" / "run.json").read_text()
    assert not (farm.home / "jetson_tx2" / "baseline" / "FAILED").exists()
    assert history(farm.home, "jetson_tx2") == []
    after = farm("jetson_tx2", 7, {1: 6.0, 8: 30.0})
    assert after.failed == [] and after.steps["compare"]["outputs"]["code"] == "0"


@pytest.mark.slow
def test_a_failed_night_is_recorded_flagged_and_never_the_baseline(farm):
    """H3: the first night's engine step failed and left no benchmark.json: it is recorded with FAILED, the
    gate is red, and it does not become the baseline (which would switch the latency gate off)."""
    failed = farm("jetson_nano", 1, outcomes={"night": "failure"}, incomplete=True)
    assert not (farm.home / "jetson_nano" / "baseline").exists()
    (night,) = history(farm.home, "jetson_nano")
    flag = (farm.home / "jetson_nano" / "history" / night / "FAILED").read_text()
    assert "engine and benchmark: failure" in flag and "no benchmark/benchmark.json" in flag
    assert (farm.home / "jetson_nano" / "history" / night / "run.json").exists()
    assert failed_steps(failed) == ["Regression gate"] and "no baseline" in failed.logs["Regression gate"]

    good = farm("jetson_nano", 2)  # the first night whose steps all succeeded becomes the baseline
    assert good.failed == [] and "2026-11-02" in (farm.home / "jetson_nano" / "baseline" / "run.json").read_text()

    # update_baseline on a night whose on-board tests failed: the baseline stays, and the gate says why
    refused = farm("jetson_nano", 3, update_baseline="jetson_nano", outcomes={"onboard": "failure"})
    assert "2026-11-02" in (farm.home / "jetson_nano" / "baseline" / "run.json").read_text()
    assert "baseline stays" in refused.logs["Regression gate"]
    (night,) = history(farm.home, "jetson_nano")
    assert "on-board tests: failure" in (farm.home / "jetson_nano" / "history" / night / "FAILED").read_text()

    # a night that failed after the baseline exists: compared (no data: red), recorded, flagged
    broken = farm("jetson_nano", 4, outcomes={"night": "failure"}, incomplete=True)
    assert broken.steps["compare"]["outputs"]["code"] != "0"
    assert "Regression gate" in failed_steps(broken)
    assert "2026-11-02" in (farm.home / "jetson_nano" / "baseline" / "run.json").read_text()
    assert len(history(farm.home, "jetson_nano")) == 2


@pytest.mark.slow
def test_the_report_says_job_failed_from_the_steps_it_is_given(farm):
    """H6 / issue 28 item 4: the Report step runs after Keep tonight and hands deploy report the job's step
    outcomes (toJSON(steps) through --steps): a night whose on-board tests failed opens its page and its job
    summary with JOB FAILED naming the step, before the figures' verdict. Old: no --steps, the figures alone."""
    n = farm("jetson_tx2", 1, outcomes={"onboard": "failure"})
    assert "Report" not in failed_steps(n), n.logs.get("Report")
    reports = farm.home.parent / "jetson_tx2" / "reports"
    steps = json.loads((reports / "steps.json").read_text())
    assert steps["onboard"]["outcome"] == "failure" and steps["keep"]["outcome"] == "success"
    page = (reports / "report.html").read_text()
    assert "JOB FAILED" in page and "onboard: failure" in page
    summary = n.summary.read_text()
    assert "**job: FAILED**" in summary and "onboard: failure" in summary
    assert summary.index("**job: FAILED**") < summary.index("runs on jetson_tx2")


@pytest.mark.slow
def test_a_changed_fingerprint_is_red_unless_expected(farm):
    """H4 (the workflow's side): power mode MAXQ tonight: deploy compare says "not comparable" (exit 4) and the
    gate fails with that verdict; with expect_change=power_mode from the dispatch input it is compared."""
    farm("xavier_nx", 1)
    drifted = farm("xavier_nx", 2, power_mode="MAXQ")
    assert drifted.steps["compare"]["outputs"]["code"] == "4"
    assert "not comparable" in drifted.logs["Regression gate"]
    elsewhere = farm("xavier_nx", 3, power_mode="MAXQ", expect_change="agx_orin:power_mode")  # another board's
    assert elsewhere.steps["compare"]["outputs"]["code"] == "4"
    expected = farm("xavier_nx", 4, power_mode="MAXQ", expect_change="agx_orin:tensorrt, xavier_nx:power_mode")
    assert expected.steps["compare"]["outputs"]["code"] == "0", expected.logs
    assert expected.failed == []
    plain = farm("xavier_nx", 5, expect_change="power_mode")  # a key without a board: refused, named
    assert "What the dispatch asks of this board" in failed_steps(plain)
    assert "names no board: give BOARD:KEY" in plain.logs["What the dispatch asks of this board"]


@pytest.mark.slow
def test_a_rerun_replaces_the_night_of_its_first_attempt(farm):
    """M4: "Re-run failed jobs" is the same workflow run: its night replaces the first attempt's."""
    farm("agx_orin", 1)
    farm("agx_orin", 2, outcomes={"onboard": "failure"})
    again = farm("agx_orin", 2, attempt=2)
    assert again.failed == []
    (night,) = history(farm.home, "agx_orin")
    assert night.endswith("-1002") and not (farm.home / "agx_orin" / "history" / night / "FAILED").exists()


def test_the_history_keeps_the_last_30_nights_with_a_blank_in_its_path(tmp_path):
    """L5: the pruning does not split paths on blanks; the oldest nights go."""
    home = tmp_path / "nightly home" / "jetson_tx2"
    (home / "history").mkdir(parents=True)
    for day in range(1, 33):
        (home / "history" / "night-2026-10-{:02d}T0123-abcdef0-{}".format(day, day)).mkdir()
    work = tmp_path / "w"
    work.mkdir()
    n = Night(work, {"NIGHTLY": str(home), "RUN": str(work / "runs" / "none")}, {}, run_id=99,
              matrix=matrix_of("jetson_tx2"), outcomes={sid: "success" for sid in SIMULATED})
    n.run(step("Keep tonight"))
    kept = sorted(p.name for p in (home / "history").iterdir())
    assert len(kept) == 30 and kept[0].startswith("night-2026-10-04") and kept[-1].endswith("-99")
    assert (tmp_path / "nightly home").is_dir()


def test_the_gate_names_bad_input_and_the_verdict(tmp_path):
    """L5: exit 1 of deploy compare is bad input, not "regressions"; exit 4 names the verdict and its reasons."""
    work = tmp_path / "w"
    deploy_wrapper(work / ".venv" / "bin" / "deploy")
    run = work / "runs" / "jetson_tx2"
    run.mkdir(parents=True)
    gate = step("Regression gate")
    n = Night(work, {"NIGHTLY": str(tmp_path / "n"), "RUN": str(run)}, {}, run_id=5, matrix=matrix_of("jetson_tx2"))
    n.steps["compare"] = {"outcome": "success", "outputs": {"code": "1"}}
    n.steps["keep"] = {"outcome": "success", "outputs": {"ran_ok": "true"}}
    res = n.run(gate)
    assert res.returncode == 1 and "bad input" in res.stdout and "regression" not in res.stdout
    (run / "comparison.json").write_text(json.dumps({"verdict": "not comparable",
                                                     "reasons": ["power_mode MAXN vs MAXQ"]}))
    n.steps["compare"]["outputs"]["code"] = "4"
    res = n.run(gate)
    assert res.returncode == 1 and "not comparable: power_mode MAXN vs MAXQ" in res.stdout
    n.steps["compare"]["outputs"]["code"] = "0"
    assert n.run(gate).returncode == 0


# --- the steps that reach the board ---------------------------------------------------------------

def board_env(tmp_path, **extra):
    out = tmp_path / "github_env"
    out.write_text("")
    env = dict(os.environ, GITHUB_ENV=str(out), RUNNER_TEMP=str(tmp_path))
    env.update(extra)
    return env, out


def read_env(path):
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


BOARD_SCRIPT = ROOT / "scripts" / "jetson" / "nightly-board"


def test_nightly_board_resolves_an_ssh_board_from_the_runners_environment(tmp_path):
    env, out = board_env(tmp_path, BOARD="jetson_tx2", ROUTE="ssh", DEPLOY_BOARD_JETSON_TX2_HOST="tx2.lab",
                         DEPLOY_BOARD_JETSON_TX2_USER="nvidia", DEPLOY_BOARD_JETSON_TX2_PORT="2222",
                         DEPLOY_SSH_KEY="-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----",
                         DEPLOY_KNOWN_HOSTS="tx2.lab ssh-ed25519 AAAA")
    res = subprocess.run([str(BOARD_SCRIPT), "resolve"], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    found = read_env(out)
    assert found["DEPLOY_BOARD_HOST"] == "tx2.lab" and found["DEPLOY_BOARD_USER"] == "nvidia"
    assert found["DEPLOY_BOARD_PYTHON"] == "/usr/bin/python3"  # the board's own Python: only what JetPack ships
    key = Path(found["DEPLOY_BOARD_IDENTITY"])
    assert key.read_text().startswith("-----BEGIN") and oct(key.stat().st_mode & 0o777) == "0o600"
    assert "ssh-ed25519" in Path(found["DEPLOY_BOARD_KNOWN_HOSTS"]).read_text()
    res = subprocess.run([str(BOARD_SCRIPT), "args"], env=dict(env, ROUTE="ssh", **found), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    words = res.stdout.splitlines()
    pairs = dict(w.split("=", 1) for w in words[1::2])
    assert set(words[0::2]) == {"--set"}
    assert pairs == {"device.transport": "ssh", "device.host": "tx2.lab", "device.user": "nvidia", "device.port": "2222",
                     "device.identity_file": str(key), "device.known_hosts_file": found["DEPLOY_BOARD_KNOWN_HOSTS"],
                     "device.python": "/usr/bin/python3", "device.backend": "tensorrt"}


def test_nightly_board_without_an_address_says_which_variable(tmp_path):
    env, _ = board_env(tmp_path, BOARD="jetson_nano", ROUTE="ssh")
    env.pop("DEPLOY_BOARD_JETSON_NANO_HOST", None)
    res = subprocess.run([str(BOARD_SCRIPT), "resolve"], env=env, capture_output=True, text=True)
    assert res.returncode == 2 and "DEPLOY_BOARD_JETSON_NANO_HOST" in res.stderr and "::error" in res.stderr


def test_the_nightly_forces_the_tensorrt_backend_on_both_routes(tmp_path):
    """M5: with backend auto, a board whose Python lost TensorRT would time ONNX Runtime and pass."""
    env, _ = board_env(tmp_path, ROUTE="local", DEPLOY_BOARD_PYTHON="/opt/agent-python")
    res = subprocess.run([str(BOARD_SCRIPT), "args"], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["--set", "device.transport=local", "--set", "device.python=/opt/agent-python",
                                  "--set", "device.backend=tensorrt"]


@pytest.fixture
def checkout(tmp_path):
    work = tmp_path / "checkout"
    deploy_wrapper(work / ".venv" / "bin" / "deploy")
    for name in ("scripts", "configs", "targets", "tests"):
        os.symlink(str(ROOT / name), str(work / name))
    return work


def test_an_unreachable_ssh_board_fails_the_probe_with_its_name(checkout, tmp_path):
    """M3: a board that is off fails its own job quickly, with a message naming it (deploy's real probe over
    ssh to a closed port)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends
    n = Night(checkout, {"DEPLOY_BOARD_JETSON_TX2_HOST": "127.0.0.1", "DEPLOY_BOARD_JETSON_TX2_PORT": str(port)}, {},
              run_id=1, matrix=matrix_of("jetson_tx2"))
    assert n.run(step("Which board")).returncode == 0
    res = n.run(step("Probe the board"))
    assert res.returncode != 0
    assert "::error title=jetson_tx2: board not ready::jetson_tx2 (ssh, 127.0.0.1)" in res.stdout
    assert "connection refused" in res.stdout.lower() or "refused" in res.stdout.lower(), res.stdout


def test_the_night_stops_after_its_timeout_with_a_clear_message(checkout, tmp_path):
    """M3: engine and benchmark that hang are stopped after NIGHT_TIMEOUT, and the message says so."""
    (checkout / ".venv" / "bin" / "deploy").write_text("#!/bin/sh\nsleep 30\n")
    n = Night(checkout, {"NIGHT_TIMEOUT": "1s", "DEPLOY_BOARD_PYTHON": sys.executable}, {}, run_id=1,
              matrix=matrix_of("agx_orin"), outcomes={"probe": "success"})
    res = n.run(step("Engine and benchmark through the agent"))
    assert res.returncode == 124
    assert "agx_orin (local): engine and benchmark did not finish within 1s and were stopped" in res.stdout


@pytest.mark.slow
def test_the_ssh_route_reaches_a_board_and_fails_when_the_on_board_tests_all_skip(checkout, tmp_path):
    """C1/C2 and M7 through a real sshd on 127.0.0.1 playing the board: the probe over ssh runs (and --strict
    says this is no TX2: exit 5, named), and the on-board tests over ssh run but all skip (no TensorRT
    here): the step fails instead of passing having verified nothing."""
    sys.path.insert(0, str(ROOT / "tests" / "device"))
    from devicekit import SshServer

    try:
        sshd = SshServer(tmp_path / "sshd").start()
    except RuntimeError as e:
        pytest.skip(str(e))
    try:
        prefix = "DEPLOY_BOARD_JETSON_TX2_"
        n = Night(checkout, {prefix + "HOST": "127.0.0.1", prefix + "PORT": str(sshd.port), prefix + "USER": sshd.user,
                             prefix + "IDENTITY": str(sshd.key), prefix + "KNOWN_HOSTS": str(sshd.known_hosts),
                             prefix + "PYTHON": sys.executable}, {}, run_id=1, matrix=matrix_of("jetson_tx2"))
        assert n.run(step("Which board")).returncode == 0
        probe = n.run(step("Probe the board"))
        assert probe.returncode == 5, probe.stdout + probe.stderr
        assert "not the board or TensorRT" in probe.stdout
        n.steps["probe"] = {"outcome": "success", "outputs": {}}  # as if it were the TX2
        tests = n.run(step("On-board tests"))
        assert tests.returncode != 0
        assert " passed" not in tests.stdout and " error" not in tests.stdout, tests.stdout
        assert "the on-board tests verified nothing: 3 collected, all skipped" in tests.stdout
        assert "has no TensorRT bindings" in tests.stdout
    finally:
        sshd.stop()


def test_junit_ran_passes_when_a_test_ran(tmp_path):
    xml = tmp_path / "j.xml"
    xml.write_text('<testsuites><testsuite><testcase name="a"/><testcase name="b"><skipped message="no"/></testcase>'
                   "</testsuite></testsuites>")
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "jetson" / "junit-ran"), str(xml)],
                         capture_output=True, text=True)
    assert res.returncode == 0 and "1 test(s) ran, 1 skipped" in res.stdout
    xml.write_text("<testsuites><testsuite/></testsuites>")  # nothing collected
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "jetson" / "junit-ran"), str(xml)],
                         capture_output=True, text=True)
    assert res.returncode == 1 and "0 collected" in res.stdout


def test_step_scripts_are_valid_bash():
    for script in (BOARD_SCRIPT,):
        res = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr


def test_compare_is_called_as_contract_a_says():
    """The gate step's `deploy compare`: --history, --expect-change from the dispatch input, -o into the run
    folder (the report and the kept night read comparison.json there), every flag known to the CLI."""
    from pipeline.cli import build_parser

    script = step("Compare with the reference")["run"]
    assert re.search(r'deploy compare "\$NIGHTLY/baseline" "\$RUN" "\$\{history\[@\]\}" "\$\{expect\[@\]\}"', script)
    assert '-o "$RUN/comparison.json"' in script
    assert 'expect+=(--expect-change "$key")' in script and '--latency-tolerance "$TOLERANCE"' in script
    assert step("Compare with the reference")["env"]["EXPECT_CHANGE"] == "${{ steps.asked.outputs.expect_change }}"
    compare = build_parser()._subparsers._group_actions[0].choices["compare"]
    known = {o for a in compare._actions for o in a.option_strings}
    missing = {"--history", "--expect-change", "--latency-tolerance", "--format", "--junit", "-o"} - known
    assert not missing, "deploy compare does not know {} yet (contract A, h10)".format(sorted(missing))


def test_the_host_job_trains_once_for_the_four_configs(tmp_path):
    """L5: the four configs share base.yaml's model, dataset and training; the first trains, the others start
    from copies of its train / export / freeze folders (deploy's cache keys decide whether they are up to
    date: tests/nightly/test_handoff.py runs the real thing). A stand-in `deploy` records what it is asked
    and plays the train stage: it trains only where runs/<config>/train is missing."""
    work = tmp_path / "host"
    (work / "bin").mkdir(parents=True)
    log = tmp_path / "deploy.log"
    fake = work / "bin" / "deploy"
    fake.write_text("#!/bin/bash\nset -eu\nconfig=$(basename \"$2\" .yaml)\n"
                    "if [ ! -d \"runs/$config/train\" ]; then echo \"train $config\" >> {log}; "
                    "for s in train export freeze; do mkdir -p \"runs/$config/$s\"; echo made > \"runs/$config/$s/manifest.json\"; done; fi\n"
                    "echo \"$*\" >> {log}\n".format(log=shlex.quote(str(log))))
    fake.chmod(0o755)
    host = load()["jobs"]["host"]
    (stage,) = [s for s in host["steps"] if s.get("name") == "Host stages (the model trained once)"]
    env = dict(os.environ, CONFIGS=host["env"]["CONFIGS"], PATH="{}:{}".format(work / "bin", os.environ["PATH"]))
    res = subprocess.run(["bash", "-euo", "pipefail", "-c", stage["run"]], cwd=work, env=env, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr
    lines = log.read_text().splitlines()
    assert [line for line in lines if line.startswith("train ")] == ["train jetson_tx2"]
    assert [line for line in lines if not line.startswith("train ")] == [
        "run configs/{}.yaml --until convert".format(c) for c in host["env"]["CONFIGS"].split()]
    for config in host["env"]["CONFIGS"].split():
        assert (work / "runs" / config / "freeze" / "manifest.json").read_text() == "made\n"


def test_docs_register_the_latest_runner_with_auto_update():
    """H1: GitHub refuses to register runners older than 2.329.0 and stops sending jobs to one that is not
    updated within 30 days: the docs name no fixed version and keep auto-update on."""
    docs = (ROOT / "docs" / "nightly.md").read_text()
    assert not re.search(r"actions-runner-linux-\w+-2\.\d+\.\d+", docs)
    assert "latest" in docs and "New self-hosted runner" in docs and "auto-update" in docs
    assert "--disableupdate" not in re.sub(r"never\s+`--disableupdate`", "", docs)


def test_docs_show_both_routes_with_ssh_the_default_for_jetpack_46():
    docs = (ROOT / "docs" / "nightly.md").read_text()
    assert "DEPLOY_BOARD_JETSON_TX2_HOST" in docs and "device.transport: ssh" in docs
    assert "OPENBLAS_CORETYPE=ARMV8" in docs  # H2, the system Python route
    assert "sudoers" in docs and "jetson_clocks --show" in docs  # L5
    # L4, issue 27 item 1: what the board's system Python needs on the default (non-image) route: JetPack's apt
    # packages only, CUDA through libcudart; no pycuda / cuda-python / nvcc step, no pip
    registering = docs[docs.index("## Registering a runner"):docs.index("## Secrets and variables")]
    for needed in ("sudo apt install python3-numpy python3-libnvinfer", "libcudart", "ctypes", "nothing from pip"):
        assert needed in registering, needed
    for gone in ("pycuda 2021.1", "pycuda 2022.2.2", "cuda-python<13", "/usr/local/cuda/bin:$PATH", "pip install"):
        assert gone not in registering, gone


# --- issue 28: red means persistent, per-board dispatch inputs, reproducible nights ----------------------


@pytest.mark.slow
@pytest.mark.parametrize("board", ["jetson_tx2", "agx_orin"])  # one over ssh, one on the board
def test_one_slow_night_is_a_warning_and_two_are_red(farm_after_green, board):
    """Issue 28 item 1 through the workflow's own gate steps: +8 % on one night is suspect: the job stays
    green with a warning, the night is kept without FAILED; the same +8 % the next night is a regression: red,
    FAILED. Old: the first +8 % night was red at once."""
    farm = farm_after_green  # nights 1-4: green_nights'
    assert [n.failed for n in farm.seen[board].nights] == [[], [], [], []]
    for day in (5, 6):
        assert farm(board, day).failed == []
    first = farm(board, 7, {1: 4.32, 8: 21.6})
    assert first.failed == [] and first.steps["compare"]["outputs"]["code"] == "0", first.logs
    assert "::warning title={}: suspect::".format(board) in first.logs["Regression gate"]
    kept = farm.home / board / "history" / history(farm.home, board)[-1]
    assert not (kept / "FAILED").exists() and json.loads((kept / "comparison.json").read_text())["verdict"] == "suspect"
    assert "suspect" in first.summary.read_text()
    second = farm(board, 8, {1: 4.33, 8: 21.7})
    assert second.steps["compare"]["outputs"]["code"] == "4" and failed_steps(second) == ["Regression gate"]
    assert "regression" in second.logs["Regression gate"]
    last = farm.home / board / "history" / history(farm.home, board)[-1]
    assert "gate: deploy compare exit 4" in (last / "FAILED").read_text()


def test_the_ssh_secrets_reach_only_the_step_that_writes_them():
    """Issue 28 item 5 (N9): the private key is not job-level env that every step (package installs, tests) sees."""
    assert "DEPLOY_SSH_KEY" not in device_job()["env"] and "DEPLOY_KNOWN_HOSTS" not in device_job()["env"]
    holders = [s.get("name") for s in device_job()["steps"] if "secrets." in json.dumps(s)]
    assert holders == ["Which board"]
    assert step("Which board")["env"]["DEPLOY_SSH_KEY"] == "${{ secrets.DEPLOY_SSH_KEY }}"


def test_the_host_toolchain_is_pinned_by_one_constraints_file():
    """Issue 28 item 5 (N6): both installs take the nightly's constraints; the converters are pinned there."""
    constraints = ROOT / load()["env"]["CONSTRAINTS"]
    pins = dict(line.split("==") for line in constraints.read_text().splitlines() if line and not line.startswith("#"))
    assert {"tensorflow-cpu", "tf2onnx", "onnx", "onnxruntime"} <= set(pins)
    host = [s for s in load()["jobs"]["host"]["steps"] if s.get("name") == "Install deploy with TensorFlow"][0]
    assert '-c "$CONSTRAINTS"' in host["run"] and '-c "$CONSTRAINTS"' in step("Install deploy")["run"]


def test_nightly_board_refuses_a_value_with_a_line_break(tmp_path):
    """Issue 29 item 4: a host holding a newline became a second variable in GITHUB_ENV (here LD_PRELOAD)."""
    for extra in ({"DEPLOY_BOARD_JETSON_TX2_HOST": "tx2.lab\nLD_PRELOAD=/tmp/evil.so"},
                  {"DEPLOY_BOARD_JETSON_TX2_HOST": "tx2.lab", "DEPLOY_BOARD_JETSON_TX2_USER": "nvidia\rX=1"}):
        env, out = board_env(tmp_path, BOARD="jetson_tx2", ROUTE="ssh", **extra)
        res = subprocess.run([str(BOARD_SCRIPT), "resolve"], env=env, capture_output=True, text=True)
        assert res.returncode == 2 and "holds a line break" in res.stderr, res.stderr
        assert out.read_text() == ""  # nothing half-written
    env, out = board_env(tmp_path, ROUTE="local", BOARD="agx_orin", DEPLOY_BOARD_PYTHON="/usr/bin/python3\nX=1")
    res = subprocess.run([str(BOARD_SCRIPT), "resolve"], env=env, capture_output=True, text=True)
    assert res.returncode == 2 and "DEPLOY_BOARD_PYTHON holds a line break" in res.stderr and out.read_text() == ""


def test_nightly_board_asked_acts_on_the_named_boards_only(tmp_path):
    """Issue 28 item 3 (N4): update_baseline and expect_change name boards."""
    def asked(board, update="", expect=""):
        env = dict(os.environ, BOARD=board, UPDATE_BASELINE=update, EXPECT_CHANGE=expect)
        return subprocess.run([str(BOARD_SCRIPT), "asked"], env=env, capture_output=True, text=True)

    res = asked("jetson_tx2", "agx_orin, jetson_tx2", "agx_orin:tensorrt jetson_tx2:power_mode,jetson_tx2:clocks")
    assert res.returncode == 0 and res.stdout == "update_baseline=true\nexpect_change=power_mode,clocks\n"
    assert asked("jetson_nano", "jetson_tx2", "agx_orin:tensorrt").stdout == "update_baseline=false\nexpect_change=\n"
    assert asked("jetson_nano", "jetson_nano_2").stdout.startswith("update_baseline=false")
    old = asked("jetson_nano", "true")  # the old boolean input would have re-baselined every board
    assert old.returncode == 2 and "names boards now" in old.stderr


def test_shellcheck_is_clean_on_the_nightly_scripts():
    """Issue 28 item 5 (N12): SC2155 at nightly-board's `local key="$(...)"`."""
    found = shutil.which("shellcheck")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is not installed (apt-get install shellcheck)")
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    res = subprocess.run([found, "-S", "info", str(BOARD_SCRIPT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout
