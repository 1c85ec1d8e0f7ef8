"""deploy diff: nodes matched by structure, not by the creation-order names TensorFlow gives them."""

import json

import numpy as np
import pytest

from pipeline.graph.diff import diff_models, format_text

from conftest import deploy


def _graph(tmp_path, name, order=("a", "b"), weights=1.0, extra=False, axis=3):
    """Two branches (each conv -> relu) concatenated; unnamed ops, so names follow creation order."""
    from pipeline.tf import import_tf

    tf = import_tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="input")
        kernels = {"a": np.full((3, 3, 3, 2), weights, "float32"), "b": np.full((1, 1, 3, 2), 0.5, "float32")}
        outs = {}
        for branch in order:
            y = tf.nn.relu(tf.nn.conv2d(x, tf.constant(kernels[branch]), 1, "SAME"))
            outs[branch] = tf.concat([y, y], axis=3)
        y = tf.concat([outs["a"], outs["b"]], axis=axis)
        if extra:
            y = tf.nn.relu(y)
        tf.identity(y, name="output")
    path = tmp_path / name
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


@pytest.mark.tf
def test_creation_order_swap_is_identical_up_to_renaming(tmp_path):
    first = _graph(tmp_path, "ab.pb", ("a", "b"))
    second = _graph(tmp_path, "ba.pb", ("b", "a"))
    report = diff_models(first, second)
    assert report.structurally_identical and not report.values
    assert report.renamed["concat"] == "concat_1" and report.renamed["concat_1"] == "concat"
    assert format_text(report).splitlines()[1] == "structurally identical up to renaming"
    res = deploy("diff", first, second)
    assert res.returncode == 0 and "concat ↔ concat_1" in res.stdout


@pytest.mark.tf
def test_changed_weights_added_nodes_and_changed_attributes(tmp_path):
    base = _graph(tmp_path, "base.pb")
    report = diff_models(base, _graph(tmp_path, "w.pb", weights=2.0))
    assert report.structurally_identical and len(report.values) == 1 and report.values[0]["max_abs_diff"] == 1.0
    report = diff_models(base, _graph(tmp_path, "extra.pb", extra=True))
    assert not report.structurally_identical and report.added == ["Relu_2"] and not report.removed
    report = diff_models(base, _graph(tmp_path, "axis.pb", axis=-1))
    assert report.structurally_identical  # the concat axis is a constant input: its value differs
    assert [(v["a"], v["max_abs_diff"]) for v in report.values] == [("concat_2/axis", 4.0)]
    res = deploy("diff", base, tmp_path / "extra.pb", "--format", "json")
    assert res.returncode == 4  # different (1 is bad input)
    data = json.loads(res.stdout)
    assert data["added"] == ["Relu_2"] and data["structurally_identical"] is False


def test_onnx_diff_and_bad_input(tmp_path):
    from onnx import TensorProto, helper, save

    def model(path, nodes):
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
        save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
        return path

    a = model(tmp_path / "a.onnx", [helper.make_node("Relu", ["x"], ["h"], name="first"),
                                    helper.make_node("Sigmoid", ["h"], ["y"], name="second")])
    b = model(tmp_path / "b.onnx", [helper.make_node("Relu", ["x"], ["h"], name="n0"),
                                    helper.make_node("Sigmoid", ["h"], ["y"], name="n1")])
    report = diff_models(a, b)
    assert report.structurally_identical and report.renamed == {"first": "n0", "second": "n1"}
    c = model(tmp_path / "c.onnx", [helper.make_node("Relu", ["x"], ["h"], name="first"),
                                    helper.make_node("Tanh", ["h"], ["y"], name="second")])
    report = diff_models(a, c)
    assert report.removed == ["second"] and report.added == ["second"] or not report.structurally_identical
    (tmp_path / "notes.txt").write_text("not a model")
    res = deploy("diff", a, tmp_path / "notes.txt", env={"DEPLOY_PROGRESS_AFTER": "30"})
    # a quick diff names no step on stderr (issue 26 item 2: only a step past the threshold does): one error line
    assert res.returncode == 1 and res.stderr.startswith("deploy: error: ") and "notes.txt" in res.stderr
    res = deploy("diff", a, tmp_path / "notes.txt", env={"DEPLOY_PROGRESS_AFTER": "0"})  # every step, at once
    assert res.returncode == 1 and res.stderr.startswith("diff: reading ") and "Traceback" not in res.stderr
    res = deploy("diff", a, tmp_path / "notes.txt", "--quiet")
    assert res.returncode == 1 and res.stderr.startswith("deploy: error: ") and not res.stdout


