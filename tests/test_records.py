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
}


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
    ("benchmark", lambda d: d["results"][0].update(batch_size=0), "results[0].batch_size", "a positive whole number"),
    ("benchmark", lambda d: d["results"][0].update(batch_size=True), "results[0].batch_size", "a positive whole number"),
    ("benchmark", lambda d: d["results"][0].update(batch_size=1.5), "results[0].batch_size", "a positive whole number"),
    ("benchmark", lambda d: d["results"][0].update(min_ms=-0.5), "results[0].min_ms", "a finite number >= 0"),
    ("benchmark", lambda d: d["results"][0].update(p99_ms=float("inf")), "results[0].p99_ms", "a finite number > 0"),
    ("benchmark", lambda d: d["results"][0].update(percentiles_ms=list(range(101))[::-1]), "results[0].percentiles_ms",
     "101 ascending"),
    ("benchmark", lambda d: d["results"][0].update(percentiles_ms=[1.0] * 100), "results[0].percentiles_ms", "101 ascending"),
    ("benchmark", lambda d: d["results"][0].pop("batch_size"), "results[0].batch_size", "the key (it is missing)"),
    ("run", lambda d: d["stages"][0].update(seconds=-1), "stages[0].seconds", "a finite number >= 0"),
    ("manifest", lambda d: d.update(duration_s=float("nan")), "duration_s", "a finite number >= 0"),
    ("engine", lambda d: d["profile"]["input"].update(max=["8", 8]), "profile.input.max[0]", "a positive whole number"),
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
def test_report_and_compare_refuse_a_file_from_a_newer_deploy(tmp_path, rel, schema):
    """Old: a check.json from a newer deploy was rendered as if current."""
    base, cur = make_run(tmp_path / "base"), make_run(tmp_path / "cur")
    edit_json(cur / rel, lambda d: d.update(schema=schema))
    line = _assert_refused(deploy("report", cur, "-o", tmp_path / "r.html"), rel.split("/")[-1], "schema")
    assert "newer deploy" in line and not (tmp_path / "r.html").exists()
    _assert_refused(deploy("compare", base, cur), rel.split("/")[-1], "schema")


def test_a_gate_file_in_place_of_the_conversion_comparison_is_refused(tmp_path):
    cur = make_run(tmp_path / "cur")
    (cur / "convert" / "comparison.json").write_text(json.dumps({"schema": "deploy.comparison/2", "verdict": "pass"}))
    _assert_refused(deploy("report", cur, "-o", tmp_path / "r.html"), "comparison.json", "schema")


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
def test_wrong_shapes_the_renderers_used_to_trip_on_are_one_line(tmp_path, rel, change, key):
    """Old: each of these reached the HTML renderer and ended in a traceback."""
    cur = make_run(tmp_path / "cur")
    edit_json(cur / rel, change)
    _assert_refused(deploy("report", cur, "-o", tmp_path / "r.html"), rel.split("/")[-1], key)


def test_a_run_folder_from_before_the_schema_stamp_still_reads(tmp_path):
    from pipeline.report.collect import load_run

    cur = make_run(tmp_path / "cur")
    for path in cur.rglob("*.json"):
        edit_json(path, lambda d: d.pop("schema", None) and None)
    run = load_run(cur)
    assert run["benchmark"]["results"] and run["check"]["deployable"] is True and run["failed"] is None
