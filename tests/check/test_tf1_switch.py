"""TF1's training switches left at their defaults: ``keep_prob = placeholder_with_default(1.0, [])``
and ``is_training = placeholder_with_default(False, [])`` choosing batch norm through tf.cond, frozen
with convert_variables_to_constants (the field's pattern). Unfed, the graph runs in inference mode,
in TensorFlow and as tf2onnx converts it (the placeholders become ONNX inputs whose initializers
hold the defaults): the check must not call the dropout random, but name the switch."""

import fixtures
import numpy as np
import pytest

from pipeline.check import check_model
from pipeline.check.dropout import dropout_matches, idle_branch
from pipeline.graph.readers import read_model
from pipeline.targets import load_target

DROPOUT = ["dropout/GreaterEqual", "dropout/SelectV2", "dropout/random_uniform/RandomUniform"]


def switch_graph(path, keep_default=1.0, training_default=False, keep_op="with_default"):
    """The field's TF1 switch graph with dropout (fixtures.tf1_switch_graph)."""
    return fixtures.tf1_switch_graph(path, keep_prob=keep_op, keep_default=keep_default,
                                     training_default=training_default)


@pytest.mark.tf
def test_keep_prob_default_one_is_inference_mode_in_tensorflow_and_as_converted(tmp_path):
    import onnxruntime as ort
    import tf2onnx

    from pipeline.tf import import_tf

    tf = import_tf()
    path = switch_graph(tmp_path / "switch.pb")
    (match,) = dropout_matches(read_model(path))
    assert sorted(match.nodes) == DROPOUT and match.fed_by == ["keep_prob"]
    assert not match.stochastic  # was: "dropout left in training mode ... fed by placeholder keep_prob: the output is random"
    assert "keep_prob (PlaceholderWithDefault, default 1.0): unfed, it keeps every unit" in match.cause
    assert match.rewrite == "strip_dropout"

    # what the claim rests on: tf2onnx (deploy names only Placeholders as inputs) and ONNX Runtime
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(path.read_bytes())
    model, _ = tf2onnx.convert.from_graph_def(graph_def, input_names=["input:0"], output_names=["probabilities:0"],
                                              opset=13)
    assert {"keep_prob:0", "is_training:0"} <= {i.name for i in model.graph.initializer}  # inputs with a default
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.RandomState(1).rand(4, 6, 6, 3).astype("float32")
    first, second = (session.run(None, {"input:0": x})[0] for _ in range(2))
    alone = np.concatenate([session.run(None, {"input:0": x[i:i + 1]})[0] for i in range(4)])
    assert np.array_equal(first, second)  # deterministic
    assert np.abs(first - alone).max() < 1e-5  # batch-independent: the inference branch of the cond ran
    with tf.compat.v1.Session(graph=tf.Graph()) as sess:  # and it is TensorFlow's answer at the defaults
        tf.compat.v1.import_graph_def(graph_def, name="")
        expected = sess.run("probabilities:0", {"input:0": x})
    assert np.abs(first - expected).max() < 1e-5
    # the warning's other half: fed a keep probability below 1, the converted model is random
    fed = [session.run(None, {"input:0": x, "keep_prob:0": np.array(0.5, "float32")})[0] for _ in range(3)]
    assert any(not np.array_equal(fed[0], other) for other in fed[1:])


@pytest.mark.tf
def test_check_names_the_switch_instead_of_calling_it_random(tmp_path):
    report = check_model(switch_graph(tmp_path / "switch.pb"), load_target("jetson_tx2"), convert=False)
    onnx = next(r for r in report.routes if r.route == "onnx")
    assert not [f for f in onnx.accepted_but_wrong if set(f.nodes) & set(DROPOUT)]
    assert not [f for f in report.findings if f.kind == "stochastic"]
    (switch,) = [f for f in report.findings if f.kind == "training_switch" and "keep_prob" in f.nodes]
    assert switch.severity == "warning" and switch.nodes[0] == "keep_prob"
    assert "fed a keep probability below 1, the output is random" in switch.cause
    assert switch.fix.startswith("leave keep_prob unfed at inference")


@pytest.mark.tf
@pytest.mark.parametrize("keep", [0.5, "fed"])
def test_near_miss_a_keep_probability_below_one_or_fed_stays_random(tmp_path, keep):
    path = switch_graph(tmp_path / "switch.pb", keep_default=0.5 if keep == 0.5 else 1.0,
                        keep_op="with_default" if keep == 0.5 else "fed")
    (match,) = dropout_matches(read_model(path))
    assert match.stochastic and match.fed_by == ["keep_prob"]
    assert match.cause.endswith("fed by placeholder keep_prob: the output is random")


def floor_dropout_graph(path, keep_default):
    """TF 1.x's own tf.nn.dropout: mask = floor(keep_prob + random_uniform), output x / keep_prob * mask."""
    from pipeline.tf import import_tf

    tf = import_tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 4], name="input")
        keep = v1.placeholder_with_default(keep_default, [], name="keep_prob")
        uniform = v1.random_uniform(tf.shape(x), minval=0.0, maxval=1.0, name="dropout/random_uniform")
        mask = tf.floor(tf.add(keep, uniform), name="dropout/Floor")
        tf.multiply(tf.math.divide(x, keep, name="dropout/div"), mask, name="output")
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


@pytest.mark.tf
def test_floor_form_keep_prob_one_is_deterministic_and_below_one_is_not(tmp_path):
    (kept,) = dropout_matches(read_model(floor_dropout_graph(tmp_path / "one.pb", 1.0)))
    assert not kept.stochastic and "default 1.0" in kept.cause
    (random,) = dropout_matches(read_model(floor_dropout_graph(tmp_path / "half.pb", 0.9)))
    assert random.stochastic


@pytest.mark.tf
def test_idle_branch_names_the_switch_only_for_the_branch_its_default_leaves_idle(tmp_path):
    graph = read_model(switch_graph(tmp_path / "off.pb"))
    assert idle_branch(graph, graph.nodes["bn/cond/FusedBatchNormV3"]) == "is_training"  # training branch
    assert idle_branch(graph, graph.nodes["bn/cond/FusedBatchNormV3_1"]) is None  # inference branch runs
    graph = read_model(switch_graph(tmp_path / "on.pb", training_default=True))
    assert idle_branch(graph, graph.nodes["bn/cond/FusedBatchNormV3"]) is None
    assert idle_branch(graph, graph.nodes["bn/cond/FusedBatchNormV3_1"]) == "is_training"


@pytest.mark.tf
@pytest.mark.parametrize("default", [float("nan"), float("inf"), float("-inf")])
def test_a_keep_prob_default_that_is_not_a_finite_number_is_random_never_a_traceback(tmp_path, default):
    """The file is untrusted: math.floor(nan) raised ValueError (inf: OverflowError) out of deploy check."""
    (match,) = dropout_matches(read_model(floor_dropout_graph(tmp_path / "odd.pb", default)))
    assert match.stochastic
    check_model(tmp_path / "odd.pb", load_target("jetson_tx2"), convert=False)  # an answer, not an exception
