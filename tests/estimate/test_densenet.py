"""The engine model on a Keras DenseNet121 (applications, weights=None, 32x32, frozen with
convert_variables_to_constants_v2): the pre-activation BN -> ReLU of every dense layer and transition is a scale
layer of its own, never folded into the convolution after it; each 1x1 convolution takes the BN and ReLU that
follow it; the concatenations are no layer (in place); the 3x3 convolutions feeding them stand alone."""

import pytest

pytestmark = [pytest.mark.tf, pytest.mark.slow]


@pytest.fixture(scope="module")
def densenet_layers(tmp_path_factory):
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from pipeline.estimate.layers import engine_layers
    from pipeline.graph import read_model

    model = tf.keras.applications.DenseNet121(weights=None, input_shape=(32, 32, 3), classes=10)
    func = tf.function(lambda x: model(x)).get_concrete_function(tf.TensorSpec([None, 32, 32, 3], tf.float32))
    graph_def = convert_variables_to_constants_v2(func).graph.as_graph_def()
    path = tmp_path_factory.mktemp("densenet") / "frozen.pb"
    path.write_bytes(graph_def.SerializeToString())
    concats = sum(1 for n in graph_def.node if n.op == "ConcatV2")
    return engine_layers(read_model(path), None, "fp16"), concats


def test_pre_activation_batch_norms_are_scale_layers_of_their_own(densenet_layers):
    layers, concats = densenet_layers
    assert concats == 58  # 6 + 12 + 24 + 16 dense layers, each one concatenation
    convs = [l for l in layers if l.kind == "conv"]
    scales = [l for l in layers if l.kind == "pointwise"]
    assert len(convs) == 120  # the stem, 2 per dense layer, 3 transitions
    # 58 dense layers' and 3 transitions' pre-activation BN + ReLU, and the final BN + ReLU before the pooling
    assert len(scales) == 62 and all(l.ops[-1] == "Relu" and "Conv2D" not in l.ops for l in scales)
    blocks = [l.name.split("/")[1] for l in scales]  # densenet121_1/conv2_block1_0_bn_1/batchnorm/mul_1
    assert sum(b.endswith("_0_bn_1") for b in blocks) == 58 and \
        sorted(b for b in blocks if not b.endswith("_0_bn_1")) == ["bn_1", "pool2_bn_1", "pool3_bn_1", "pool4_bn_1"]
    # a conv never takes in ops from before it: its first op is the convolution, and only the stem and the 1x1
    # bottleneck convolutions (BN and ReLU after them) carry more
    assert all(l.ops[0] == "Conv2D" for l in convs)
    bottlenecks = [l for l in convs if "_1_conv" in l.name]
    assert len(bottlenecks) == 58 and all(l.ops == ["Conv2D", "Mul", "AddV2", "Relu"] for l in bottlenecks)
    growth = [l for l in convs if "_2_conv" in l.name]
    assert len(growth) == 58 and all(l.ops == ["Conv2D"] for l in growth)  # their output goes into a concatenation
    assert not any("Concat" in op for l in layers for op in l.ops)
