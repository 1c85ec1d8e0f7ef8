"""The estimate on graphs built the way the field builds them: a Keras application frozen with
convert_variables_to_constants_v2, the same model as a SavedModel, and its tf2onnx ONNX file. The three
give the same engine (the same FLOPs and convolutions), and the FLOPs are the ones the Keras layers imply."""

import pytest

from pipeline.estimate import estimate_model, layers_of

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory):
    import tensorflow as tf
    import tf2onnx
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    folder = tmp_path_factory.mktemp("mobilenet")
    model = tf.keras.applications.MobileNet(weights=None, alpha=0.25, input_shape=(96, 96, 3), classes=10)
    func = tf.function(lambda x: model(x)).get_concrete_function(tf.TensorSpec([None, 96, 96, 3], tf.float32, name="x"))
    frozen = convert_variables_to_constants_v2(func)
    graph_def = frozen.graph.as_graph_def()
    (folder / "frozen.pb").write_bytes(graph_def.SerializeToString())
    tf.saved_model.save(model, str(folder / "saved"))
    inputs = [t.name for t in frozen.inputs]
    outputs = [t.name for t in frozen.outputs]
    onnx_model, _ = tf2onnx.convert.from_graph_def(graph_def, input_names=inputs, output_names=outputs, opset=13)
    (folder / "model.onnx").write_bytes(onnx_model.SerializeToString())
    return folder, model


def _keras_flops(model):
    """2 x multiply-adds of the Keras conv, depthwise and dense layers, from their kernels and output shapes."""
    import tensorflow as tf

    total = 0
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.DepthwiseConv2D):
            kh, kw = layer.kernel_size
            _, h, w, c = layer.output.shape
            total += 2 * h * w * c * kh * kw
        elif isinstance(layer, tf.keras.layers.Conv2D):
            kh, kw = layer.kernel_size
            _, h, w, c = layer.output.shape
            total += 2 * h * w * c * kh * kw * layer.input.shape[-1]
        elif isinstance(layer, tf.keras.layers.Dense):
            total += 2 * layer.input.shape[-1] * layer.units
    return total


def test_three_formats_one_engine(mobilenet):
    folder, model = mobilenet
    expected = _keras_flops(model)
    counts = {}
    for name in ("frozen.pb", "saved", "model.onnx"):
        _, layers = layers_of(folder / name)
        assert all(layer.known for layer in layers), name
        convs = [layer for layer in layers if layer.kind in ("conv", "depthwise", "matmul")]
        flops = sum(layer.flops for layer in convs)
        counts[name] = len(convs)
        # the conv FLOPs plus their fused epilogues (batch norm, activation: a few per output)
        assert expected <= flops <= expected * 1.05, (name, flops, expected)
    assert counts["frozen.pb"] == counts["saved"] == counts["model.onnx"] == 28  # 27 convs + the classifier


def test_estimate_names_the_keras_layers_and_orders_boards(mobilenet):
    folder, _ = mobilenet
    report = estimate_model(folder / "frozen.pb", ["jetson_nano", "agx_orin"])
    nano, orin = report["estimates"]
    assert orin["latency_ms"] < nano["latency_ms"]
    assert any("conv_pw_" in layer["name"] or "conv_dw_" in layer["name"] for layer in nano["top_layers"])
