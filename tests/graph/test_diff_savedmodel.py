"""A SavedModel's weights are in its variables/ checkpoint, not in its graph (diff item 1).

Before, `deploy diff` of two SavedModels with the same structure and other weights said
"structurally identical" and nothing about the weights (the same pair as .keras files listed the
constants with other values). Now it reads both checkpoints (without TensorFlow) and lists the
variables whose values differ; where it cannot read them it says so, never implying they are equal."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import deploy
from pipeline.graph.diff import diff_models, format_text

pytestmark = pytest.mark.tf


def _tf2_module(path, bias):
    """tf.saved_model.save of relu(x @ w + b): the serving signature reads variables no restore op
    writes (they are bound through the object graph)."""
    from pipeline.tf import import_tf

    tf = import_tf()

    class Dense(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(np.arange(12, dtype="float32").reshape(4, 3) / 10, name="dense/kernel")
            self.b = tf.Variable(np.asarray(bias, "float32"), name="dense/bias")

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def __call__(self, x):
            return {"y": tf.nn.relu(tf.matmul(x, self.w) + self.b)}

    module = Dense()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.__call__})
    return path


def _tf1_builder(path, bias):
    """A TF1 SavedModel (saved_model.Builder): restored by the saver's ops in the graph."""
    from pipeline.tf import import_tf

    tf = import_tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 4], name="x")
        w = v1.get_variable("dense/kernel", initializer=np.ones((4, 3), "float32"))
        b = v1.get_variable("dense/bias", initializer=np.asarray(bias, "float32"))
        y = tf.nn.relu(tf.matmul(x, w) + b, name="y")
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            builder = v1.saved_model.Builder(str(path))
            signature = v1.saved_model.predict_signature_def({"x": x}, {"y": y})
            builder.add_meta_graph_and_variables(session, ["serve"], {"serving_default": signature})
            builder.save()
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("diff_savedmodel")
    return {
        "a": _tf2_module(folder / "a", [0.0, 0.0, 0.0]),
        "same": _tf2_module(folder / "same", [0.0, 0.0, 0.0]),
        "b": _tf2_module(folder / "b", [0.0, 0.5, 0.0]),
        "tf1_a": _tf1_builder(folder / "tf1_a", [0.0, 0.0, 0.0]),
        "tf1_b": _tf1_builder(folder / "tf1_b", [0.0, 0.0, -2.0]),
    }


