"""One schema per file deploy writes, used to write and to read (issue 22 point 1): every file carries
``schema: deploy.<name>/<version>``; a file of the wrong shape, with impossible values, of another kind
or from a newer deploy is one line naming the file and the key (exit 1), never a render or a pass."""

import json
import types

import pytest

from pipeline import records
from pipeline.errors import DeployError
from pipeline.records import MODELS

from conftest import deploy
from reportkit import bench_rows, edit_json, make_run

SAMPLES = {  # one small, valid body per kind
    "run": {"run": "demo", "exit_code": 0, "stages": [{"name": "train", "status": "ran", "seconds": 1.5}]},
    "manifest": {"stage": "train", "status": "ok", "duration_s": 2.0, "outputs": {}},
    "benchmark": {"results": bench_rows({1: 4.0}), "where": {"runtime": "onnxruntime"}},
    "check": {"deployable": True, "verdict": "YES", "routes": [{"route": "onnx", "blockers": 0, "findings": []}]},
    "rewrite": {"passes": [{"pass": "fold_constants", "ops": {"Mul": -2}, "sites": ["a"]}], "nodes": {"before": 3, "after": 1}},
    "conversion": {"max_abs_diff": 1e-6, "tolerance": 1e-4, "samples": 8, "runtimes": {"candidate": {"runtime": "onnxruntime"}}},
    "comparison": {"verdict": "pass", "reasons": [], "rows": []},
    "history": {"classes": ["a", "b"], "epochs": [{"loss": float("nan"), "accuracy": 0.5}]},
    "engine": {"build_s": 3.0, "engine_bytes": 100, "profile": {"input": {"min": [1, 8], "opt": [8, 8], "max": [8, 8]}}},
    "estimate": {"model": "m.pb", "layers": 3, "gflops": 0.5, "estimates": [
        {"target": "jetson_tx2", "precision": "fp16", "batch": 1, "latency_ms": 1.2, "low_ms": 1.0, "high_ms": 1.5,
         "throughput": 800.0, "bound": "compute", "power_mode": "MAXN", "calibration": "none", "top_layers": []}]},
}
SAMPLES = {kind: body for kind, body in SAMPLES.items() if kind in MODELS}  # estimate: while it is being added


def one_line(excinfo):
    text = str(excinfo.value.message if hasattr(excinfo.value, "message") else excinfo.value)
    assert "\n" not in text.strip(), text
    return text


# --- the library: write stamps and checks, read checks, each kind


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_write_stamps_the_schema_and_read_takes_back_what_was_written(tmp_path, kind):
    assert set(SAMPLES) == set(MODELS)
    path = tmp_path / "f.json"
    written = records.write(path, SAMPLES[kind], kind)
    assert written["schema"] == records.schema_of(kind) == "deploy.{}/{}".format(kind, MODELS[kind].VERSION)
    back = records.read(path, kind)
    assert back["schema"] == written["schema"] and set(back) == set(SAMPLES[kind]) | {"schema"}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_a_file_from_a_newer_deploy_is_refused_with_upgrade(tmp_path, kind):
    path = tmp_path / "f.json"
    newer = "deploy.{}/{}".format(kind, MODELS[kind].VERSION + 1)
    path.write_text(json.dumps(dict(SAMPLES[kind], schema=newer)))
    with pytest.raises(DeployError) as e:
        records.read(path, kind)
    line = one_line(e)
    assert str(path) in line and "schema" in line and newer in line and "newer deploy" in line and "upgrade" in line


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_a_file_without_schema_is_version_1_and_read_as_before(tmp_path, kind):
    path = tmp_path / "f.json"
    path.write_text(json.dumps(SAMPLES[kind]))
    assert records.read(path, kind) == SAMPLES[kind] or kind == "history"  # NaN != NaN
    assert records.version_of(SAMPLES[kind], kind) == 1


def test_another_kind_of_file_is_refused(tmp_path):
    path = tmp_path / "benchmark.json"
    path.write_text(json.dumps(dict(SAMPLES["check"], schema="deploy.check/2")))
    with pytest.raises(DeployError) as e:
        records.read(path, "benchmark")
    line = one_line(e)
    assert "schema" in line and "deploy.benchmark/" in line and "deploy.check/2" in line


