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


@pytest.fixture(scope="module")
def lstm(tmp_path_factory):
    """The Keras LSTM frozen once for the module: {"loop": its while loop (unroll=False), "unrolled": unroll=True}."""
    folder = tmp_path_factory.mktemp("lstm")
    return {"loop": _freeze_lstm(folder / "lstm.pb", unroll=False),
            "unrolled": _freeze_lstm(folder / "unrolled.pb", unroll=True)}


def _check(path, target="jetson_tx2", convert=False):
    from pipeline.check import check_model
    from pipeline.targets import load_target

    return check_model(path, load_target(target), convert=convert)


def test_lstm_no_names_unroll_and_the_unrolled_model_is_yes(lstm):
    report = _check(lstm["loop"])
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
    fixed = _check(lstm["unrolled"])
    assert [f.cause for f in fixed.route("onnx").findings if f.severity == "blocker"] == []
    assert fixed.route("onnx").accepted_but_wrong == []



def test_converted_lstm_every_onnx_blocker_names_unroll_and_the_unrolled_model_is_yes(lstm):
    """The onnx route judged on tf2onnx's real output (deploy check's default): the TensorList op
    tf2onnx leaves at the top and the one it leaves inside the ONNX Loop body both name the fix."""
    report = _check(lstm["loop"], convert=True)
    onnx = report.route("onnx")
    blockers = [f for f in onnx.findings if f.severity == "blocker"]
    assert any("/body/" in n for f in blockers for n in f.nodes), [f.nodes for f in blockers]
    for finding in blockers:
        assert "unroll=True" in finding.fix and "fixed sequence length" in finding.fix, finding.cause
        assert "static_rnn" in finding.fix and "move it out of the If/Loop/Scan body" not in finding.fix
    fixed = _check(lstm["unrolled"], convert=True)
    assert [f.cause for f in fixed.route("onnx").findings if f.severity == "blocker"] == []


def _loop_model(path, body_node):
    """x -> Loop(3 times: v + Det(v)) -> y; Det is not in TensorRT 8.2's ONNX parser."""
    from onnx import TensorProto, helper, save

    value = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         helper.make_node("Det", ["v_in"], ["d"], name=body_node),
         helper.make_node("Add", ["v_in", "d"], ["v_out"], name="add")],
        "body", [value("i", TensorProto.INT64, []), value("cond_in", TensorProto.BOOL, []),
                 value("v_in", TensorProto.FLOAT, [2, 2])],
        [value("cond_out", TensorProto.BOOL, []), value("v_out", TensorProto.FLOAT, [2, 2])])
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["M"], value=helper.make_tensor("m", TensorProto.INT64, [], [3])),
         helper.make_node("Constant", [], ["c"], value=helper.make_tensor("t", TensorProto.BOOL, [], [True])),
         helper.make_node("Loop", ["M", "c", "x"], ["y"], name="loop", body=body)],
        "g", [value("x", TensorProto.FLOAT, [2, 2])], [value("y", TensorProto.FLOAT, [2, 2])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def test_an_op_in_a_loop_body_from_a_tf_while_names_unroll_a_plain_loop_body_does_not(tmp_path):
    """The same unsupported op in a Loop body: tf2onnx's body of a TF while loop (TF node names with
    /while/) gets the recurrent-layer fix; a plain ONNX Loop body keeps the generic one."""
    def fix(body_node):
        report = _check(_loop_model(tmp_path / "m.onnx", body_node))
        return [f.fix for f in report.route("onnx").findings if f.severity == "blocker" and f.op == "Det"]

    recurrent = fix("model/lstm/while/body/_1/det")
    assert len(recurrent) == 1 and "unroll=True" in recurrent[0] and "static_rnn" in recurrent[0]
    assert fix("det") == ["replace Det with supported ops, or move it out of the If/Loop/Scan body"]


def test_lstm_loop_noops_are_not_advised_away_a_stray_noop_is(lstm, tmp_path):
    """rewrite remove_identity leaves the loop's NoOps alone (removing them breaks the loop), so the check
    names none of them; near miss: a NoOp beside a plain graph still gets remove_identity."""
    from pipeline.graph.frames import held_by_control_flow, tf_edges
    from pipeline.graph.readers import read_model

    path = lstm["loop"]
    held = held_by_control_flow(tf_edges(read_model(str(path))))
    loop_noops = {n for n in held if "LoopControlInputs" in n or "output_control_node" in n}
    assert loop_noops
    advised = {n for f in _check(path).findings if f.rewrite == "remove_identity" for n in f.nodes}
    assert not advised & held, sorted(advised & held)
    stray = _check(_stray_noop(tmp_path / "stray.pb"))
    assert [f.nodes for f in stray.findings if f.rewrite == "remove_identity"] == [["stray"]]


def _stray_noop(path):
    from pipeline.graph import proto

    graph_def = proto.GraphDef()
    x = graph_def.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = 1
    x.attr["shape"].shape.dim.add(size=-1)
    x.attr["shape"].shape.dim.add(size=4)
    graph_def.node.add(name="stray", op="NoOp", input=["^x"])
    relu = graph_def.node.add(name="out", op="Relu", input=["x", "^stray"])
    relu.attr["T"].type = 1
    path.write_bytes(graph_def.SerializeToString())
    return path


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
    from pipeline.tf.keras_model import CUSTOM_OBJECTS_ENV

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
    # the CLI flag, and the converter's worker loads the classes too: a converted verdict, not a prediction
    monkeypatch.delenv(CUSTOM_OBJECTS_ENV)
    from conftest import deploy

    res = deploy("check", tmp_path / "custom.keras", "--target", "jetson_tx2", "--custom-objects", objects,
                 "--format", "json", timeout=600)
    assert res.returncode in (0, 2) and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "GeMPooling" not in res.stderr and "predicted" not in res.stdout, res.stdout[-3000:]
    assert '"converted"' in res.stdout, res.stdout[-3000:]