@pytest.mark.parametrize("pair", [("a", "b"), ("tf1_a", "tf1_b")], ids=["tf2-object-graph", "tf1-saver"])
def test_other_weights_are_listed(models, pair):
    a, b = models[pair[0]], models[pair[1]]
    report = diff_models(a, b)
    assert report.structurally_identical
    assert [(v["a"], v["values"]) for v in report.values] == [
        ("dense/bias", {"a": [0.0, 0.0, 0.0], "b": [0.0, 0.5, 0.0] if pair[0] == "a" else [0.0, 0.0, -2.0]})]
    assert report.variables_compared == 2 and not report.weights_not_compared
    text = format_text(report)
    assert "structurally identical, 1 variable(s) with different values" in text
    assert "dense/bias: [0.0,0.0,0.0] → " in text
    res = deploy("diff", a, b, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["identical_up_to_renaming"] is False


def test_the_same_weights_are_identical(models):
    report = diff_models(models["a"], models["same"])
    assert report.variables_compared == 2 and not report.values and not report.weights_not_compared
    assert report.to_dict()["identical_up_to_renaming"] is True
    assert "variable" not in format_text(report).split("\n")[1]


def test_an_unreadable_checkpoint_is_said_not_compared(models, tmp_path):
    """The near miss: a checkpoint deploy cannot read is named, and the weights are not called equal."""
    broken = tmp_path / "broken"
    shutil.copytree(str(models["b"]), str(broken))
    (broken / "variables" / "variables.index").write_bytes(b"not a table" * 8)
    report = diff_models(models["a"], broken)
    text = format_text(report)
    assert "weights not compared: 2 variable(s): SavedModel variables: " in text
    assert "variables.index is not a checkpoint index" in text
    assert report.structurally_identical and not report.values and report.variables_compared == 0
    assert report.to_dict()["identical_up_to_renaming"] is None
    assert deploy("diff", models["a"], broken).returncode == 0


def test_one_keras_model_by_model_export_and_tf_saved_model_save(tmp_path):
    """The field's two ways to save a Keras model (diff items 1 and 2): model.export names the
    variables' resources dense/bias_1 and restores them in its restore function; tf.saved_model.save
    names them dense/bias and binds them through the object graph only. Identical up to renaming,
    weights read on both sides and equal; other weights are listed."""
    import keras

    from pipeline.tf import import_tf

    tf = import_tf()
    inputs = keras.Input((4,), name="x")
    model = keras.Model(inputs, keras.layers.Dense(3, name="dense")(inputs))
    model.export(str(tmp_path / "export"), verbose=False)
    tf.saved_model.save(model, str(tmp_path / "tfsave"))
    model.layers[-1].bias.assign([0.0, 0.0, 0.25])
    model.export(str(tmp_path / "export2"), verbose=False)

    report = diff_models(tmp_path / "export", tmp_path / "tfsave")
    assert report.structurally_identical and not report.values, format_text(report)
    assert report.variables_compared == 2 and not report.weights_not_compared
    assert report.renamed["dense/bias_1"] == "dense/bias"
    res = deploy("diff", tmp_path / "export", tmp_path / "tfsave")
    assert res.returncode == 0 and "structurally identical up to renaming" in res.stdout, res.stdout + res.stderr

    report = diff_models(tmp_path / "export", tmp_path / "export2")
    assert [(v["a"], v["values"]["b"]) for v in report.values] == [("dense/bias_1", [0.0, 0.0, 0.25])]


def test_a_damaged_checkpoint_index_is_unreadable_never_a_traceback(tmp_path):
    """The bundle is parsed by deploy (no TensorFlow): a block shorter than its own trailer (struct.error inside) or a
    shard offset past the file's end (a read of the claimed size would allocate it) is Unreadable, which the diff
    reports as "weights not compared"."""
    import pytest

    from pipeline.graph import proto
    from pipeline.graph.diff.weights import SavedModelVariables, Unreadable

    saved = proto.SavedModel()
    meta = saved.meta_graphs.add()
    meta.meta_info_def.tags.append("serve")
    (tmp_path / "saved_model.pb").write_bytes(saved.SerializeToString())
    (tmp_path / "variables").mkdir()
    bad = Path(__file__).resolve().parents[1] / "fuzz" / "regressions" / "bundle" / "block_shorter_than_its_trailer"
    (tmp_path / "variables" / "variables.index").write_bytes(bad.read_bytes())
    variables = SavedModelVariables(tmp_path)
    for _ in range(2):  # the second answer is the first's, kept
        with pytest.raises(Unreadable, match="the checkpoint does not parse"):
            variables.value("dense/kernel")


def test_an_untrusted_index_s_odd_numbers_are_unreadable_not_a_hang_or_a_traceback():
    """Review findings: a varint longer than 10 bytes grew an integer without end (a 400 KB index took 12 s, a few MB
    minutes); negative dimensions passed the size check (the product of [-1, -3] is 3) and reshape raised; complex
    values broke --format json."""
    import numpy as np

    from pipeline.graph.diff.report import array_change
    from pipeline.graph.diff.weights import Unreadable, Value, _varint

    assert _varint(b"\xac\x02", 0) == (300, 2)
    with pytest.raises(Unreadable, match="cannot parse"):
        _varint(b"\xff" * 11 + b"\x01", 0)
    odd = Value("float32", [-1, -3], np.zeros(3, "float32").tobytes())
    assert odd.array() is None
    with pytest.raises(Unreadable, match="negative dimension"):
        Value("string", [-1, -3], b"").strings()
    change = array_change("c", "c", np.array([1 + 1j, 2], "complex64"), np.array([1 + 1j, 3], "complex64"))
    json.dumps(change)
    assert change["values"] == {"a": ["(1+1j)", "(2+0j)"], "b": ["(1+1j)", "(3+0j)"]}
