"""The engine model's layers: what TensorRT fuses, counted as it runs them, and what it must not fuse."""

import pytest

from pipeline.errors import DeployError
from pipeline.estimate.layers import engine_layers
from tests.estimate.graphs import const, conv, conv_bias_relu, op, tf_graph


def test_conv_bias_relu_is_one_layer_with_its_flops():
    graph = tf_graph(conv_bias_relu("c1", "x", 3, 16), ["c1/Relu"])
    layers = engine_layers(graph, precision="fp32")
    assert [(l.name, l.kind, l.ops) for l in layers] == [("c1", "conv", ["Conv2D", "BiasAdd", "Relu"])]
    conv_flops = 2 * 8 * 8 * 16 * 3 * 3 * 3
    assert layers[0].flops == conv_flops + 2 * 8 * 8 * 16  # the bias and the activation: one op each per output
    assert layers[0].weights == 3 * 3 * 3 * 16 + 16
    assert (layers[0].reads, layers[0].writes) == (8 * 8 * 3, 8 * 8 * 16)


def test_near_miss_a_conv_read_twice_keeps_its_bias_apart():
    # the conv's raw output is also a graph output: TensorRT cannot fold the bias into it
    nodes = conv_bias_relu("c1", "x", 3, 16)
    graph = tf_graph(nodes, ["c1/Relu", "c1"])
    layers = engine_layers(graph, precision="fp32")
    assert [(l.kind, l.ops) for l in layers] == [("conv", ["Conv2D"]), ("pointwise", ["BiasAdd", "Relu"])]


def test_residual_add_and_relu_fuse_into_the_second_conv_once():
    nodes = conv_bias_relu("a", "x", 3, 8) + conv("b", "a/Relu", 8, 8) + [
        op("add", "AddV2", ["b", "a/Relu"]), op("relu", "Relu", ["add"]), op("add2", "AddV2", ["relu", "a/Relu"])]
    graph = tf_graph(nodes, ["add2"])
    layers = engine_layers(graph, precision="fp32")
    assert [l.ops for l in layers] == [["Conv2D", "BiasAdd", "Relu"], ["Conv2D", "AddV2 (residual)", "Relu"],
                                       ["AddV2"]]  # a second residual add is its own layer
    assert layers[1].reads == 8 * 8 * 8 * 2  # its input and the residual


def test_elementwise_chain_is_one_layer_and_concat_is_in_place():
    nodes = [op("s", "Sigmoid", ["x"]), op("t", "Tanh", ["s"]), op("n", "Neg", ["t"]),
             op("axis", "Const", []), op("cat", "ConcatV2", ["n", "x", "axis"]), op("r", "Relu", ["cat"])]
    from pipeline.graph.view import TensorValue

    nodes[3].attrs["value"] = TensorValue("int32", [], 4, value=None)
    graph = tf_graph(nodes, ["r"])
    layers = engine_layers(graph, precision="fp32")
    assert [l.ops for l in layers] == [["Sigmoid", "Tanh", "Neg"], ["Relu"]]


def test_fp16_adds_the_input_and_output_reformats():
    graph = tf_graph(conv_bias_relu("c1", "x", 3, 16), ["c1/Relu"])
    kinds = [(l.kind, l.name) for l in engine_layers(graph, precision="fp16")]
    assert kinds[0] == ("reformat", "x (reformat input fp16)") and kinds[-1][0] == "reformat" and len(kinds) == 3


def test_strided_conv_output_size():
    graph = tf_graph(conv("c", "x", 3, 4, k=3, stride=2), ["c"], shape=(1, 9, 9, 3))
    (layer,) = engine_layers(graph, precision="fp32")
    assert layer.writes == 5 * 5 * 4  # SAME: ceil(9 / 2)


def test_unknown_spatial_size_names_the_input_and_the_flag():
    graph = tf_graph(conv("c", "x", 3, 4), ["c"], shape=(None, None, None, 3))
    with pytest.raises(DeployError, match=r"input 'x:0' has an unknown dimension 1 .*--input-shape x="):
        engine_layers(graph)
    (layer,) = engine_layers(graph, input_shapes={"x": [1, 16, 16, 3]}, precision="fp32")
    assert layer.writes == 16 * 16 * 4


def test_input_shape_for_an_input_the_graph_lacks():
    graph = tf_graph(conv("c", "x", 3, 4), ["c"])
    with pytest.raises(DeployError, match="--input-shape nope: the graph has no such input"):
        engine_layers(graph, input_shapes={"nope": [1, 2]})


def test_pre_activation_batch_norm_is_a_scale_layer_never_folded_into_the_next_conv():
    """DenseNet and ResNet-v2 write BN -> ReLU -> Conv: a batch norm behind a ReLU cannot be folded into the
    following convolution's weights (the ReLU between is not linear), so TensorRT runs it as its own scale layer
    with the ReLU; the near miss, Conv -> BN -> ReLU, folds both into the convolution."""
    bn = [const("g", [3]), const("b", [3]), const("m", [3]), const("v", [3])]
    pre = bn + [op("bn", "FusedBatchNormV3", ["x", "g", "b", "m", "v"]), op("relu", "Relu", ["bn"])] + \
        conv("c", "relu", 3, 8)
    layers = engine_layers(tf_graph(pre, ["c"]), precision="fp32")
    assert [(l.kind, l.ops) for l in layers] == [("pointwise", ["FusedBatchNormV3", "Relu"]), ("conv", ["Conv2D"])]
    bn8 = [const("g", [8]), const("b", [8]), const("m", [8]), const("v", [8])]
    post = conv("c", "x", 3, 8) + bn8 + [op("bn", "FusedBatchNormV3", ["c", "g", "b", "m", "v"]),
                                         op("relu", "Relu", ["bn"])]
    layers = engine_layers(tf_graph(post, ["relu"]), precision="fp32")
    assert [(l.kind, l.ops) for l in layers] == [("conv", ["Conv2D", "FusedBatchNormV3", "Relu"])]
