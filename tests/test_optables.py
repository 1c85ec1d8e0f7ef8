"""Op tables under targets/ops/ and their loader, pipeline/targets/optables.py."""

import shutil
import subprocess
import sys
import time

import pytest
import yaml

from pipeline.errors import DeployError
from pipeline.targets.optables import (
    ROUTE_OP_NAMES,
    OpSupport,
    OpTable,
    list_op_tables,
    load_op_table,
    normalize_type,
    op_tables_dir,
)
from pipeline.targets import TARGETS_DIR, TARGETS_DIR_ENV, list_targets, load_target

SHIPPED = ["dla", "onnx_trt_10", "onnx_trt_8.2", "onnx_trt_8.5", "onnx_trt_8.6", "tftrt", "uff_trt8"]
OPS_DIR = TARGETS_DIR / "ops"


@pytest.fixture(autouse=True)
def _default_targets_dir(monkeypatch):
    monkeypatch.delenv(TARGETS_DIR_ENV, raising=False)


def _table_text(name):
    return (OPS_DIR / f"{name}.yaml").read_text()


def _load_error(tmp_path, monkeypatch, text, name="onnx_trt_8.2"):
    (tmp_path / "ops").mkdir(exist_ok=True)
    (tmp_path / "ops" / f"{name}.yaml").write_text(text if isinstance(text, str) else yaml.safe_dump(text, sort_keys=False))
    monkeypatch.setenv(TARGETS_DIR_ENV, str(tmp_path))
    with pytest.raises(DeployError) as info:
        load_op_table(name)
    message = str(info.value)
    assert "\n" not in message
    return message


# -- shipped tables --------------------------------------------------------------------------------


def test_shipped_tables_are_listed():
    tables = list_op_tables()
    assert set(SHIPPED) <= set(tables)
    # other data files share targets/ops/ (the checker's op_families.yaml, ...): they are not tables
    assert "op_families" not in tables and "tensorflow_ops" not in tables


@pytest.mark.parametrize("name", sorted(set(SHIPPED) | set(list_op_tables())))
def test_every_table_loads_and_validates(name):
    table = load_op_table(name)
    assert isinstance(table, OpTable)
    assert table.name == name and table.path == (OPS_DIR / f"{name}.yaml").resolve()
    assert table.op_names == ROUTE_OP_NAMES[table.route]
    assert table.sources and table.ops
    assert all(isinstance(v, OpSupport) for v in table.ops.values())
    assert load_op_table(name) is table  # cached


@pytest.mark.parametrize("name", [n for n in SHIPPED if n.startswith("onnx_trt_")])
def test_onnx_tables_match_their_source_counts(name):
    table = load_op_table(name)
    counts = table.facts["counts"]
    assert counts["listed"] == len(table.ops)
    assert counts["supported"] == len(table.supported_ops)
    assert counts["unsupported"] == len(table.unsupported_ops)


def test_onnx_trt_8_2_facts():
    t = load_op_table("onnx_trt_8.2")
    assert (t.route, t.op_names, t.tensorrt, t.unlisted) == ("onnx", "onnx", "8.2", "unsupported")
    assert t.opset.max == 13 and t.opset.min is None
    assert t.supports_opset(13) and not t.supports_opset(14)
    assert t.data_types == ("DOUBLE", "FLOAT32", "FLOAT16", "INT8", "BOOL")
    assert t.is_supported("Conv") and t.supported_types("Conv") == ("FP32", "FP16", "INT8")
    assert t.const_inputs("Conv") == {1: "W"}
    # NonMaxSuppression: supported, experimental, three inputs must be initializers (8.2-GA operators.md)
    nms = t.lookup("NonMaxSuppression")
    assert nms.supported and nms.experimental
    assert nms.const_inputs == {2: "max_output_boxes_per_class", 3: "iou_threshold", 4: "score_threshold"}
    assert nms.padded_output == "[max_output_boxes_per_class, 3]"  # "Output has fixed shape and is padded to ..."
    # operators.md says N; the pinned parser imports it (unaryHelper kRECIP): Keras LayerNormalization was a false NO
    reciprocal = t.lookup("Reciprocal")
    assert reciprocal.supported and reciprocal.types == ("FP32", "FP16")
    assert any("DEFINE_BUILTIN_OP_IMPORTER(Reciprocal)" in n for n in reciprocal.notes)
    assert all(load_op_table(n).lookup("NonMaxSuppression").padded_output is None
               for n in ("onnx_trt_8.5", "onnx_trt_8.6", "onnx_trt_10"))
    assert t.lookup("NonZero").supported is False and not t.is_supported("NonZero")
    assert t.lookup("Resize").attributes["mode"] == ("nearest", "linear")
    assert t.lookup("TopK").const_inputs == {1: "K"}
    assert t.lookup("RandomUniform").restrictions == ("`seed` value is ignored by TensorRT",)
    assert t.lookup("MadeUpOp") is None and not t.is_supported("MadeUpOp")
    assert t.outcome("MadeUpOp") == "unsupported" and "not in op table onnx_trt_8.2" in t.explain("MadeUpOp")
    assert t.supports_type("Add", "float32") is True and t.supports_type("Add", "int64") is False


