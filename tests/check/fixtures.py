"""Models for the check tests, built in code: TF1-style graphs through tf.compat.v1, a Keras
model, and ONNX models through onnx.helper. Each builder writes a file and returns its path."""

import numpy as np


def _tf():
    from pipeline.tf import import_tf

    return import_tf()


def _freeze(tf, graph, sess, outputs, path):
    frozen = tf.compat.v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), outputs)
    with open(str(path), "wb") as f:
        f.write(frozen.SerializeToString())
    return path


def training_graph(path, keep_prob_placeholder=True):
    """conv -> fused_batch_norm(is_training=True) -> relu -> dropout -> dense, frozen with its training ops."""
    tf = _tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        rng = np.random.RandomState(0)
        x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="input")
        w = tf.Variable(rng.randn(3, 3, 3, 4).astype("float32"), name="conv/kernel")
        y = tf.nn.conv2d(x, w, strides=1, padding="SAME", name="conv/Conv2D")
        scale = tf.Variable(np.ones(4, "float32"), name="bn/gamma")
        offset = tf.Variable(np.zeros(4, "float32"), name="bn/beta")
        y, _, _ = v1.nn.fused_batch_norm(y, scale, offset, is_training=True, name="bn/FusedBatchNormV3")
        y = tf.nn.relu(y, name="relu")
        if keep_prob_placeholder:
            keep = v1.placeholder_with_default(0.5, [], name="keep_prob")
            y = v1.nn.dropout(y, keep_prob=keep, name="dropout")
        else:
            y = v1.nn.dropout(y, rate=0.5, name="dropout")
        y = tf.reshape(y, [-1, 8 * 8 * 4], name="flatten")
        wd = tf.Variable(rng.randn(256, 2).astype("float32"), name="dense/kernel")
        y = tf.nn.softmax(tf.matmul(y, wd, name="dense/MatMul"), name="probabilities")
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            return _freeze(tf, graph, sess, ["probabilities"], path)


def queue_graph(path):
    """A queue-fed input pipeline (FIFOQueue -> dequeue -> DecodeJpeg -> cast) in front of a conv."""
    tf = _tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        queue = v1.FIFOQueue(4, [tf.string], shapes=[[]], name="input_queue")
        jpeg = queue.dequeue(name="dequeue")
        image = tf.io.decode_jpeg(jpeg, channels=3, name="decode")
        image = tf.cast(tf.expand_dims(image, 0), tf.float32, name="to_float")
        image = tf.reshape(image, [1, 8, 8, 3], name="fixed")
        w = tf.constant(np.ones((3, 3, 3, 2), "float32"), name="kernel")
        out = tf.nn.relu(tf.nn.conv2d(image, w, 1, "SAME", name="conv"), name="output")
        assert out is not None
    return _write(graph, path)


def nms_graph(path):
    """Boxes and scores -> NonMaxSuppressionV3 -> gather (detection post-processing)."""
    tf = _tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        boxes = v1.placeholder(tf.float32, [10, 4], name="boxes")
        scores = v1.placeholder(tf.float32, [10], name="scores")
        keep = tf.image.non_max_suppression(boxes, scores, max_output_size=5, iou_threshold=0.5, name="nms")
        tf.gather(boxes, keep, name="detections")
    return _write(graph, path)


def while_graph(path):
    """A tf.while_loop (v1 control flow: Enter/Merge/Switch/Exit/NextIteration/LoopCond)."""
    tf = _tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        v1.disable_control_flow_v2()
        x = v1.placeholder(tf.float32, [1, 4], name="input")
        _, y = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), [tf.constant(0), x], name="loop")
        tf.identity(y, name="output")
        v1.enable_control_flow_v2()
    return _write(graph, path)


def custom_op_graph(path):
    """A frozen graph with a node of an op TensorFlow does not have (a custom op)."""
    from pipeline.graph.proto import message_class

    GraphDef = message_class("GraphDef")
    g = GraphDef()
    inp = g.node.add(name="input", op="Placeholder")
    inp.attr["dtype"].type = 1
    g.node.add(name="custom", op="MyCustomOp", input=["input"])
    g.node.add(name="output", op="Relu", input=["custom"]).attr["T"].type = 1
    path.write_bytes(g.SerializeToString())
    return path


def _write(graph, path):
    with open(str(path), "wb") as f:
        f.write(graph.as_graph_def().SerializeToString())
    return path