@pytest.mark.parametrize("kind,change,key,expected", [
    ("benchmark", lambda d: d["results"][0].update(batch_size=0), "results[0].batch_size", "a whole number from 1 to 65536"),
    ("benchmark", lambda d: d["results"][0].update(batch_size=True), "results[0].batch_size", "a whole number from 1 to 65536"),
    ("benchmark", lambda d: d["results"][0].update(batch_size=1.5), "results[0].batch_size", "a whole number from 1 to 65536"),
    ("benchmark", lambda d: d["results"][0].update(min_ms=-0.5), "results[0].min_ms", "0 or a number of milliseconds from 1e-09"),
    ("benchmark", lambda d: d["results"][0].update(p99_ms=float("inf")), "results[0].p99_ms", "a number of milliseconds from 1e-09 to 1e+09"),
    ("benchmark", lambda d: d["results"][0].update(percentiles_ms=list(range(101))[::-1]), "results[0].percentiles_ms",
     "101 ascending"),
    ("benchmark", lambda d: d["results"][0].update(percentiles_ms=[1.0] * 100), "results[0].percentiles_ms", "101 ascending"),
    ("benchmark", lambda d: d["results"][0].pop("batch_size"), "results[0].batch_size", "the key (it is missing)"),
    ("run", lambda d: d["stages"][0].update(seconds=-1), "stages[0].seconds", "a number of seconds from 0 to 1e+09"),
    ("manifest", lambda d: d.update(duration_s=float("nan")), "duration_s", "a number of seconds from 0 to 1e+09"),
    ("engine", lambda d: d["profile"]["input"].update(max=["8", 8]), "profile.input.max[0]", "a whole number from 1 to 2**53"),
    ("history", lambda d: d["epochs"][0].update(accuracy=float("inf")), "epochs[0].accuracy", "a finite number"),
    ("comparison", lambda d: d.update(reasons="none"), "reasons", "a list"),
])
def test_impossible_values_are_one_line_naming_file_key_and_expectation(tmp_path, kind, change, key, expected):
    data = json.loads(json.dumps(SAMPLES[kind]))
    change(data)
    path = tmp_path / "f.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DeployError) as e:
        records.read(path, kind)
    line = one_line(e)
    assert line.startswith("{}: {}: expected {}".format(path, key, expected)) and "found" in line, line
    with pytest.raises(DeployError) as w:  # the writer refuses the same data and writes nothing
        records.write(tmp_path / "w.json", data, kind)
    assert key in one_line(w) and not (tmp_path / "w.json").exists()


def test_the_writer_refuses_non_finite_figures_as_one_line_not_a_traceback(tmp_path):
    """Old: the benchmark stage's json.dump(allow_nan=False) raised ValueError (a traceback) on a NaN."""
    from pipeline.stages.benchmark import _finish

    out = tmp_path / "benchmark" / "benchmark.json"
    ctx = types.SimpleNamespace(options=types.SimpleNamespace(consistency=False, batch_sizes=[1]),
                                output=lambda name: out)
    rows = bench_rows({1: 4.0})
    report = {"where": {"runtime": "onnxruntime", "on_target_device": False}, "results": rows}
    _finish(ctx, report, None, "m.onnx", "host", rows)
    assert json.loads(out.read_text())["schema"] == "deploy.benchmark/1"
    rows[0]["p50_ms"] = float("nan")
    with pytest.raises(DeployError) as e:
        _finish(ctx, dict(report, results=rows), None, "m.onnx", "host", rows)
    assert "results[0].p50_ms" in one_line(e)


# --- the writers stamp their files


RUNNER_CONFIG = """\
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
"""


@pytest.fixture
def fake_run(tmp_path, monkeypatch):
    import fake_stages
    from pipeline.config import load_config
    from pipeline.progress import Progress
    from pipeline.runner import run
    from pipeline.targets import load_target

    monkeypatch.setattr("pipeline.runner.registry", lambda: fake_stages.STAGES)
    path = tmp_path / "c.yaml"
    path.write_text(RUNNER_CONFIG.format(runs=tmp_path / "runs"))

    def go():
        config = load_config(path, [])
        fake_stages.CALLS.clear()
        return run(config, load_target(config.target), progress=Progress("quiet"))

    go.run_dir = tmp_path / "runs" / "demo"
    return go


