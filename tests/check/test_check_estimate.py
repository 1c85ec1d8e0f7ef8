"""Issue 30 item 1: deploy check's report carries the latency estimate (text line, JSON ``estimate`` object, a
column of the zoo table); it never changes the verdict, says why when it cannot be made, is gated on big graphs,
switched off by --no-estimate, and a re-check from the check cache never shows a stale one."""

import json
import re

import pytest

from check.fixtures import onnx_model
from conftest import deploy
from pipeline import records
from pipeline.check import cache as check_cache
from pipeline.errors import DeployError
from pipeline.estimate.summary import GATE_NODES, check_estimate

NO_CACHE = {check_cache.OFF_ENV: "0"}


def _estimate_lines(text):
    return [line for line in text.splitlines() if line.startswith("estimate:")]


def _onnx_unknown_height(path):
    """x[N,3,H,8] -> Conv -> Relu: the estimate needs a fixed height."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"], name="relu")], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, "H", 8])],
        [numpy_helper.from_array(np.ones((2, 3, 3, 3), "float32"), "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


def _loop_graph(path):
    """A frozen graph with a TF1 while loop's frame ops (Enter/Exit around a conv): iterations unknown offline."""
    from pipeline.graph.proto import message_class

    g = message_class("GraphDef")()
    x = g.node.add(name="input", op="Placeholder")
    x.attr["dtype"].type = 1
    for d in (1, 8, 8, 3):
        x.attr["shape"].shape.dim.add(size=d)
    g.node.add(name="loop/Enter", op="Enter", input=["input"]).attr["T"].type = 1
    g.node.add(name="loop/Exit", op="Exit", input=["loop/Enter"]).attr["T"].type = 1
    g.node.add(name="output", op="Relu", input=["loop/Exit"]).attr["T"].type = 1
    path.write_bytes(g.SerializeToString())
    return path


def test_text_has_one_estimate_line_and_the_verdict_is_the_same_without_it(tmp_path):
    model = onnx_model(tmp_path / "m.onnx")
    on = deploy("check", model, "--target", "agx_xavier", env=NO_CACHE)
    off = deploy("check", model, "--target", "agx_xavier", "--no-estimate", env=NO_CACHE)
    assert on.returncode == off.returncode == 0, on.stderr + off.stderr
    lines = _estimate_lines(on.stdout)
    assert len(lines) == 1, on.stdout
    assert lines[0].startswith("estimate: ~") and " ms per image (" in lines[0]
    assert "at fp16 batch 1 on AGX Xavier, MAXN" in lines[0] and "assumed — bound by " in lines[0]
    assert lines[0].endswith("`deploy estimate` for the layers")
    assert _estimate_lines(off.stdout) == []
    # the rest of the report is the check's, unchanged
    assert [line for line in on.stdout.splitlines() if not line.startswith("estimate:")] == off.stdout.splitlines()


def test_json_estimate_object_is_schema_checked_and_says_what_deploy_estimate_says(tmp_path):
    from pipeline.estimate import estimate_model

    model = onnx_model(tmp_path / "m.onnx")
    r = deploy("check", model, "--target", "jetson_nano", "--format", "json", env=NO_CACHE)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    e = data["estimate"]
    assert e["made"] is True and e["target"] == "jetson_nano" and e["precision"] == "fp16" and e["batch"] == 1
    assert e["low_ms"] <= e["latency_ms"] <= e["high_ms"] and "seconds" not in e  # reproducible: timed on stderr
    # the same figure deploy estimate gives for the target at batch 1, fp16
    same = estimate_model(str(model), ["jetson_nano"], "fp16", [1])["estimates"][0]
    assert (e["latency_ms"], e["low_ms"], e["high_ms"], e["bound"]) == (
        same["latency_ms"], same["low_ms"], same["high_ms"], same["bound"])
    records.check(dict(data), "check", "deploy check --format json")  # the check.json schema takes it
    bad = dict(data, estimate=dict(e, latency_ms="fast"))
    with pytest.raises(DeployError, match="estimate.latency_ms"):
        records.check(bad, "check", "deploy check --format json")
    with pytest.raises(DeployError, match="estimate.made"):
        records.check(dict(data, estimate={"reason": "x"}), "check", "deploy check --format json")


def test_a_graph_it_cannot_estimate_is_a_reason_never_an_error(tmp_path):
    model = _onnx_unknown_height(tmp_path / "open.onnx")
    on = deploy("check", model, "--target", "jetson_nano", env=NO_CACHE)
    off = deploy("check", model, "--target", "jetson_nano", "--no-estimate", env=NO_CACHE)
    assert on.returncode == off.returncode and "Traceback" not in on.stderr
    (line,) = _estimate_lines(on.stdout)
    assert line.startswith("estimate: not made — input 'x' has an unknown dimension 2") and "--input-shape" in line
    loop = check_estimate(_loop_graph(tmp_path / "loop.pb"), "jetson_nano")
    assert loop["made"] is False
    assert loop["reason"] == "the graph has a loop (Enter): its iterations cannot be counted offline"
    missing = check_estimate(tmp_path / "gone.onnx", "jetson_nano")
    assert missing["made"] is False and "no such file" in missing["reason"]
    host = check_estimate(onnx_model(tmp_path / "m.onnx"), "host_cpu")
    assert host == dict(host, made=False, reason="none for host_cpu: its target file has no estimate facts")


