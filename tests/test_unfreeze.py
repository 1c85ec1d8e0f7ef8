"""Unfreeze a frozen graph, train it in TF2, freeze it again: same structure, new weights."""

import json

import numpy as np
import pytest

from conftest import deploy

pytestmark = pytest.mark.tf


def _frozen(tmp_path):
    """A small trained-looking Keras CNN frozen like deploy's freeze stage: frozen.pb + io.json."""
    from pipeline.data.shapes import generate_shapes
    from pipeline.tf import import_tf
    from pipeline.tf.freeze import freeze_saved_model, write_graph_def

    tf = import_tf()
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((32, 32, 3), name="input")
    x = keras.layers.Conv2D(8, 3, name="conv")(keras.layers.Rescaling(1 / 255.0, name="scale")(inputs))
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(keras.layers.ReLU(name="relu")(x))
    model = keras.Model(inputs, keras.layers.Dense(4, activation="softmax", name="probabilities")(x))
    module = tf.Module()
    module.model = model

    @tf.function(input_signature=[tf.TensorSpec([None, 32, 32, 3], tf.float32, name="input")])
    def serve(images):
        return {"probabilities": model(images, training=False)}

    tf.saved_model.save(module, str(tmp_path / "sm"), signatures={"serving_default": serve})
    graph_def, io = freeze_saved_model(tmp_path / "sm")
    (tmp_path / "frozen").mkdir()
    write_graph_def(graph_def, tmp_path / "frozen" / "frozen.pb")
    (tmp_path / "frozen" / "io.json").write_text(json.dumps(io))
    generate_shapes(tmp_path / "data", image_size=32, train_per_class=4, val_per_class=0)
    return tmp_path / "frozen" / "frozen.pb"


def test_unfreeze_train_refreeze_and_diff(tmp_path):
    from pipeline.data.folder import index_image_folder, load_images
    from pipeline.graph.diff import diff_models
    from pipeline.tf import import_tf
    from pipeline.tf.freeze import freeze_saved_model, write_graph_def

    tf = import_tf()
    frozen = _frozen(tmp_path)
    res = deploy("unfreeze", frozen, "-o", tmp_path / "unfrozen")
    assert res.returncode == 0, res.stderr
    assert "variables" in res.stdout and "input input, outputs probabilities" in res.stdout

    loaded = tf.saved_model.load(str(tmp_path / "unfrozen"))
    variables = list(loaded.trainable_variables)  # the reusable-SavedModel convention (TF Hub)
    trainable = {v.name.split(":")[0] for v in variables}
    assert trainable == {"conv/kernel", "conv/bias", "bn/gamma", "bn/beta", "probabilities/kernel",
                         "probabilities/bias"}, trainable
    frozen_stats = {v.name.split(":")[0] for v in loaded.variables} - trainable
    assert frozen_stats == {"bn/moving_mean", "bn/moving_variance"}
    assert all(not v.trainable for v in loaded.variables if v.name.split(":")[0] in frozen_stats)
    out = loaded(tf.zeros([2, 32, 32, 3]), training=False)
    assert out.shape == (2, 4)
    index = index_image_folder(tmp_path / "data", val_split=0)
    images = load_images([p for p, _ in index.train], 32)
    labels = np.array([label for _, label in index.train])
    optimizer = tf.keras.optimizers.Adam(0.05)
    losses = []
    for _ in range(15):
        with tf.GradientTape() as tape:
            probs = loaded.serve(tf.constant(images))["probabilities"]
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, probs))
        grads = tape.gradient(loss, variables)
        assert all(g is not None for g in grads), [v.name for v, g in zip(variables, grads) if g is None]
        optimizer.apply_gradients(zip(grads, variables))
        losses.append(float(loss))
    assert losses[-1] < losses[0] * 0.9, losses

    tf.saved_model.save(loaded, str(tmp_path / "trained"), signatures={"serving_default": loaded.serve})
    graph_def, _ = freeze_saved_model(tmp_path / "trained")
    write_graph_def(graph_def, tmp_path / "refrozen.pb")
    report = diff_models(frozen, tmp_path / "refrozen.pb")
    assert report.structurally_identical, report.to_dict()
    assert report.values  # the weights changed


def test_unfreeze_bad_input(tmp_path):
    from pipeline.graph.proto import message_class

    g = message_class("GraphDef")()
    g.node.add(name="input", op="Placeholder").attr["dtype"].type = 1
    g.node.add(name="output", op="Relu", input=["input"]).attr["T"].type = 1
    (tmp_path / "empty.pb").write_bytes(g.SerializeToString())
    res = deploy("unfreeze", tmp_path / "empty.pb", "-o", tmp_path / "out")
    assert res.returncode == 1 and "no weight constants to unfreeze" in res.stderr
    assert not (tmp_path / "out").exists()
    res = deploy("unfreeze", tmp_path / "missing.pb", "-o", tmp_path / "out", "--quiet")
    assert res.returncode == 1 and res.stderr.startswith("deploy: error: ")


