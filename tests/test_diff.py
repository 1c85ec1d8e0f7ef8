"""deploy diff: nodes matched by structure, not by the creation-order names TensorFlow gives them."""

import json

import numpy as np
import pytest

from pipeline.diff import diff_models, format_text

from conftest import deploy


def _graph(tmp_path, name, order=("a", "b"), weights=1.0, extra=False, axis=3):
    """Two branches (each conv -> relu) concatenated; unnamed ops, so names follow creation order."""
    from pipeline.tf import import_tf

    tf = import_tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="input")
        kernels = {"a": np.full((3, 3, 3, 2), weights, "float32"), "b": np.full((1, 1, 3, 2), 0.5, "float32")}
        outs = {}
        for branch in order:
            y = tf.nn.relu(tf.nn.conv2d(x, tf.constant(kernels[branch]), 1, "SAME"))
            outs[branch] = tf.concat([y, y], axis=3)
        y = tf.concat([outs["a"], outs["b"]], axis=axis)
        if extra:
            y = tf.nn.relu(y)
        tf.identity(y, name="output")
    path = tmp_path / name
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


@pytest.mark.tf
def test_creation_order_swap_is_identical_up_to_renaming(tmp_path):
    first = _graph(tmp_path, "ab.pb", ("a", "b"))
    second = _graph(tmp_path, "ba.pb", ("b", "a"))
    report = diff_models(first, second)
    assert report.structurally_identical and not report.values
    assert report.renamed["concat"] == "concat_1" and report.renamed["concat_1"] == "concat"
    assert format_text(report).splitlines()[1] == "structurally identical up to renaming"
    res = deploy("diff", first, second)
    assert res.returncode == 0 and "concat ↔ concat_1" in res.stdout


@pytest.mark.tf
def test_changed_weights_added_nodes_and_changed_attributes(tmp_path):
    base = _graph(tmp_path, "base.pb")
    report = diff_models(base, _graph(tmp_path, "w.pb", weights=2.0))
    assert report.structurally_identical and len(report.values) == 1 and report.values[0]["max_abs_diff"] == 1.0
    report = diff_models(base, _graph(tmp_path, "extra.pb", extra=True))
    assert not report.structurally_identical and report.added == ["Relu_2"] and not report.removed
    report = diff_models(base, _graph(tmp_path, "axis.pb", axis=-1))
    assert report.structurally_identical  # the concat axis is a constant input: its value differs
    assert [(v["a"], v["max_abs_diff"]) for v in report.values] == [("concat_2/axis", 4.0)]
    res = deploy("diff", base, tmp_path / "extra.pb", "--format", "json")
    assert res.returncode == 1
    data = json.loads(res.stdout)
    assert data["added"] == ["Relu_2"] and data["structurally_identical"] is False


def test_onnx_diff_and_bad_input(tmp_path):
    from onnx import TensorProto, helper, save

    def model(path, nodes):
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
        save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
        return path

    a = model(tmp_path / "a.onnx", [helper.make_node("Relu", ["x"], ["h"], name="first"),
                                    helper.make_node("Sigmoid", ["h"], ["y"], name="second")])
    b = model(tmp_path / "b.onnx", [helper.make_node("Relu", ["x"], ["h"], name="n0"),
                                    helper.make_node("Sigmoid", ["h"], ["y"], name="n1")])
    report = diff_models(a, b)
    assert report.structurally_identical and report.renamed == {"first": "n0", "second": "n1"}
    c = model(tmp_path / "c.onnx", [helper.make_node("Relu", ["x"], ["h"], name="first"),
                                    helper.make_node("Tanh", ["h"], ["y"], name="second")])
    report = diff_models(a, c)
    assert report.removed == ["second"] and report.added == ["second"] or not report.structurally_identical
    (tmp_path / "notes.txt").write_text("not a model")
    res = deploy("diff", a, tmp_path / "notes.txt")
    assert res.returncode == 1 and res.stderr.startswith("deploy: error: ") and "notes.txt" in res.stderr
