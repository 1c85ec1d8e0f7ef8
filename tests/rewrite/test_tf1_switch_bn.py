"""bn_inference on TF1's ``tf.cond(is_training, training bn, inference bn)`` (is_training a
placeholder_with_default), frozen with convert_variables_to_constants: the moving statistics reach
the inference branch through Switch nodes (bn/cond/FusedBatchNormV3_1/Switch_3, Switch_4), not
under the training branch's scope (bn/cond/moving_mean). The pass finds them; `deploy check`'s
"after `deploy rewrite --auto`" and `deploy rewrite --auto` agree with the check of the output."""

import numpy as np
import pytest

from pipeline.targets import load_target

MEAN = np.array([0.3, -0.2, 0.1, 0.5], "float32")
VARIANCE = np.array([0.6, 1.4, 0.9, 2.0], "float32")


def switch_graph(path, training_default=False, ref_variables=False):
    """The field's TF1 switch graph without dropout, moving statistics MEAN and VARIANCE (fixtures.tf1_switch_graph)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "check"))
    import fixtures

    return fixtures.tf1_switch_graph(path, keep_prob=None, training_default=training_default,
                                     ref_variables=ref_variables, mean=MEAN, variance=VARIANCE)


def run(serialized, x, feed=None):
    from pipeline.tf import import_tf

    tf = import_tf()
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(serialized)
    with tf.compat.v1.Session(graph=tf.Graph()) as sess:
        tf.compat.v1.import_graph_def(graph_def, name="")
        return sess.run("probabilities:0", dict({"input:0": x}, **(feed or {})))


@pytest.mark.tf
def test_bn_inference_finds_the_moving_statistics_behind_the_cond_switches(tmp_path):
    from pipeline.rewrite import registry
    from pipeline.rewrite.tfgraph import TFGraph

    graph = TFGraph.load(switch_graph(tmp_path / "switch.pb"))
    original = graph.serialize()
    # was: "no moving mean/variance for bn/cond/FusedBatchNormV3 (looked for bn/cond/moving_mean ...)"
    sites = registry()["bn_inference"].func(graph, {})
    assert sites == ["bn/cond/FusedBatchNormV3"]
    node = graph.node("bn/cond/FusedBatchNormV3")
    assert graph.attr(node, "is_training") is False
    assert np.array_equal(graph.const_value(graph.producer(node.input[3])), MEAN)
    assert np.array_equal(graph.const_value(graph.producer(node.input[4])), VARIANCE)
    # the training branch now computes what the inference branch does, whatever is_training is fed
    x = np.random.RandomState(1).rand(3, 6, 6, 3).astype("float32")
    inference = run(original, x)
    assert np.abs(run(graph.serialize(), x, {"is_training:0": True}) - inference).max() < 1e-5
    assert np.abs(run(original, x, {"is_training:0": True}) - inference).max() > 1e-3  # it did not before


@pytest.mark.tf
def test_near_miss_no_moving_statistics_names_where_it_looked(tmp_path):
    from pipeline.errors import DeployError
    from pipeline.rewrite import registry
    from pipeline.rewrite.tfgraph import TFGraph

    graph = TFGraph.load(switch_graph(tmp_path / "switch.pb"))
    for name in ("bn/moving_mean", "bn/moving_variance"):  # the statistics the inference branch reads: gone
        graph.set_const(graph.node(name), np.zeros(0, "float32"))
    with pytest.raises(DeployError, match=r"no moving mean/variance for bn/cond/FusedBatchNormV3 \(looked for "
                                          r"bn/cond/moving_mean and bn/cond/moving_variance or bn/moving_mean and "
                                          r"bn/moving_variance in the graph, in its tf.cond's inference branch\)"):
        registry()["bn_inference"].func(graph, {})


@pytest.mark.tf
def test_auto_prediction_rewrite_and_check_of_the_output_agree(tmp_path):
    """is_training left True: batch norm runs in training mode, NO on every account; --auto fixes it."""
    from pipeline.check import check_model
    from pipeline.rewrite.command import rewrite_model, write_outputs
    from pipeline.rewrite.predict import predict_rewrite

    target = load_target("jetson_tx2")
    path = switch_graph(tmp_path / "on.pb", training_default=True)
    before = check_model(path, target, convert=False, predict=predict_rewrite)
    assert not before.deployable
    prediction = before.prediction  # was NO: "bn_inference: no moving mean/variance for bn/cond/FusedBatchNormV3"
    assert prediction["verdict"] == "YES" and "bn_inference" in prediction["passes"] and not prediction["remaining"]
    graph, io, summary, after = rewrite_model(path, target, auto=True, samples=2)
    assert after.deployable  # deploy rewrite --auto's "after rewrite: YES"
    assert summary["passes"][0]["pass"] == "bn_inference" and summary["passes"][0]["sites"] == ["bn/cond/FusedBatchNormV3"]
    out = tmp_path / "out.pb"
    write_outputs(graph, io, summary, str(out))
    assert check_model(out, target).deployable  # deploy check out.pb, on tf2onnx's real output


@pytest.mark.tf
def test_the_shipped_rewrite_passes_keep_a_tf1_cond_graph_importable(tmp_path):
    """deploy run's rewrite stage (fold_constants, fold_batchnorm, fold_pad in configs/base.yaml) on the TF1 switch
    graph: folding gamma's read away left the cond's Switch colocated ('_class: loc:@bn/gamma') with a node that no
    longer exists, and TensorFlow refused the graph ("expects to be colocated with unknown node")."""
    from pipeline.rewrite.command import rewrite_model
    from pipeline.rewrite.tfgraph import TFGraph

    path = switch_graph(tmp_path / "switch.pb", ref_variables=True)
    assert any(b"loc:@bn/gamma" in n.attr["_class"].list.s for n in TFGraph.load(path).graph_def.node
               if "_class" in n.attr)
    x = np.random.RandomState(1).rand(2, 6, 6, 3).astype("float32")
    graph, _, _, after = rewrite_model(path, load_target("jetson_tx2"), ["fold_constants", "fold_batchnorm", "fold_pad"])
    assert after.deployable
    names = {n.name for n in graph.graph_def.node}
    assert all(v[5:].decode() in names for n in graph.graph_def.node if "_class" in n.attr
               for v in n.attr["_class"].list.s if v.startswith(b"loc:@"))
    assert np.allclose(run(graph.serialize(), x), run(path.read_bytes(), x), atol=1e-5)


def test_moving_statistics_are_looked_for_above_a_cond_scope_only():
    """Climbing every parent scope could take another layer's statistics (a parent scope's moving_mean of the same
    size): only a tf.cond's scope (cond, cond_N) is climbed past."""
    from pipeline.rewrite.passes.training_mode import _stat_names

    assert _stat_names("net/bn/cond_1/FusedBatchNormV3_1") == [
        ("net/bn/cond_1/moving_mean", "net/bn/cond_1/moving_variance"), ("net/bn/moving_mean", "net/bn/moving_variance")]
    assert _stat_names("block2/bn/FusedBatchNormV3") == [("block2/bn/moving_mean", "block2/bn/moving_variance")]
    assert _stat_names("FusedBatchNormV3") == [("moving_mean", "moving_variance")]