def _tf1_frozen(path):
    """conv -> batch norm (inference, moving statistics) -> relu -> dense, TF1 variables, frozen
    with convert_variables_to_constants: weights reach their ops through `<name>/read` Identities."""
    from pipeline.tf import import_tf

    tf = import_tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    rng = np.random.RandomState(0)
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="input")
        kernel = v1.get_variable("conv/weights", initializer=rng.randn(3, 3, 3, 4).astype("float32") * 0.3,
                                 use_resource=False)
        y = tf.nn.conv2d(x, kernel, 1, "SAME")
        stats = {n: v1.get_variable("bn/" + n, initializer=init, use_resource=False) for n, init in (
            ("gamma", np.ones(4, "float32")), ("beta", np.zeros(4, "float32")),
            ("moving_mean", rng.randn(4).astype("float32") * 0.1), ("moving_variance", np.ones(4, "float32")))}
        y, _, _ = v1.nn.fused_batch_norm(y, stats["gamma"], stats["beta"], mean=stats["moving_mean"],
                                         variance=stats["moving_variance"], is_training=False)
        y = tf.reshape(tf.nn.relu(y), [-1, 8 * 8 * 4])
        dense = v1.get_variable("logits/weights", initializer=rng.randn(256, 3).astype("float32") * 0.1,
                                use_resource=False)
        bias = v1.get_variable("logits/biases", initializer=np.zeros(3, "float32"), use_resource=False)
        tf.nn.softmax(tf.matmul(y, dense) + bias, name="probabilities")
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["probabilities"])
    assert any(n.name == "conv/weights/read" for n in frozen.node)
    path.write_bytes(frozen.SerializeToString())
    return path


def _train(tf, loaded, steps=12):
    rng = np.random.RandomState(1)
    images = tf.constant(rng.rand(12, 8, 8, 3).astype("float32"))
    labels = rng.randint(0, 3, 12)
    variables = list(loaded.trainable_variables)
    optimizer = tf.keras.optimizers.Adam(0.05)
    losses = []
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, loaded(images, training=True)))
        grads = tape.gradient(loss, variables)
        assert all(g is not None for g in grads), [v.name for v, g in zip(variables, grads) if g is None]
        optimizer.apply_gradients(zip(grads, variables))
        losses.append(float(loss))
    assert losses[-1] < losses[0] * 0.9, losses


def test_tf1_convert_variables_to_constants_graph(tmp_path):
    from pipeline.tf import import_tf

    tf = import_tf()
    frozen = _tf1_frozen(tmp_path / "frozen.pb")
    res = deploy("unfreeze", frozen, "-o", tmp_path / "unfrozen")
    assert res.returncode == 0, res.stderr
    assert "7 variables, 5 trainable" in res.stdout
    loaded = tf.saved_model.load(str(tmp_path / "unfrozen"))
    assert {v.name.split(":")[0] for v in loaded.trainable_variables} == {
        "conv/weights", "bn/gamma", "bn/beta", "logits/weights", "logits/biases"}
    assert {v.name.split(":")[0] for v in loaded.variables if not v.trainable} == {"bn/moving_mean", "bn/moving_variance"}
    _train(tf, loaded)


def test_tf2_convert_variables_to_constants_v2_graph(tmp_path):
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from pipeline.tf import import_tf

    tf = import_tf()
    rng = np.random.RandomState(0)
    kernel = tf.Variable(rng.randn(3, 3, 3, 4).astype("float32") * 0.3, name="conv/kernel")
    dense = tf.Variable(rng.randn(256, 3).astype("float32") * 0.1, name="dense/kernel")
    bias = tf.Variable(np.zeros(3, "float32"), name="dense/bias")

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32, name="input")])
    def model(x):
        y = tf.reshape(tf.nn.relu(tf.nn.conv2d(x, kernel, 1, "SAME")), [-1, 256])
        return tf.nn.softmax(tf.matmul(y, dense) + bias, name="probabilities")

    graph_def = convert_variables_to_constants_v2(model.get_concrete_function()).graph.as_graph_def()
    assert any(n.op == "Identity" and "ReadVariableOp" in n.name for n in graph_def.node)
    (tmp_path / "frozen.pb").write_bytes(graph_def.SerializeToString())
    res = deploy("unfreeze", tmp_path / "frozen.pb", "-o", tmp_path / "unfrozen")
    assert res.returncode == 0, res.stderr
    loaded = tf.saved_model.load(str(tmp_path / "unfrozen"))
    assert len(loaded.trainable_variables) == 3 and len(loaded.variables) == 3
    _train(tf, loaded)