def test_onnx_tables_differ_where_the_sources_do():
    assert not load_op_table("onnx_trt_8.2").is_supported("OneHot")
    t85 = load_op_table("onnx_trt_8.5")
    assert t85.is_supported("OneHot") and t85.is_unconfirmed("OneHot")  # branch head vs GA tag
    assert t85.opset.max == 17
    assert not load_op_table("onnx_trt_8.6").lookup("NonMaxSuppression").experimental
    t10 = load_op_table("onnx_trt_10")
    assert (t10.opset.min, t10.opset.max) == (9, 20) and t10.tensorrt == "10.1"
    assert t10.lookup("ConstantOfShape").types[-2:] == ("INT64", "BOOL")  # the source's 'INF64'
    assert t10.lookup("LayerNormalization").unsupported_outputs == ("Mean", "InvStdDev")
    assert t10.lookup("Dropout").const_inputs == {2: "training_mode"}
    assert any("10.3" in u for u in t10.unconfirmed)


def test_uff_trt8_facts():
    t = load_op_table("uff_trt8")
    assert (t.route, t.op_names, t.unlisted) == ("uff", "tensorflow", "unsupported")
    for op in ("FusedBatchNormV3", "AddV2"):
        entry = t.lookup(op)
        assert entry.supported is False and entry.reason and entry.evidence
        assert not t.is_supported(op) and t.explain(op) == entry.reason
    assert "FusedBatchNormV3" in t.lookup("FusedBatchNormV3").reason
    assert t.is_supported("FusedBatchNorm") and t.lookup("FusedBatchNorm").maps_to == "BatchNorm"
    assert t.is_supported("Add") and t.is_supported("Floor") and t.is_supported("Square")
    # conversion_conditions are restrictions on the ops they concern
    assert t.lookup("Mean").const_inputs == {1: "reduction_indices"}
    assert t.lookup("StridedSlice").attributes == {"ellipsis_mask": (0,), "new_axis_mask": (0,)}
    assert any("constant right" in r for r in t.lookup("Maximum").restrictions)
    # every known_unsupported op of the reference is in the table, marked unsupported
    for op in ("NonMaxSuppressionV4", "Switch", "Merge", "ResizeBilinear", "Cast", "Tile", "PlaceholderWithDefault"):
        assert t.lookup(op).supported is False
    assert not t.is_supported("SomeCustomOp")


def test_tftrt_unlisted_stays_in_tensorflow():
    t = load_op_table("tftrt")
    assert (t.route, t.op_names, t.unlisted) == ("tftrt", "tensorflow", "stays_in_tensorflow")
    assert t.is_supported("Conv2D") and t.outcome("Conv2D") == "converts"
    assert not t.is_supported("SomeCustomOp") and t.outcome("SomeCustomOp") == "stays_in_tensorflow"
    assert len(t.ops) == 121 and not t.unsupported_ops  # 120 registered ops + the _CopyFromHostToGpu passthrough
    assert t.is_supported("FusedBatchNormV3") and t.is_supported("AddV2")
    # version gates apply when the target's TensorRT is given
    assert t.lookup("Greater").min_tensorrt == "8.2"
    assert t.is_supported("Greater", tensorrt="8.2.1") and not t.is_supported("Greater", tensorrt="8.0")
    assert "needs TensorRT >= 8.2" in t.explain("Greater", tensorrt=(7, 1))


