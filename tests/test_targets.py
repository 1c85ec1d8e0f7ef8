"""Target files under targets/ and their loader, pipeline/targets/device.py."""

import shutil
import subprocess
import sys

import pytest
import yaml

from pipeline.errors import DeployError
from pipeline.targets import (
    TARGETS_DIR,
    TARGETS_DIR_ENV,
    Target,
    describe_target,
    format_target_list,
    list_targets,
    load_target,
)

SHIPPED = ["agx_orin", "agx_xavier", "host_cpu", "jetson_nano", "jetson_tx2", "orin_nano", "orin_nx", "xavier_nx"]


@pytest.fixture(autouse=True)
def _default_targets_dir(monkeypatch):
    monkeypatch.delenv(TARGETS_DIR_ENV, raising=False)


def _tx2_data():
    return yaml.safe_load((TARGETS_DIR / "jetson_tx2.yaml").read_text())


def _write(directory, name, data):
    """Write a target file; the op tables it names come along (they live in <targets dir>/ops/)."""
    if not (directory / "ops").exists():
        shutil.copytree(TARGETS_DIR / "ops", directory / "ops")
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False) if isinstance(data, dict) else data)
    return path


def _load_error(tmp_path, monkeypatch, data, name="jetson_tx2"):
    _write(tmp_path, name, data)
    monkeypatch.setenv(TARGETS_DIR_ENV, str(tmp_path))
    with pytest.raises(DeployError) as info:
        load_target(name)
    message = str(info.value)
    assert "\n" not in message
    return message


# -- shipped targets -------------------------------------------------------------------------------


def test_shipped_targets_are_listed():
    assert set(SHIPPED) <= set(list_targets())


@pytest.mark.parametrize("name", list_targets())
def test_every_shipped_target_loads(name):
    target = load_target(name)
    assert isinstance(target, Target)
    assert target.name == name
    assert target.path == (TARGETS_DIR / f"{name}.yaml").resolve()
    assert target.sources, "a target file cites its sources"
    if target.has_tensorrt:
        topics = " ".join(target.sources)
        assert "tensorrt" in topics and "onnx" in topics and "precisions" in topics


def test_jetson_tx2_facts():
    tx2 = load_target("jetson_tx2")
    assert tx2.has_tensorrt
    assert tx2.tensorrt == "8.2.1" and tx2.trt_version == (8, 2, 1)
    assert tx2.jetpack == "4.6.6"
    assert tx2.max_opset == 13
    assert tx2.op_table == "onnx_trt_8.2"
    assert tx2.op_tables == {"uff": "uff_trt8", "onnx": "onnx_trt_8.2", "tftrt": "tftrt"}
    assert tx2.op_table_for("onnx") == "onnx_trt_8.2" and tx2.op_table_for("UFF") == "uff_trt8"
    assert tx2.op_table_for("dla") is None
    assert tx2.precisions == ("fp32", "fp16")
    assert tx2.supports_precision("fp16") and tx2.supports_precision("FP32")
    assert not tx2.supports_precision("int8")
    assert tx2.python == "3.6"
    assert tx2.supports_route("uff") and tx2.supports_route("onnx")
    assert tx2.dla_cores == 0
    assert tx2.supports_opset(13) and not tx2.supports_opset(14)


def test_jetson_nano_has_no_int8():
    assert not load_target("jetson_nano").supports_precision("int8")


def test_xavier_facts():
    for name in ("xavier_nx", "agx_xavier"):
        t = load_target(name)
        assert t.tensorrt == "8.5.2" and t.max_opset == 17
        assert t.supports_precision("int8") and t.supports_route("uff")


@pytest.mark.parametrize("name", ["orin_nano", "orin_nx", "agx_orin"])
def test_orin_has_no_uff(name):
    orin = load_target(name)
    assert orin.trt_version[0] >= 10
    assert not orin.supports_route("uff")
    assert orin.supports_route("onnx")
    assert orin.supports_precision("int8")


def test_orin_nano_has_no_dla():
    assert load_target("orin_nano").dla_cores == 0


def test_host_cpu_is_onnxruntime_only():
    host = load_target("host_cpu")
    assert not host.has_tensorrt
    assert host.runtime == "onnxruntime"
    assert host.tensorrt is None and host.trt_version is None
    assert host.routes == ("onnx",)
    # the onnx route is checked against ONNX Runtime's CPU kernels (scripts/gen_onnxruntime_table.py)
    assert host.op_tables == {"onnx": "onnxruntime_cpu"} and host.op_table_for("onnx") == "onnxruntime_cpu"