def test_after_fold_batchnorm_every_weight_trains(tmp_path):
    """The rewrite folds batch norm into the conv: the folded kernel and bias are trainable
    (before, only the moving statistics became variables and training had no gradients)."""
    from pipeline.tf import import_tf

    tf = import_tf()
    frozen = _tf1_frozen(tmp_path / "frozen.pb")
    folded = tmp_path / "folded.pb"
    res = deploy("rewrite", frozen, "-t", "jetson_tx2", "-o", folded, "--pass", "fold_batchnorm")
    assert res.returncode == 0, res.stderr
    from pipeline.graph import proto

    graph_def = proto.GraphDef.FromString(folded.read_bytes())
    assert not [n for n in graph_def.node if n.op.startswith("FusedBatchNorm")]  # folded through /read Identities
    res = deploy("unfreeze", folded, "-o", tmp_path / "unfrozen")
    assert res.returncode == 0, res.stderr
    loaded = tf.saved_model.load(str(tmp_path / "unfrozen"))
    assert loaded.trainable_variables and all(v.trainable for v in loaded.variables)
    _train(tf, loaded)


def test_onnx_and_existing_output_are_clear_errors(tmp_path):
    from onnx import TensorProto, helper, save

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "m.onnx"))
    res = deploy("unfreeze", tmp_path / "m.onnx", "-o", tmp_path / "out")
    assert res.returncode == 1 and res.stderr.startswith(
        "deploy: error: {}: unfreeze reads TensorFlow frozen graphs; this is ONNX".format(tmp_path / "m.onnx"))
    (tmp_path / "taken").write_text("x")
    res = deploy("unfreeze", _tf1_frozen(tmp_path / "f.pb"), "-o", tmp_path / "taken")
    assert res.returncode == 1 and "already exists as a file" in res.stderr


def test_a_keras3_graph_keeps_batch_norm_statistics_frozen_and_its_trainable_scalar(tmp_path):
    """Issue 26, item 5: a user's TF2 freeze of a Keras 3 model (batch norm unfused: its statistics read
    through ``.../Cast/ReadVariableOp/resource`` constants) with a custom layer's scalar weight. Before: all
    weights trainable, the moving mean and variance included, and the scalar lost."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    import keras

    from pipeline.tf import import_tf

    tf = import_tf()
    keras.utils.set_random_seed(0)

    class Scale(keras.layers.Layer):
        def build(self, shape):
            self.p = self.add_weight(name="p", shape=(), initializer=keras.initializers.Constant(1.5))

        def call(self, x):
            return x * self.p

    inputs = keras.Input((8, 8, 3), name="input")
    bn = keras.layers.BatchNormalization()
    x = Scale()(bn(keras.layers.Conv2D(4, 3)(inputs)))
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(keras.layers.GlobalAveragePooling2D()(x)))
    mean, variance = np.array([0.1, 0.2, 0.3, 0.4], "float32"), np.array([1.5, 2.5, 3.5, 4.5], "float32")
    bn.moving_mean.assign(mean)
    bn.moving_variance.assign(variance)
    function = tf.function(lambda images: model(images, training=False)).get_concrete_function(
        tf.TensorSpec([None, 8, 8, 3], tf.float32, name="input"))
    graph_def = convert_variables_to_constants_v2(function).graph.as_graph_def()
    (tmp_path / "frozen.pb").write_bytes(graph_def.SerializeToString())
    res = deploy("unfreeze", tmp_path / "frozen.pb", "-o", tmp_path / "unfrozen", "--format", "json",
                 env={"DEPLOY_PROGRESS_AFTER": "0"})  # every step named, however quick
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)  # the result alone on stdout; the progress on stderr (issue 26, item 2)
    assert "(step 1 of 3)" in res.stderr and "(step 3 of 3)" in res.stderr
    assert len(result["variables"]) == 9 and len(result["trainable"]) == 7, result
    loaded = tf.saved_model.load(str(tmp_path / "unfrozen"))
    frozen = sorted(v.numpy().tolist() for v in loaded.variables if not v.trainable)
    assert frozen == sorted([mean.tolist(), variance.tolist()])
    scalars = [v for v in loaded.trainable_variables if v.shape.rank == 0]
    assert len(scalars) == 1 and float(scalars[0].numpy()) == 1.5
    _train(tf, loaded)
    assert sorted(v.numpy().tolist() for v in loaded.variables if not v.trainable) == frozen  # training leaves them
    assert float(scalars[0].numpy()) != 1.5  # the scalar gets a gradient and trains
