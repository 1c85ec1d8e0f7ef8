"""deploy estimate --calibrate: a user's on-target TensorRT runs refit the board into the user's file, never
into targets/; a host ONNX Runtime run is refused by name."""

import hashlib
import json
from pathlib import Path

import pytest

from pipeline import records
from pipeline.cli import main
from pipeline.targets.files import targets_dir


def onnx_conv_model(path, size=32):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np

    w = numpy_helper.from_array(np.zeros((16, 3, 3, 3), np.float32), "w")
    b = numpy_helper.from_array(np.zeros((16,), np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="relu1")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, b])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def run_folder(root, runtime="tensorrt", on_target=True, p50=0.25):
    (root / "convert").mkdir(parents=True)
    (root / "benchmark").mkdir()
    onnx_conv_model(root / "convert" / "model.onnx")
    records.write(root / "benchmark" / "benchmark.json", {
        "where": {"runtime": runtime, "target": "jetson_nano", "on_target_device": on_target},
        "results": [{"batch_size": 1, "p50_ms": p50}, {"batch_size": 4, "p50_ms": p50 * 1.2}]}, "benchmark")
    return root


def _tree_digest(folder):
    digest = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            digest.update(str(path).encode() + path.read_bytes())
    return digest.hexdigest()


def test_calibrate_writes_the_user_file_and_later_estimates_say_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEPLOY_ESTIMATE_DIR", str(tmp_path / "mine"))
    before = _tree_digest(targets_dir())
    run = run_folder(tmp_path / "run1")
    assert main(["estimate", "--calibrate", str(run)]) == 0
    assert "jetson_nano: refitted on 2 measurement(s)" in capsys.readouterr().out
    assert _tree_digest(targets_dir()) == before  # the shipped targets are never written
    saved = json.loads((tmp_path / "mine" / "jetson_nano.json").read_text())
    assert saved["target"] == "jetson_nano" and saved["runs"] == [str(run / "benchmark" / "benchmark.json")]
    model = run / "convert" / "model.onnx"
    assert main(["estimate", str(model), "--target", "jetson_nano", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["estimates"][0]["calibration"].startswith("your calibration ")
    assert report["estimates"][0]["latency_ms"] == pytest.approx(0.25, rel=0.35)  # fitted to its own 0.25 ms


def test_host_onnxruntime_never_calibrates(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEPLOY_ESTIMATE_DIR", str(tmp_path / "mine"))
    run = run_folder(tmp_path / "run1", runtime="onnxruntime", on_target=False)
    assert main(["estimate", "--calibrate", str(run)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "measured with onnxruntime off the target" in err
    assert not (tmp_path / "mine").exists()


def test_user_dir_inside_targets_is_refused(monkeypatch, tmp_path):
    from pipeline.errors import DeployError
    from pipeline.estimate.calibration import write_user
    from pipeline.estimate.roofline import Params

    monkeypatch.setenv("DEPLOY_ESTIMATE_DIR", str(targets_dir() / "estimate"))
    with pytest.raises(DeployError, match="never written into the shipped targets"):
        write_user("jetson_nano", Params(0.5, 0.1, 0.5, 10, 0.3), [])


def test_run_summary_puts_the_estimate_beside_the_measurement(tmp_path, monkeypatch):
    from pipeline.estimate.summary import check_summary, run_summary, summary_line

    monkeypatch.setenv("DEPLOY_ESTIMATE_DIR", str(tmp_path / "mine"))
    run = run_folder(tmp_path / "run1", p50=0.4)
    rows = run_summary(run)
    assert [(r["target"], r["batch"], r["measured_ms"]) for r in rows] == [("jetson_nano", 1, 0.4), ("jetson_nano", 4, 0.48)]
    assert all(r["low_ms"] < r["latency_ms"] < r["high_ms"] for r in rows)
    host = run_folder(tmp_path / "run2", runtime="onnxruntime", on_target=False)
    assert run_summary(host) == []  # host figures are never set beside the board's estimate
    summary = check_summary(run / "convert" / "model.onnx", "jetson_nano")
    assert summary_line(summary).startswith("estimate (fp16, batch 1, MAXN")
    assert check_summary(run / "convert" / "model.onnx", "host_cpu") is None