def test_same_tensorrt_means_same_onnx_support():
    by_trt = {}
    for name in list_targets():
        t = load_target(name)
        if t.has_tensorrt:
            tables = tuple(sorted((k, v) for k, v in t.op_tables.items() if k != "dla"))  # dla follows the module's cores
            by_trt.setdefault(t.tensorrt, set()).add((t.max_opset, t.min_opset, tables))
    assert all(len(v) == 1 for v in by_trt.values()), by_trt


def test_load_by_path():
    path = TARGETS_DIR / "jetson_tx2.yaml"
    assert load_target(str(path)).name == "jetson_tx2"
    assert load_target(path).name == "jetson_tx2"


# -- errors ----------------------------------------------------------------------------------------


def test_unknown_target_suggests_the_closest():
    with pytest.raises(DeployError) as info:
        load_target("jetson_tx")
    message = str(info.value)
    assert "\n" not in message
    assert "unknown target 'jetson_tx'" in message
    assert "did you mean 'jetson_tx2'?" in message
    assert "agx_orin" in message and "host_cpu" in message


def test_missing_target_file_path():
    with pytest.raises(DeployError, match="nope.yaml: not found"):
        load_target("nope.yaml")


def test_unknown_key_names_file_and_key(tmp_path, monkeypatch):
    data = _tx2_data()
    data["tensorrt_verison"] = "8.2.1"
    message = _load_error(tmp_path, monkeypatch, data)
    assert "jetson_tx2.yaml" in message
    assert "key 'tensorrt_verison'" in message and "unknown key" in message


def test_unknown_nested_key_names_key_path(tmp_path, monkeypatch):
    data = _tx2_data()
    data["onnx"]["max_opsets"] = 13
    message = _load_error(tmp_path, monkeypatch, data)
    assert "jetson_tx2.yaml" in message and "key 'onnx.max_opsets'" in message


def test_wrong_type_names_file_and_key_path(tmp_path, monkeypatch):
    data = _tx2_data()
    data["onnx"]["max_opset"] = "thirteen"
    message = _load_error(tmp_path, monkeypatch, data)
    assert "jetson_tx2.yaml" in message
    assert "key 'onnx.max_opset'" in message and "'thirteen'" in message


def test_unknown_precision_names_list_index(tmp_path, monkeypatch):
    data = _tx2_data()
    data["precisions"] = ["fp32", "fp8"]
    message = _load_error(tmp_path, monkeypatch, data)
    assert "key 'precisions[1]'" in message and "'fp8'" in message


def test_unquoted_version_asks_for_a_string(tmp_path, monkeypatch):
    text = (TARGETS_DIR / "jetson_tx2.yaml").read_text().replace("cuda: '10.2'", "cuda: 10.2")
    message = _load_error(tmp_path, monkeypatch, text)
    assert "key 'cuda'" in message and "quoted string" in message


def test_missing_key(tmp_path, monkeypatch):
    data = _tx2_data()
    del data["routes"]
    message = _load_error(tmp_path, monkeypatch, data)
    assert "key 'routes': required key is missing" in message


def test_uff_route_needs_tensorrt_8(tmp_path, monkeypatch):
    data = _tx2_data()
    data["tensorrt"] = "10.3"
    message = _load_error(tmp_path, monkeypatch, data)
    assert "uff" in message and "TensorRT 10.3" in message


def test_unconfirmed_must_name_a_field(tmp_path, monkeypatch):
    data = _tx2_data()
    data["unconfirmed"] = ["tensorrt", "trt"]
    message = _load_error(tmp_path, monkeypatch, data)
    assert "key 'unconfirmed'" in message and "'trt'" in message


def test_name_must_match_file(tmp_path, monkeypatch):
    message = _load_error(tmp_path, monkeypatch, _tx2_data(), name="my_tx2")
    assert "my_tx2.yaml" in message and "key 'name'" in message


def test_duplicate_key(tmp_path, monkeypatch):
    text = (TARGETS_DIR / "jetson_tx2.yaml").read_text() + "tensorrt: '8.0.1'\n"
    message = _load_error(tmp_path, monkeypatch, text)
    assert "jetson_tx2.yaml" in message and "key 'tensorrt' appears twice" in message


