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
    from pipeline.diff import diff_models
    from pipeline.tf import import_tf
    from pipeline.tf.freeze import freeze_saved_model, write_graph_def

    tf = import_tf()
    frozen = _frozen(tmp_path)
    res = deploy("unfreeze", frozen, "-o", tmp_path / "unfrozen")
    assert res.returncode == 0, res.stderr
    assert "variables" in res.stdout and "input input, outputs probabilities" in res.stdout

    loaded = tf.saved_model.load(str(tmp_path / "unfrozen"))
    variables = list(loaded.weights)
    assert {v.name.split(":")[0] for v in variables} >= {"conv/kernel", "probabilities/kernel"}
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
    res = deploy("unfreeze", tmp_path / "missing.pb", "-o", tmp_path / "out")
    assert res.returncode == 1 and res.stderr.startswith("deploy: error: ")
