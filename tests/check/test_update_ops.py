"""A TF1 training graph frozen with convert_variables_to_constants whose output waits on batch norm's
moving-average updates (tf.control_dependencies(update_ops)): the weights are constants, the update
ops (AssignVariableOp on what are now constants) came along. NO (tf2onnx cannot convert them), but
for that reason, with that fix: not "its weights are still variables ... freeze it"."""

import numpy as np
import pytest

from pipeline.check import check_model
from pipeline.targets import load_target


def training_step_graph(path, frozen=True):
    """conv -> fused_batch_norm(is_training=True) -> relu (waiting on the moving-average updates) -> dense."""
    from pipeline.tf import import_tf

    tf = import_tf()
    v1 = tf.compat.v1
    rng = np.random.RandomState(0)
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 6, 6, 3], name="input")
        w = v1.get_variable("conv/weights", initializer=rng.randn(3, 3, 3, 4).astype("float32"))
        y = tf.nn.conv2d(x, w, strides=1, padding="SAME")
        with v1.variable_scope("bn"):
            gamma = v1.get_variable("gamma", initializer=np.ones(4, "float32"))
            beta = v1.get_variable("beta", initializer=np.zeros(4, "float32"))
            mean = v1.get_variable("moving_mean", initializer=np.zeros(4, "float32"), trainable=False)
            var = v1.get_variable("moving_variance", initializer=np.ones(4, "float32"), trainable=False)
            y, batch_mean, batch_var = v1.nn.fused_batch_norm(y, gamma, beta, epsilon=1e-3, is_training=True)
            updates = [v1.assign(mean, mean * 0.9 + batch_mean * 0.1), v1.assign(var, var * 0.9 + batch_var * 0.1)]
        with v1.control_dependencies(updates):
            y = tf.nn.relu(y)
        y = tf.reduce_mean(y, axis=[1, 2])
        fw = v1.get_variable("fc/weights", initializer=rng.randn(4, 3).astype("float32"))
        tf.nn.softmax(tf.matmul(y, fw), name="probabilities")
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            graph_def = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["probabilities"]) \
                if frozen else graph.as_graph_def()
    path.write_bytes(graph_def.SerializeToString())
    return path


@pytest.mark.tf
def test_frozen_graph_with_update_ops_names_them_and_says_freeze_the_inference_graph(tmp_path):
    report = check_model(training_step_graph(tmp_path / "train.pb"), load_target("jetson_tx2"), convert=False)
    assert not report.deployable
    (finding,) = [f for f in report.findings if f.kind == "not_inference_graph"]
    assert finding.severity == "blocker" and sorted(finding.nodes) == ["bn/AssignVariableOp", "bn/AssignVariableOp_1"]
    assert finding.cause.startswith("not an inference graph: it holds training's update ops (2 nodes: AssignVariableOp "
                                    "×2: bn/AssignVariableOp, bn/AssignVariableOp_1) assigning to bn/moving_mean, "
                                    "bn/moving_variance (batch norm's moving averages), tied to Relu by control "
                                    "dependencies")
    assert "still variables" not in finding.cause and "holds no weights" not in finding.cause
    assert finding.fix.startswith("freeze the inference graph instead: build it with training=False (or leave the "
                                  "update ops out of the output's control dependencies")
    # every route reads the same cause for those nodes (was: "the graph is not frozen ... freeze it")
    for route in report.routes:
        for f in route.findings:
            if "bn/AssignVariableOp" in f.nodes and f.severity == "blocker":
                assert "update ops" in f.cause and "not frozen" not in f.cause, (route.route, f.cause)
                assert f.fix.startswith("freeze the inference graph instead")


@pytest.mark.tf
def test_near_miss_a_graph_not_frozen_still_says_its_weights_are_variables(tmp_path):
    report = check_model(training_step_graph(tmp_path / "session.pb", frozen=False), load_target("jetson_tx2"),
                         convert=False)
    variables = [f for f in report.findings if f.kind == "not_inference_graph" and "VarHandleOp" in f.op]
    assert variables and "its weights are still variables" in variables[0].cause
    assert not [f for f in report.findings if "update ops" in f.cause]
