"""A matched constant whose value changed is a changed value, whatever its shape (diff item 3).

`deploy diff tf1_train_classic.pb tf1_classic_rw.pb` (bn_inference put the moving statistics where
training had empty constants) printed "bn/Const ↔ bn/FusedBatchNormV3/moving_mean (Const): shape []
→ [0.0,...]" (values under the label "shape"), "0 constant(s) with different values" although
that constant went from empty to 8 values, and listed it under "renamed" although it was replaced."""

import json

import numpy as np

from conftest import deploy
from pipeline.graph import proto
from pipeline.graph.diff import diff_models, format_text


def _const(g, name, array):
    node = g.node.add(name=name, op="Const")
    node.attr["dtype"].type = 1
    tensor = node.attr["value"].tensor
    tensor.dtype = 1
    for d in array.shape:
        tensor.tensor_shape.dim.add().size = d
    tensor.tensor_content = np.asarray(array, "float32").tobytes()
    return node


def _graph(path, mean, scale, scale_name="scale"):
    """input -> Mul(., scale) -> AddV2(., mean) named out; ``mean`` is read by the add."""
    g = proto.GraphDef()
    g.node.add(name="input", op="Placeholder").attr["dtype"].type = 1
    _const(g, scale_name, scale)
    mul = g.node.add(name="mul", op="Mul", input=["input", scale_name])
    mul.attr["T"].type = 1
    _const(g, mean[0], mean[1])
    add = g.node.add(name="out", op="AddV2", input=["mul", mean[0]])
    add.attr["T"].type = 1
    path.write_bytes(g.SerializeToString())
    return path


def test_a_replaced_constant_is_a_changed_value_with_its_shape_labelled(tmp_path):
    scale = np.ones(8)
    a = _graph(tmp_path / "a.pb", ("bn/Const", np.zeros(0)), scale)
    b = _graph(tmp_path / "b.pb", ("bn/FusedBatchNormV3/moving_mean", np.zeros(8)), scale)
    report = diff_models(a, b)
    assert [(c["a"], c["b"], c["what"]) for c in report.changed] == [
        ("bn/Const", "bn/FusedBatchNormV3/moving_mean", "shape [0] → [8]")]
    assert [(v["a"], v["b"]) for v in report.values] == [("bn/Const", "bn/FusedBatchNormV3/moving_mean")]
    assert "bn/Const" not in report.renamed  # replaced, not renamed
    text = format_text(report)
    assert "different: 0 added, 0 removed, 1 changed, 1 constant(s) with different values" in text
    assert "bn/Const ↔ bn/FusedBatchNormV3/moving_mean (Const): shape [0] → [8]" in text
    assert "bn/Const ↔ bn/FusedBatchNormV3/moving_mean: [] → [0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0]" in text
    assert "renamed" not in text
    res = deploy("diff", a, b, "--format", "json")
    assert res.returncode == 4
    data = json.loads(res.stdout)
    assert len(data["values"]) == 1 and data["renamed"] == {}


def test_a_big_constant_of_another_shape_and_a_renamed_one_with_new_values(tmp_path):
    """The near misses: a big constant's shape change shows dims in both lists; a constant renamed
    with the same shape and new values stays a rename, its values listed."""
    a = _graph(tmp_path / "a.pb", ("mean", np.zeros(8)), np.ones(8), scale_name="scale_1")
    b = _graph(tmp_path / "b.pb", ("mean", np.zeros(32)), np.full(8, 2.0), scale_name="scale")
    report = diff_models(a, b)
    text = format_text(report)
    assert "mean (Const): shape [8] → [32]" in text
    assert "  mean: shape [8] → [32]" in text  # more than 16 values: its shape, not its values
    assert "scale_1 ↔ scale: [1.0,1.0,1.0,1.0,1.0,1.0,1.0,1.0] → [2.0,2.0,2.0,2.0,2.0,2.0,2.0,2.0]" in text
    assert report.renamed == {"scale_1": "scale"}
    assert "1 changed, 2 constant(s) with different values" in text
