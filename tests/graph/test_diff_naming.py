"""Naming attributes are names: the same Keras model saved with model.export() and with
tf.saved_model.save() names its variables' resources ``dense/bias_1`` in one and ``dense/bias``
in the other (VarHandleOp's shared_name and debug_name). Before, `deploy diff` reported every
variable as "changed" (exit 4) although the graphs are identical up to renaming."""

import pytest
from google.protobuf import text_format

from conftest import deploy
from pipeline.graph import proto
from pipeline.graph.diff import diff_models, format_text


def _graph(var_name, dtype=1, container=""):
    """input -> AddV2(input, ReadVariableOp(VarHandleOp)); the variable's resource named ``var_name``."""
    g = proto.GraphDef()
    x = g.node.add(name="input", op="Placeholder")
    x.attr["dtype"].type = 1
    var = g.node.add(name=var_name, op="VarHandleOp")
    var.attr["dtype"].type = dtype
    var.attr["shape"].shape.dim.add().size = 8
    var.attr["shared_name"].s = var_name.encode()
    var.attr["debug_name"].s = (var_name + "/").encode()
    var.attr["container"].s = container.encode()
    var.attr["allowed_devices"].list.SetInParent()
    read = g.node.add(name=var_name + "/Read/ReadVariableOp", op="ReadVariableOp", input=[var_name])
    read.attr["dtype"].type = dtype
    add = g.node.add(name="out", op="AddV2", input=["input", read.name])
    add.attr["T"].type = 1
    return g


def _write(g, path):
    if path.suffix == ".pbtxt":
        path.write_text(text_format.MessageToString(g))
    else:
        path.write_bytes(g.SerializeToString())
    return path


@pytest.mark.parametrize("suffixes", [(".pb", ".pb"), (".pbtxt", ".pbtxt"), (".pb", ".pbtxt")],
                         ids=["bytes", "decoded", "bytes-vs-decoded"])
def test_shared_name_debug_name_and_container_are_names(tmp_path, suffixes):
    a = _write(_graph("dense/bias_1"), tmp_path / ("a" + suffixes[0]))
    b = _write(_graph("dense/bias", container="localhost"), tmp_path / ("b" + suffixes[1]))
    report = diff_models(a, b)
    assert report.structurally_identical, report.to_dict()
    assert report.renamed["dense/bias_1"] == "dense/bias"
    text = format_text(report)
    assert "structurally identical up to renaming" in text
    assert "attributes:" not in text and "changed" not in text
    res = deploy("diff", a, b)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_a_variable_of_another_dtype_is_still_a_change(tmp_path, suffix):
    """The near miss: only naming attributes are left out; a VarHandleOp whose dtype changed is changed."""
    a = _write(_graph("dense/bias_1"), tmp_path / ("a" + suffix))
    b = _write(_graph("dense/bias", dtype=2), tmp_path / ("b" + suffix))
    report = diff_models(a, b)
    assert not report.structurally_identical
    whats = {c["b"]: c["what"] for c in report.changed}
    assert "dtype float32 → float64" in whats["dense/bias"], whats
    assert "shared_name" not in whats["dense/bias"]
    assert deploy("diff", a, b).returncode == 4
