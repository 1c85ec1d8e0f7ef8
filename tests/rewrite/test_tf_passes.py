"""Each TensorFlow rewrite pass on a tiny graph holding its pattern, and on a near miss it must leave alone.

Outputs are compared before and after (or with the inference-mode reference) by the pass runner
itself, which raises when they differ; the tests also check the sites, the ops and the bytes.
"""

import numpy as np
import pytest

pytestmark = pytest.mark.tf

RNG = np.random.RandomState(0)
SAMPLES = RNG.uniform(0, 1, (4, 8, 8, 3)).astype("float32")


def tf():
    from pipeline.tf import import_tf

    return import_tf()


def freeze(build, path):
    """Build a tf.compat.v1 graph with ``build(tf, x)`` -> output tensor, freeze it to ``path``."""
    t = tf()
    v1 = t.compat.v1
    graph = t.Graph()
    with graph.as_default():
        x = v1.placeholder(t.float32, [None, 8, 8, 3], name="input")
        t.identity(build(t, x), name="output")
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["output"])
    path.write_bytes(frozen.SerializeToString())
    return path


def run_passes(path, names, options=None, reference=None):
    from pipeline.rewrite.apply import apply_passes, graph_io
    from pipeline.rewrite.tfgraph import TFGraph

    graph = TFGraph.load(path)
    io = graph_io(graph, path)
    ref = TFGraph.load(reference) if reference is not None else None
    receipt = apply_passes(graph, io, names, options or {}, SAMPLES, 1e-5, ref)
    return graph, receipt


def conv(t, x, name="conv"):
    """The same weights for the same name, in every graph built here."""
    w = t.constant(np.random.RandomState(sum(map(ord, name))).randn(3, 3, 3, 4).astype("float32"), name=name + "/kernel")
    return t.nn.conv2d(x, w, 1, "SAME", name=name + "/Conv2D")


# ------------------------------------------------------------------------------ strip_dropout


@pytest.mark.parametrize("form", ["keep_prob_placeholder", "constant_rate"])
def test_strip_dropout_matches_the_graph_without_dropout(tmp_path, form):
    def with_dropout(t, x):
        y = t.nn.relu(conv(t, x))
        if form == "keep_prob_placeholder":
            keep = t.compat.v1.placeholder_with_default(0.7, [], name="keep_prob")
            return t.compat.v1.nn.dropout(y, keep_prob=keep, name="dropout")
        return t.compat.v1.nn.dropout(y, rate=0.3, name="dropout")

    trained = freeze(with_dropout, tmp_path / "train.pb")
    reference = freeze(lambda t, x: t.nn.relu(conv(t, x)), tmp_path / "ref.pb")
    graph, receipt = run_passes(trained, ["strip_dropout"], reference=reference)
    assert receipt[0]["sites"] == ["dropout/SelectV2"] or receipt[0]["sites"][0].startswith("dropout/")
    assert receipt[0]["ops"]["RandomUniform"] == -1
    assert receipt[0]["comparison"]["against"] == "the inference-mode reference"
    assert receipt[0]["comparison"]["max_abs_diff"] == 0.0
    assert "RandomUniform" not in graph.op_counts() and "keep_prob" not in graph.nodes


def test_strip_dropout_near_miss_noise_injection_is_left_alone(tmp_path):
    # random noise added to the activation is not dropout (no Floor / GreaterEqual mask)
    path = freeze(lambda t, x: conv(t, x) + t.random.uniform(t.shape(conv(t, x, "c2"))), tmp_path / "noise.pb")
    before = path.read_bytes()
    from pipeline.rewrite.passes.training_mode import strip_dropout
    from pipeline.rewrite.tfgraph import TFGraph

    graph = TFGraph.load(path)
    assert strip_dropout(graph, {}) == []
    assert graph.serialize() == TFGraph.load(path).serialize() and path.read_bytes() == before


# ------------------------------------------------------------------------------ bn_inference


