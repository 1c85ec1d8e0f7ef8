"""The runner: cache hits and misses, --force/--from/--until/--only, failures, atomicity, the lock."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import fake_stages
from pipeline.config import load_config
from pipeline.errors import DeployError
from pipeline.lock import RunLock
from pipeline.progress import Progress
from pipeline.runner import format_summary, run
from pipeline.targets import load_target

from conftest import ROOT

CONFIG = """\
run:
  name: demo
  dir: {runs}
model:
  zoo: small_cnn
target: host_cpu
stages:
  train:
    epochs: 2
  export:
  freeze:
"""


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setattr("pipeline.runner.registry", lambda: fake_stages.STAGES)
    fake_stages.CALLS.clear()
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.format(runs=tmp_path / "runs"))

    def go(*overrides, **flags):
        config = load_config(path, list(overrides))
        fake_stages.CALLS.clear()
        return run(config, load_target(config.target), progress=Progress("quiet"), **flags)

    go.run_dir = tmp_path / "runs" / "demo"
    go.config_path = path
    return go


def statuses(report):
    return {s.name: s.status for s in report.stages}


def test_upgrading_a_tool_redoes_the_stages_that_declare_it_and_what_follows(setup, monkeypatch):
    from pipeline.stages import tools

    setup()
    real = tools.installed_versions()
    upgraded = {name: "99.0" if name.startswith("tensorflow") else v for name, v in real.items()}
    monkeypatch.setattr(tools, "installed_versions", lambda: upgraded)
    tools.clear_cache()
    try:
        again = setup()
    finally:
        monkeypatch.undo()
        tools.clear_cache()
    assert statuses(again) == {"train": "cached", "export": "cached", "freeze": "ran"}  # only freeze declares it
    manifest = json.loads((setup.run_dir / "freeze" / "manifest.json").read_text())
    assert manifest["tools"]["python"].count(".") == 2


def test_tool_versions_are_the_installed_packages():
    from importlib import metadata

    from pipeline.stages.tools import tool_versions

    versions = tool_versions(("tensorflow", "onnx", "no-such-tool"))
    assert versions["onnx"] == metadata.version("onnx") and "no-such-tool" not in versions
    installed = []
    for dist in ("tensorflow", "tensorflow-cpu"):
        try:
            installed.append(metadata.version(dist))
        except metadata.PackageNotFoundError:
            pass
    assert versions["tensorflow"] == installed[0]


def test_plan_decides_skips_and_forcing_before_anything_runs(setup):
    from pipeline.runner import plan

    config = load_config(setup.config_path, [])
    steps = plan(config, load_target(config.target), force=("export",), until="export").steps
    assert [(s.name, s.skip, s.selected, s.forced) for s in steps] == [
        ("train", None, True, False), ("export", None, True, True), ("freeze", "after the selected stages", False, False)]
    assert not setup.run_dir.exists()


def test_run_json_says_which_commit_and_which_config_made_the_run(setup, monkeypatch, tmp_path):
    """What a nightly report is read for: the commit ($GITHUB_SHA in CI, else git), the config's digest
    (--set included) and the settings a report shows while a stage is pending."""
    monkeypatch.delenv("GITHUB_SHA", raising=False)
    monkeypatch.delenv("GITHUB_RUN_ID", raising=False)
    setup()
    record = json.loads((setup.run_dir / "run.json").read_text())
    assert record["commit"] is None and record["commit_source"] is None  # tmp_path is no git tree
    assert len(record["config_digest"]) == 64 and "settings" in record and "ci" not in record
    assert record["overrides"] == []
    setup("stages.train.epochs=3")
    again = json.loads((setup.run_dir / "run.json").read_text())
    assert again["config_digest"] != record["config_digest"]
    assert again["overrides"] == ["stages.train.epochs=3"]  # the report's next command repeats them
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    setup()
    record = json.loads((setup.run_dir / "run.json").read_text())
    assert (record["commit"], record["commit_source"]) == (head, "git")
    monkeypatch.setenv("GITHUB_SHA", "a" * 40)
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "team/deploy")
    setup()
    record = json.loads((setup.run_dir / "run.json").read_text())
    assert (record["commit"], record["commit_source"]) == ("a" * 40, "GITHUB_SHA")
    assert record["ci"]["run_url"] == "https://github.com/team/deploy/actions/runs/42"


def test_first_run_runs_then_everything_is_cached(setup):
    first = setup()
    assert statuses(first) == {"train": "ran", "export": "ran", "freeze": "ran"}
    assert first.exit_code == 0
    second = setup()
    assert statuses(second) == {"train": "cached", "export": "cached", "freeze": "cached"}
    assert fake_stages.CALLS == []
    assert second.stages[0].results == {"summary": "acc 1.0", "epochs": 2}


def test_manifest_records_digest_hashes_tools_and_results(setup):
    setup()
    manifest = json.loads((setup.run_dir / "export" / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["stage"] == "export"
    assert set(manifest) >= {"key", "config_digest", "inputs", "outputs", "tools", "started", "duration_s", "results"}
    assert len(manifest["inputs"]["keras_model"]["sha256"]) == 64
    assert manifest["outputs"]["saved_model"]["path"] == "saved"
    assert manifest["tools"]["python"].count(".") == 2
    assert manifest["results"] == {"summary": "exported"}


def test_changed_options_rerun_that_stage_and_what_depends_on_its_output(setup):
    setup()
    report = setup("stages.export.input_name=image")
    assert statuses(report) == {"train": "cached", "export": "ran", "freeze": "ran"}
    report = setup("stages.train.epochs=3")
    assert statuses(report) == {"train": "ran", "export": "ran", "freeze": "ran"}
    # a change in a section a stage uses (train uses `model`) is a miss too; the fake train
    # writes the same bytes, so what reads its output stays cached
    report = setup("stages.train.epochs=3", "model.input_size=64")
    assert statuses(report) == {"train": "ran", "export": "cached", "freeze": "cached"}


def test_same_output_downstream_stays_cached(setup):
    setup()
    # rerunning train with --force gives the same bytes, so export's input hash is unchanged
    report = setup(force=["train"])
    assert statuses(report) == {"train": "ran", "export": "cached", "freeze": "cached"}


def test_force_all_from_until_only(setup):
    setup()
    assert set(statuses(setup(force_all=True)).values()) == {"ran"}
    assert statuses(setup(from_stage="export", force=["export"])) == {"train": "cached", "export": "ran", "freeze": "cached"}
    report = setup("stages.train.epochs=7", until="train")
    assert statuses(report) == {"train": "ran", "export": "skipped", "freeze": "skipped"}
    assert statuses(setup("stages.train.epochs=7", only="export")) == {"train": "cached", "export": "ran", "freeze": "skipped"}


def test_a_relative_run_dir_is_cached_too(setup, tmp_path, monkeypatch):
    """The shipped configs use run.dir: runs (relative to the working directory)."""
    monkeypatch.chdir(tmp_path)
    assert set(statuses(setup("run.dir=runs2")).values()) == {"ran"}
    assert set(statuses(setup("run.dir=runs2")).values()) == {"cached"}


def test_from_needs_an_up_to_date_upstream(setup):
    setup()
    with pytest.raises(DeployError, match=r"stage 'train' has no up-to-date result in .*train \(its config or inputs changed\)"):
        setup("stages.train.epochs=9", from_stage="export")
    with pytest.raises(DeployError, match=r"--from convert: not a stage of this config \(stages: train, export, freeze\)"):
        setup(from_stage="convert")


def test_from_takes_stages_made_by_other_tool_versions_as_they_are(setup, monkeypatch, capsys):
    """A CI host job (TensorFlow installed) makes train..freeze; a Jetson job without TensorFlow runs
    --from convert: freeze matches in config and inputs, so it is taken as it is, with a note naming
    the tool. Without --from, freeze (it declares tensorflow) runs again, as after any upgrade; a
    config change is never taken."""
    from pipeline.stages import tools

    setup("stages.convert={}")
    real = tools.installed_versions()
    monkeypatch.setattr(tools, "installed_versions",
                        lambda: {name: v for name, v in real.items() if not name.startswith("tensorflow")})
    tools.clear_cache()
    try:
        config = load_config(setup.config_path, ["stages.convert={}"])
        capsys.readouterr()
        report = run(config, load_target(config.target), progress=Progress("human"), from_stage="convert")
        assert statuses(report) == {"train": "cached", "export": "cached", "freeze": "cached", "convert": "cached"}
        note = [line for line in capsys.readouterr().err.splitlines() if line.startswith("freeze")]
        assert "made with tensorflow" in note[0] and "(here not installed); taken as it is" in note[0]
        with pytest.raises(DeployError, match="stage 'train' has no up-to-date result"):
            setup("stages.convert={}", "stages.train.epochs=9", from_stage="convert")
        assert statuses(setup("stages.convert={}"))["freeze"] == "ran"
    finally:
        monkeypatch.undo()
        tools.clear_cache()


def test_failed_stage_leaves_nothing_and_stops(setup):
    report = setup("stages.export.input_name=fail")
    assert statuses(report) == {"train": "ran", "export": "failed", "freeze": "not run"}
    assert report.exit_code == 3
    assert report.stages[1].message == "export failed on purpose"
    assert not (setup.run_dir / "export").exists()
    assert list(setup.run_dir.glob(".tmp-*")) == []
    table = format_summary(report)
    assert "export  failed   0.0s  export failed on purpose" in table
    assert "freeze  not run  -     an earlier stage failed" in table


def test_pending_stage_and_its_dependents(setup, write):
    text = setup.config_path.read_text() + "  convert:\n  engine:\n  benchmark:\n"
    setup.config_path.write_text(text)
    report = setup()
    st = statuses(report)
    assert st["convert"] == "ran" and st["engine"] == "pending" and st["benchmark"] == "pending"
    assert report.stages[-1].message == "waits for engine (pending: no TensorRT here)"
    assert report.exit_code == 0


def test_a_device_error_while_asking_whether_a_stage_is_pending_still_gives_the_table(setup, monkeypatch):
    """Issue 28 item 5: the engine stage asks the device whether TensorRT is there; a device that cannot be used
    (exit 5) stopped deploy run with no summary table (the DeployError left the runner)."""
    import dataclasses

    def unreachable(ctx):
        raise DeployError("device.python: python3 on the board has no numpy; install it", code=5)

    stages = dict(fake_stages.STAGES, engine=dataclasses.replace(fake_stages.STAGES["engine"], pending_reason=unreachable))
    monkeypatch.setattr("pipeline.runner.registry", lambda: stages)
    setup.config_path.write_text(setup.config_path.read_text() + "  convert:\n  engine:\n  benchmark:\n")
    report = setup()
    assert statuses(report) == {"train": "ran", "export": "ran", "freeze": "ran", "convert": "ran", "engine": "failed",
                                "benchmark": "not run"}
    assert report.exit_code == 5
    table = format_summary(report)
    assert "engine     failed" in table and "has no numpy" in table and "convert    ran" in table
    assert json.loads((setup.run_dir / "run.json").read_text())["exit_code"] == 5


def test_interrupted_stage_keeps_previous_result_and_leaves_no_partial_output(setup, monkeypatch):
    setup()
    before = (setup.run_dir / "export" / "saved" / "graph.txt").read_text()

    def interrupted(ctx):
        (ctx.out_dir / "saved").mkdir()
        (ctx.out_dir / "saved" / "graph.txt").write_text("half")
        raise KeyboardInterrupt

    monkeypatch.setattr(fake_stages.STAGES["export"], "func", interrupted)
    with pytest.raises(KeyboardInterrupt):
        setup(force=["export"])
    assert (setup.run_dir / "export" / "saved" / "graph.txt").read_text() == before
    assert list(setup.run_dir.glob(".tmp-*")) == []


KILL_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import fake_stages
    fake_stages.install()
    from pipeline.cli import main
    sys.exit(main(["run", {config!r}, "--quiet"]))
""")


