"""Graphs built the ways the field builds them, for the ask-the-converter tests: TF1 graphs through
tf.compat.v1 frozen with convert_variables_to_constants, TF2 functions (and Keras 3 layers) frozen
with convert_variables_to_constants_v2. Tiny shapes: each converts in well under a second.

Each builder takes a folder and returns the path of the frozen .pb it wrote."""

import numpy as np


def _tf():
    from pipeline.tf import import_tf

    return import_tf()


def _write(graph_def, path):
    path.write_bytes(graph_def.SerializeToString())
    return path


def _tf1(path, build, outputs):
    """Build a TF1 graph in a session and freeze it with convert_variables_to_constants."""
    tf = _tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        build(tf, v1)
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), outputs)
    return _write(frozen, path)


def _tf2(path, func, *specs):
    """Freeze a tf.function with convert_variables_to_constants_v2 (the TF2 way)."""
    tf = _tf()
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = tf.function(func).get_concrete_function(*specs)
    return _write(convert_variables_to_constants_v2(concrete).graph.as_graph_def(), path)


def _dense(tf, v1, x, units, name, features=None):
    rng = np.random.RandomState(len(name))
    w = tf.Variable(rng.randn(features or int(x.shape[-1]), units).astype("float32"), name=name + "/kernel")
    return tf.matmul(x, w, name=name + "/MatMul")


# ------------------------------------------------------------------------------ dropout


def tf1_dropout(path, placeholder_rate):
    """TF1: dense -> tf.nn.dropout(keep_prob) -> dense; keep_prob a constant 0.5 or a fed placeholder."""
    def build(tf, v1):
        x = v1.placeholder(tf.float32, [None, 4], name="input")
        keep = v1.placeholder(tf.float32, [], name="keep_prob") if placeholder_rate else 0.5
        y = v1.nn.dropout(tf.nn.relu(_dense(tf, v1, x, 8, "fc1")), keep_prob=keep, name="dropout")
        tf.identity(_dense(tf, v1, y, 2, "fc2"), name="output")

    return _tf1(path, build, ["output"])


def tf115_dropout(path, placeholder_rate):
    """Dropout as TF 1.13-1.15's tf.nn.dropout wrote it (nn_ops.dropout_v2): x * scale * Cast(random >= rate),
    the form tf2onnx's dropout rewriter matches (today's TensorFlow applies the mask with SelectV2)."""
    def build(tf, v1):
        x = v1.placeholder(tf.float32, [None, 4], name="input")
        rate = v1.placeholder(tf.float32, [], name="rate") if placeholder_rate else tf.constant(0.5, name="dropout/rate")
        y = tf.nn.relu(_dense(tf, v1, x, 8, "fc1"))
        noise = v1.random_uniform(tf.shape(y), name="dropout/random_uniform")
        scale = 1.0 / (1.0 - rate) if placeholder_rate else tf.constant(2.0, name="dropout/scale")
        keep = tf.cast(tf.greater_equal(noise, rate, name="dropout/GreaterEqual"), tf.float32, name="dropout/Cast")
        y = tf.multiply(tf.multiply(y, scale, name="dropout/mul"), keep, name="dropout/mul_1")
        tf.identity(_dense(tf, v1, y, 2, "fc2"), name="output")

    return _tf1(path, build, ["output"])


def tf2_dropout(path, placeholder_rate):
    """TF2: tf.nn.dropout(rate) in a tf.function; rate a constant 0.5 or a second input."""
    tf = _tf()
    w = tf.Variable(np.ones((4, 2), "float32"), name="dense/kernel")
    x_spec = tf.TensorSpec([None, 4], tf.float32, name="input")
    if placeholder_rate:
        return _tf2(path, lambda x, rate: tf.identity(tf.nn.dropout(tf.matmul(x, w), rate=rate), name="output"),
                    x_spec, tf.TensorSpec([], tf.float32, name="rate"))
    return _tf2(path, lambda x: tf.identity(tf.nn.dropout(tf.matmul(x, w), rate=0.5), name="output"), x_spec)


def keras_dropout_training(path):
    """Keras 3 layers called with training=True: Dense -> Dropout -> Dense, frozen the TF2 way.
    Keras 3's Dropout draws its seed from a SeedGenerator variable and calls
    tf.nn.experimental.stateless_dropout; a frozen graph holds the seed as a constant, which is
    what this builds (freezing the seed variable's update is what convert_variables_to_constants_v2
    cannot do)."""
    import keras

    tf = _tf()
    inputs = keras.Input((4,), name="input")
    hidden = keras.layers.Dense(8, activation="relu", name="fc1")
    out = keras.layers.Dense(2, name="fc2")
    model = keras.Model(inputs, out(hidden(inputs)))
    model.build((None, 4))

    def forward(x):
        y = hidden(x)
        y = tf.nn.experimental.stateless_dropout(y, rate=0.5, seed=[1, 2])  # keras.layers.Dropout, training=True
        return tf.identity(out(y), name="output")

    return _tf2(path, forward, tf.TensorSpec([None, 4], tf.float32, name="input"))