def test_invalid_yaml(tmp_path, monkeypatch):
    message = _load_error(tmp_path, monkeypatch, "name: [jetson_tx2\n")
    assert "jetson_tx2.yaml" in message and "invalid YAML" in message


def test_not_a_mapping(tmp_path, monkeypatch):
    message = _load_error(tmp_path, monkeypatch, "- jetson_tx2\n")
    assert "jetson_tx2.yaml" in message and "mapping" in message


def test_targets_dir_override(tmp_path, monkeypatch):
    data = _tx2_data()
    data["name"] = "my_board"
    data["description"] = "a board only this test knows"
    _write(tmp_path, "my_board", data)
    monkeypatch.setenv(TARGETS_DIR_ENV, str(tmp_path))
    assert list_targets() == ["my_board"]
    assert load_target("my_board").description == "a board only this test knows"
    with pytest.raises(DeployError, match="did you mean 'my_board'"):
        load_target("my_bord")


def test_targets_dir_override_missing(tmp_path, monkeypatch):
    monkeypatch.setenv(TARGETS_DIR_ENV, str(tmp_path / "absent"))
    with pytest.raises(DeployError, match=TARGETS_DIR_ENV):
        list_targets()


def test_edited_file_is_reloaded(tmp_path, monkeypatch):
    data = _tx2_data()
    path = _write(tmp_path, "jetson_tx2", data)
    monkeypatch.setenv(TARGETS_DIR_ENV, str(tmp_path))
    assert load_target("jetson_tx2").max_opset == 13
    data["onnx"]["max_opset"] = 11
    data["description"] += " (edited)"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert load_target("jetson_tx2").max_opset == 11


# -- op tables -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list_targets())
def test_every_route_has_an_op_table_of_that_route(name):
    from pipeline.targets.optables import load_op_table

    target = load_target(name)
    for route in target.routes if target.has_tensorrt else ():
        assert load_op_table(target.op_table_for(route)).route == route
    assert ("dla" in target.op_tables) == (target.dla_cores > 0)


def test_orin_onnx_table_is_marked_unconfirmed():
    for name in ("orin_nano", "orin_nx", "agx_orin"):
        orin = load_target(name)
        assert orin.op_table_for("onnx") == "onnx_trt_10" and orin.is_unconfirmed("op_tables.onnx")


def test_route_without_op_table(tmp_path, monkeypatch):
    data = _tx2_data()
    del data["op_tables"]["uff"]
    message = _load_error(tmp_path, monkeypatch, data)
    assert "jetson_tx2.yaml" in message and "op_tables has no table for route uff" in message


def test_unknown_op_table_names_file_key_and_suggests(tmp_path, monkeypatch):
    data = _tx2_data()
    data["op_tables"]["onnx"] = "onnx_trt_ops_8.2"
    message = _load_error(tmp_path, monkeypatch, data)
    assert "jetson_tx2.yaml: key 'op_tables.onnx'" in message
    assert "unknown op table 'onnx_trt_ops_8.2'" in message and "did you mean 'onnx_trt_8.2'?" in message


def test_op_table_of_another_route(tmp_path, monkeypatch):
    data = _tx2_data()
    data["op_tables"]["onnx"] = "uff_trt8"
    message = _load_error(tmp_path, monkeypatch, data)
    assert "key 'op_tables.onnx'" in message and "is for route 'uff', not 'onnx'" in message


def test_op_table_for_another_tensorrt_major(tmp_path, monkeypatch):
    data = _tx2_data()
    data["op_tables"]["onnx"] = "onnx_trt_10"
    data["onnx"]["min_opset"] = 9
    message = _load_error(tmp_path, monkeypatch, data)
    assert "key 'op_tables.onnx'" in message and "TensorRT 10.1" in message and "8.2.1" in message


def test_max_opset_above_the_table(tmp_path, monkeypatch):
    data = _tx2_data()
    data["onnx"]["max_opset"] = 14
    message = _load_error(tmp_path, monkeypatch, data)
    assert "key 'onnx.max_opset'" in message and "up to opset 13" in message


def test_op_table_for_a_route_the_target_lacks(tmp_path, monkeypatch):
    data = _tx2_data()
    data["routes"] = ["onnx", "tftrt"]
    message = _load_error(tmp_path, monkeypatch, data)
    assert "op_tables.uff is set but routes has no uff" in message