def test_dla_table():
    t = load_op_table("dla")
    assert (t.route, t.op_names, t.unlisted) == ("dla", "onnx", "unsupported")
    assert t.precisions == ("fp16", "int8")
    assert t.facts["hardware"]["xavier"]["dla_generation"] == 1 and t.facts["hardware"]["orin"]["dla_generation"] == 2
    assert t.is_supported("Conv") and t.lookup("Conv").via["tensorrt"] == "Native"
    assert any("kernel_hw" in r for r in t.restrictions("Conv"))
    assert not t.is_supported("Gather") and "reconstructed" in t.explain("Gather")
    assert not t.is_supported("Exp") and "RFE" in t.explain("Exp")
    assert t.is_supported("Softmax", dla_generation=2) and not t.is_supported("Softmax", dla_generation=1)
    assert t.lookup("Div").min_tensorrt == "8.6.12" and t.is_unconfirmed("Div")
    assert not t.is_supported("Div", tensorrt="8.5.2")


def test_not_converted_collects_reasons_in_order():
    t = load_op_table("uff_trt8")
    found = t.not_converted(["Conv2D", "AddV2", "Relu", "FusedBatchNormV3", "AddV2", "MyOp"])
    assert list(found) == ["AddV2", "FusedBatchNormV3", "MyOp"]
    assert "not in op table uff_trt8" in found["MyOp"]


def test_route_names_agree_with_targets():
    from pipeline.targets.optables import ROUTES
    from pipeline.targets import OP_TABLE_KEYS

    assert set(ROUTES) == set(OP_TABLE_KEYS)


def test_normalize_type():
    assert normalize_type("float32") == normalize_type("FLOAT") == normalize_type("DT_FLOAT") == "FP32"
    assert normalize_type("double") == "FP64" and normalize_type("FP16") == "FP16" and normalize_type("string") is None


def test_loading_is_fast():
    from pipeline.targets.optables import parse_op_table

    path = (OPS_DIR / "onnx_trt_10.yaml").resolve()  # the biggest ONNX table
    start = time.perf_counter()
    for _ in range(5):
        parse_op_table(path)  # parse + validate, uncached
    assert (time.perf_counter() - start) / 5 < 0.1  # a few ms here; generous for slow CI machines


# -- targets use them ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list_targets())
def test_every_shipped_targets_routes_resolve_to_tables(name):
    target = load_target(name)
    for route in target.routes:
        table = load_op_table(target.op_table_for(route))  # host_cpu: ONNX Runtime's CPU kernels
        assert table.route == route
    if target.dla_cores:
        assert load_op_table(target.op_table_for("dla")).route == "dla"


# -- errors ----------------------------------------------------------------------------------------


def test_unknown_table_suggests_the_closest():
    with pytest.raises(DeployError) as info:
        load_op_table("onnx_trt_ops_8.2")
    message = str(info.value)
    assert "\n" not in message
    assert "unknown op table 'onnx_trt_ops_8.2'" in message and "did you mean 'onnx_trt_8.2'?" in message
    assert "uff_trt8" in message and "targets/ops" in message


def test_a_data_file_that_is_not_a_table():
    with pytest.raises(DeployError, match="op_families.yaml is not an op table"):
        load_op_table("op_families")


def test_malformed_table_names_file_and_key(tmp_path, monkeypatch):
    text = _table_text("onnx_trt_8.2").replace("  Conv:\n    types: [FP32, FP16, INT8]", "  Conv:\n    types: [FP32, FP61, INT8]")
    message = _load_error(tmp_path, monkeypatch, text)
    assert "onnx_trt_8.2.yaml" in message and "key 'ops.Conv.types[1]'" in message and "'FP61'" in message