# ------------------------------------------------------------------------------ shapes


def keras_flatten_tf1(path):
    """Keras 2's Flatten as frozen in TF1: Shape -> StridedSlice -> Prod -> Pack -> Reshape (the
    batch size is read at run time, the feature size computed from the shape vector)."""
    def build(tf, v1):
        x = v1.placeholder(tf.float32, [None, 4, 4, 3], name="input")
        y = tf.nn.relu(tf.nn.conv2d(x, tf.Variable(np.ones((3, 3, 3, 2), "float32"), name="conv/kernel"), 1, "SAME"))
        shape = tf.shape(y, name="flatten/Shape")
        batch = tf.strided_slice(shape, [0], [1], shrink_axis_mask=1, name="flatten/strided_slice")
        features = tf.reduce_prod(tf.strided_slice(shape, [1], [4], name="flatten/strided_slice_1"), axis=0,
                                  name="flatten/Prod")
        flat = tf.reshape(y, tf.stack([batch, features], name="flatten/stack"), name="flatten/Reshape")
        tf.nn.softmax(_dense(tf, v1, flat, 2, "dense", features=32), name="output")

    return _tf1(path, build, ["output"])


def keras_flatten_tf2(path):
    """Keras 3: Conv2D -> Flatten -> Dense, frozen with convert_variables_to_constants_v2."""
    import keras

    tf = _tf()
    inputs = keras.Input((4, 4, 3), name="input")
    x = keras.layers.Conv2D(2, 3, name="conv")(inputs)
    x = keras.layers.Flatten(name="flatten")(x)
    model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(x))
    return _tf2(path, lambda x: tf.identity(model(x, training=False), name="output"),
                tf.TensorSpec([None, 4, 4, 3], tf.float32, name="input"))


def batch_mean(path):
    """A reduction over the batch axis (tf.nn.moments over axes [0]): batch-dependent for real."""
    def build(tf, v1):
        x = v1.placeholder(tf.float32, [None, 4], name="input")
        mean = tf.reduce_mean(x, axis=[0], keepdims=True, name="batch_mean")
        tf.subtract(x, mean, name="output")

    return _tf1(path, build, ["output"])


# ------------------------------------------------------------------------------ control flow


def tf_cond(path):
    """tf.cond on a boolean input (TF2 control flow: StatelessIf with two branch functions)."""
    tf = _tf()
    return _tf2(path, lambda x, flag: tf.identity(tf.cond(flag, lambda: x * 2.0, lambda: x + 1.0), name="output"),
                tf.TensorSpec([None, 4], tf.float32, name="input"), tf.TensorSpec([], tf.bool, name="flag"))


def tf_case(path):
    """tf.switch_case on an int32 input (TF2: Case with three branch functions)."""
    tf = _tf()
    return _tf2(path, lambda x, i: tf.identity(tf.switch_case(i, [lambda: x, lambda: x * 2.0, lambda: x - 1.0]),
                                               name="output"),
                tf.TensorSpec([None, 4], tf.float32, name="input"), tf.TensorSpec([], tf.int32, name="branch"))


def tf1_while(path):
    """tf.while_loop with v1 control flow (Enter/Merge/Switch/Exit/NextIteration/LoopCond)."""
    def build(tf, v1):
        v1.disable_control_flow_v2()
        x = v1.placeholder(tf.float32, [None, 4], name="input")
        _, y = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), [tf.constant(0), x], name="loop")
        tf.identity(y, name="output")
        v1.enable_control_flow_v2()

    return _tf1(path, build, ["output"])


def tf2_while(path):
    """tf.while_loop in a tf.function (TF2: StatelessWhile with cond/body functions)."""
    tf = _tf()
    return _tf2(path, lambda x: tf.identity(tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0),
                                                          [tf.constant(0), x])[1], name="output"),
                tf.TensorSpec([None, 4], tf.float32, name="input"))


# ------------------------------------------------------------------------------ inputs


def placeholder_with_default(path):
    """A PlaceholderWithDefault scale (a knob left in the graph) multiplying the features."""
    def build(tf, v1):
        x = v1.placeholder(tf.float32, [None, 4], name="input")
        scale = v1.placeholder_with_default(tf.constant(2.0), [], name="scale")
        tf.identity(tf.nn.relu(_dense(tf, v1, x * scale, 2, "fc")), name="output")

    return _tf1(path, build, ["output"])