def keras_model(path):
    import keras

    inputs = keras.Input((16, 16, 3), name="input")
    x = keras.layers.Conv2D(4, 3, name="conv")(inputs)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.ReLU(name="relu")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    x = keras.layers.Dropout(0.5, name="dropout")(x)
    outputs = keras.layers.Dense(2, name="dense")(x)
    keras.Model(inputs, outputs).save(str(path))
    return path


# ------------------------------------------------------------------------------------ ONNX


def onnx_model(path, opset=13, input_type=None, plugin=False, resize_mode=None):
    """x[N,3,8,8] -> Conv -> Relu (+ a plugin node, a Resize) at the given opset."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    input_type = input_type or TensorProto.FLOAT
    nodes, inits = [], [numpy_helper.from_array(np.ones((2, 3, 3, 3), "float32"), "w")]
    first = "x"
    if input_type != TensorProto.FLOAT:
        nodes.append(helper.make_node("Cast", ["x"], ["xf"], name="to_float", to=TensorProto.FLOAT))
        first = "xf"
    nodes += [helper.make_node("Conv", [first, "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
              helper.make_node("Relu", ["c"], ["y"], name="relu")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 8, 8])]
    if resize_mode:
        inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], "float32"), "scales"))
        nodes.append(helper.make_node("Resize", ["y", "", "scales"], ["r"], name="resize", mode=resize_mode))
        outputs = [helper.make_tensor_value_info("r", TensorProto.FLOAT, ["N", 2, 16, 16])]
    if plugin:
        nodes.append(helper.make_node("EfficientNMS_TRT", ["y"], ["nms"], name="nms", domain="",
                                      score_threshold=0.5, iou_threshold=0.5, max_output_boxes=10))
        outputs.append(helper.make_tensor_value_info("nms", TensorProto.INT32, ["N", 1]))
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", input_type, ["N", 3, 8, 8])], outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.save(model, str(path))
    return path


def saved_model(directory):
    """A SavedModel whose serving signature is inference only, with a training signature that
    adds dropout noise (RandomUniform) the check must not see."""
    tf = _tf()
    module = tf.Module()
    module.w = tf.Variable(np.ones((4, 2), "float32"), name="dense/kernel")

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="input")])
    def serve(x):
        return {"y": tf.matmul(x, module.w)}

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="input")])
    def train(x):
        noise = tf.random.uniform(tf.shape(x))
        return {"y": tf.matmul(x * noise, module.w)}

    module.serve, module.train = serve, train
    tf.saved_model.save(module, str(directory), signatures={"serving_default": serve, "train": train})
    return directory


def seed_scenario(directory):
    """The fine-tuned TF1 graph users bring: conv -> fused_batch_norm(is_training=True) -> relu ->
    dropout(keep_prob placeholder) -> dense, frozen with its training ops; its training checkpoint
    (with the batch norm's moving statistics); and the inference-mode reference built from the same
    weights (batch norm on the moving statistics, no dropout).

    Returns (training frozen graph, checkpoint prefix, reference frozen graph)."""
    tf = _tf()
    v1 = tf.compat.v1
    rng = np.random.RandomState(0)
    weights = {
        "conv/kernel": rng.randn(3, 3, 3, 4).astype("float32") * 0.5,
        "bn/gamma": rng.uniform(0.5, 1.5, 4).astype("float32"),
        "bn/beta": rng.uniform(-0.5, 0.5, 4).astype("float32"),
        "bn/moving_mean": rng.uniform(-1, 1, 4).astype("float32"),
        "bn/moving_variance": rng.uniform(0.5, 2.0, 4).astype("float32"),
        "dense/kernel": rng.randn(256, 3).astype("float32") * 0.1,
    }

    def build(training):
        graph = tf.Graph()
        with graph.as_default():
            var = {k: tf.Variable(v, name=k) for k, v in weights.items()}
            x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="input")
            y = tf.nn.conv2d(x, var["conv/kernel"], strides=1, padding="SAME", name="conv/Conv2D")
            if training:
                y, _, _ = v1.nn.fused_batch_norm(y, var["bn/gamma"], var["bn/beta"], is_training=True,
                                                 name="bn/FusedBatchNormV3")
            else:
                y, _, _ = v1.nn.fused_batch_norm(y, var["bn/gamma"], var["bn/beta"], mean=var["bn/moving_mean"],
                                                 variance=var["bn/moving_variance"], is_training=False,
                                                 name="bn/FusedBatchNormV3")
            y = tf.nn.relu(y, name="relu")
            if training:
                keep = v1.placeholder_with_default(0.5, [], name="keep_prob")
                y = v1.nn.dropout(y, keep_prob=keep, name="dropout")
            y = tf.reshape(y, [-1, 256], name="flatten")
            tf.nn.softmax(tf.matmul(y, var["dense/kernel"], name="dense/MatMul"), name="probabilities")
            sess = v1.Session(graph=graph)
            sess.run(v1.global_variables_initializer())
        return graph, sess

    graph, sess = build(training=True)
    with graph.as_default():
        prefix = v1.train.Saver().save(sess, str(directory / "model.ckpt"))
    train_pb = _freeze(tf, graph, sess, ["probabilities"], directory / "train.pb")
    sess.close()
    graph, sess = build(training=False)
    ref_pb = _freeze(tf, graph, sess, ["probabilities"], directory / "reference.pb")
    sess.close()
    return train_pb, prefix, ref_pb


def tf1_switch_graph(path, keep_prob="with_default", keep_default=1.0, training_default=False, ref_variables=False,
                     mean=None, variance=None):
    """TF1's training switches, the field's pattern: input -> conv -> tf.cond(is_training, bn training, bn inference)
    -> relu [-> dropout(keep_prob)] -> mean -> dense -> softmax "probabilities", frozen with
    convert_variables_to_constants. ``keep_prob``: "with_default" (placeholder_with_default(keep_default)), "fed" (a
    plain placeholder) or None (no dropout); ``is_training``: placeholder_with_default(training_default);
    ``ref_variables``: TF1's reference variables (read through NAME/read); ``mean``/``variance``: the moving
    statistics (drawn when not given: not the identity, so a wrong pick shows)."""
    tf = _tf()
    v1 = tf.compat.v1
    rng = np.random.RandomState(0)
    graph = tf.Graph()
    v1.disable_control_flow_v2()  # TF1's tf.cond: Switch / Merge, as TF 1.x wrote it
    try:
        with graph.as_default():
            x = v1.placeholder(tf.float32, [None, 6, 6, 3], name="input")
            is_training = v1.placeholder_with_default(training_default, [], name="is_training")
            keep = None
            if keep_prob == "with_default":
                keep = v1.placeholder_with_default(keep_default, [], name="keep_prob")
            elif keep_prob == "fed":
                keep = v1.placeholder(tf.float32, [], name="keep_prob")
            w = v1.get_variable("conv/weights", initializer=rng.randn(3, 3, 3, 4).astype("float32"))
            y = tf.nn.conv2d(x, w, strides=1, padding="SAME")
            with v1.variable_scope("bn"):
                resource = not ref_variables
                mean = rng.randn(4).astype("float32") if mean is None else mean
                variance = rng.rand(4).astype("float32") + 0.5 if variance is None else variance
                gamma = v1.get_variable("gamma", initializer=np.full(4, 1.5, "float32"), use_resource=resource)
                beta = v1.get_variable("beta", initializer=np.full(4, 0.25, "float32"), use_resource=resource)
                moving_mean = v1.get_variable("moving_mean", initializer=mean, trainable=False, use_resource=resource)
                moving_var = v1.get_variable("moving_variance", initializer=variance, trainable=False,
                                             use_resource=resource)
                y = v1.cond(is_training,
                            lambda: v1.nn.fused_batch_norm(y, gamma, beta, epsilon=1e-3, is_training=True)[0],
                            lambda: v1.nn.fused_batch_norm(y, gamma, beta, mean=moving_mean, variance=moving_var,
                                                           epsilon=1e-3, is_training=False)[0])
            y = tf.nn.relu(y)
            if keep is not None:
                y = v1.nn.dropout(y, keep_prob=keep)
            y = tf.reduce_mean(y, axis=[1, 2])
            fw = v1.get_variable("fc/weights", initializer=rng.randn(4, 3).astype("float32"))
            tf.nn.softmax(tf.matmul(y, fw), name="probabilities")
            with v1.Session(graph=graph) as sess:
                sess.run(v1.global_variables_initializer())
                frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["probabilities"])
    finally:
        v1.enable_control_flow_v2()
    path.write_bytes(frozen.SerializeToString())
    return path