def _branches(tmp_path, name, first="y"):
    """a = relu(concat([x, y])), b = sigmoid(concat([x, z])), out = concat([a, b]): the two inner
    concats are created in the order ``first`` says, so `concat` and `concat_1` swap."""
    from pipeline.tf import import_tf

    tf = import_tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x, y, z = (v1.placeholder(tf.float32, [None, 4], name=n) for n in ("x", "y", "z"))
        if first == "y":
            cy = tf.concat([x, y], axis=1)
            cz = tf.concat([x, z], axis=1)
        else:
            cz = tf.concat([x, z], axis=1)
            cy = tf.concat([x, y], axis=1)
        tf.concat([tf.nn.relu(cy), tf.nn.sigmoid(cz)], axis=1, name="out")
    path = tmp_path / name
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


@pytest.mark.tf
def test_alike_branches_created_in_the_other_order(tmp_path):
    report = diff_models(_branches(tmp_path, "yz.pb", "y"), _branches(tmp_path, "zy.pb", "z"))
    assert report.structurally_identical and not report.values and not report.changed, format_text(report)
    assert report.renamed["concat"] == "concat_1" and report.renamed["concat_1"] == "concat"
    text = format_text(report)
    assert "swapped names (4), matched by structure:" in text and "concat ↔ concat_1" in text


def _two_heads(tmp_path, name, order, classes=(3, 3)):
    """Two structurally identical dense heads on one input; unnamed ops, weights differ."""
    from pipeline.tf import import_tf

    tf = import_tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 4], name="input")
        outs = {}
        for head in order:
            w = np.full((4, classes[0 if head == "a" else 1]), 1.0 if head == "a" else 2.0, "float32")
            outs[head] = tf.nn.softmax(tf.matmul(x, tf.constant(w)))
        tf.identity(outs["a"], name="head_a")
        tf.identity(outs["b"], name="head_b")
    path = tmp_path / name
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


@pytest.mark.tf
def test_two_identical_heads_are_told_apart_by_structure_and_values(tmp_path):
    report = diff_models(_two_heads(tmp_path, "ab.pb", "ab"), _two_heads(tmp_path, "ba.pb", "ba"))
    assert report.structurally_identical and not report.values, format_text(report)  # no weight "changed" by a swap
    assert report.renamed["MatMul"] == "MatMul_1" and report.renamed["MatMul_1"] == "MatMul"
    res = deploy("diff", tmp_path / "ab.pb", tmp_path / "ba.pb")
    assert res.returncode == 0


@pytest.mark.tf
def test_op_changed_in_place_and_shapes_of_changed_constants(tmp_path):
    """AddV2 -> Add is one change; a 91 -> 5 class head shows its kernel's shape change."""
    from pipeline.tf import import_tf

    tf = import_tf()
    v1 = tf.compat.v1

    def build(name, add, classes):
        graph = tf.Graph()
        with graph.as_default():
            x = v1.placeholder(tf.float32, [None, 8], name="input")
            h = tf.raw_ops.AddV2(x=x, y=tf.ones([8]), name="bias") if add == "AddV2" else \
                tf.raw_ops.Add(x=x, y=tf.ones([8]), name="bias")
            logits = tf.matmul(h, tf.constant(np.ones((8, classes), "float32")), name="logits/MatMul")
            tf.reshape(logits, [-1, classes, 1], name="boxes")
        (tmp_path / name).write_bytes(graph.as_graph_def().SerializeToString())
        return tmp_path / name

    report = diff_models(build("a.pb", "AddV2", 91), build("b.pb", "Add", 5))
    ops = [c for c in report.changed if "op " in c["what"]]
    assert [(c["a"], c["what"]) for c in ops] == [("bias", "op AddV2 → Add")]
    assert not report.added and not report.removed
    text = format_text(report)
    assert "bias (AddV2): op AddV2 → Add" in text
    assert "shape [8,91] → [8,5]" in text  # the kernel's shape
    assert "boxes/shape: [-1,91,1] → [-1,5,1]" in text  # the reshape's target shape, by value
    assert deploy("diff", tmp_path / "a.pb", tmp_path / "b.pb").returncode == 4


