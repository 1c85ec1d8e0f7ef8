"""Advice that works, each fix applied (issue 26 item 4): a Keras LSTM's NO names unroll=True and the
unrolled model is YES; the unused placeholders convert_variables_to_constants_v2 leaves are pruned,
never blockers; a .keras with custom layers names its classes, and each route it names reads."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.tf, pytest.mark.slow]


def _freeze_lstm(path, unroll):
    from pipeline.tf import import_tf

    tf = import_tf()
    import keras
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    steps = 5 if unroll else None
    inp = keras.Input(shape=(steps,), dtype="int32", name="x")
    hidden = keras.layers.LSTM(8, unroll=unroll)(keras.layers.Embedding(50, 8)(inp))
    model = keras.Model(inp, keras.layers.Dense(2, activation="softmax")(hidden))
    func = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([None, steps], tf.int32, name="x"))
    path.write_bytes(convert_variables_to_constants_v2(func).graph.as_graph_def().SerializeToString())
    return path


def _check(path, target="jetson_tx2"):
    from pipeline.check import check_model
    from pipeline.targets import load_target

    return check_model(path, load_target(target), convert=False)


def test_lstm_no_names_unroll_and_the_unrolled_model_is_yes(tmp_path):
    report = _check(_freeze_lstm(tmp_path / "lstm.pb", unroll=False))
    onnx = report.route("onnx")
    blockers = [f for f in onnx.findings if f.severity == "blocker"]
    # the NO rests on the loop tf2onnx leaves, not on the unused VARIANT placeholders
    assert [f.op for f in blockers] == ["TensorListReserve"], [f.cause for f in blockers]
    assert "unroll=True" in blockers[0].fix and "fixed sequence length" in blockers[0].fix
    assert "static_rnn" in blockers[0].fix and "tf2onnx 1.17 leaves it" in blockers[0].cause
    assert not any("VARIANT" in f.cause for r in report.routes for f in r.findings)
    pruned = [f for f in report.findings if f.op == "Placeholder"]
    assert pruned and all(n.startswith("unused_control_flow_input") for n in pruned[0].nodes)
    assert [i["name"] for i in report.model["inputs"]] == ["x:0"]
    # the fix applied: LSTM(unroll=True) over a fixed length
    fixed = _check(_freeze_lstm(tmp_path / "unrolled.pb", unroll=True))
    assert [f.cause for f in fixed.route("onnx").findings if f.severity == "blocker"] == []
    assert fixed.route("onnx").accepted_but_wrong == []


_USER_SCRIPT = textwrap.dedent('''
    import sys
    import keras
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    class GeMPooling(keras.layers.Layer):
        def build(self, shape):
            self.p = self.add_weight(shape=(), initializer=keras.initializers.Constant(3.0), name="p")

        def call(self, x):
            return tf.reduce_mean(tf.pow(tf.maximum(x, 1e-6), self.p), axis=[1, 2]) ** (1.0 / self.p)

    inp = keras.Input(shape=(16, 16, 3), name="x")
    out = keras.layers.Dense(2)(GeMPooling()(keras.layers.Conv2D(4, 3)(inp)))
    model = keras.Model(inp, out)
    out_dir = sys.argv[1]
    model.save(out_dir + "/custom.keras")
    model.export(out_dir + "/exported")
    func = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([None, 16, 16, 3], tf.float32, name="x"))
    open(out_dir + "/custom.pb", "wb").write(
        convert_variables_to_constants_v2(func).graph.as_graph_def().SerializeToString())
''')

_CUSTOM_OBJECTS = textwrap.dedent('''
    import keras
    import tensorflow as tf

    class GeMPooling(keras.layers.Layer):
        def build(self, shape):
            self.p = self.add_weight(shape=(), initializer=keras.initializers.Constant(3.0), name="p")

        def call(self, x):
            return tf.reduce_mean(tf.pow(tf.maximum(x, 1e-6), self.p), axis=[1, 2]) ** (1.0 / self.p)
''')


def test_custom_layers_are_named_and_every_route_named_reads(tmp_path, monkeypatch):
    from pipeline.errors import DeployError
    from pipeline.graph.keras_reader import CUSTOM_OBJECTS_ENV

    script = tmp_path / "user_train.py"
    script.write_text(_USER_SCRIPT)
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True, capture_output=True, timeout=300)
    monkeypatch.delenv(CUSTOM_OBJECTS_ENV, raising=False)
    with pytest.raises(DeployError) as error:
        _check(tmp_path / "custom.keras")
    message = str(error.value)
    assert "GeMPooling" in message and "model.export" in message and "frozen .pb" in message
    assert "--custom-objects" in message and "DEPLOY_CUSTOM_OBJECTS=FILE.py" in message and "save it again" not in message
    # each route it names, applied
    for route in (tmp_path / "exported", tmp_path / "custom.pb"):
        assert _check(route).route("onnx") is not None
    objects = tmp_path / "layers.py"
    objects.write_text(_CUSTOM_OBJECTS)
    monkeypatch.setenv(CUSTOM_OBJECTS_ENV, str(objects))
    report = _check(tmp_path / "custom.keras")
    assert report.model["format"] == "keras" and report.route("onnx") is not None