def test_the_runner_writes_run_json_and_manifests_with_their_schema(fake_run):
    fake_run()
    assert json.loads((fake_run.run_dir / "run.json").read_text())["schema"] == "deploy.run/1"
    for stage in ("train", "export"):
        assert json.loads((fake_run.run_dir / stage / "manifest.json").read_text())["schema"] == "deploy.manifest/1"
    assert records.read(fake_run.run_dir / "run.json", "run")["stages"][0]["name"] == "train"


def test_a_manifest_from_a_newer_deploy_is_not_a_cache_hit(fake_run):
    fake_run()
    edit_json(fake_run.run_dir / "train" / "manifest.json", lambda d: d.update(schema="deploy.manifest/2"))
    report = fake_run()
    assert {s.name: s.status for s in report.stages}["train"] == "ran"
    assert json.loads((fake_run.run_dir / "train" / "manifest.json").read_text())["schema"] == "deploy.manifest/1"


def test_the_rewrite_receipt_and_the_gates_file_carry_their_schema(tmp_path):
    from pipeline.report.collect import load_run
    from pipeline.report.compare import compare_runs, write_comparison
    from pipeline.rewrite.command import write_onnx_outputs

    model = types.SimpleNamespace(SerializeToString=lambda: b"onnx")
    write_onnx_outputs(model, dict(SAMPLES["rewrite"]), str(tmp_path / "out.onnx"))
    assert json.loads((tmp_path / "out.rewrite.json").read_text())["schema"] == "deploy.rewrite/1"
    base, cur = make_run(tmp_path / "base"), make_run(tmp_path / "cur")
    write_comparison(cur / "comparison.json", compare_runs(load_run(base), load_run(cur)))
    assert records.read(cur / "comparison.json", "comparison")["schema"] == "deploy.comparison/2"
    assert load_run(cur)["gate"]["verdict"] == "pass"


def test_the_engine_route_reads_check_json_through_its_schema(tmp_path):
    """Old: a check.json whose ``recommended`` was a string was an AttributeError traceback."""
    from pipeline.stages.engine import route

    report = tmp_path / "check.json"
    ctx = types.SimpleNamespace(config=types.SimpleNamespace(stages=types.SimpleNamespace(
        convert=types.SimpleNamespace(format="auto"))), inputs={"report": report},
        target=types.SimpleNamespace(routes=("uff", "onnx")))
    report.write_text(json.dumps({"schema": "deploy.check/2", "recommended": {"route": "uff"}}))
    assert route(ctx) == "uff"
    report.write_text(json.dumps({"schema": "deploy.check/2", "recommended": "uff"}))
    with pytest.raises(DeployError) as e:
        route(ctx)
    assert "recommended" in one_line(e) and "an object" in str(e.value)


# --- report and compare: exit 1, one line, never a render or a pass


def _assert_refused(res, name, key):
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    (line,) = res.stderr.strip().splitlines()
    assert name in line and key in line, line
    return line


@pytest.mark.parametrize("rel,schema", [("check/check.json", "deploy.check/3"),
                                        ("benchmark/benchmark.json", "deploy.benchmark/2"),
                                        ("run.json", "deploy.run/2")])
def test_report_and_compare_refuse_a_file_from_a_newer_deploy(tmp_path, rel, schema, cli):
    """Old: a check.json from a newer deploy was rendered as if current."""
    base, cur = make_run(tmp_path / "base"), make_run(tmp_path / "cur")
    edit_json(cur / rel, lambda d: d.update(schema=schema))
    line = _assert_refused(cli("report", cur, "-o", tmp_path / "r.html"), rel.split("/")[-1], "schema")
    assert "newer deploy" in line and not (tmp_path / "r.html").exists()
    _assert_refused(cli("compare", base, cur), rel.split("/")[-1], "schema")


def test_a_gate_file_in_place_of_the_conversion_comparison_is_refused(tmp_path, cli):
    cur = make_run(tmp_path / "cur")
    (cur / "convert" / "comparison.json").write_text(json.dumps({"schema": "deploy.comparison/2", "verdict": "pass"}))
    _assert_refused(cli("report", cur, "-o", tmp_path / "r.html"), "comparison.json", "schema")


