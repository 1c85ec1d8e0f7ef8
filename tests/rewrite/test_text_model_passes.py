"""remove_identity and fold_constants on a frozen Keras LSTM text model (issue 26, item 4): the loop
convert_variables_to_constants_v2 lowers to Enter/Merge/Switch/NextIteration/Exit frames keeps its
Identity nodes and is never folded, the pass runner's numeric check (token ids) holds, and the
pass-through Identities and constant subgraphs beside the loop still go. Near misses on small graphs."""

import pytest

from pipeline.graph import proto
from pipeline.rewrite.tfgraph import TFGraph

LOOP_OPS = ("Enter", "Merge", "Switch", "NextIteration", "LoopCond")


@pytest.fixture(scope="module")
def text_model(tmp_path_factory):
    """Input((16,), int32) -> Embedding(100, 8) -> LSTM(8) -> Dense(2, softmax), frozen."""
    from pipeline.tf import import_tf

    tf = import_tf()
    import keras
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((16,), dtype="int32"), keras.layers.Embedding(100, 8),
                              keras.layers.LSTM(8), keras.layers.Dense(2, activation="softmax")])
    func = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([None, 16], tf.int32, name="ids"))
    path = tmp_path_factory.mktemp("text") / "text.pb"
    path.write_bytes(convert_variables_to_constants_v2(func).graph.as_graph_def().SerializeToString())
    return path


def _apply(path, names):
    """The passes through the pass runner, fed as deploy rewrite feeds a text model (it raises when the
    outputs move); the graph after, the graph before, the receipt."""
    from pipeline.rewrite.apply import apply_passes, graph_io
    from pipeline.rewrite.feed import check_feed

    graph = TFGraph.load(path)
    io = graph_io(graph, path)
    feed = check_feed(graph, io)
    assert [str(a.dtype) for a in feed.arrays.values()] == ["int32"]
    before = TFGraph.load(path)
    return graph, before, apply_passes(graph, io, names, {}, feed, 1e-5)


def _loop_ops(graph):
    counts = graph.op_counts()
    return {op: counts[op] for op in LOOP_OPS}


pytestmark = pytest.mark.tf


def test_remove_identity_keeps_the_lstm_loop_and_removes_the_identities_beside_it(text_model):
    from pipeline.rewrite.passes.control_flow import frame_nodes

    graph, before, receipt = _apply(text_model, ["remove_identity"])
    in_frame = frame_nodes(before)
    sites = receipt[0]["sites"]
    assert receipt[0]["comparison"]["max_abs_diff"] == 0.0
    assert sites and not set(sites) & in_frame
    # the near miss beside the loop: the Dense layer's ReadVariableOp Identities went
    assert any("dense" in s and "ReadVariableOp" in s for s in sites)
    kept = [n for n in in_frame if before.node(n).op == "Identity"]
    assert kept and all(n in graph.nodes for n in kept)
    assert _loop_ops(graph) == _loop_ops(before) and _loop_ops(graph)["Enter"] > 0


def test_fold_constants_folds_only_what_needs_no_feed(text_model):
    from pipeline.rewrite.passes.control_flow import feed_dependent, frame_nodes

    graph, before, receipt = _apply(text_model, ["fold_constants"])
    sites = receipt[0]["sites"]
    assert receipt[0]["comparison"]["max_abs_diff"] == 0.0
    assert sites and not set(sites) & (feed_dependent(before) | frame_nodes(before))
    assert _loop_ops(graph) == _loop_ops(before)
    # the TensorList the loop writes into is a variant: never fetched, left as it was
    assert graph.op_counts()["TensorListReserve"] == before.op_counts()["TensorListReserve"]


def test_both_passes_together_on_the_text_model(text_model):
    graph, before, receipt = _apply(text_model, ["remove_identity", "fold_constants"])
    assert [r["comparison"]["max_abs_diff"] for r in receipt] == [0.0, 0.0]
    assert len(graph.nodes) < len(before.nodes)


# ------------------------------------------------------------------------------ near misses


def _node(graph_def, name, op, inputs=(), dtype=1):
    node = graph_def.node.add(name=name, op=op, input=list(inputs))
    node.attr["T"].type = dtype
    return node


def test_remove_identity_near_miss_identity_in_a_frame_or_feeding_one():
    """x -> Identity a -> Relu out (a goes); x -> Identity feed -> Enter -> Identity body (^pivot) ->
    NextIteration: feed, body, and the NoOp the Enter waits on stay (no TensorFlow needed)."""
    from pipeline.rewrite.passes.cleanup import remove_identity

    graph_def = proto.GraphDef()
    graph_def.node.add(name="x", op="Placeholder").attr["dtype"].type = 1
    _node(graph_def, "a", "Identity", ["x"])
    _node(graph_def, "out", "Relu", ["a"])
    graph_def.node.add(name="loop_inputs", op="NoOp", input=["^x"])
    _node(graph_def, "feed", "Identity", ["x"])
    _node(graph_def, "enter", "Enter", ["feed", "^loop_inputs"])
    _node(graph_def, "merge", "Merge", ["enter", "next"])
    _node(graph_def, "switch", "Switch", ["merge", "merge"])
    graph_def.node.add(name="pivot", op="NoOp", input=["^switch"])
    _node(graph_def, "body", "Identity", ["switch:1", "^pivot"])
    _node(graph_def, "next", "NextIteration", ["body"])
    _node(graph_def, "exit", "Exit", ["switch"])
    _node(graph_def, "loop_out", "Identity", ["exit"])
    graph = TFGraph(graph_def)
    sites = remove_identity(graph, {"_outputs": ["out", "loop_out"]})
    assert sites == ["a"]
    assert graph.node("out").input[0] == "x"
    assert {"feed", "body", "pivot", "loop_inputs", "loop_out"} <= set(graph.nodes)
    assert list(graph.node("enter").input) == ["feed", "^loop_inputs"]