@pytest.mark.tf
def test_read_identities_of_convert_variables_to_constants_are_pass_through(tmp_path):
    """TF1 convert_variables_to_constants keeps `<var>/read` Identity nodes; the same graph
    without them (as optimize_for_inference writes it) is identical up to pass-through nodes."""
    from pipeline.tf import import_tf

    tf = import_tf()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 4], name="input")
        w = v1.get_variable("dense/kernel", initializer=np.ones((4, 2), "float32"), use_resource=False)
        tf.nn.relu(tf.matmul(x, w), name="output")
        with v1.Session(graph=graph) as sess:
            sess.run(v1.global_variables_initializer())
            frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), ["output"])
    assert any(n.name == "dense/kernel/read" for n in frozen.node)
    (tmp_path / "with_read.pb").write_bytes(frozen.SerializeToString())
    stripped = v1.GraphDef()
    for node in frozen.node:
        if node.name != "dense/kernel/read":
            new = stripped.node.add()
            new.CopyFrom(node)
            new.input[:] = ["dense/kernel" if i == "dense/kernel/read" else i for i in node.input]
    (tmp_path / "optimized.pb").write_bytes(stripped.SerializeToString())
    report = diff_models(tmp_path / "with_read.pb", tmp_path / "optimized.pb")
    assert report.structurally_identical and report.passthrough == {"removed": ["dense/kernel/read"], "added": []}
    assert format_text(report).splitlines()[1] == "structurally identical up to pass-through nodes"
    res = deploy("diff", tmp_path / "with_read.pb", tmp_path / "optimized.pb")
    assert res.returncode == 0


@pytest.mark.tf
@pytest.mark.slow
def test_keras_h5_models_from_fresh_sessions_match_by_structure(tmp_path):
    """The same network saved from two sessions (conv2d_16 vs conv2d, dense_3 vs dense) with a
    38 -> 44-class head: matched by structure, only the head reported."""
    import keras

    def build(path, classes, warm_up):
        keras.backend.clear_session()
        for _ in range(warm_up):  # earlier layers in the session push the default names on
            keras.layers.Conv2D(1, 1)
            keras.layers.Dense(1)
        inp = keras.Input((16, 16, 3), name="image")
        y = keras.layers.Conv2D(8, 3, activation="relu", kernel_initializer="ones")(inp)
        y = keras.layers.Conv2D(8, 3, activation="relu", kernel_initializer="ones")(y)
        y = keras.layers.GlobalAveragePooling2D()(y)
        out = keras.layers.Dense(classes, activation="softmax", kernel_initializer="ones")(y)
        keras.Model(inp, out).save(str(path))
        return path

    a = build(tmp_path / "a.h5", 38, warm_up=16)
    b = build(tmp_path / "b.h5", 44, warm_up=0)
    report = diff_models(a, b)
    assert not report.added and not report.removed, format_text(report)
    assert sorted(c["what"] for c in report.changed) == ["shape [38] → [44]", "shape [8,38] → [8,44]"]
    # the head's weights are changed values too (counted with the values, whatever their shape)
    assert sorted((v["shape"]["a"], v["shape"]["b"]) for v in report.values) == [([8, 38], [8, 44]), ([38], [44])]
    assert all("dense_16_1/" in c["a"] and "dense_1/" in c["b"] for c in report.changed), format_text(report)
    assert any("conv2d_16_1/" in x and "conv2d_1/" in y for x, y in report.renamed.items())
    res = deploy("diff", a, b)
    assert res.returncode == 4 and "shape [8,38] → [8,44]" in res.stdout