@pytest.mark.parametrize("rel,change,key", [
    ("rewrite/rewrite.json", lambda d: d["passes"][0].update(ops={"Const": "-156"}), "passes[0].ops.Const"),
    ("convert/comparison.json", lambda d: d["runtimes"].update(candidate="onnxruntime"), "runtimes.candidate"),
    ("train/history.json", lambda d: d.update(restore=["a"]), "restore"),
    ("check/check.json", lambda d: d["routes"][0].update(findings=["AddV2"]), "routes[0].findings[0]"),
    ("check/check.json", lambda d: d.update(recommended="onnx"), "recommended"),
    ("benchmark/benchmark.json", lambda d: d["consistency"].update(images="4"), "consistency.images"),
    ("benchmark/benchmark.json", lambda d: d["results"][0]["power"].update(rails_mw={"VDD_IN": "5 W"}),
     "results[0].power.rails_mw.VDD_IN"),
])
def test_wrong_shapes_the_renderers_used_to_trip_on_are_one_line(tmp_path, rel, change, key, cli):
    """Old: each of these reached the HTML renderer and ended in a traceback."""
    cur = make_run(tmp_path / "cur")
    edit_json(cur / rel, change)
    _assert_refused(cli("report", cur, "-o", tmp_path / "r.html"), rel.split("/")[-1], key)


def test_a_run_folder_from_before_the_schema_stamp_still_reads(tmp_path):
    from pipeline.report.collect import load_run

    cur = make_run(tmp_path / "cur")
    for path in cur.rglob("*.json"):
        edit_json(path, lambda d: d.pop("schema", None) and None)
    run = load_run(cur)
    assert run["benchmark"]["results"] and run["check"]["deployable"] is True and run["failed"] is None


# --- issue 29: numbers a reader cannot compute with, objects all the way down

BIG = 10 ** 400  # parses as a Python int; float() of it is an OverflowError


@pytest.mark.parametrize("kind,change,key,expected", [
    ("benchmark", lambda d: d["results"][0].update(iterations=BIG), "results[0].iterations", "from 1 to 10**9"),
    ("benchmark", lambda d: d["results"][0].update(batch_size=10 ** 30), "results[0].batch_size", "from 1 to 65536"),
    ("benchmark", lambda d: d["results"][0].update(p50_ms=5e-324), "results[0].p50_ms", "from 1e-09"),
    ("benchmark", lambda d: d["results"][0].update(p99_ms=1e308), "results[0].p99_ms", "to 1e+09"),
    ("benchmark", lambda d: d["results"][0].update(min_ms=5e-324), "results[0].min_ms", "0 or a number"),
    ("benchmark", lambda d: d["results"][0].update(throughput_ips=1e308), "results[0].throughput_ips", "images per"),
    ("benchmark", lambda d: d["results"][0]["percentiles_ms"].__setitem__(0, 5e-324), "results[0].percentiles_ms",
     "101 ascending"),
    ("benchmark", lambda d: d.update(settings={"batch_sizes": [10 ** 30]}), "settings.batch_sizes[0]", "from 1 to 65536"),
    ("benchmark", lambda d: d.update(model={"bytes": "12 MB"}), "model.bytes", "a whole number"),
    ("history", lambda d: d["epochs"][0].update(loss=BIG), "epochs[0].loss", "a number"),
    ("run", lambda d: d.update(exit_code=10 ** 30), "exit_code", "a whole number from -2**53"),
    ("run", lambda d: d.update(settings={"engine": "fp16"}), "settings.engine", "an object"),
    ("run", lambda d: d.update(settings={"benchmark": {"batch_sizes": "1,8"}}), "settings.benchmark.batch_sizes", "a list"),
    ("run", lambda d: d.update(ci={"runner": ["a"]}), "ci.runner", "a string"),
    ("manifest", lambda d: d.update(outputs={"onnx": {"size": "3 MB"}}), "outputs.onnx.size", "a whole number"),
    ("manifest", lambda d: d.update(options={"batch_sizes": [1, BIG]}), "options.batch_sizes[1]", "from 1 to 65536"),
    ("check", lambda d: d["routes"][0].update(share="half"), "routes[0].share", "an object"),
    ("check", lambda d: d["routes"][0].update(findings=[{"nodes": 3}]), "routes[0].findings[0].nodes", "a list"),
    ("comparison", lambda d: d.update(rows=[{"figure": [1], "change": "x"}, 5]), "rows[0].figure", "a string"),
    ("comparison", lambda d: d.update(rows=[{"figure": "p50_ms", "change": "x"}]), "rows[0].change", "a finite number"),
    ("comparison", lambda d: d.update(rows=[{"figure": "p50_ms", "band": [1]}]), "rows[0].band", "two finite numbers"),
    ("comparison", lambda d: d.update(rows=[{"figure": "p50_ms", "current": "4 ms"}]), "rows[0].current", "a finite"),
    ("comparison", lambda d: d.update(k=1e300), "k", "at most 1e+06"),
    ("comparison", lambda d: d.update(reference={"fingerprint": "tx2"}), "reference.fingerprint", "an object"),
    ("engine", lambda d: d.update(engine_bytes=BIG), "engine_bytes", "a whole number from 0 to 2**53"),
])
def test_numbers_no_reader_can_compute_with_and_wrong_inner_types_are_one_line(tmp_path, kind, change, key, expected):
    """Issue 29: each passed the schema before and ended in a traceback in report or compare (OverflowError,
    an infinite relative change, AttributeError on a string, TypeError on a list)."""
    _assert_one_line(tmp_path, kind, change, key, expected)


