"""The convert stage says why TensorFlow and ONNX Runtime disagree: a graph that is not a function
of its input (dropout or batch norm in training mode), a keep_prob input, or the first layer."""

import json

import numpy as np
import pytest

from conftest import deploy

pytestmark = pytest.mark.tf


def _tf():
    from pipeline.tf import import_tf

    return import_tf()


def training_graph(path, keep_prob="constant"):
    """conv -> fused_batch_norm(is_training=True) -> relu -> dropout -> dense, frozen with
    convert_variables_to_constants; keep_prob "constant" (rate 0.5) or "placeholder" (fed at run time)."""
    tf = _tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        rng = np.random.RandomState(0)
        x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="input")
        y = tf.nn.conv2d(x, tf.Variable(rng.randn(3, 3, 3, 4).astype("float32"), name="conv/kernel"), 1, "SAME",
                         name="conv/Conv2D")
        y, _, _ = v1.nn.fused_batch_norm(y, tf.ones([4]), tf.zeros([4]), is_training=True, name="bn/FusedBatchNormV3")
        y = tf.nn.relu(y, name="relu")
        keep = v1.placeholder(tf.float32, [], name="keep_prob") if keep_prob == "placeholder" else 0.5
        y = v1.nn.dropout(y, keep_prob=keep, name="dropout")
        y = tf.reshape(y, [-1, 8 * 8 * 4])
        tf.nn.softmax(tf.matmul(y, tf.Variable(rng.randn(256, 2).astype("float32"))), name="probabilities")
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["probabilities"])
    path.write_bytes(frozen.SerializeToString())
    return path


def config(tmp_path, model):
    path = tmp_path / "c.yaml"
    path.write_text(
        "run: {{name: t, dir: {runs}}}\nmodel: {{source: {model}}}\n"
        "dataset: {{path: {data}, generate: shapes, train_per_class: 2, val_per_class: 2}}\n"
        "target: jetson_tx2\nstages: {{convert: {{compare_samples: 3}}}}\n".format(
            runs=tmp_path / "runs", model=model, data=tmp_path / "data"))
    return path


def test_training_mode_graph_fails_convert_with_the_layers_named(tmp_path):
    model = training_graph(tmp_path / "train.pb")
    res = deploy("run", config(tmp_path, model))
    assert res.returncode == 3, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("deploy: error: stage convert: ONNX Runtime and TensorFlow outputs differ by ")
    assert ("the TensorFlow graph is not a function of its input: batch statistics at bn/FusedBatchNormV3 "
            "(FusedBatchNormV3); random output at dropout/random_uniform/RandomUniform (RandomUniform); batch norm in "
            "training mode") in line
    assert not (tmp_path / "runs" / "t" / "convert").exists()  # a failed stage leaves nothing
    again = deploy("run", config(tmp_path, model))
    assert again.stderr.strip().splitlines()[-1] == line  # the same diagnosis every run


def test_keep_prob_second_input_names_strip_dropout(tmp_path):
    model = training_graph(tmp_path / "keep.pb", keep_prob="placeholder")
    res = deploy("run", config(tmp_path, model))
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        "deploy: error: stage convert: input keep_prob is dropout's keep probability (a training-time input): the "
        "graph was frozen in training mode; strip the dropout (rewrite stage passes: [strip_dropout], or deploy "
        "rewrite --pass strip_dropout) or export with training=False")


def test_first_layer_mismatch_between_tensorflow_and_onnx(tmp_path):
    """An ONNX model whose second conv's weights were changed after conversion: the first layer
    that differs is that conv, not the output."""
    from onnx import numpy_helper

    from pipeline.convert import to_onnx
    from pipeline.tf.graph import load_graph_def
    from pipeline.convert.mismatch import first_layer_mismatch

    tf = _tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="input")
        y = tf.nn.relu(tf.nn.conv2d(x, tf.constant(np.full((3, 3, 3, 4), 0.1, "float32")), 1, "SAME", name="conv1"))
        y = tf.nn.relu(tf.nn.conv2d(y, tf.constant(np.full((3, 3, 4, 4), 0.2, "float32")), 1, "SAME", name="conv2"))
        tf.reduce_mean(y, [1, 2], name="output")
    (tmp_path / "g.pb").write_bytes(graph.as_graph_def().SerializeToString())
    graph_def = load_graph_def(tmp_path / "g.pb")
    io = {"inputs": [{"name": "input"}], "outputs": [{"name": "output"}]}
    model = to_onnx(graph_def, io, 13)
    images = np.random.RandomState(0).rand(2, 8, 8, 3).astype("float32")
    assert first_layer_mismatch(graph_def, io, model, images, 1e-5) is None
    weights = sorted((t for t in model.graph.initializer if tuple(t.dims) == (4, 4, 3, 3)), key=lambda t: t.name)
    assert len(weights) == 1
    weights[0].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weights[0]) * 1.5, weights[0].name))
    node, op, diff = first_layer_mismatch(graph_def, io, model, images, 1e-5)
    assert (node, op) == ("conv2", "Conv2D") and diff > 0.01
    json.dumps([node, op, diff])


def test_non_finite_outputs_fail_convert_instead_of_passing(tmp_path):
    """A model whose outputs are NaN on real inputs (log of a negative number): NaN > tolerance is False, so
    the comparison passed silently; now the stage fails saying so, and comparison.json is not written."""
    tf = _tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="input")
        tf.reduce_mean(tf.math.log(x - 1000.0), axis=[1, 2], name="probabilities")
    path = tmp_path / "nan.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    res = deploy("run", config(tmp_path, path))
    assert res.returncode == 3, res.stderr
    assert "non-finite outputs" in res.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "runs" / "t" / "convert").exists()