def _bn(t, x, training, with_stats_in_graph=True):
    gamma = t.constant(np.linspace(0.5, 1.5, 4, dtype="float32"), name="bn/gamma")
    beta = t.constant(np.linspace(-0.2, 0.2, 4, dtype="float32"), name="bn/beta")
    mean = t.constant(np.array([0.1, -0.2, 0.3, 0.0], "float32"), name="bn/moving_mean")
    var = t.constant(np.array([1.5, 0.7, 1.1, 2.0], "float32"), name="bn/moving_variance")
    y = conv(t, x)
    if training:
        out, _, _ = t.compat.v1.nn.fused_batch_norm(y, gamma, beta, is_training=True, name="bn/FusedBatchNormV3")
        if with_stats_in_graph:  # keep the moving statistics in the frozen graph (as an unused sum)
            out = out + 0.0 * (t.reduce_sum(mean) + t.reduce_sum(var))
        return out
    out, _, _ = t.compat.v1.nn.fused_batch_norm(y, gamma, beta, mean=mean, variance=var, is_training=False,
                                                name="bn/FusedBatchNormV3")
    return out + 0.0 * (t.reduce_sum(mean) + t.reduce_sum(var))


def test_bn_inference_uses_the_moving_statistics(tmp_path):
    trained = freeze(lambda t, x: _bn(t, x, training=True), tmp_path / "train.pb")
    reference = freeze(lambda t, x: _bn(t, x, training=False), tmp_path / "ref.pb")
    graph, receipt = run_passes(trained, ["bn_inference"], reference=reference)
    assert receipt[0]["sites"] == ["bn/FusedBatchNormV3"]
    assert receipt[0]["comparison"]["max_abs_diff"] < 1e-5
    assert graph.attr(graph.node("bn/FusedBatchNormV3"), "is_training") is False


def test_bn_inference_near_miss_and_missing_statistics(tmp_path):
    inference = freeze(lambda t, x: _bn(t, x, training=False), tmp_path / "inf.pb")
    _, receipt = run_passes(inference, ["bn_inference"])
    assert receipt[0]["sites"] == [] and "comparison" not in receipt[0]
    bare = freeze(lambda t, x: _bn(t, x, training=True, with_stats_in_graph=False), tmp_path / "bare.pb")
    from pipeline.errors import DeployError

    with pytest.raises(DeployError, match=r"bn_inference: no moving mean/variance for bn/FusedBatchNormV3 \(looked for "
                                          r"bn/moving_mean and bn/moving_variance in the graph\); pass the training checkpoint"):
        run_passes(bare, ["bn_inference"])


# ------------------------------------------------------------------------------ clean-ups


def test_remove_identity_keeps_outputs_and_numbers(tmp_path):
    def chain(t, x):
        y = t.identity(conv(t, x), name="id1")
        y = t.debugging.check_numerics(y, "nan?", name="check")
        return t.stop_gradient(t.nn.relu(y), name="stop")

    graph, receipt = run_passes(freeze(chain, tmp_path / "ids.pb"), ["remove_identity"])
    assert sorted(receipt[0]["sites"]) == ["check", "id1", "stop"]
    assert receipt[0]["comparison"]["max_abs_diff"] == 0.0
    assert "output" in graph.nodes  # the graph's output Identity stays: the output name is kept
    # near miss: nothing to remove but the output itself
    _, receipt = run_passes(freeze(lambda t, x: t.nn.relu(conv(t, x)), tmp_path / "plain.pb"), ["remove_identity"])
    assert receipt[0]["sites"] == []


