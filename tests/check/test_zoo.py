"""`deploy check A B folder/ --target T`: a model zoo in one call (issue 20, point 5).

The zoo is built the ways the field builds models: a TF1 training graph frozen with
convert_variables_to_constants (NO), an onnx.helper model (YES), a TF2 SavedModel (tf.saved_model.save)
inside a folder, and a truncated file among them."""

import json
import xml.etree.ElementTree as ET

import pytest

import fixtures
from conftest import deploy
from pipeline.check import check_model, zoo
from pipeline.check.report import FORMATS
from pipeline.errors import EXIT_BAD_INPUT, EXIT_NOT_DEPLOYABLE, EXIT_OK
from pipeline.rewrite.predict import predict_rewrite
from pipeline.targets import load_target

NO_CONVERT = {"DEPLOY_CHECK_CONVERT": "0"}  # tf2onnx is not what these tests are about


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory):
    """zoo/ = {a_train.pb (NO), b_model.onnx (YES), c_truncated.pb (bad), notes.md, empty/,
    saved/ (a SavedModel: one model, its variables/ not looked into)}; yes.onnx beside it."""
    root = tmp_path_factory.mktemp("zoo")
    folder = root / "zoo"
    folder.mkdir()
    fixtures.training_graph(folder / "a_train.pb")
    fixtures.onnx_model(folder / "b_model.onnx")
    good = (folder / "a_train.pb").read_bytes()
    (folder / "c_truncated.pb").write_bytes(good[: len(good) // 3])
    (folder / "notes.md").write_text("not a model\n")
    fixtures.saved_model(folder / "saved")
    fixtures.onnx_model(root / "yes.onnx")
    return root


def _paths(root):
    z = root / "zoo"
    return [str(root / "yes.onnx"), str(z / "a_train.pb"), str(z / "b_model.onnx"), str(z / "c_truncated.pb"),
            str(z / "saved")]


@pytest.mark.tf
def test_folder_is_every_model_in_it_sorted_savedmodel_once(zoo_dir):
    found = zoo.expand([str(zoo_dir / "yes.onnx"), str(zoo_dir / "zoo"), str(zoo_dir / "zoo" / "b_model.onnx")])
    assert [p for p, _ in found] == _paths(zoo_dir)  # sorted; b_model.onnx once; notes.md, variables/ skipped
    assert all(not error for _, error in found)
    empty = zoo_dir / "empty"
    empty.mkdir(exist_ok=True)
    [(path, error)] = zoo.expand([str(empty)])
    assert path == str(empty) and error.startswith(str(empty) + ": no model in this folder")
    assert zoo.is_zoo([str(zoo_dir / "zoo")]) and zoo.is_zoo(["a.pb", "b.pb"])
    assert not zoo.is_zoo([str(zoo_dir / "zoo" / "saved")]) and not zoo.is_zoo([str(zoo_dir / "yes.onnx")])


@pytest.mark.tf
def test_zoo_text_one_verdict_each_then_summary_bad_file_does_not_stop_the_others(zoo_dir):
    r = deploy("check", zoo_dir / "yes.onnx", zoo_dir / "zoo", "--target", "jetson_tx2", env=NO_CONVERT)
    assert r.returncode == EXIT_BAD_INPUT, r.stderr  # a model could not be read: worst of 1, 2, 0
    out = r.stdout
    heads = [line[3:-3] for line in out.splitlines() if line.startswith("== ")]
    assert heads == _paths(zoo_dir)
    for path in (zoo_dir / "yes.onnx", zoo_dir / "zoo" / "a_train.pb"):
        one = deploy("check", path, "--target", "jetson_tx2", env=NO_CONVERT).stdout
        assert "== {} ==\n{}\n".format(path, one) in out  # the single-model report, whole
    summary = out[out.index("summary: "):].splitlines()
    assert summary[0] == "summary: 5 models: 3 YES, 1 NO, 1 not readable"
    assert summary[1].split() == ["model", "verdict", "recommended", "route", "blockers", "estimate", "note"]
    rows = {line.split()[0]: line.split() for line in summary[2:]}
    assert rows[str(zoo_dir / "zoo" / "a_train.pb")][1] == "NO"
    assert rows[str(zoo_dir / "yes.onnx")][1:3] == ["YES", "onnx"]
    assert rows[str(zoo_dir / "zoo" / "saved")][1] == "YES"
    bad = rows[str(zoo_dir / "zoo" / "c_truncated.pb")]
    assert bad[1:5] == ["ERROR", "-", "-", "-"] and bad[5].startswith(str(zoo_dir / "zoo" / "c_truncated.pb") + ":")


@pytest.mark.tf
def test_zoo_exit_code_is_the_worst(zoo_dir):
    z = zoo_dir / "zoo"
    r = deploy("check", zoo_dir / "yes.onnx", z / "a_train.pb", "--target", "jetson_tx2", env=NO_CONVERT)
    assert r.returncode == EXIT_NOT_DEPLOYABLE, r.stderr
    r = deploy("check", zoo_dir / "yes.onnx", z / "b_model.onnx", z / "saved", "--target", "jetson_tx2", env=NO_CONVERT)
    assert r.returncode == EXIT_OK, r.stderr
    e = zoo.ZooEntry
    assert zoo.exit_code([e("a", code=2), e("b", code=1), e("c", code=0)]) == EXIT_BAD_INPUT
    assert zoo.exit_code([e("a", code=0), e("b", code=2)]) == EXIT_NOT_DEPLOYABLE
    assert zoo.exit_code([e("a", code=5)]) == EXIT_BAD_INPUT  # any other failure reading a model: bad input


@pytest.mark.tf
def test_zoo_json_is_a_list_of_the_single_model_objects(zoo_dir):
    r = deploy("check", *_paths(zoo_dir), "--target", "jetson_tx2", "--format", "json", env=NO_CONVERT)
    assert r.returncode == EXIT_BAD_INPUT
    items = json.loads(r.stdout)
    assert [i["model"]["path"] for i in items] == _paths(zoo_dir)
    assert [i["verdict"] for i in items] == ["YES", "NO", "YES", "ERROR", "YES"]
    one = deploy("check", zoo_dir / "zoo" / "a_train.pb", "--target", "jetson_tx2", "--format", "json", env=NO_CONVERT)
    assert items[1] == json.loads(one.stdout)
    bad = items[3]
    assert bad["deployable"] is False and bad["exit_code"] == EXIT_BAD_INPUT and bad["schema"] == "deploy.check/2"
    assert bad["error"].startswith(_paths(zoo_dir)[3] + ":") and "\n" not in bad["error"]


@pytest.mark.tf
def test_zoo_markdown_and_junit(zoo_dir, tmp_path):
    junit = tmp_path / "zoo.xml"
    r = deploy("check", *_paths(zoo_dir), "--target", "jetson_tx2", "--format", "markdown", "--junit", junit,
               env=NO_CONVERT)
    assert r.returncode == EXIT_BAD_INPUT
    md = r.stdout
    assert md.startswith("# deploy check: 5 models\n")
    assert "| {} | NO | onnx at opset 13 |".format(_paths(zoo_dir)[1]) in md
    assert md.count("\n## deploy check: ") == 5
    suites = ET.parse(str(junit)).getroot()
    names = [s.get("name") for s in suites]
    assert names[0] == "{}: deploy.check.onnx".format(_paths(zoo_dir)[0])
    assert _paths(zoo_dir)[3] in names  # the unreadable model: one failing case
    bad = next(s for s in suites if s.get("name") == _paths(zoo_dir)[3])
    assert bad.get("failures") == "1"
    failing = {s.get("name").split(": ")[0] for s in suites if s.get("failures") != "0"}
    assert failing == {_paths(zoo_dir)[1], _paths(zoo_dir)[3]}  # the NO model and the unreadable one


@pytest.mark.tf
def test_one_model_output_is_what_it_was(zoo_dir, monkeypatch):
    monkeypatch.setenv("DEPLOY_CHECK_CONVERT", "0")
    tx2 = load_target("jetson_tx2")
    for path in (zoo_dir / "zoo" / "a_train.pb", zoo_dir / "zoo" / "saved"):
        report = check_model(str(path), tx2, predict=predict_rewrite)  # as the verb asks it
        for fmt in ("text", "json", "markdown"):
            # --no-estimate: check_model makes no latency estimate (the verb adds it; issue 30)
            r = deploy("check", path, "--target", "jetson_tx2", "--format", fmt, "--no-estimate", env=NO_CONVERT)
            expected = FORMATS[fmt](report, next_step=True) if fmt == "text" else FORMATS[fmt](report)
            assert r.stdout == expected + "\n"  # a YES in text ends with the next command
    r = deploy("check", zoo_dir / "missing.pb", "--target", "jetson_tx2", env=NO_CONVERT)
    assert r.returncode == EXIT_BAD_INPUT and r.stdout == "" and "no such file" in r.stderr


def test_a_folder_with_no_model_is_one_error(tmp_path):
    (tmp_path / "notes.txt").write_text("no model here\n")
    r = deploy("check", tmp_path, "--target", "jetson_tx2")
    assert r.returncode == EXIT_BAD_INPUT and r.stdout == ""
    assert r.stderr.startswith("deploy: error: {}: no model in this folder".format(tmp_path))


def test_unknown_route_for_the_zoo_is_one_error(tmp_path):
    fixtures.onnx_model(tmp_path / "a.onnx")
    fixtures.onnx_model(tmp_path / "b.onnx")
    r = deploy("check", tmp_path / "a.onnx", tmp_path / "b.onnx", "--target", "agx_orin", "--route", "uff")
    assert r.returncode == EXIT_BAD_INPUT and r.stdout == ""
    assert r.stderr.strip() == "deploy: error: --route uff: agx_orin has no uff route (it has: onnx, tftrt)"