def test_fold_constants_near_miss_a_constant_behind_a_control_edge_on_the_input(tmp_path):
    """c2 = Identity(constant) with a control edge on relu(x) needs x fed: left alone (it was evaluated
    before, and TensorFlow asked for the Placeholder); rsqrt(constant) beside it still folds."""
    import numpy as np

    from pipeline.rewrite.apply import apply_passes, graph_io
    from pipeline.tf import import_tf

    t = import_tf()
    v1 = t.compat.v1
    graph = t.Graph()
    with graph.as_default():
        x = v1.placeholder(t.float32, [None, 4], name="input")
        r = t.nn.relu(x, name="relu")
        with t.control_dependencies([r]):
            gated = t.identity(t.constant(np.full([4], 2.0, "float32")), name="gated")
        scale = t.math.rsqrt(t.constant(np.full([4], 4.0, "float32")), name="scale")
        t.identity(r * gated * scale, name="output")
    path = tmp_path / "gated.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    tf_graph = TFGraph.load(path)
    samples = np.random.RandomState(0).uniform(-1, 1, (4, 4)).astype("float32")
    receipt = apply_passes(tf_graph, graph_io(tf_graph, path), ["fold_constants"], {}, samples, 1e-6)
    assert receipt[0]["sites"] == ["scale"]
    assert tf_graph.node("gated").op == "Identity" and tf_graph.node("scale").op == "Const"


def _v1_graph(build, path):
    """A tf.compat.v1 graph with TF1 control flow (Switch/Merge conds) built by ``build(t, x)``, written
    unfrozen (it holds no variables); control flow v2 comes back on after."""
    import numpy as np

    from pipeline.tf import import_tf

    t = import_tf()
    v1 = t.compat.v1
    v1.disable_control_flow_v2()
    try:
        graph = t.Graph()
        with graph.as_default():
            x = v1.placeholder(t.float32, [None, 4], name="input")
            t.identity(build(t, v1, np, x), name="output")
    finally:
        v1.enable_control_flow_v2()
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


def _fold(path):
    import numpy as np

    from pipeline.rewrite.apply import apply_passes, graph_io

    graph = TFGraph.load(path)
    samples = np.random.RandomState(0).uniform(-1, 1, (4, 4)).astype("float32")
    return graph, apply_passes(graph, graph_io(graph, path, ["output"]), ["fold_constants"], {}, samples, 1e-6)[0]


def test_fold_constants_folds_a_constant_cond_to_its_merge(tmp_path):
    def build(t, v1, np, x):
        four = t.constant(np.full([4], 4.0, "float32"))
        return x * v1.cond(t.constant(False), lambda: four * 3.0, lambda: t.math.rsqrt(four), name="pick")

    graph, receipt = _fold(_v1_graph(build, tmp_path / "cond.pb"))
    assert "pick/Merge" in receipt["sites"] and graph.node("pick/Merge").op == "Const"
    assert receipt["ops"]["Merge"] == -1 and receipt["comparison"]["max_abs_diff"] == 0.0


def test_fold_constants_near_miss_a_dead_branch_and_a_second_output(tmp_path):
    """rsqrt(constant) inside the branch a constant False never takes has no value to fetch; a constant
    Split's second output cannot be read from a one-output Const: both left as they are."""
    def build(t, v1, np, x):
        four = t.constant(np.full([4], 4.0, "float32"))
        dead = v1.cond(t.constant(False), lambda: t.math.rsqrt(four, name="scale") * x, lambda: x * 2.0, name="pick")
        a, b = t.split(t.constant(np.arange(8, dtype="float32")), 2, name="halves")
        return dead + x * a + x * b

    graph, receipt = _fold(_v1_graph(build, tmp_path / "near.pb"))
    assert graph.node("pick/scale").op == "Rsqrt" and graph.node("halves").op == "Split"
    assert not {"pick/scale", "halves"} & set(receipt["sites"])


def test_the_checks_remove_identity_advice_is_what_the_pass_removes(text_model):
    """The check names for remove_identity only NoOps the pass really removes (never the loop's own)."""
    from pipeline.check import check_model
    from pipeline.targets import load_target

    report = check_model(text_model, load_target("jetson_tx2"), convert=False)
    advised = {n for f in report.findings if f.rewrite == "remove_identity" for n in f.nodes}
    graph, before, receipt = _apply(text_model, ["remove_identity"])
    assert advised and advised <= set(receipt[0]["sites"]) and not advised & set(graph.nodes)