def test_remove_identity_removes_the_print_ops_the_checks_debug_family_names(tmp_path):
    """The check's debug family lists Print and PrintV2 with the fix remove_identity: the pass removes both
    (tf.compat.v1.Print passes its first input through; tf.print's PrintV2 is held by a control edge)."""

    def printed(t, x):
        y = t.compat.v1.Print(conv(t, x), [t.reduce_mean(x)], message="mean: ", name="print1")
        with t.control_dependencies([t.print("y:", t.reduce_max(y), name="print2")]):
            y = t.identity(y, name="after_print")
        return t.nn.relu(y)

    graph, receipt = run_passes(freeze(printed, tmp_path / "printed.pb"), ["remove_identity"])
    assert {"print1", "print2"} <= set(receipt[0]["sites"])
    assert receipt[0]["comparison"]["max_abs_diff"] == 0.0
    assert not any(n.op in ("Print", "PrintV2") for n in graph.nodes.values())


def test_prune_drops_dead_nodes_only(tmp_path):
    from pipeline.graph import proto
    from pipeline.rewrite.tfgraph import TFGraph

    path = freeze(lambda t, x: t.nn.relu(conv(t, x)), tmp_path / "g.pb")
    graph = TFGraph.load(path)
    dead = graph.graph_def.node.add(name="dead", op="Relu", input=["conv/Conv2D"])
    dead.attr["T"].type = proto.DataType["DT_FLOAT"]
    graph.save(tmp_path / "dead.pb")
    (tmp_path / "dead.io.json").write_text('{"inputs": [{"name": "input"}], "outputs": [{"name": "output"}]}')
    pruned, receipt = run_passes(tmp_path / "dead.pb", ["prune"])
    assert "dead" not in pruned.nodes and receipt[0]["ops"] == {"Relu": -1}
    _, receipt = run_passes(path, ["prune"])
    assert receipt[0]["sites"] == [] and receipt[0]["ops"] == {}


def test_uff_compat_renames_and_leaves_training_bn_alone(tmp_path):
    graph, receipt = run_passes(freeze(lambda t, x: _bn(t, x, training=False) + 1.0, tmp_path / "v3.pb"), ["uff_compat"])
    assert receipt[0]["ops"]["FusedBatchNorm"] == 1 and receipt[0]["ops"]["FusedBatchNormV3"] == -1
    assert receipt[0]["ops"]["AddV2"] < 0 and receipt[0]["comparison"]["max_abs_diff"] == 0.0
    _, receipt = run_passes(freeze(lambda t, x: _bn(t, x, training=True), tmp_path / "tr.pb"), ["uff_compat"])
    assert "bn/FusedBatchNormV3" not in receipt[0]["sites"]


def test_set_input_shape_and_cut(tmp_path):
    graph, receipt = run_passes(freeze(lambda t, x: t.nn.relu(conv(t, x)), tmp_path / "s.pb"), ["set_input_shape"],
                                {"set_input_shape": {"shape": [None, 8, 8, 3]}})
    assert receipt[0]["sites"] == ["input"] and graph.attr(graph.node("input"), "shape") == [None, 8, 8, 3]
    from pipeline.rewrite.passes.shapes import cut
    from pipeline.rewrite.tfgraph import TFGraph

    graph = TFGraph.load(tmp_path / "s.pb")
    assert cut(graph, {"inputs": {"conv/Conv2D": [None, 8, 8, 4]}}) == ["conv/Conv2D"]
    graph.prune(["output"])
    assert graph.node("conv/Conv2D").op == "Placeholder" and "input" not in graph.nodes


def test_same_input_gives_byte_identical_output(tmp_path):
    trained = freeze(lambda t, x: t.compat.v1.nn.dropout(_bn(t, x, training=True), rate=0.5), tmp_path / "t.pb")
    first, _ = run_passes(trained, ["strip_dropout", "bn_inference", "uff_compat"])
    second, _ = run_passes(trained, ["strip_dropout", "bn_inference", "uff_compat"])
    assert first.serialize() == second.serialize()


def test_unknown_pass_and_missing_option(tmp_path):
    from pipeline.errors import DeployError

    path = freeze(lambda t, x: t.nn.relu(conv(t, x)), tmp_path / "u.pb")
    with pytest.raises(DeployError, match=r"unknown rewrite pass 'strip_dropuot'; did you mean 'strip_dropout'\?"):
        run_passes(path, ["strip_dropuot"])
    with pytest.raises(DeployError, match=r"rewrite pass cut needs option inputs"):
        run_passes(path, ["cut"])


