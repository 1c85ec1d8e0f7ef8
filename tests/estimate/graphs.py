"""Tiny graphs in deploy's own IR (no TensorFlow), for the engine model's tests."""

from pipeline.graph.view import Graph, Node, TensorValue


def const(name, shape, dtype="float32"):
    n = 1
    for d in shape:
        n *= d
    return Node(name, "Const", [], [], {"value": TensorValue(dtype, list(shape), n * 4)})


def op(name, kind, inputs, **attrs):
    return Node(name, kind, list(inputs), [], attrs)


def tf_graph(nodes, outputs, shape=(None, 8, 8, 3)):
    nodes = [op("x", "Placeholder", [])] + list(nodes)
    return Graph(kind="tensorflow", nodes={n.name: n for n in nodes}, inputs=["x:0"],
                 outputs=[o + ":0" for o in outputs], input_shapes={"x:0": list(shape)})


def conv(name, source, cin, cout, k=3, stride=1):
    return [const(name + "/kernel", [k, k, cin, cout]),
            op(name, "Conv2D", [source, name + "/kernel"], strides=[1, stride, stride, 1], padding="SAME")]


def conv_bias_relu(name, source, cin, cout):
    return conv(name, source, cin, cout) + [const(name + "/bias", [cout]),
                                            op(name + "/BiasAdd", "BiasAdd", [name, name + "/bias"]),
                                            op(name + "/Relu", "Relu", [name + "/BiasAdd"])]
