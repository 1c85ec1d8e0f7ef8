"""What the numeric checks of deploy rewrite feed (pipeline/rewrite/feed.py), and the pass runner feeding a
graph whose batch is fixed: token ids for a text model, normal values for a float sequence, the shape
set_input_shape will give, a batch of 1 fed one sample at a time (issue 26, item 4).

The first tests build GraphDefs with pipeline.graph.proto (no TensorFlow); the last ones freeze small Keras
models and run `deploy rewrite` on them."""

import json

import numpy as np
import pytest

from pipeline.errors import DeployError
from pipeline.graph import proto
from pipeline.graph.io import graph_io
from pipeline.rewrite.feed import SEQUENCE_LENGTH, check_feed
from pipeline.rewrite.tfgraph import TFGraph

INT32, FLOAT = 3, 1


def _placeholder(graph_def, name, dtype, dims):
    x = graph_def.node.add(name=name, op="Placeholder")
    x.attr["dtype"].type = dtype
    for d in dims:
        x.attr["shape"].shape.dim.add(size=d)
    return x


def _text_graph(vocabulary=50, gather=True):
    """ids int32 [?, ?] -> (Identity) -> GatherV2(embedding [vocabulary, 8], ids) -> Relu "output"."""
    from pipeline.graph.tf_attrs import decode_tf_tensor  # noqa: F401 - the reader the pass runner uses

    graph_def = proto.GraphDef()
    _placeholder(graph_def, "ids", INT32, [-1, -1])
    graph_def.node.add(name="ids/read", op="Identity", input=["ids"]).attr["T"].type = INT32
    weight = graph_def.node.add(name="embedding", op="Const")
    weight.attr["dtype"].type = FLOAT
    tensor = weight.attr["value"].tensor
    tensor.dtype = FLOAT
    for d in (vocabulary, 8):
        tensor.tensor_shape.dim.add(size=d)
    tensor.tensor_content = np.ones((vocabulary, 8), "float32").tobytes()
    axis = graph_def.node.add(name="axis", op="Const")
    axis.attr["dtype"].type = INT32
    axis.attr["value"].tensor.dtype = INT32
    axis.attr["value"].tensor.int_val.append(0)
    if gather:
        graph_def.node.add(name="lookup", op="GatherV2", input=["embedding", "ids/read", "axis"])
        graph_def.node.add(name="output", op="Relu", input=["lookup"])
    else:
        graph_def.node.add(name="output", op="Cast", input=["ids/read"])
    return TFGraph(graph_def)


def _graph(dtype, dims):
    graph_def = proto.GraphDef()
    _placeholder(graph_def, "x", dtype, dims)
    graph_def.node.add(name="output", op="Relu", input=["x"])
    return TFGraph(graph_def)


def test_a_text_model_gets_token_ids_below_its_vocabulary():
    graph = _text_graph(vocabulary=50)
    feed = check_feed(graph, graph_io(graph.graph_def, outputs=["output"]), count=4)
    ids = feed.arrays["ids"]
    assert feed.skipped is None and ids.dtype == np.int32 and ids.shape == (4, SEQUENCE_LENGTH)
    assert ids.min() >= 0 and ids.max() < 50 and len(np.unique(ids)) > 5
    assert "token ids in [0, 50)" in feed.source


def test_the_shape_set_input_shape_will_give_is_the_samples_shape():
    graph = _text_graph()
    feed = check_feed(graph, graph_io(graph.graph_def, outputs=["output"]), count=4, shape=("ids", [1, 32]))
    assert feed.arrays["ids"].shape == (4, 32)  # four samples; the pass runner feeds a batch-1 graph one at a time


def test_a_float_sequence_gets_normal_values():
    graph = _graph(FLOAT, [-1, -1, 4])
    feed = check_feed(graph, graph_io(graph.graph_def), count=3)
    assert feed.arrays["x"].shape == (3, SEQUENCE_LENGTH, 4) and feed.arrays["x"].dtype == np.float32
    assert "normal values" in feed.source


def test_an_integer_input_no_embedding_reads_is_not_compared_and_says_why():
    graph = _text_graph(gather=False)
    feed = check_feed(graph, graph_io(graph.graph_def, outputs=["output"]))
    assert feed.arrays == {} and "feeds no embedding lookup" in feed.skipped
    assert feed.source.startswith("not compared: integer input ids")