def queue_input(path):
    """A TF1 queue input pipeline (FIFOQueue -> dequeue -> DecodeJpeg) in front of a conv, no placeholder."""
    def build(tf, v1):
        queue = v1.FIFOQueue(4, [tf.string], shapes=[[]], name="input_queue")
        image = tf.io.decode_jpeg(queue.dequeue(name="dequeue"), channels=3, name="decode")
        image = tf.reshape(tf.cast(image, tf.float32), [1, 4, 4, 3], name="fixed")
        tf.nn.relu(tf.nn.conv2d(image, tf.constant(np.ones((3, 3, 3, 2), "float32")), 1, "SAME"), name="output")

    return _tf1(path, build, ["output"])


def string_input(path):
    """A serving graph with an encoded-image string input: DecodeJpeg in the graph."""
    def build(tf, v1):
        data = v1.placeholder(tf.string, [], name="encoded_image")
        image = tf.cast(tf.io.decode_jpeg(data, channels=3, name="decode"), tf.float32)
        image = tf.image.resize(tf.expand_dims(image, 0), [4, 4], name="resize")
        tf.nn.relu(tf.nn.conv2d(image, tf.constant(np.ones((3, 3, 3, 2), "float32")), 1, "SAME"), name="output")

    return _tf1(path, build, ["output"])


# ------------------------------------------------------------------------------ recurrent


def _lstm_step(tf, x, h, c, kernel, bias):
    """One LSTM cell step as TF1's LSTMCell computes it: one MatMul of [x, h], split into 4 gates."""
    z = tf.nn.bias_add(tf.matmul(tf.concat([x, h], 1), kernel), bias)
    i, j, f, o = tf.split(z, 4, axis=1)
    c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
    return tf.sigmoid(o) * tf.tanh(c), c


def _lstm_weights(tf):
    rng = np.random.RandomState(3)
    return (tf.Variable(rng.randn(8, 16).astype("float32") * 0.3, name="lstm/kernel"),
            tf.Variable(np.zeros(16, "float32"), name="lstm/bias"))


def lstm_unrolled(path):
    """An LSTM over 3 fixed time steps, unrolled (TF1 static_rnn: the cell's ops once per step)."""
    def build(tf, v1):
        x = v1.placeholder(tf.float32, [None, 3, 4], name="input")
        kernel, bias = _lstm_weights(tf)
        h = c = tf.zeros_like(x[:, 0, :])
        for step in tf.unstack(x, axis=1):
            h, c = _lstm_step(tf, step, h, c, kernel, bias)
        tf.identity(h, name="output")

    return _tf1(path, build, ["output"])


def lstm_dynamic(path):
    """A TF1 dynamic_rnn-style LSTM: a while loop over time reading a TensorArray (v1 control flow)."""
    def build(tf, v1):
        v1.disable_control_flow_v2()
        x = v1.placeholder(tf.float32, [None, 3, 4], name="input")
        kernel, bias = _lstm_weights(tf)
        steps = tf.TensorArray(tf.float32, size=3).unstack(tf.transpose(x, [1, 0, 2]))
        h0 = tf.zeros_like(x[:, 0, :])

        def body(t, h, c):
            h, c = _lstm_step(tf, steps.read(t), h, c, kernel, bias)
            return t + 1, h, c

        _, h, _ = tf.while_loop(lambda t, h, c: t < 3, body, [tf.constant(0), h0, h0], name="rnn")
        tf.identity(h, name="output")
        v1.enable_control_flow_v2()

    return _tf1(path, build, ["output"])


CORPUS = {
    "tf1_dropout_const": lambda p: tf1_dropout(p, placeholder_rate=False),
    "tf1_dropout_placeholder": lambda p: tf1_dropout(p, placeholder_rate=True),
    "tf115_dropout_const": lambda p: tf115_dropout(p, placeholder_rate=False),
    "tf115_dropout_placeholder": lambda p: tf115_dropout(p, placeholder_rate=True),
    "tf2_dropout_const": lambda p: tf2_dropout(p, placeholder_rate=False),
    "tf2_dropout_placeholder": lambda p: tf2_dropout(p, placeholder_rate=True),
    "keras_dropout_training": keras_dropout_training,
    "keras_flatten_tf1": keras_flatten_tf1,
    "keras_flatten_tf2": keras_flatten_tf2,
    "batch_mean": batch_mean,
    "tf_cond": tf_cond,
    "tf_case": tf_case,
    "tf1_while": tf1_while,
    "tf2_while": tf2_while,
    "placeholder_with_default": placeholder_with_default,
    "queue_input": queue_input,
    "string_input": string_input,
    "lstm_unrolled": lstm_unrolled,
    "lstm_dynamic": lstm_dynamic,
}


def build_corpus(directory):
    """{name: path} of every corpus graph, written under ``directory``."""
    return {name: build(directory / (name + ".pb")) for name, build in CORPUS.items()}
