"""The pipeline order is derived from the stages' declared inputs (pipeline.stages.pipeline_order): today's
order, whatever order the stage modules were imported in; a declaration naming no stage, an artifact its
stage does not write, a circle, a stage reading from itself are errors; the config, the runner and the
report read that one order."""

import json
import subprocess
import sys

import pytest

from pipeline.config import load_config
from pipeline.config.schema import Stages
from pipeline.report.collect import is_run_dir, load_run
from pipeline.stages import Stage, pipeline_order, registry, stage

from conftest import ROOT

TODAY = ("train", "export", "freeze", "check", "rewrite", "convert", "engine", "benchmark")


def _stage(name, inputs=None, outputs=()):
    return Stage(name, lambda ctx: {}, dict(inputs or {}), {a: a + ".bin" for a in outputs})


def test_the_derived_order_is_todays():
    assert pipeline_order() == TODAY


def test_the_order_does_not_depend_on_which_stage_module_was_imported_first():
    """Ties (check, rewrite, convert all read freeze's graph) go by the order of _MODULES, not by registration."""
    shuffled = dict(reversed(list(registry().items())))
    assert pipeline_order(shuffled) == TODAY
    code = ("import pipeline.stages.benchmark, pipeline.stages.convert, pipeline.stages.check\n"
            "from pipeline.stages import pipeline_order\nprint(','.join(pipeline_order()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True, check=True)
    assert tuple(out.stdout.strip().split(",")) == TODAY


def test_the_order_follows_the_inputs_before_the_listing():
    """Stages not in _MODULES tie by their place in the mapping; an input still puts its producer first."""
    stages = {"b": _stage("b", {"x": "a"}, ["y"]), "c": _stage("c", outputs=["z"]), "a": _stage("a", outputs=["x"])}
    assert pipeline_order(stages) == ("c", "a", "b")


def test_an_input_from_a_stage_that_does_not_exist_is_an_error():
    stages = {"a": _stage("a", outputs=["x"]), "b": _stage("b", {"x": "nope"})}
    with pytest.raises(ValueError, match=r"^stage 'b' reads 'x' from stage 'nope', which is not a stage \(stages: a, b\)$"):
        pipeline_order(stages)


def test_an_input_its_stage_does_not_write_is_an_error():
    stages = {"a": _stage("a", outputs=["x"]), "b": _stage("b", {"onnx": "a"})}
    with pytest.raises(ValueError, match=r"^stage 'b' reads 'onnx' from stage 'a', which does not write it \(a writes: x\)$"):
        pipeline_order(stages)


def test_a_circle_is_an_error_naming_it():
    stages = {"a": _stage("a", {"y": "b"}, ["x"]), "b": _stage("b", {"x": "a"}, ["y"]),
              "c": _stage("c", {"x": "a"})}
    with pytest.raises(ValueError, match=r"^stages read each other's outputs in a circle: "
                                         r"a reads y from b, b reads x from a$"):
        pipeline_order(stages)


def test_what_one_declaration_gets_wrong_is_an_error_when_it_registers():
    before = dict(registry())
    with pytest.raises(ValueError, match=r"^stage 'loop' reads frozen_graph from itself$"):
        stage("loop", inputs={"frozen_graph": "loop"}, outputs={"frozen_graph": "f.pb"})(lambda ctx: {})
    with pytest.raises(ValueError, match=r"^stage 'odd': optional names engine, which it does not read \(inputs: onnx\)$"):
        stage("odd", inputs={"onnx": "convert"}, optional=("engine",))(lambda ctx: {})
    assert registry() == before  # nothing registered


def test_the_config_schema_lists_the_stages_in_pipeline_order():
    """Stages (the config's sections, defined when pipeline.config is imported) is the one copy of the names
    that cannot be derived without importing the stage modules into the config: held to the order here."""
    assert tuple(Stages.model_fields) == pipeline_order()


def test_a_config_selects_its_stages_in_pipeline_order(write):
    config = load_config(write("c.yaml", "run: {name: x}\nmodel: {zoo: small_cnn}\ntarget: host_cpu\nstages:\n"
                                         "  benchmark:\n  convert:\n  check:\n  freeze:\n"))
    assert config.selected_stages() == ["freeze", "check", "convert", "benchmark"]


def test_the_report_reads_a_run_without_run_json_in_pipeline_order(tmp_path):
    for name in ("convert", "train", "check"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(json.dumps({"stage": name, "status": "ok"}))
    assert is_run_dir(tmp_path)
    assert [row["name"] for row in load_run(tmp_path)["stages"]] == ["train", "check", "convert"]


def test_the_order_imports_nothing_heavy():
    code = ("import sys\nfrom pipeline.stages import pipeline_order\nimport pipeline.report.collect\npipeline_order()\n"
            "print(sorted(m for m in ('tensorflow', 'keras', 'numpy', 'onnx', 'tf2onnx', 'onnxruntime') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
