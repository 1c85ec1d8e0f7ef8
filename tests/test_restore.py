"""pipeline.train.restore: partial restores into changed networks, from every checkpoint format."""

import numpy as np
import pytest

from pipeline.errors import DeployError

pytestmark = pytest.mark.tf

BASE_VARS = ["conv0/kernel", "conv0/bias", "bn0/gamma", "bn0/beta", "bn0/moving_mean", "bn0/moving_variance",
             "conv1/kernel", "conv1/bias", "dense/kernel", "dense/bias"]


@pytest.fixture(scope="module")
def keras():
    from pipeline.tf import import_tf

    import_tf()
    import keras

    return keras


def build(keras, variant="base", classes=4):
    """The base net (conv -> bn -> relu -> conv -> gap -> dense) or one changed as ``variant`` says."""
    L = keras.layers
    inputs = keras.Input((6, 6, 3), name="input")
    x = L.Conv2D(4, 3, padding="same", name="conv0")(inputs)
    if variant != "no_bn":  # (a) a layer removed
        x = L.BatchNormalization(name="bn0")(x)
    if variant == "elu":  # (c) a non-trainable op replaced
        x = L.ELU(name="elu0")(x)
    elif variant != "no_relu":  # (b) a non-trainable op removed
        x = L.ReLU(name="relu0")(x)
    if variant == "new_conv":  # (d) a trainable layer added
        x = L.Conv2D(4, 1, name="conv_new")(x)
    y = L.Conv2D(4, 3, padding="same", name="conv1")(x)
    if variant == "skip":  # (c) a skip connection added
        y = L.Add(name="skip")([x, y])
    x = L.GlobalAveragePooling2D(name="gap")(y)
    outputs = L.Dense(classes, name="dense")(x)
    return keras.Model(inputs, outputs, name="net")


def randomise(model, seed=0):
    rng = np.random.default_rng(seed)
    for v in model.weights:
        v.assign(rng.standard_normal(tuple(v.shape)).astype("float32"))
    return model


def values(model):
    return {v.path: np.array(v.numpy()) for v in model.weights}


@pytest.fixture(scope="module")
def saved(keras, tmp_path_factory):
    """The base model, randomised, saved in every format: {"model", "values", format: path}."""
    import tensorflow as tf

    d = tmp_path_factory.mktemp("restore")
    model = randomise(build(keras))
    model.save(str(d / "base.keras"))
    model.save_weights(str(d / "base.weights.h5"))
    model.save(str(d / "legacy.h5"))
    prefix = tf.train.Checkpoint(model=model).save(str(d / "tf2" / "ckpt"))
    return {"model": model, "values": values(model), "keras": d / "base.keras", "weights_h5": d / "base.weights.h5",
            "legacy_h5": d / "legacy.h5", "tf2_prefix": prefix, "tf2_dir": d / "tf2"}


FORMATS = ["keras", "weights_h5", "legacy_h5", "tf2_prefix", "tf2_dir"]


def check_restored(model, saved, report):
    want = saved["values"]
    now = values(model)
    for path in report["restored"]:
        np.testing.assert_array_equal(now[path], want[path], err_msg=path)


# -- reading ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_read_weights_has_every_value(saved, fmt):
    from pipeline.train.restore import read_weights

    weights = read_weights(saved[fmt])
    assert len(weights) == len(BASE_VARS)
    assert sorted(v.size for v in weights.values()) == sorted(v.size for v in saved["values"].values())


def test_names_per_format(saved):
    from pipeline.train.restore import read_weights

    assert sorted(read_weights(saved["keras"])) == sorted(BASE_VARS)
    assert sorted(read_weights(saved["legacy_h5"])) == sorted(BASE_VARS)
    assert "conv1/vars/0" in read_weights(saved["weights_h5"])
    tf2 = read_weights(saved["tf2_prefix"])
    assert all(not n.endswith(".ATTRIBUTES/VARIABLE_VALUE") and "save_counter" not in n for n in tf2)


def test_inspect(saved):
    from pipeline.train.restore import inspect

    rows = inspect(saved["keras"])
    assert [r[0] for r in rows] == sorted(BASE_VARS)
    assert ("conv1/kernel", (3, 3, 4, 4), "float32", 144) in rows


def test_read_frozen_graph(keras, saved, tmp_path):
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from pipeline.train.restore import read_weights

    model = saved["model"]
    fn = tf.function(lambda x: model(x)).get_concrete_function(tf.TensorSpec([1, 6, 6, 3], tf.float32))
    path = tmp_path / "frozen.pb"
    path.write_bytes(convert_variables_to_constants_v2(fn).graph.as_graph_def().SerializeToString())
    weights = read_weights(path)
    assert weights.kind == "pb"
    for name in ("conv0/kernel", "conv1/kernel", "dense/kernel"):
        assert any(np.array_equal(v, saved["values"][name]) for v in weights.values()), name