def test_dla_table_needs_dla_cores(tmp_path, monkeypatch):
    data = _tx2_data()
    data["op_tables"]["dla"] = "dla"
    message = _load_error(tmp_path, monkeypatch, data)
    assert "op_tables.dla is set but dla_cores is 0" in message


def test_dla_cores_need_a_dla_table(tmp_path, monkeypatch):
    data = yaml.safe_load((TARGETS_DIR / "agx_orin.yaml").read_text())
    del data["op_tables"]["dla"]
    message = _load_error(tmp_path, monkeypatch, data, name="agx_orin")
    assert "agx_orin.yaml" in message and "no dla table" in message


def test_unknown_op_tables_key(tmp_path, monkeypatch):
    data = _tx2_data()
    data["op_tables"]["trt"] = "onnx_trt_8.2"
    message = _load_error(tmp_path, monkeypatch, data)
    assert "key 'op_tables.trt': unknown key" in message and "uff, onnx, tftrt, dla" in message


def test_onnx_op_table_key_is_gone(tmp_path, monkeypatch):
    data = _tx2_data()
    data["onnx"]["op_table"] = "onnx_trt_8.2"
    message = _load_error(tmp_path, monkeypatch, data)
    assert "key 'onnx.op_table'" in message and "unknown key" in message


def test_unconfirmed_may_name_an_op_table(tmp_path, monkeypatch):
    data = _tx2_data()
    data["unconfirmed"] = ["op_tables.onnx", "op_tables.uff"]
    _write(tmp_path, "jetson_tx2", data)
    monkeypatch.setenv(TARGETS_DIR_ENV, str(tmp_path))
    assert load_target("jetson_tx2").is_unconfirmed("op_tables.uff")
    data["unconfirmed"] = ["op_tables.trt"]
    assert "'op_tables.trt'" in _load_error(tmp_path, monkeypatch, data)


# -- output ----------------------------------------------------------------------------------------


def test_format_target_list():
    table = format_target_list([load_target(n) for n in SHIPPED])
    lines = table.splitlines()
    for column in ("name", "JetPack", "TensorRT", "CUDA", "Python", "precisions", "routes", "max opset"):
        assert column in lines[0]
    assert len(lines) == 2 + len(SHIPPED)
    tx2_row = next(line for line in lines if line.startswith("jetson_tx2 "))
    for cell in ("4.6.6", "8.2.1", "10.2", "3.6", "fp32,fp16", "uff,onnx,tftrt", "13"):
        assert cell in tx2_row.split()


def test_describe_target():
    text = describe_target(load_target("jetson_tx2"))
    assert text.splitlines()[0].startswith("jetson_tx2: ")
    for fact in ("TensorRT 8.2.1", "4.6.6", "up to 13", "onnx: onnx_trt_8.2", "uff: uff_trt8", "fp32, fp16", "uff, onnx, tftrt",
                 "sources:"):
        assert fact in text
    orin = describe_target(load_target("orin_nx"))
    assert "onnx: onnx_trt_10 (unconfirmed)" in orin and "dla: dla" in orin


def test_import_is_light():
    heavy = ["tensorflow", "tensorrt", "onnx", "onnxruntime", "tf2onnx", "pycuda", "numpy", "torch"]
    code = "import sys, pipeline.targets; print(' '.join(m for m in %r if m in sys.modules))" % (heavy,)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_an_op_data_file_is_parsed_once_and_again_after_an_edit(tmp_path, monkeypatch):
    """pipeline.targets.files.data_file keeps one parse per file: a check reads trt_plugins.yaml and the
    op families many times (each call parsed the file again: a walk of 925 checks went from 10.1 to 2.6 s)."""
    from pipeline.targets import files

    assert files.data_file("trt_plugins.yaml") is files.data_file("trt_plugins.yaml")
    ops = tmp_path / "ops"
    ops.mkdir()
    (ops / "extra.yaml").write_text("a: 1\n")
    monkeypatch.setattr(files, "op_tables_dir", lambda: ops)
    first = files.data_file("extra.yaml")
    assert first == {"a": 1} and files.data_file("extra.yaml") is first
    (ops / "extra.yaml").write_text("a: 22\n")  # another size: read again
    assert files.data_file("extra.yaml") == {"a": 22}