def test_an_image_of_unknown_size_names_the_flag_that_sets_it_and_the_flag_works():
    graph = _graph(FLOAT, [-1, -1, -1, 3])
    io = graph_io(graph.graph_def)
    with pytest.raises(DeployError, match="--pass set_input_shape --input-shape x=1,224,224,3"):
        check_feed(graph, io)
    feed = check_feed(graph, io, count=2, shape=(None, [1, 8, 6, 3]))
    assert feed.arrays["x"].shape == (2, 8, 6, 3) and feed.source == "random pixels, seed 0"


def test_a_dataset_for_a_model_without_image_input_is_refused(tmp_path):
    graph = _text_graph()
    with pytest.raises(DeployError, match="--dataset .*one NHWC image input; this one takes ids int32"):
        check_feed(graph, graph_io(graph.graph_def, outputs=["output"]), dataset=str(tmp_path))


def test_the_config_s_dataset_is_not_asked_for_a_model_without_image_input(tmp_path):
    """In deploy run the dataset section is there for every stage (base.yaml's shapes): the rewrite stage feeds a text
    model token ids as deploy rewrite without --dataset does, and says the folder was not used (it stopped the run
    with advice about a --dataset flag deploy run does not have)."""
    graph = _text_graph()
    io = graph_io(graph.graph_def, outputs=["output"])
    feed = check_feed(graph, io, dataset=str(tmp_path), dataset_asked=False)
    plain = check_feed(graph, io)
    assert feed.source == "dataset.path {} not used (not one NHWC image input); {}".format(tmp_path, plain.source)
    assert feed.arrays.keys() == plain.arrays.keys() and all(
        np.array_equal(feed.arrays[k], plain.arrays[k]) for k in plain.arrays)


def test_the_pass_runner_feeds_a_fixed_batch_what_it_takes():
    from pipeline.rewrite.engine import _run_in_batches

    seen = []

    class Session:
        def run(self, feed):
            seen.append(feed["x"].shape[0])
            return [feed["x"] * 2, feed["x"].sum(axis=1)]

    x = np.arange(10, dtype="float32").reshape(5, 2)
    for batch, groups in ((1, [1] * 5), (2, [2, 2, 2]), (None, [5])):
        seen.clear()
        out = _run_in_batches(Session(), {"x": x}, batch)
        assert seen == groups and np.array_equal(out[0], x * 2) and np.array_equal(out[1], x.sum(axis=1))


# ------------------------------------------------------------------------------ deploy rewrite, end to end


def _freeze_keras(model, path, spec):
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from pipeline.tf import import_tf

    tf = import_tf()
    function = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec)
    graph_def = convert_variables_to_constants_v2(function).graph.as_graph_def()
    path.write_bytes(graph_def.SerializeToString())
    return path


def _rewrite(capsys, *argv):
    from pipeline.cli import main

    code = main(["rewrite", *map(str, argv), "--target", "jetson_tx2", "--quiet"])
    return code, capsys.readouterr()


@pytest.mark.tf
@pytest.mark.slow
def test_a_text_model_is_rewritten_with_its_numbers_checked(tmp_path, capsys):
    """Embedding + LSTM over int32 ids [None, None]: before, "the numeric checks need a fixed-size NHWC
    input (apply set_input_shape first)", also after set_input_shape was given."""
    import keras

    from pipeline.tf import import_tf

    tf = import_tf()
    keras.utils.set_random_seed(0)
    ids = keras.Input((None,), dtype="int32", name="ids")
    hidden = keras.layers.LSTM(8)(keras.layers.Embedding(40, 8)(ids))
    model = keras.Model(ids, keras.layers.Dense(2, activation="softmax")(hidden))
    frozen = _freeze_keras(model, tmp_path / "text.pb", tf.TensorSpec([None, None], tf.int32, name="ids"))
    out = tmp_path / "fixed.pb"
    code, seen = _rewrite(capsys, frozen, "--pass", "set_input_shape", "--input-shape", "ids=1,12", "-o", out)
    assert code in (0, 2), seen.err
    receipt = json.loads((tmp_path / "fixed.rewrite.json").read_text())
    assert "token ids in [0, 40) shape [4,12]" in receipt["inputs"]
    compared = [p["comparison"] for p in receipt["passes"] if p.get("comparison")]
    assert compared and all(c.get("passed") for c in compared), receipt["passes"]


