"""The tf2onnx table (targets/ops/tf2onnx.json) and its loader; one slow test re-measures it live."""

import importlib.util
import json
import subprocess
import sys

import pytest

from pipeline.errors import DeployError
from pipeline.targets.files import clear_cache
from pipeline.targets.tf2onnx import load_tf2onnx_table, tf2onnx_table_path

from conftest import ROOT

GENERATOR = ROOT / "scripts" / "gen_tf2onnx_table.py"


def generator():
    """scripts/gen_tf2onnx_table.py as a module (importing it does not import TensorFlow)."""
    spec = importlib.util.spec_from_file_location("gen_tf2onnx_table", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def table():
    return load_tf2onnx_table()


def test_header_names_the_tools_and_the_command(table):
    assert table.path == (ROOT / "targets" / "ops" / "tf2onnx.json").resolve()
    assert table.tf2onnx_version and table.versions["tensorflow"] and table.versions["onnx"]
    assert "python scripts/gen_tf2onnx_table.py" in table.path.read_text()
    assert set(table.opsets_measured) >= {13, 17}
    assert table.max_opset >= max(table.opsets_measured)


def test_handlers_cover_the_registry(table):
    assert len(table.handler_min_opset) >= 200
    assert table.handled("Conv2D", 13) and table.handled("NonMaxSuppressionV5", 13)
    assert not table.handled("CombinedNonMaxSuppression", 11)  # its handler starts at opset 12
    assert table.handled("CombinedNonMaxSuppression", 12)
    assert not any(op.startswith("TFL_") for op in table.handler_min_opset)  # TFLite front end left out


def test_conv2d_becomes_conv(table):
    for opset in (13, 17):
        assert "Conv" in table.emits("Conv2D", opset)
        assert table.error("Conv2D", opset) is None


def test_relu6_as_measured(table):
    emitted = set(table.emits("Relu6", 13))
    assert emitted == {"Clip"} or {"Relu", "Min"} <= emitted


def test_decode_jpeg_does_not_convert(table):
    assert not table.handled("DecodeJpeg", 13) or table.error("DecodeJpeg", 13)
    assert table.emits("DecodeJpeg", 13) is None
    assert "DecodeJpeg" in table.error("DecodeJpeg", 13)


def test_pass_through_ops_emit_nothing(table):
    for op in ("Identity", "StopGradient", "NoOp"):
        assert table.emits(op, 13) == [], op


def test_v1_control_flow_converts_without_a_handler(table):
    for op in ("Merge", "Switch", "Enter", "Exit", "NextIteration", "LoopCond"):
        assert op not in table.handler_min_opset
        assert table.handled(op, 13), op
        assert "Loop" in table.emits(op, 13) or "If" in table.emits(op, 13), op
    assert not table.handled("Merge", 11)  # measured from opset 13 only: unknown below


def test_node_attributes_pick_the_matching_variants(table):
    assert table.emits("MirrorPad", 13, {"mode": "REFLECT"}) == ["Pad"]
    assert "Pad" in table.emits("MirrorPad", 13, {"mode": "SYMMETRIC"})
    assert set(table.emits("MirrorPad", 13)) >= set(table.emits("MirrorPad", 13, {"mode": "SYMMETRIC"}))
    assert table.emits("MirrorPad", 13, {"mode": "NOT_MEASURED"}) == table.emits("MirrorPad", 13)  # union
    training = table.emits("FusedBatchNormV3", 13, {"is_training": True})
    assert table.emits("FusedBatchNormV3", 13, {"is_training": False}) == ["BatchNormalization", "Transpose"]
    assert len(training) > 2


def test_opset_lookup_falls_back_to_the_nearest_measured_below(table):
    assert table.emits("Conv2D", 15) == table.emits("Conv2D", 13)
    assert table.emits("Conv2D", 12) is None  # nothing measured at or below 12
    assert table.emits("NotAnOp", 13) is None and table.error("NotAnOp", 13) is None
    assert not table.handled("NotAnOp", 13)


def test_an_op_whose_handler_needs_a_newer_opset(table):
    assert not table.handled("TensorScatterAdd", 13) and "Unsupported ops" in table.error("TensorScatterAdd", 13)
    assert table.handled("TensorScatterAdd", 17) and table.emits("TensorScatterAdd", 17) == ["ScatterND"]


def test_above_tf2onnx_max_opset_nothing_converts(table):
    above = table.max_opset + 1
    assert not table.handled("Conv2D", above)
    assert str(table.max_opset) in table.error("Conv2D", above)


def test_variant_failures_are_kept_when_other_variants_convert(table):
    errors = table.variant_errors("NonMaxSuppressionV5", 13)
    assert any("soft_nms_sigma" in e for e in errors.values())
    assert table.emits("NonMaxSuppressionV5", 13) and table.error("NonMaxSuppressionV5", 13) is None
    assert {v["variant"] for v in table.variants("Cast")} >= {"int64 -> float32", "float32 -> int32"}


def test_every_case_of_the_generator_is_in_the_table(table):
    cases = {c.tf_op for c in generator().CASES}
    assert cases == {op for op in cases if table.measured(op)}, "regenerate: python scripts/gen_tf2onnx_table.py"


def test_cached_and_reloaded_when_the_file_changes(table, tmp_path, monkeypatch):
    assert load_tf2onnx_table() is table
    (tmp_path / "ops").mkdir()
    copy = tmp_path / "ops" / "tf2onnx.json"
    copy.write_text(table.path.read_text())
    monkeypatch.setenv("DEPLOY_TARGETS_DIR", str(tmp_path))
    assert tf2onnx_table_path() == copy
    moved = load_tf2onnx_table()
    assert moved.path == copy.resolve() and moved.emits("Conv2D", 13) == table.emits("Conv2D", 13)
    data = json.loads(copy.read_text())
    data["emits"]["Conv2D"]["13"] = ["Conv"]
    copy.write_text(json.dumps(data))
    assert load_tf2onnx_table().emits("Conv2D", 13) == ["Conv"]


def test_missing_or_broken_table_is_a_deploy_error(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPLOY_TARGETS_DIR", str(tmp_path))
    with pytest.raises(DeployError, match="gen_tf2onnx_table.py"):
        load_tf2onnx_table()
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "tf2onnx.json").write_text('{"tool": "something else"}\n')
    with pytest.raises(DeployError, match="not a tf2onnx table"):
        load_tf2onnx_table()
    (tmp_path / "ops" / "tf2onnx.json").write_text('{"tool": [unclosed\n')
    with pytest.raises(DeployError, match="invalid JSON"):
        load_tf2onnx_table()
    clear_cache()


def test_loader_imports_no_tensorflow():
    code = ("import sys; from pipeline.targets.tf2onnx import load_tf2onnx_table; load_tf2onnx_table(); "
            "heavy = [m for m in ('tensorflow', 'tf2onnx', 'onnx', 'pydantic') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


LIVE_OPS = ("Conv2D", "Relu6", "FusedBatchNormV3", "ResizeBilinear", "NonMaxSuppressionV5")


@pytest.mark.tf
@pytest.mark.slow
def test_live_tf2onnx_matches_the_table(table):
    """Re-measure a few ops with the installed tf2onnx: a tf2onnx upgrade that changes them fails here."""
    gen = generator()
    tf = gen.load_tf()
    opsets = (13, 17)
    for op in LIVE_OPS:
        live = gen.measure_op(op, opsets, tf)
        for opset in opsets:
            assert table.emits(op, opset) == live["emits"].get(str(opset)), (op, opset)
            assert table.error(op, opset) == live["errors"].get(str(opset)), (op, opset)
        stored = {v["variant"]: v for v in table.variants(op)}
        for v in live["variants"]:
            for opset in map(str, opsets):
                want = stored[v["variant"]].get("emits", {}).get(opset)
                assert want == v.get("emits", {}).get(opset), (op, v["variant"], opset)
    if table.tf2onnx_version != gen.versions()["tf2onnx"]:
        pytest.fail("the table was made with tf2onnx {}, {} is installed: regenerate it".format(
            table.tf2onnx_version, gen.versions()["tf2onnx"]))