def test_unknown_op_key_lists_allowed_keys(tmp_path, monkeypatch):
    text = _table_text("onnx_trt_8.2").replace("  Abs: {types:", "  Abs: {restriction: [x], types:")
    message = _load_error(tmp_path, monkeypatch, text)
    assert "key 'ops.Abs.restriction': unknown key" in message and "restrictions" in message


def test_missing_key_and_bad_route(tmp_path, monkeypatch):
    data = yaml.safe_load(_table_text("onnx_trt_8.2"))
    del data["unlisted"]
    data["route"] = "trt"
    message = _load_error(tmp_path, monkeypatch, data)
    assert "key 'unlisted': required key is missing" in message and "key 'route'" in message and "'trt'" in message


def test_table_schema_rules(tmp_path, monkeypatch):
    data = yaml.safe_load(_table_text("onnx_trt_8.2"))
    data["op_names"] = "tensorflow"
    assert "set op_names: onnx" in _load_error(tmp_path, monkeypatch, data)
    data = yaml.safe_load(_table_text("onnx_trt_8.2"))
    del data["opset"]
    assert "needs opset" in _load_error(tmp_path, monkeypatch, data)
    data = yaml.safe_load(_table_text("onnx_trt_8.2"))
    data["ops"]["Conv"]["reason"] = "why"
    assert "key 'ops.Conv'" in _load_error(tmp_path, monkeypatch, data)


def test_unquoted_version(tmp_path, monkeypatch):
    text = _table_text("onnx_trt_8.2").replace("tensorrt: '8.2'", "tensorrt: 8.2")
    message = _load_error(tmp_path, monkeypatch, text)
    assert "key 'tensorrt'" in message and "quoted string" in message


def test_duplicate_op(tmp_path, monkeypatch):
    text = _table_text("onnx_trt_8.2").replace("  Abs: {", "  Conv: {supported: false}\n  Abs: {", 1)
    message = _load_error(tmp_path, monkeypatch, text)
    assert "onnx_trt_8.2.yaml" in message and "key 'Conv' appears twice" in message


def test_invalid_yaml(tmp_path, monkeypatch):
    message = _load_error(tmp_path, monkeypatch, "name: [onnx_trt_8.2\n")
    assert "onnx_trt_8.2.yaml" in message and "invalid YAML" in message


def test_name_must_match_file(tmp_path, monkeypatch):
    message = _load_error(tmp_path, monkeypatch, _table_text("onnx_trt_8.2"), name="my_table")
    assert "my_table.yaml" in message and "key 'name'" in message


def test_targets_dir_moves_the_tables(tmp_path, monkeypatch):
    shutil.copytree(OPS_DIR, tmp_path / "ops")
    (tmp_path / "ops" / "uff_trt8.yaml").unlink()
    monkeypatch.setenv(TARGETS_DIR_ENV, str(tmp_path))
    assert op_tables_dir() == tmp_path / "ops"
    assert "uff_trt8" not in list_op_tables()
    with pytest.raises(DeployError, match="unknown op table 'uff_trt8'"):
        load_op_table("uff_trt8")
    shutil.copy(TARGETS_DIR / "jetson_tx2.yaml", tmp_path / "jetson_tx2.yaml")
    with pytest.raises(DeployError, match=r"jetson_tx2.yaml: key 'op_tables.uff': unknown op table 'uff_trt8'"):
        load_target("jetson_tx2")


def test_edited_table_is_reloaded(tmp_path, monkeypatch):
    shutil.copytree(OPS_DIR, tmp_path / "ops")
    monkeypatch.setenv(TARGETS_DIR_ENV, str(tmp_path))
    assert load_op_table("tftrt").is_supported("Conv2D")
    path = tmp_path / "ops" / "tftrt.yaml"
    path.write_text(path.read_text().replace("  Conv2D: {", "  Conv2DX: {") + "# edited\n")
    assert not load_op_table("tftrt").is_supported("Conv2D")


def test_import_is_light():
    heavy = ["tensorflow", "tensorrt", "onnx", "onnxruntime", "tf2onnx", "pycuda", "numpy", "torch"]
    code = "import sys, pipeline.targets.optables; print(' '.join(m for m in %r if m in sys.modules))" % (heavy,)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