# ------------------------------------------------------------------------------ folding


def test_fold_constants_evaluates_constant_subgraphs_only(tmp_path):
    def graph(t, x):
        scale = t.math.rsqrt(t.constant([4.0, 1.0, 0.25, 1.0]) + 0.0, name="bn/Rsqrt")  # constants only
        return conv(t, x) * scale

    folded, receipt = run_passes(freeze(graph, tmp_path / "c.pb"), ["fold_constants"])
    assert "bn/Rsqrt" in receipt[0]["sites"] and receipt[0]["ops"]["Rsqrt"] == -1
    assert receipt[0]["comparison"]["max_abs_diff"] == 0.0
    # near miss: an op on the input is never folded
    _, receipt = run_passes(freeze(lambda t, x: t.math.rsqrt(t.abs(x) + 1.0), tmp_path / "n.pb"), ["fold_constants"])
    assert receipt[0]["sites"] == []


@pytest.mark.parametrize("kind", ["Conv2D", "DepthwiseConv2dNative"])
def test_fold_batchnorm_into_the_convolution(tmp_path, kind):
    def graph(t, x):
        if kind == "Conv2D":
            y = conv(t, x)
            channels = 4
        else:
            w = t.constant(np.random.RandomState(3).randn(3, 3, 3, 2).astype("float32"), name="dw/kernel")
            y = t.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME", name="dw/depthwise")
            channels = 6
        mul = t.constant(np.linspace(0.5, 2.0, channels, dtype="float32"), name="bn/mul")
        add = t.constant(np.linspace(-1, 1, channels, dtype="float32"), name="bn/sub")
        return t.nn.relu(y * mul + add)

    folded, receipt = run_passes(freeze(graph, tmp_path / "bn.pb"), ["fold_batchnorm"])
    assert len(receipt[0]["sites"]) == 1 and receipt[0]["ops"]["BiasAdd"] == 1 and receipt[0]["ops"]["Mul"] == -1
    assert receipt[0]["comparison"]["max_abs_diff"] < 1e-5


def test_fold_batchnorm_near_miss_conv_output_used_twice(tmp_path):
    def graph(t, x):
        y = conv(t, x)
        mul = t.constant(np.linspace(0.5, 2.0, 4, dtype="float32"))
        return (y * mul + 1.0) + y  # the un-normalised conv output is needed too: folding would break it

    _, receipt = run_passes(freeze(graph, tmp_path / "twice.pb"), ["fold_batchnorm"])
    assert receipt[0]["sites"] == []


def test_fold_pad_into_a_valid_convolution(tmp_path):
    def graph(t, x):
        padded = t.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], name="pad")
        w = t.constant(np.random.RandomState(5).randn(3, 3, 3, 4).astype("float32"), name="k")
        return t.nn.conv2d(padded, w, 2, "VALID", name="strided")

    folded, receipt = run_passes(freeze(graph, tmp_path / "pad.pb"), ["fold_pad"])
    assert receipt[0]["sites"] == ["pad"] and receipt[0]["ops"]["Pad"] == -1
    assert receipt[0]["comparison"]["max_abs_diff"] < 1e-5
    assert folded.attr(folded.node("strided"), "padding") == "EXPLICIT"


def test_fold_pad_near_miss_same_padding_conv(tmp_path):
    def graph(t, x):  # a SAME convolution after a Pad: the paddings would add up, leave it
        padded = t.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
        return t.nn.conv2d(padded, t.constant(np.ones((3, 3, 3, 4), "float32")), 1, "SAME")

    _, receipt = run_passes(freeze(graph, tmp_path / "same.pb"), ["fold_pad"])
    assert receipt[0]["sites"] == []