def _run_fake_cli(config, env=None):
    script = KILL_SCRIPT.format(tests=str(ROOT / "tests"), config=str(config))
    return subprocess.Popen([sys.executable, "-c", script], cwd=str(ROOT), env=dict(os.environ, **(env or {})),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_kill_9_mid_stage_then_rerun_redoes_it(setup):
    proc = _run_fake_cli(setup.config_path, {"FAKE_TRAIN_SLEEP": "30"})
    deadline = time.time() + 30
    while not list(setup.run_dir.glob(".tmp-train-*/started")) and time.time() < deadline:
        time.sleep(0.05)
    assert list(setup.run_dir.glob(".tmp-train-*/started")), proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (setup.run_dir / "train").exists()  # nothing a later run could trust
    proc = _run_fake_cli(setup.config_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert (setup.run_dir / "train" / "manifest.json").exists()
    assert list(setup.run_dir.glob(".tmp-*")) == []  # the dead run's leftovers are gone


def test_lock_names_the_holder_and_stale_locks_are_taken_over(setup):
    setup.run_dir.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from pipeline.lock import RunLock
        RunLock(sys.argv[1]).acquire()
        print("locked", flush=True)
        time.sleep(60)
    """), str(setup.run_dir)], cwd=str(ROOT), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(DeployError, match=r"is locked by another deploy run \(pid {}\)".format(holder.pid)):
            setup()
    finally:
        holder.kill()
        holder.wait()
    # the holder died without unlocking: its lock file (with its pid) is left, and taken over
    assert (setup.run_dir / ".lock").read_text() == str(holder.pid)
    assert setup().exit_code == 0


def test_lock_is_released(tmp_path):
    with RunLock(tmp_path):
        pass
    with RunLock(tmp_path):
        pass


def test_from_with_force_reruns_that_stage_and_after_not_before(setup):
    setup()
    report = setup(from_stage="export", force_all=True)
    assert statuses(report) == {"train": "cached", "export": "ran", "freeze": "ran"}
    assert fake_stages.CALLS == ["export", "freeze"]


@pytest.mark.parametrize("flags, message", [
    ({"from_stage": "freeze", "until": "train"}, "--from freeze --until train: freeze comes after train"),
    ({"only": "export", "from_stage": "train"}, "--only export: runs one stage; drop --from/--until"),
])
def test_impossible_ranges_are_one_line_errors(setup, flags, message):
    with pytest.raises(DeployError) as err:
        setup(**flags)
    assert err.value.message.startswith(message) and "\n" not in err.value.message


def test_same_size_corruption_reruns_the_stage_and_what_follows(setup):
    """Flip bytes inside an artifact without changing its size: the content check catches it (the
    size, mtime and inode fast path sees the write), that stage runs again."""
    setup()
    frozen = setup.run_dir / "export" / "saved" / "graph.txt"
    st = frozen.stat()
    data = frozen.read_bytes()
    with open(frozen, "r+b") as handle:  # in place, as a stray tool or a bad disk would
        handle.write(data[::-1] if data[::-1] != data else data.swapcase())
    assert frozen.stat().st_size == st.st_size and frozen.read_bytes() != data
    progress = []
    config = load_config(setup.config_path)
    import pipeline.progress

    class Recorder(pipeline.progress.Progress):
        def log(self, text):
            progress.append(text)

    fake_stages.CALLS.clear()
    report = run(config, load_target(config.target), progress=Recorder("quiet"))
    assert statuses(report) == {"train": "cached", "export": "ran", "freeze": "cached"}  # same bytes out: cached
    assert fake_stages.CALLS == ["export"]
    assert any("export    saved changed since it was written (sha256 differs): running export again" in p
               for p in progress), progress


def test_changed_output_of_the_last_stage_is_redone(setup):
    setup()
    frozen = setup.run_dir / "freeze" / "frozen.txt"
    frozen.write_text(frozen.read_text().lower())  # other content, maybe same size
    report = setup()
    assert statuses(report)["freeze"] == "ran" and fake_stages.CALLS == ["freeze"]


@pytest.mark.parametrize("manifest", ["{not json", "[]", '{"status": "ok"}', '{"status": "ok", "key": 1, "outputs": 3}',
                                      '{"status": "ok", "outputs": {"keras_model": {"path": "model.txt"}}}'])
def test_malformed_manifest_means_not_cached(setup, manifest):
    setup()
    (setup.run_dir / "train" / "manifest.json").write_text(manifest)
    report = setup()
    assert statuses(report)["train"] == "ran"


def test_outputs_and_manifests_follow_the_umask(setup):
    old = os.umask(0o022)
    try:
        import pipeline.files

        pipeline.files._UMASK.clear()
        setup()
        for path in (setup.run_dir / "train" / "manifest.json", setup.run_dir / "freeze" / "manifest.json"):
            assert path.stat().st_mode & 0o777 == 0o644, oct(path.stat().st_mode)
    finally:
        os.umask(old)
        pipeline.files._UMASK.clear()


def test_sigterm_mid_stage_cleans_up_like_ctrl_c(setup):
    proc = _run_fake_cli(setup.config_path, {"FAKE_TRAIN_SLEEP": "30"})
    deadline = time.time() + 30
    while not list(setup.run_dir.glob(".tmp-train-*/started")) and time.time() < deadline:
        time.sleep(0.05)
    assert list(setup.run_dir.glob(".tmp-train-*/started")), proc.communicate()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert err.strip().splitlines()[-1] == "deploy: terminated (SIGTERM); unfinished stages left nothing behind"
    assert not (setup.run_dir / "train").exists() and list(setup.run_dir.glob(".tmp-*")) == []
    assert (setup.run_dir / ".lock").read_text() == ""  # released (the file stays, empty)
    with RunLock(setup.run_dir):
        pass


def test_child_processes_die_with_deploy():
    """The export stage's child process gets PR_SET_PDEATHSIG: kill -9 of deploy kills it too."""
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import subprocess, sys, time
        from pipeline.files import die_with_parent
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=die_with_parent)
        print(child.pid, flush=True)
        time.sleep(60)
    """)], cwd=str(ROOT), stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        try:  # reaped by init, or a zombie until then
            with open("/proc/{}/status".format(child)) as f:
                if "\nState:\tZ" in f.read():
                    return
        except OSError:
            return
        time.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the child outlived its parent")


def test_run_folder_problems_are_one_line(setup, tmp_path):
    setup.run_dir.parent.mkdir(parents=True)
    setup.run_dir.write_text("not a folder")
    with pytest.raises(DeployError, match=r"run\.dir/run\.name: .*demo is a file, not a folder; move it or choose "
                                          r"another run\.name"):
        setup()
    setup.run_dir.unlink()
    (setup.run_dir / ".lock").mkdir(parents=True)
    with pytest.raises(DeployError, match=r"cannot lock .*\.lock \(.*\); remove it"):
        setup()


def test_parallel_runs_share_one_generated_dataset_and_stale_temp_folders_go(tmp_path):
    """Four runs of configs sharing one generated dataset, started together: all succeed; a
    killed generation's temporary folder is removed."""
    data = tmp_path / "data" / "shapes"
    data.parent.mkdir()
    (data.parent / ".shapes.tmp-999-dead").mkdir()  # what a killed generation leaves
    procs = []
    for k in range(4):
        config = tmp_path / "c{}.yaml".format(k)
        config.write_text("run: {{name: r{k}, dir: {r}}}\nmodel: {{zoo: small_cnn}}\ntarget: host_cpu\n"
                          "dataset: {{path: {d}, generate: shapes, train_per_class: 3, val_per_class: 1}}\n"
                          "stages: {{train: {{epochs: 1}}}}\n".format(k=k, r=tmp_path / "runs", d=data))
        script = ("import sys; from pipeline.config import load_config; from pipeline.progress import Progress; "
                  "from pipeline.data.dataset import prepare_dataset; prepare_dataset(load_config(sys.argv[1]), Progress('quiet'))")
        procs.append(subprocess.Popen([sys.executable, "-c", script, str(config)], cwd=str(ROOT),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert sorted(p.name for p in data.parent.iterdir()) == [".shapes.lock", "shapes"]
    assert len(list((data / "train").rglob("*.png"))) == 12
