"""Untrusted graphs are screened before anything runs them: file, Python, checkpoint, queue and
variable ops are refused with the node's name, in the main graph and inside library functions."""

import pytest

from pipeline.errors import DeployError
from pipeline.tf.screen import execution_policy, screen_graph, unsafe_nodes


def _tf():
    import tensorflow as tf

    return tf


def v1_graph(build):
    """A TF1 graph built the usual way; returns its GraphDef."""
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="input")
        build(tf, x)
    return graph.as_graph_def()


def refused(graph_def):
    with pytest.raises(DeployError) as err:
        screen_graph(graph_def, "model.pb")
    message = err.value.message
    assert "\n" not in message and message.startswith("model.pb: node ")
    assert message.endswith("remove it from the graph (export the inference graph again), or pass --trust-model if you trust this file")
    return message


@pytest.mark.tf
def test_write_file_behind_a_control_dependency_is_refused(tmp_path):
    def build(tf, x):
        write = tf.io.write_file(str(tmp_path / "pwned.txt"), "owned", name="leak")
        with tf.control_dependencies([write]):
            tf.identity(x * 2.0, name="output")

    message = refused(v1_graph(build))
    assert message.startswith("model.pb: node 'leak' is WriteFile, which reads or writes files on the machine running deploy")
    assert not (tmp_path / "pwned.txt").exists()


@pytest.mark.tf
def test_read_file_into_write_file_copy_names_both():
    def build(tf, x):
        data = tf.io.read_file("/etc/hostname", name="steal")
        tf.io.write_file("/tmp/copy", data, name="drop")
        tf.identity(x, name="output")

    message = refused(v1_graph(build))
    assert "node 'steal' is ReadFile" in message and "also drop (WriteFile)" in message


@pytest.mark.tf
def test_python_inside_a_library_function_is_refused():
    tf = _tf()

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def model(x):
        y = tf.py_function(lambda t: t * 2.0, [x], tf.float32, name="smuggled")
        return tf.identity(y, name="output")

    graph_def = model.get_concrete_function().graph.as_graph_def()
    found = unsafe_nodes(graph_def)
    assert [(op, why) for _, _, op, why in found] == [("EagerPyFunc", "runs Python code carried by the graph")]
    refused(graph_def)


@pytest.mark.tf
def test_write_file_inside_a_while_body_function_is_refused():
    tf = _tf()

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def model(x):
        def body(i, acc):
            tf.io.write_file("/tmp/loop", tf.strings.as_string(i))
            return i + 1, acc * 2.0

        _, y = tf.while_loop(lambda i, acc: i < 3, body, [tf.constant(0), x])
        return y

    graph_def = model.get_concrete_function().graph.as_graph_def()
    found = unsafe_nodes(graph_def)
    assert [op for _, _, op, _ in found] == ["WriteFile"]
    assert found[0][0].startswith("function while_body")
    assert " in function while_body" in refused(graph_def)


@pytest.mark.tf
def test_print_to_a_file_is_refused_print_to_stderr_is_not(tmp_path):
    def to_file(tf, x):
        tf.print(x, output_stream="file://" + str(tmp_path / "log.txt"), name="log")
        tf.identity(x, name="output")

    def to_stderr(tf, x):
        tf.print(x, name="log")
        tf.identity(x, name="output")

    assert "node 'log' is PrintV2, which prints to a file" in refused(v1_graph(to_file))
    assert unsafe_nodes(v1_graph(to_stderr)) == []


@pytest.mark.tf
def test_training_graph_with_variables_saver_and_queue_is_refused():
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        queue = tf.compat.v1.FIFOQueue(8, [tf.float32], shapes=[[4]], name="batch_queue")
        x = queue.dequeue_many(2, name="dequeue")
        w = tf.compat.v1.get_variable("w", [4, 1], use_resource=False)  # TF1 reference variables
        loss = tf.reduce_mean(tf.matmul(x, w), name="loss")
        tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        tf.compat.v1.train.Saver()
    ops = {op for _, _, op, _ in unsafe_nodes(graph.as_graph_def())}
    assert {"FIFOQueueV2", "QueueDequeueManyV2", "VariableV2", "Assign", "ApplyGradientDescent", "SaveV2",
            "RestoreV2"} <= ops


@pytest.mark.tf
def test_inference_graphs_with_dropout_batch_norm_and_loops_pass():
    def build(tf, x):
        keep = tf.compat.v1.placeholder_with_default(0.5, [], name="keep_prob")
        y = tf.compat.v1.nn.dropout(x, keep_prob=keep)
        scale, offset = tf.ones([4]), tf.zeros([4])
        y4 = tf.reshape(y, [-1, 1, 1, 4])
        y4, _, _ = tf.compat.v1.nn.fused_batch_norm(y4, scale, offset, is_training=True)
        i0 = tf.constant(0)
        _, y4 = tf.compat.v1.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v * 0.5), [i0, y4])
        tf.image.non_max_suppression(tf.zeros([3, 4]), tf.zeros([3]), 2)
        tf.identity(y4, name="output")

    assert unsafe_nodes(v1_graph(build)) == []


def test_custom_op_is_refused_and_trust_skips_the_screen():
    from google.protobuf import text_format

    from pipeline.graph import proto

    graph_def = text_format.Parse('node { name: "input" op: "Placeholder" } node { name: "x" op: "MyCustomOp" input: "input" }',
                                  proto.GraphDef())
    assert "node 'x' is MyCustomOp, which is not an op this TensorFlow registers" in refused(graph_def)
    screen_graph(graph_def, "model.pb", trust=True)