@pytest.mark.parametrize("kind,change,key,expected", [
    ("benchmark", lambda d: d["where"].update(host="a machine"), "where.host", "an object"),
    ("benchmark", lambda d: d.update(accuracy={"tolerance": "fp16"}), "accuracy.tolerance", "an object"),
    ("benchmark", lambda d: d.update(consistency={"outputs": ["probabilities"]}), "consistency.outputs[0]", "an object"),
    ("run", lambda d: d.update(settings="fp16"), "settings", "an object"),
    ("run", lambda d: d.update(ci="github"), "ci", "an object"),
    ("manifest", lambda d: d.update(options="fp16"), "options", "an object"),
    ("check", lambda d: d.update(target="jetson_tx2"), "target", "an object"),
    ("rewrite", lambda d: d["passes"][0].update(comparison=[0.0]), "passes[0].comparison", "an object"),
    ("rewrite", lambda d: d.update(check_before="onnx"), "check_before", "an object"),
    ("comparison", lambda d: d.update(rows=[5]), "rows[0]", "an object"),
    ("comparison", lambda d: d.update(baseline=["runs/a"]), "baseline", ""),
])
def test_outer_objects_of_the_wrong_type_stay_refused(tmp_path, kind, change, key, expected):
    """Refused before issue 29 too (the outer object's type was checked): kept while the objects got models."""
    _assert_one_line(tmp_path, kind, change, key, expected)


def _assert_one_line(tmp_path, kind, change, key, expected):
    data = json.loads(json.dumps(SAMPLES[kind]))
    if kind == "benchmark":
        data["results"][0]["percentiles_ms"] = bench_rows({1: 4.0})[0]["percentiles_ms"]
    change(data)
    path = tmp_path / "f.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DeployError) as e:
        records.read(path, kind)
    line = one_line(e)
    assert line.startswith("{}: {}: expected ".format(path, key)) and expected in line and "found" in line, line


@pytest.mark.parametrize("kind,change", [
    ("benchmark", lambda d: d["results"][0].update(min_ms=0.0, std_ms=-0.0)),  # ±0: a spread of 0 is real
    ("benchmark", lambda d: d["results"][0].update(p50_ms=1e-9, max_ms=1e9, iterations=10 ** 9, batch_size=65536)),
    ("history", lambda d: d["epochs"][0].update(loss=float("inf"), val_loss=-0.0)),  # a diverged loss is a figure
    ("comparison", lambda d: d.update(baseline="runs/a", rows=[{"metric": "p50 b1 (ms)", "baseline": 4.0, "verdict": "ok"}])),
    ("comparison", lambda d: d.update(rows=[{"figure": "check", "baseline": True, "current": False, "band": None,
                                             "interval": [None, 4.5], "change": -0.0}])),
    ("run", lambda d: d.update(settings={"engine": None, "benchmark": {"batch_sizes": [1, 8]}, "device": None},
                               ci={"run_url": "https://x/1", "runner": None})),
])
def test_the_edges_of_each_range_are_read(tmp_path, kind, change):
    data = json.loads(json.dumps(SAMPLES[kind]))
    change(data)
    assert records.check(data, kind, "f.json") is data


