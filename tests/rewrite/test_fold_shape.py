"""fold_shape (pipeline/rewrite/passes/uff_shape.py): Shape of a static-shaped tensor becomes a Const,
and with a dynamic batch Keras Flatten's Shape -> StridedSlice -> Pack -> Reshape loses its Shape;
outputs equal (the pass runner compares them); a batch read for anything else is left alone; the
UFF route names Shape as its blocker with this pass as the fix (issue 26 item 5)."""

import numpy as np
import pytest

pytestmark = pytest.mark.tf

SAMPLES = np.random.RandomState(0).uniform(0, 1, (4, 8, 8, 3)).astype("float32")


def _tf():
    from pipeline.tf import import_tf

    return import_tf()


def _graph(path, batch, head):
    """conv -> relu -> ``head(t, y)`` -> output, input [batch, 8, 8, 3], frozen."""
    t = _tf()
    v1 = t.compat.v1
    graph = t.Graph()
    with graph.as_default():
        x = v1.placeholder(t.float32, [batch, 8, 8, 3], name="input")
        w = t.constant(np.random.RandomState(1).randn(3, 3, 3, 4).astype("float32"))
        y = t.nn.relu(t.nn.conv2d(x, w, 1, "SAME"))
        t.identity(head(t, y), name="output")
        with v1.Session(graph=graph) as sess:
            frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["output"])
    path.write_bytes(frozen.SerializeToString())
    return path


def _flatten(t, y):
    """Keras 2's Flatten as frozen in TF1: the batch read at run time, the features from the shape."""
    shape = t.raw_ops.Shape(input=y)  # a Shape node, as Keras emits (tf.shape folds a static one)
    batch = t.strided_slice(shape, [0], [1], shrink_axis_mask=1)
    features = t.reduce_prod(t.strided_slice(shape, [1], [4]), axis=0)
    return t.reduce_sum(t.reshape(y, t.stack([batch, features])), axis=1)


def _batch_scaled(t, y):
    """Near miss: the batch size used as data (a mean over the batch by hand)."""
    batch = t.cast(t.raw_ops.Shape(input=y)[0], t.float32)
    return t.reduce_sum(y, axis=[1, 2, 3]) / batch


def _run(path, names):
    from pipeline.rewrite.apply import apply_passes, graph_io
    from pipeline.rewrite.tfgraph import TFGraph

    graph = TFGraph.load(path)
    receipt = apply_passes(graph, graph_io(graph, path), names, {}, SAMPLES, 1e-6, None)
    return graph, receipt


def _shapes(graph):
    return [n.name for n in graph.graph_def.node if n.op == "Shape"]


@pytest.mark.parametrize("batch", [4, None])
def test_fold_shape_removes_flattens_shape_and_keeps_the_outputs(tmp_path, batch):
    graph, receipt = _run(_graph(tmp_path / "f.pb", batch, _flatten), ["fold_shape"])
    assert receipt[0]["sites"] and receipt[0]["ops"]["Shape"] == -1
    assert receipt[0]["comparison"]["max_abs_diff"] == 0.0
    assert _shapes(graph) == []


def test_fold_shape_near_miss_a_dynamic_batch_used_as_data_is_left_alone(tmp_path):
    graph, receipt = _run(_graph(tmp_path / "n.pb", None, _batch_scaled), ["fold_shape"])
    assert receipt[0]["sites"] == [] and _shapes(graph)


def test_uff_route_blocks_shape_names_the_pass_and_the_pass_clears_it(tmp_path):
    from pipeline.check import check_model
    from pipeline.targets import load_target

    path = _graph(tmp_path / "k.pb", None, _flatten)
    report = check_model(path, load_target("jetson_tx2"), convert=False)
    shape = [f for f in report.route("uff").findings if f.severity == "blocker" and f.op == "Shape"]
    assert shape and shape[0].rewrite == "fold_shape" and "NvUffParser rejects" in shape[0].cause
    graph, _ = _run(path, ["fold_shape"])
    graph.save(tmp_path / "folded.pb")
    after = check_model(tmp_path / "folded.pb", load_target("jetson_tx2"), convert=False)
    assert not [f for f in after.route("uff").findings if f.op == "Shape"]


def test_fold_shape_on_keras_3_flatten(tmp_path):
    """Keras 3's own Flatten (dynamic batch), frozen with convert_variables_to_constants_v2."""
    import keras
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    t = _tf()
    inputs = keras.Input((8, 8, 3), name="input")
    flat = keras.layers.Flatten()(keras.layers.Conv2D(2, 3, name="conv")(inputs))
    model = keras.Model(inputs, keras.layers.Dense(2)(flat))
    func = t.function(lambda x: t.identity(model(x, training=False), name="output")).get_concrete_function(
        t.TensorSpec([None, 8, 8, 3], t.float32, name="input"))
    path = tmp_path / "keras.pb"
    path.write_bytes(convert_variables_to_constants_v2(func).graph.as_graph_def().SerializeToString())
    graph, receipt = _run(path, ["fold_shape"])
    assert receipt[0]["ops"]["Shape"] == -1 and _shapes(graph) == []
    assert receipt[0]["comparison"]["max_abs_diff"] == 0.0