def test_policy_data_names_real_ops():
    """Every op the policy allows despite TensorFlow's stateful flag is a registered, stateful op;
    the refusal patterns compile and catch what they are meant to."""
    policy = execution_policy()
    assert policy.allowed_stateful <= policy.registered
    assert policy.allowed_stateful <= policy.stateful
    for op in ("WriteFile", "ReadFile", "MatchingFiles", "PyFunc", "EagerPyFunc", "PyFuncStateless", "SaveV2",
               "RestoreV2", "TFRecordReaderV2", "FIFOQueueV2", "TFRecordDataset", "IteratorGetNext", "VariableV2",
               "VarHandleOp", "ReadVariableOp", "ScalarSummary", "DebugIdentity", "ImmutableConst"):
        assert policy.refusal(op), op
    for op in ("Conv2D", "FusedBatchNormV3", "RandomUniform", "While", "StatefulPartitionedCall", "Placeholder",
               "NonMaxSuppressionV5", "TensorScatterUpdate", "ScatterNd", "Enter", "_FusedConv2D"):
        assert policy.refusal(op) is None, op


@pytest.mark.tf
def test_with_outputs_only_what_running_them_executes_is_screened(tmp_path):
    """TensorFlow runs the fetched nodes' data and control inputs and the functions they call;
    a saver hanging off a training graph never runs when the logits are fetched."""
    def build(tf, x):
        w = tf.constant(0.5, shape=[4, 2])
        tf.identity(tf.matmul(x, w), name="logits")
        tf.io.write_file(str(tmp_path / "unrelated"), "x", name="saver_like")
        write = tf.io.write_file(str(tmp_path / "pwned"), "x", name="leak")
        with tf.control_dependencies([write]):
            tf.identity(x, name="leaky_output")

    graph_def = v1_graph(build)
    assert unsafe_nodes(graph_def, outputs=["logits"]) == []
    assert [n for _, n, _, _ in unsafe_nodes(graph_def, outputs=["leaky_output:0"])] == ["leak"]
    assert [n for _, n, _, _ in unsafe_nodes(graph_def)] == ["saver_like", "leak"]


@pytest.mark.tf
def test_functions_called_by_reachable_nodes_are_screened_transitively():
    tf = _tf()

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def model(x):
        def body(i, acc):
            tf.io.write_file("/tmp/loop", tf.strings.as_string(i))
            return i + 1, acc * 2.0

        _, y = tf.while_loop(lambda i, acc: i < 3, body, [tf.constant(0), x])
        return tf.identity(y, name="output"), tf.identity(x, name="plain")

    graph_def = model.get_concrete_function().graph.as_graph_def()
    assert [op for _, _, op, _ in unsafe_nodes(graph_def, outputs=["output"])] == ["WriteFile"]
    assert unsafe_nodes(graph_def, outputs=["plain"]) == []


def _evil(tmp_path):
    """A frozen-looking graph whose output has a control dependency on tf.io.write_file(...)."""
    target = tmp_path / "pwned.txt"
    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 1], name="input")
        write = tf.io.write_file(str(target), "owned", name="leak")
        with tf.control_dependencies([write]):
            tf.identity(x * 2.0, name="output")
    path = tmp_path / "evil.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path, target


REFUSAL = ("deploy: error: {}: node 'leak' is WriteFile, which reads or writes files on the machine running deploy: "
           "deploy does not run graphs that can act outside the graph; remove it from the graph (export the inference "
           "graph again), or pass --trust-model if you trust this file")


@pytest.mark.tf
@pytest.mark.parametrize("argv", [["consistency", "{m}", "--samples", "1"],
                                  ["rewrite", "{m}", "-t", "jetson_tx2", "-o", "{d}/out.pb", "--pass", "prune"],
                                  ["unfreeze", "{m}", "-o", "{d}/unfrozen"]])
def test_commands_refuse_to_run_a_graph_that_writes_files(tmp_path, argv):
    from conftest import deploy

    model, target = _evil(tmp_path)
    res = deploy(*[a.format(m=model, d=tmp_path) for a in argv])
    assert res.returncode == 1 and res.stderr.strip().splitlines()[-1] == REFUSAL.format(model)
    assert not target.exists()
    assert not (tmp_path / "out.pb").exists() and not (tmp_path / "unfrozen").exists()


@pytest.mark.tf
def test_the_convert_stage_refuses_it_and_trust_model_opts_in(tmp_path):
    from conftest import deploy

    model, target = _evil(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text("run: {{name: t, dir: {r}/runs}}\nmodel: {{source: {m}}}\ntarget: host_cpu\n"
                      "dataset: {{path: {r}/data, generate: shapes, train_per_class: 1, val_per_class: 1}}\n"
                      "stages: {{convert: {{compare_samples: 2}}}}\n".format(r=tmp_path, m=model))
    res = deploy("run", config, "--quiet")
    assert res.returncode == 1 and res.stderr.strip().splitlines()[-1] == "deploy: error: stage convert: " + \
        REFUSAL.format(model)[len("deploy: error: "):]
    assert not target.exists()
    res = deploy("consistency", model, "--samples", "1", "--trust-model")
    assert res.returncode == 0, res.stderr
    assert target.read_text() == "owned"  # the user vouched for the file: it ran


@pytest.mark.tf
def test_check_reports_it_without_running_anything(tmp_path):
    from conftest import deploy

    model, target = _evil(tmp_path)
    res = deploy("check", model, "--target", "jetson_tx2", "--format", "json")
    import json

    findings = [f for f in json.loads(res.stdout)["findings"] if f["kind"] == "acts_outside_graph"]
    assert [(f["op"], f["nodes"]) for f in findings] == [("WriteFile", ["leak"])]
    assert not target.exists()