@pytest.mark.parametrize("activation", ["LeakyRelu", "Elu", "Relu6"])
def test_substitute_activations_keeps_the_numbers(tmp_path, activation):
    fn = {"LeakyRelu": lambda t, y: t.nn.leaky_relu(y, alpha=0.1), "Elu": lambda t, y: t.nn.elu(y),
          "Relu6": lambda t, y: t.nn.relu6(y)}[activation]
    path = freeze(lambda t, x: fn(t, conv(t, x) - 1.0), tmp_path / "act.pb")
    graph, receipt = run_passes(path, ["substitute_activations"])
    assert len(receipt[0]["sites"]) == 1 and receipt[0]["ops"][activation] == -1
    assert receipt[0]["comparison"]["max_abs_diff"] < 1e-5
    # near miss: an activation not asked for stays
    _, receipt = run_passes(path, ["substitute_activations"], {"substitute_activations": {"ops": ["Selu"]}})
    assert receipt[0]["sites"] == []


def test_drop_noop_cast_and_its_near_miss(tmp_path):
    path = freeze(lambda t, x: t.nn.relu(t.raw_ops.Cast(x=conv(t, x), DstT=t.float32, name="same")), tmp_path / "cast.pb")
    _, receipt = run_passes(path, ["drop_noop_cast"])
    assert receipt[0]["sites"] == ["same"] and receipt[0]["ops"] == {"Cast": -1}
    real = freeze(lambda t, x: t.cast(t.cast(conv(t, x), t.int32), t.float32), tmp_path / "real.pb")
    _, receipt = run_passes(real, ["drop_noop_cast"])
    assert receipt[0]["sites"] == []


def test_fold_batchnorm_over_the_convolution_s_own_bias(tmp_path):
    """Keras' Conv2D (use_bias=True) then BatchNormalization, frozen: Conv2D -> BiasAdd -> Mul -> Add. The BiasAdd
    between them hid the batch norm from the pass (0 sites, said nowhere); (conv + b) * s + t folds to one BiasAdd."""
    def graph(t, x):
        y = t.nn.bias_add(conv(t, x), t.constant(np.linspace(-0.3, 0.4, 4, dtype="float32"), name="conv/bias"))
        mul = t.constant(np.linspace(0.5, 2.0, 4, dtype="float32"), name="bn/mul")
        add = t.constant(np.linspace(-1, 1, 4, dtype="float32"), name="bn/sub")
        return t.nn.relu(y * mul + add)

    folded, receipt = run_passes(freeze(graph, tmp_path / "biased.pb"), ["fold_batchnorm"])
    assert len(receipt[0]["sites"]) == 1 and receipt[0]["ops"]["Mul"] == -1
    assert receipt[0]["comparison"]["max_abs_diff"] < 1e-5
    ops = [n.op for n in folded.graph_def.node if n.op in ("BiasAdd", "Mul", "AddV2", "Add")]
    assert ops == ["BiasAdd"], ops


def test_fold_batchnorm_folds_a_real_sized_kernel(tmp_path):
    """A 3x3x32x64 kernel (18,432 values): TFGraph.const_value read it through the graph view's small-tensor value
    (None above 10,000 elements), so fold_batchnorm skipped every real convolution without a word."""
    def graph(t, x):
        rng = np.random.RandomState(5)
        y = t.nn.conv2d(x, t.constant(rng.randn(3, 3, 3, 32).astype("float32"), name="c1/kernel"), 1, "SAME")
        y = t.nn.conv2d(y, t.constant(rng.randn(3, 3, 32, 64).astype("float32") * 0.1, name="c2/kernel"), 1, "SAME")
        return t.nn.relu(y * t.constant(np.linspace(0.5, 2.0, 64, dtype="float32")) +
                         t.constant(np.linspace(-1, 1, 64, dtype="float32")))

    _, receipt = run_passes(freeze(graph, tmp_path / "big.pb"), ["fold_batchnorm"])
    assert len(receipt[0]["sites"]) == 1 and receipt[0]["comparison"]["max_abs_diff"] < 1e-3