@pytest.mark.tf
def test_big_files_read_b_in_a_second_process_with_the_same_answers(tmp_path, monkeypatch):
    """The parallel path (B read in a forked process, values read again only when needed) gives the
    report the one-process path gives: renames, changed weights with their values, changed ops."""
    import pipeline.graph.diff

    base, changed = _graph(tmp_path, "base.pb"), _graph(tmp_path, "w.pb", weights=2.0, axis=-1)
    alone = diff_models(base, changed).to_dict()
    monkeypatch.setattr(pipeline.graph.diff, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(pipeline.graph.diff, "_idle_core", lambda: True)  # parallel whatever the machine's load
    parallel = diff_models(base, changed).to_dict()
    assert parallel == alone and parallel["values"]
    swapped = diff_models(_branches(tmp_path, "yz.pb", "y"), _branches(tmp_path, "zy.pb", "z"))
    assert swapped.structurally_identical and swapped.renamed["concat"] == "concat_1"


def test_the_parallel_read_counts_this_process_in_the_load(monkeypatch):
    """A core is free when the load average, less this process's own 1.0, leaves 1.5 cores idle: the
    benchmark loop's own load (about 1.0 on a quiet 2-core machine) no longer hides the free core."""
    import os

    import pipeline.graph.diff as diff

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    for load, free in ((0.2, True), (1.05, True), (1.5, True), (1.6, False), (3.5, False)):
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        assert diff._idle_core() is free, load
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert diff._idle_core() is False


# ------------------------------------------------------------------------------ across formats (issue 26, item 5)


@pytest.mark.tf
def test_one_model_as_frozen_pb_and_as_keras_is_structurally_identical(tmp_path):
    """The .pb is read straight from the GraphDef (signatures of its bytes), the .keras through the reader
    (signatures of decoded attributes). Before: every node "changed: attributes: ?" (27 of 38 here, 718 on
    MobileNetV3Small)."""
    import keras
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from pipeline.tf import import_tf

    tf = import_tf()
    keras.utils.set_random_seed(0)
    inputs = keras.Input((16, 16, 3), name="x")
    y = keras.layers.BatchNormalization()(keras.layers.Conv2D(4, 3, activation="relu")(inputs))
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(keras.layers.GlobalAveragePooling2D()(y)))
    model.save(str(tmp_path / "model.keras"))
    function = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([None, 16, 16, 3], tf.float32, name="x"))
    (tmp_path / "model.pb").write_bytes(convert_variables_to_constants_v2(function).graph.as_graph_def().SerializeToString())
    for a, b in (("model.pb", "model.keras"), ("model.keras", "model.pb")):
        report = diff_models(tmp_path / a, tmp_path / b)
        assert report.structurally_identical and not report.changed and not report.values, format_text(report)
        assert "?" not in format_text(report)


def _node_graph(path, attr):
    """input -> Relu "output" whose attribute "extra" is ``attr(AttrValue)``-set; no TensorFlow."""
    from pipeline.graph import proto

    graph_def = proto.GraphDef()
    x = graph_def.node.add(name="input", op="Placeholder")
    x.attr["dtype"].type = 1
    y = graph_def.node.add(name="output", op="Relu", input=["input"])
    y.attr["T"].type = 1
    attr(y.attr["extra"])
    path.write_bytes(graph_def.SerializeToString())
    return path


def test_attributes_deploy_cannot_read_are_named_once_and_tensor_attributes_by_value(tmp_path):
    def placeholder(name):
        return lambda value: setattr(value, "placeholder", name)

    def tensor(fill):
        def set_tensor(value):
            value.tensor.dtype = 1
            value.tensor.tensor_shape.dim.add(size=2)
            value.tensor.float_val.extend([fill, fill])
        return set_tensor

    report = diff_models(_node_graph(tmp_path / "a.pb", placeholder("T1")), _node_graph(tmp_path / "b.pb", placeholder("T2")))
    assert report.structurally_identical and report.not_compared == {"extra": 1}  # before: "attributes: ?"
    assert "attributes deploy cannot read, not compared: extra (1 node)" in format_text(report)
    report = diff_models(_node_graph(tmp_path / "c.pb", tensor(1.0)), _node_graph(tmp_path / "d.pb", tensor(2.0)))
    assert [c["what"] for c in report.changed] == ["attributes: extra tensor float32 [1.0,1.0] → tensor float32 [2.0,2.0]"]
