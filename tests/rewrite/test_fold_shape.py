"""fold_shape (pipeline/rewrite/passes/uff_shape.py): Shape of a static-shaped tensor becomes a Const,
outputs equal (the pass runner compares them); a Shape over a dynamic batch is left alone; the UFF
route names Shape as its blocker with this pass as the fix (issue 26 item 5)."""

import numpy as np
import pytest

pytestmark = pytest.mark.tf

SAMPLES = np.random.RandomState(0).uniform(0, 1, (4, 8, 8, 3)).astype("float32")


def _flatten_graph(path, batch):
    """A Keras-Flatten-like graph: Reshape(x, [Shape(x)[0], -1]) after a conv, input batch ``batch``."""
    from pipeline.tf import import_tf

    t = import_tf()
    v1 = t.compat.v1
    graph = t.Graph()
    with graph.as_default():
        x = v1.placeholder(t.float32, [batch, 8, 8, 3], name="input")
        w = t.constant(np.random.RandomState(1).randn(3, 3, 3, 4).astype("float32"))
        y = t.nn.relu(t.nn.conv2d(x, w, 1, "SAME"))
        flat = t.reshape(y, t.stack([t.raw_ops.Shape(input=y)[0], -1]), name="flatten")  # a Shape node, as Keras emits
        t.identity(t.reduce_sum(flat, axis=1), name="output")
        with v1.Session(graph=graph) as sess:
            frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["output"])
    path.write_bytes(frozen.SerializeToString())
    return path


def _run(path, names):
    from pipeline.rewrite.apply import apply_passes, graph_io
    from pipeline.rewrite.tfgraph import TFGraph

    graph = TFGraph.load(path)
    receipt = apply_passes(graph, graph_io(graph, path), names, {}, SAMPLES, 1e-6, None)
    return graph, receipt


def test_fold_shape_of_a_static_tensor_keeps_the_outputs(tmp_path):
    graph, receipt = _run(_flatten_graph(tmp_path / "static.pb", 4), ["fold_shape"])
    assert receipt[0]["sites"] and receipt[0]["ops"]["Shape"] == -1
    assert receipt[0]["comparison"]["max_abs_diff"] == 0.0
    assert not [n for n in graph.graph_def.node if n.op == "Shape"]


def test_fold_shape_near_miss_dynamic_batch_is_left_alone(tmp_path):
    graph, receipt = _run(_flatten_graph(tmp_path / "dynamic.pb", None), ["fold_shape"])
    assert receipt[0]["sites"] == []
    assert [n for n in graph.graph_def.node if n.op == "Shape"]


def test_uff_route_blocks_shape_and_names_the_pass(tmp_path):
    from pipeline.check import check_model
    from pipeline.targets import load_target

    report = check_model(_flatten_graph(tmp_path / "k.pb", 4), load_target("jetson_tx2"), convert=False)
    shape = [f for f in report.route("uff").findings if f.severity == "blocker" and f.op == "Shape"]
    assert shape and shape[0].rewrite == "fold_shape" and "NvUffParser rejects" in shape[0].cause
