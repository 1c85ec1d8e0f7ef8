"""A SavedModel with several signatures reports each signature's inputs; a tf.Example signature
(a serialized string input parsed in the graph) is named as such (issue 20, point 7). Built the
way the field builds them: tf.saved_model.save with a predict signature on a float tensor and a
tf.Example one that parses serialized protos (tf.io.parse_example)."""

import pytest

from pipeline.graph import read_model
from pipeline.graph.tf_reader import TF_EXAMPLE, describe_signatures

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    from pipeline.tf import import_tf

    tf = import_tf()
    import numpy as np

    directory = tmp_path_factory.mktemp("signatures") / "saved_model"
    module = tf.Module()
    module.w = tf.Variable(np.ones((4, 2), "float32"))

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def predict(x):
        return {"y": tf.matmul(x, module.w)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def parse_and_predict(examples):
        features = tf.io.parse_example(examples, {"x": tf.io.FixedLenFeature([4], tf.float32)})
        return {"y": tf.matmul(features["x"], module.w)}

    module.predict, module.parse_and_predict = predict, parse_and_predict
    tf.saved_model.save(module, str(directory), signatures={"serving_default": predict,
                                                            "from_examples": parse_and_predict})
    return directory


def test_every_signature_with_its_inputs(saved_model):
    graph = read_model(saved_model)  # serving_default is viewed; every signature is described
    sigs = graph.signatures
    assert list(sigs) == ["from_examples", "serving_default"]
    [x] = sigs["serving_default"]["inputs"]
    assert (x["key"], x["dtype"], x["shape"], x["kind"]) == ("x", "float32", [None, 4], "tensor")
    [examples] = sigs["from_examples"]["inputs"]
    assert (examples["key"], examples["dtype"], examples["shape"], examples["kind"]) == (
        "examples", "string", [None], TF_EXAMPLE)
    assert sigs["from_examples"]["method"] == "tensorflow/serving/predict"
    # the same description whichever signature is viewed
    assert read_model(saved_model, signature="from_examples").signatures == sigs


def test_signature_lines_name_the_tf_example_input(saved_model):
    lines = describe_signatures(read_model(saved_model).signatures)
    assert lines == [
        "signature from_examples (predict): examples string [?] (serialized tf.Example protos, parsed in the graph)",
        "signature serving_default (predict): x float32 [?, 4]",
    ]


def test_a_plain_string_input_is_not_called_tf_example(tmp_path):
    from pipeline.tf import import_tf

    tf = import_tf()
    module = tf.Module()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def length(text):
        return {"n": tf.strings.length(text)}

    module.length = length
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures={"serving_default": length})
    [text] = read_model(tmp_path / "sm").signatures["serving_default"]["inputs"]
    assert (text["dtype"], text["kind"]) == ("string", "tensor")