def test_a_big_graph_is_skipped_unless_asked_and_no_estimate_turns_it_off(tmp_path):
    gone = tmp_path / "never_read.onnx"  # the gate is decided before the file is opened
    skipped = check_estimate(gone, "jetson_nano", nodes=GATE_NODES + 1)
    assert skipped["made"] is False and skipped["reason"].startswith(
        "skipped: {:,} nodes, over {:,} (--estimate to include".format(GATE_NODES + 1, GATE_NODES))
    assert "no such file" in check_estimate(gone, "jetson_nano", nodes=GATE_NODES + 1, mode=True)["reason"]
    model = onnx_model(tmp_path / "m.onnx")
    assert check_estimate(model, "jetson_nano", nodes=GATE_NODES + 1, mode=True)["made"] is True
    assert check_estimate(model, "jetson_nano", nodes=10, mode=False) is None
    from pipeline.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["check", "m.pb", "--target", "x"]).estimate is None
    assert parse(["check", "m.pb", "--target", "x", "--estimate"]).estimate is True
    assert parse(["check", "m.pb", "--target", "x", "--no-estimate"]).estimate is False


def test_a_cached_answer_carries_the_estimate_of_today_s_calibration(tmp_path, monkeypatch):
    """The check cache answers the verdict; the estimate is kept beside it under a key that also covers the
    estimate's code and calibration: the user's --calibrate file changes the figure on the next re-check."""
    from pipeline.estimate.calibration import USER_DIR_ENV, board_params, write_user
    from pipeline.estimate import summary
    from pipeline.estimate.summary import cached_check_estimate

    monkeypatch.setenv(USER_DIR_ENV, str(tmp_path / "mine"))
    model = onnx_model(tmp_path / "m.onnx")
    answers = check_cache.AnswerCache(tmp_path / "cache", {"target": "jetson_nano", "code": "fixed"})
    first = cached_check_estimate(answers, model, "jetson_nano")
    (kept,) = (tmp_path / "cache" / "estimate").glob("*.json")  # beside the answers, keyed
    made = []
    monkeypatch.setattr(summary, "check_estimate", lambda *a, **k: made.append(a) or first)
    again = cached_check_estimate(answers, model, "jetson_nano")
    assert first["made"] and again == first and made == []  # read back, not made again
    # a re-check answered from the check cache passes the answer's key (its entry's name): the same entry
    named = cached_check_estimate(answers, tmp_path / "gone.onnx", "jetson_nano", answer_key=answers.key(model))
    assert named == first and made == []
    monkeypatch.undo()
    monkeypatch.setenv(USER_DIR_ENV, str(tmp_path / "mine"))
    params, _ = board_params("jetson_nano")
    write_user("jetson_nano", type(params)(**dict(params.to_dict(), launch_us=params.launch_us * 10)), [])
    third = cached_check_estimate(answers, model, "jetson_nano")
    assert third["latency_ms"] == check_estimate(model, "jetson_nano")["latency_ms"]
    assert third["latency_ms"] > first["latency_ms"]
    # through the command line: a re-check (from the check cache when the key held) still carries the estimate
    env = {check_cache.DIR_ENV: str(tmp_path / "cli"), check_cache.OFF_ENV: "1", USER_DIR_ENV: str(tmp_path / "mine")}
    runs = [json.loads(deploy("check", model, "--target", "jetson_nano", "--format", "json", env=env).stdout)
            for _ in range(2)]
    assert [r["estimate"]["latency_ms"] for r in runs] == [third["latency_ms"]] * 2


def test_the_zoo_table_has_an_estimate_column_and_its_json_an_estimate_each(tmp_path):
    a = onnx_model(tmp_path / "a.onnx")
    b = _onnx_unknown_height(tmp_path / "b.onnx")
    r = deploy("check", a, b, "--target", "jetson_nano", env=NO_CACHE)
    summary = r.stdout[r.stdout.index("summary: "):].splitlines()
    assert summary[1].split() == ["model", "verdict", "recommended", "route", "blockers", "estimate", "note"]
    column = summary[1].index("estimate")  # the table is aligned: each row's cell starts under its header
    rows = {line.split()[0]: line[column:] for line in summary[2:]}
    assert re.match(r"[0-9.]+ ms \([0-9.]+–[0-9.]+\)( |$)", rows[str(a)]), rows
    assert rows[str(b)].startswith("not made"), rows
    out = deploy("check", a, b, "--target", "jetson_nano", "--format", "json", env=NO_CACHE)
    items = json.loads(out.stdout)
    assert [item["estimate"]["made"] for item in items] == [True, False]
    for item in items:
        records.check(item, "check", "deploy check --format json")