def _stderr_line(res):
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    (line,) = res.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize("which,change,key", [
    ("cur", lambda d: d["results"][0].update(iterations=BIG), "results[0].iterations"),  # was OverflowError
    ("base", lambda d: d["results"][0].update(p50_ms=5e-324), "results[0].p50_ms"),  # was a non-JSON infinite change
    ("cur", lambda d: d["results"][0].update(p50_ms=5e-324), "results[0].p50_ms"),
])
def test_compare_refuses_extreme_figures_with_one_line(tmp_path, which, change, key, cli):
    runs = {"base": make_run(tmp_path / "base"), "cur": make_run(tmp_path / "cur", seed=3)}
    edit_json(runs[which] / "benchmark" / "benchmark.json", change)
    line = _stderr_line(cli("compare", runs["base"], runs["cur"], "--format", "json", "-o", tmp_path / "c.json"))
    assert "benchmark.json" in line and key in line, line
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("rel,change,key", [
    ("run.json", lambda d: d.update(settings={"engine": "fp16"}), "settings.engine"),  # was AttributeError
    ("run.json", lambda d: d.update(settings={"benchmark": "b1"}), "settings.benchmark"),
    ("comparison.json", lambda d: d.update(rows=[{"figure": [1], "change": "x"}]), "rows[0].figure"),  # was TypeError
])
def test_report_refuses_wrong_inner_types_with_one_line(tmp_path, rel, change, key, cli):
    cur = make_run(tmp_path / "cur")
    if rel == "comparison.json":
        (cur / rel).write_text(json.dumps({"schema": "deploy.comparison/2", "verdict": "pass", "rows": []}))
    edit_json(cur / rel, change)
    line = _stderr_line(cli("report", cur, "-o", tmp_path / "r.html"))
    assert rel in line and key in line, line
    assert not (tmp_path / "r.html").exists()


# --- issue 29: a run file or a history night that is not a regular file is refused by name, at once


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "too_big"])
def test_a_record_that_is_not_a_regular_file_or_too_big_is_one_line(tmp_path, kind):
    import os

    path = tmp_path / "benchmark.json"
    if kind == "fifo":
        os.mkfifo(str(path))
    elif kind == "dev_zero":
        os.symlink("/dev/zero", str(path))
    else:
        with open(str(path), "wb") as handle:
            handle.truncate((256 << 20) + 1)
    import signal

    def hung(signum, frame):
        raise AssertionError("records.read still waited on {} after 20 s".format(kind))

    previous = signal.signal(signal.SIGALRM, hung)  # a FIFO blocks open() for good: the alarm ends the wait
    signal.alarm(20)
    try:
        with pytest.raises(DeployError) as e:
            records.read(path, "benchmark")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    line = one_line(e)
    assert line.startswith(str(path)) and ("not a regular file" in line or "more than benchmark figures may hold" in line)


@pytest.mark.parametrize("rel,command", [("run.json", "report"), ("benchmark/benchmark.json", "report"),
                                         ("benchmark/benchmark.json", "history")])
def test_report_and_compare_refuse_a_named_pipe_in_a_run_folder_at_once(tmp_path, rel, command):
    """Old: open() of a FIFO run file waited forever."""
    import os
    import subprocess

    base, cur = make_run(tmp_path / "base"), make_run(tmp_path / "cur", seed=3)
    (cur / rel).unlink()
    os.mkfifo(str(cur / rel))
    argv = ["report", cur, "-o", tmp_path / "r.html"] if command == "report" else \
        ["compare", base, base, "--history", cur]
    try:
        res = deploy(*argv, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("deploy {} waited on the named pipe".format(command)) from None
    line = _stderr_line(res)
    assert str(cur / rel) in line and "a named pipe (FIFO), not a regular file" in line, line


def test_a_gate_file_beside_the_run_with_wrong_inner_types_is_no_data_never_a_traceback(tmp_path, cli):
    """comparison.json beside the run folder (the nightly's layout) is read through the gate's schema too:
    rows of the wrong type give a NO DATA verdict naming the file and key (was a TypeError traceback)."""
    cur = make_run(tmp_path / "cur")
    (tmp_path / "comparison.json").write_text(json.dumps({
        "schema": "deploy.comparison/2", "verdict": "pass", "current": {"dir": str(cur)},
        "rows": [{"figure": [1], "change": "x"}, 5]}))
    res = cli("report", cur, "--format", "markdown")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "no data" in res.stdout.lower() and "rows[0]" in res.stdout, res.stdout
    assert "PASS" not in res.stdout