def test_keras_file_with_unknown_layer_falls_back_to_its_weights(keras, saved, tmp_path):
    """A .keras whose config cannot be rebuilt here (custom layer): its model.weights.h5 is read."""
    import zipfile

    from pipeline.train.restore import read_weights, restore

    path = tmp_path / "custom.keras"
    with zipfile.ZipFile(str(saved["keras"])) as src, zipfile.ZipFile(str(path), "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "config.json":
                data = data.replace(b'"ReLU"', b'"NoSuchLayer"')
            dst.writestr(item, data)
    assert "conv1/vars/0" in read_weights(path)
    model = build(keras, "new_conv")
    report = restore(model, path)
    assert report["new"] == ["conv_new/kernel", "conv_new/bias"] and len(report["restored"]) == 10
    check_restored(model, saved, report)


# -- the same network and the four changed ones ----------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_same_network_restores_everything(keras, saved, fmt):
    from pipeline.train.restore import restore

    model = build(keras)
    report = restore(model, saved[fmt])
    assert sorted(report["restored"]) == sorted(BASE_VARS)
    assert report["new"] == report["unused"] == report["shape_mismatch"] == report["excluded"] == []
    check_restored(model, saved, report)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("variant, new, unused_count", [
    ("no_bn", [], 4),  # (a) a layer removed: its 4 variables are unused
    ("no_relu", [], 0),  # (b) a non-trainable op removed
    ("elu", [], 0),  # (c) added non-trainable ops
    ("skip", [], 0),
    ("new_conv", ["conv_new/kernel", "conv_new/bias"], 0),  # (d) an added trainable layer
])
def test_changed_networks(keras, saved, fmt, variant, new, unused_count):
    from pipeline.train.restore import restore

    model = build(keras, variant)
    before = values(model)
    report = restore(model, saved[fmt])
    in_model = {v.path for v in model.weights}
    assert sorted(report["restored"]) == sorted(p for p in BASE_VARS if p in in_model)
    assert report["new"] == new
    assert len(report["unused"]) == unused_count
    assert report["shape_mismatch"] == [] and report["ambiguous"] == []
    check_restored(model, saved, report)
    for path in new:  # initialised, untouched
        np.testing.assert_array_equal(values(model)[path], before[path])


def test_ambiguous_added_layer_in_tf2_checkpoint_is_not_guessed(keras, saved):
    """A TF2 checkpoint has positions, not names: an added conv shaped like its neighbour leaves
    the alignment two ways to go; neither conv is restored and both are reported."""
    from pipeline.train.restore import restore

    L = keras.layers
    inputs = keras.Input((6, 6, 3), name="input")
    x = L.ReLU(name="relu0")(L.BatchNormalization(name="bn0")(L.Conv2D(4, 3, padding="same", name="conv0")(inputs)))
    x = L.Conv2D(4, 3, padding="same", name="conv_new")(x)  # same shapes as conv1
    x = L.Conv2D(4, 3, padding="same", name="conv1")(x)
    model = keras.Model(inputs, L.Dense(4, name="dense")(L.GlobalAveragePooling2D(name="gap")(x)))
    report = restore(model, saved["tf2_prefix"])
    assert sorted(report["ambiguous"]) == ["conv1/bias", "conv1/kernel", "conv_new/bias", "conv_new/kernel"]
    assert "conv1/kernel" in report["new"] and "conv_new/kernel" in report["new"]
    assert len(report["unused"]) == 2
    assert sorted(report["restored"]) == sorted(p for p in BASE_VARS if not p.startswith("conv1"))
    # Named formats place it by name.
    report = restore(model, saved["keras"])
    assert report["new"] == ["conv_new/kernel", "conv_new/bias"] and report["ambiguous"] == []


# -- shape mismatches, exclude and trainable scopes ------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_new_head_shape_mismatch_needs_exclude_scopes(keras, saved, fmt):
    from pipeline.train.restore import restore

    model = build(keras, classes=5)
    before = values(model)
    with pytest.raises(DeployError) as e:
        restore(model, saved[fmt])
    message = str(e.value)
    assert "dense/kernel" in message and "stages.train.exclude_scopes: [dense]" in message
    assert "\n" not in message
    for path, value in values(model).items():  # nothing assigned on failure
        np.testing.assert_array_equal(value, before[path])

    report = restore(model, saved[fmt], exclude_scopes=["dense"])
    assert report["excluded"] == ["dense/kernel", "dense/bias"]
    assert sorted(report["restored"]) == sorted(p for p in BASE_VARS if not p.startswith("dense"))
    assert report["shape_mismatch"] == [] and report["new"] == [] and report["unused"] == []
    check_restored(model, saved, report)


def test_report_without_raising_lists_the_mismatch(keras, saved):
    from pipeline.train.restore import read_weights, restore_report

    report = restore_report(build(keras, classes=5), read_weights(saved["keras"]), strict=False)
    assert report["shape_mismatch"] == ["dense/kernel (4, 4) vs (4, 5)", "dense/bias (4,) vs (5,)"]


def test_trainable_scopes_freeze_the_rest(keras, saved):
    from pipeline.train.restore import restore

    model = build(keras, "new_conv")
    report = restore(model, saved["keras"], trainable_scopes=["conv_new", "dense"])
    assert report["trainable"] == ["conv_new/kernel", "conv_new/bias", "dense/kernel", "dense/bias"]
    assert [v.path for v in model.trainable_weights] == report["trainable"]
    assert not any(v.trainable for v in model.weights if v.path.startswith(("conv0", "bn0", "conv1")))


def test_format_report(keras, saved):
    from pipeline.train.restore import format_report, restore

    text = format_report(restore(build(keras, "new_conv"), saved["keras"]))
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["restored", "10"]
    assert any(line.split()[:3] == ["new", "2", "conv_new/kernel,"] for line in lines)
    assert any(line.split()[:2] == ["shape", "mismatch"] for line in lines)


# -- name matching ---------------------------------------------------------------------------------

def test_suffix_match_ignores_a_leading_scope_and_port(keras, saved):
    from pipeline.train.restore import restore_report

    weights = {"other_model/" + k + ":0": v for k, v in saved["values"].items()}
    report = restore_report(build(keras), weights)
    assert sorted(report["restored"]) == sorted(BASE_VARS)


def test_suffix_match_never_guesses(keras, saved):
    from pipeline.train.restore import restore_report

    weights = {"a/" + k: v for k, v in saved["values"].items()}
    weights["b/conv1/kernel"] = saved["values"]["conv1/kernel"]
    report = restore_report(build(keras), weights)
    assert report["ambiguous"] == ["conv1/kernel"]
    assert "conv1/kernel" in report["new"] and "conv1/kernel" not in report["restored"]
    assert sorted(report["unused"]) == ["a/conv1/kernel", "b/conv1/kernel"]


def test_tf1_name_based_checkpoint_with_name_map(keras, tmp_path):
    import tensorflow as tf

    from pipeline.train.restore import read_weights, restore

    rng = np.random.default_rng(1)
    want = {}
    graph = tf.Graph()
    with graph.as_default():
        specs = {"net/conv_a/weights": (3, 3, 3, 4), "net/conv_a/biases": (4,),
                 "net/conv_a/BatchNorm/gamma": (4,), "net/conv_a/BatchNorm/beta": (4,),
                 "net/conv_a/BatchNorm/moving_mean": (4,), "net/conv_a/BatchNorm/moving_variance": (4,),
                 "net/conv_b/weights": (3, 3, 4, 4), "net/conv_b/biases": (4,),
                 "net/logits/weights": (4, 4), "net/logits/biases": (4,)}
        for name, shape in specs.items():
            want[name] = rng.standard_normal(shape).astype("float32")
            tf.compat.v1.get_variable(name, initializer=want[name])
        tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            prefix = saver.save(sess, str(tmp_path / "tf1" / "model.ckpt"))
    weights = read_weights(prefix)
    assert weights.kind == "tf1" and sorted(weights) == sorted(specs)

    name_map = {"net/conv_a/BatchNorm": "bn0", "net/conv_a": "conv0", "net/conv_b": "conv1", "net/logits": "dense"}
    model = build(keras)
    report = restore(model, tmp_path / "tf1", name_map=name_map)
    assert sorted(report["restored"]) == sorted(BASE_VARS)
    assert report["unused"] == [] and report["new"] == []
    now = values(model)
    np.testing.assert_array_equal(now["conv0/kernel"], want["net/conv_a/weights"])
    np.testing.assert_array_equal(now["bn0/moving_variance"], want["net/conv_a/BatchNorm/moving_variance"])
    np.testing.assert_array_equal(now["dense/bias"], want["net/logits/biases"])

    # Without the map the TF-slim scopes do not match the Keras layer names: nothing matches, an error.
    from pipeline.errors import DeployError

    with pytest.raises(DeployError, match=r"none of its {} variables matches the model's".format(len(specs))):
        restore(build(keras), prefix)


def test_nested_model_from_weights_h5(keras, tmp_path):
    """A zoo-like model (a model inside a model): .weights.h5 names resolve through the nesting."""
    from pipeline.train.restore import restore

    def nested(classes):
        L = keras.layers
        inner_in = keras.Input((6, 6, 3))
        inner = keras.Model(inner_in, L.GlobalAveragePooling2D(name="gap")(L.Conv2D(4, 3, name="Conv1")(inner_in)),
                            name="backbone")
        inputs = keras.Input((6, 6, 3), name="input")
        return keras.Model(inputs, L.Dense(classes, name="probabilities")(inner(inputs)), name="model")

    source = randomise(nested(4))
    source.save_weights(str(tmp_path / "n.weights.h5"))
    model = nested(3)
    report = restore(model, tmp_path / "n.weights.h5", exclude_scopes=["probabilities"])
    assert report["restored"] == ["Conv1/kernel", "Conv1/bias"]
    assert report["excluded"] == ["probabilities/kernel", "probabilities/bias"]
    np.testing.assert_array_equal(model.weights[0].numpy(), source.weights[0].numpy())


# -- bad files -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["missing.keras", "missing.weights.h5", "missing_ckpt", "missing.pb"])
def test_missing_file(tmp_path, name):
    from pipeline.train.restore import read_weights

    with pytest.raises(DeployError) as e:
        read_weights(tmp_path / name)
    assert name in str(e.value) and "\n" not in str(e.value) and ".keras" in str(e.value)


@pytest.mark.parametrize("name", ["bad.keras", "bad.weights.h5", "bad.h5", "bad.pb"])
def test_corrupt_file(tmp_path, name):
    from pipeline.train.restore import read_weights

    path = tmp_path / name
    path.write_bytes(b"not a model at all \x00\x01\x02")
    with pytest.raises(DeployError) as e:
        read_weights(path)
    assert name in str(e.value) and "\n" not in str(e.value)


def test_corrupt_checkpoint(saved, tmp_path):
    from pipeline.train.restore import read_weights

    (tmp_path / "ckpt-1.index").write_bytes(b"garbage" * 10)
    (tmp_path / "ckpt-1.data-00000-of-00001").write_bytes(b"garbage")
    with pytest.raises(DeployError) as e:
        read_weights(tmp_path / "ckpt-1")
    assert "ckpt-1" in str(e.value) and "\n" not in str(e.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DeployError, match="no checkpoint"):
        read_weights(empty)


def test_restore_into_zoo_model_from_its_own_keras_file(keras, tmp_path):
    """The train stage's model (small_cnn; mobilenet_v2 is too slow here), restored with a new head."""
    from types import SimpleNamespace

    from pipeline.train.zoo import build_model
    from pipeline.train.restore import restore

    section = SimpleNamespace(zoo="small_cnn", input_size=16, alpha=0.35, dropout=0.1, bn_momentum=0.9)
    source = randomise(build_model(section, 3))
    source.save(str(tmp_path / "zoo.keras"))
    model = build_model(section, 5)
    report = restore(model, tmp_path / "zoo.keras", exclude_scopes=["probabilities"])
    assert len(report["restored"]) == len(model.weights) - 2 and report["new"] == []


def test_nothing_matching_is_an_error(tmp_path):
    import keras

    from pipeline.errors import DeployError
    from pipeline.train.restore import restore

    keras.utils.set_random_seed(0)
    other = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="unrelated")], name="other")
    other.save(str(tmp_path / "other.keras"))
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(2, 3, name="conv")], name="mine")
    with pytest.raises(DeployError, match=r"other.keras: none of its 2 variables matches the model's"):
        restore(model, tmp_path / "other.keras")


def test_big_constants_of_a_frozen_graph_are_read_whole(tmp_path):
    """Weights above the graph view's small-tensor limit (10,000 values) are still read."""
    from pipeline.graph.proto import message_class
    from pipeline.train.restore import read_weights

    big = np.arange(20000, dtype="float32").reshape(100, 200)
    g = message_class("GraphDef")()
    node = g.node.add(name="dense/kernel", op="Const")
    node.attr["dtype"].type = 1
    tensor = node.attr["value"].tensor
    tensor.dtype = 1
    for d in big.shape:
        tensor.tensor_shape.dim.add(size=d)
    tensor.tensor_content = big.tobytes()
    g.node.add(name="out", op="Identity", input=["dense/kernel"]).attr["T"].type = 1
    (tmp_path / "big.pb").write_bytes(g.SerializeToString())
    np.testing.assert_array_equal(read_weights(tmp_path / "big.pb")["dense/kernel"], big)