@pytest.mark.tf
@pytest.mark.slow
def test_a_conv1d_sequence_model_is_compared_on_normal_values(tmp_path, capsys):
    import keras

    from pipeline.tf import import_tf

    tf = import_tf()
    keras.utils.set_random_seed(0)
    x = keras.Input((None, 3), name="x")
    y = keras.layers.GlobalAveragePooling1D()(keras.layers.Conv1D(4, 3, activation="relu")(x))
    model = keras.Model(x, keras.layers.Dense(2)(y))
    frozen = _freeze_keras(model, tmp_path / "seq.pb", tf.TensorSpec([None, None, 3], tf.float32, name="x"))
    code, seen = _rewrite(capsys, frozen, "--pass", "remove_identity", "-o", tmp_path / "fixed.pb")
    assert code in (0, 2), seen.err
    receipt = json.loads((tmp_path / "fixed.rewrite.json").read_text())
    assert "x float32 normal values shape [4,{},3]".format(SEQUENCE_LENGTH) in receipt["inputs"]
    assert [p["comparison"]["passed"] for p in receipt["passes"]] == [True]


@pytest.mark.tf
def test_set_input_shape_with_a_batch_of_1_passes_the_numeric_check(tmp_path, capsys):
    """Before: "Cannot feed value of shape (4, 8, 8, 3) for Tensor input:0, which has shape (1, 8, 8, 3)" (exit 3)."""
    from tests.rewrite.test_tf_passes import conv, freeze

    from pipeline.cli import main

    frozen = freeze(lambda t, x: t.nn.relu(conv(t, x)), tmp_path / "image.pb")
    code = main(["rewrite", str(frozen), "--target", "jetson_tx2", "--pass", "set_input_shape", "--input-shape",
                 "input=1,8,8,3", "--pass", "remove_identity", "-o", str(tmp_path / "fixed.pb"), "--format", "json"])
    seen = capsys.readouterr()
    assert code in (0, 2), seen.err
    receipt = json.loads((tmp_path / "fixed.rewrite.json").read_text())
    assert receipt["passes"][0]["sites"] == ["input"] and receipt["passes"][0]["comparison"]["passed"]
    printed = json.loads(seen.out)  # --format json: one object on stdout; the progress on stderr (issue 26, item 2)
    assert printed["passes"] == receipt["passes"] and printed["receipt"] == str(tmp_path / "fixed.rewrite.json")
    assert printed["inputs"].startswith("random pixels, seed 0") and printed["passes"][0]["pass"] == "set_input_shape"
    assert "numeric checks" not in seen.err and "set_input_shape" not in seen.err  # stderr: slow steps only


def test_the_config_s_rgb_folder_is_not_used_for_a_one_channel_model(tmp_path):
    """The rewrite stage in deploy run on a 1-channel model stopped with "the model takes 1 channels; images from
    data/shapes are RGB (3)" (no next step): the config's folder is not asked for, so random pixels, said so; asked
    (deploy rewrite --dataset), the refusal stands."""
    graph = _graph("DT_FLOAT", [-1, 28, 28, 1])
    io = graph_io(graph.graph_def, outputs=["output"])
    feed = check_feed(graph, io, dataset=str(tmp_path), count=2, dataset_asked=False)
    assert feed.arrays["x"].shape == (2, 28, 28, 1)
    assert feed.source == "random pixels, seed 0 (dataset.path {} not used: its images are RGB, the model takes 1 " \
                          "channel)".format(tmp_path)
    with pytest.raises(DeployError, match="the model takes 1 channels"):
        check_feed(graph, io, dataset=str(tmp_path), count=2)


def test_a_real_sized_embedding_is_read_too():
    """A 2,000 x 8 embedding (16,000 values, over the graph view's 10,000-element small-tensor limit): its size was
    read through TensorValue.value, None above the limit, so every real text model was "not compared" and its passes
    ran unchecked."""
    graph = _text_graph(vocabulary=2000)
    feed = check_feed(graph, graph_io(graph.graph_def, outputs=["output"]), count=4)
    assert feed.skipped is None and "token ids in [0, 2000)" in feed.source
    assert graph.const_value(graph.node("embedding")).shape == (2000, 8)
