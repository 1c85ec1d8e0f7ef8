"""A YES from `deploy check` means "it converts and behaves": verdicts on graphs built the way the
field builds them (TF1 training sessions written to disk, convert_variables_to_constants_v2,
tf2onnx output of a training-mode graph), TF-TRT's share, ONNX Runtime on host_cpu, JUnit."""

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from pipeline.check import check_model
from pipeline.rewrite.predict import predict_rewrite
from pipeline.targets import load_target


def tf():
    from pipeline.tf import import_tf

    return import_tf()


def findings_of(report, kind):
    return [f for f in report.findings if f.kind == kind]


def training_session_graph(path):
    """A TF1 training script's graph as `tf.io.write_graph(sess.graph_def, ..., as_text=True)`
    writes it, under a .pb name: a TFRecord queue pipeline (no placeholder), variables, Adam,
    summaries and a Saver."""
    t = tf()
    v1 = t.compat.v1
    graph = t.Graph()
    with graph.as_default():
        files = v1.train.string_input_producer(["train.tfrecord"], name="input_files")
        _, record = v1.TFRecordReader(name="reader").read(files)
        parsed = v1.parse_single_example(record, {"image": v1.FixedLenFeature([], t.string),
                                                  "label": v1.FixedLenFeature([], t.int64)})
        image = t.reshape(v1.decode_raw(parsed["image"], t.uint8), [8, 8, 3])
        image = t.cast(image, t.float32, name="to_float")
        images, labels = v1.train.shuffle_batch([image, parsed["label"]], batch_size=4, capacity=32,
                                                min_after_dequeue=8, name="batch")
        kernel = v1.get_variable("conv/kernel", [3, 3, 3, 4], use_resource=False)
        y = t.nn.relu(t.nn.conv2d(images, kernel, 1, "SAME"), name="relu")
        dense = v1.get_variable("logits/kernel", [8 * 8 * 4, 2], use_resource=False)
        logits = t.matmul(t.reshape(y, [4, 8 * 8 * 4]), dense, name="logits")
        loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
        v1.summary.scalar("loss", loss)
        v1.train.AdamOptimizer(0.01).minimize(loss, global_step=v1.train.get_or_create_global_step())
        v1.train.Saver()
    t.io.write_graph(graph.as_graph_def(), str(path.parent), path.name, as_text=True)
    return path


@pytest.mark.tf
def test_training_session_written_as_text_pb_is_not_an_inference_graph(tmp_path, cli):
    path = training_session_graph(tmp_path / "train.pb")
    assert path.read_bytes().lstrip().startswith(b"node {")  # text, whatever the name says
    report = check_model(path, load_target("jetson_tx2"), predict=predict_rewrite)
    assert report.model["format"] == "pbtxt"
    causes = sorted(f.cause.split(":")[1].split("(")[0].strip() for f in findings_of(report, "not_inference_graph"))
    assert causes == ["it holds TensorBoard summary ops", "it holds checkpoint save/restore ops",
                      "it holds gradient ops of the training step", "it holds the training step",
                      "its input is a queue/reader/dataset pipeline", "its weights are still variables"]
    assert all(f.severity == "blocker" and f.route == "all" for f in findings_of(report, "not_inference_graph"))
    assert [report.verdict(r) for r in ("uff", "onnx", "tftrt")] == ["NO", "NO", "NO"]  # TF-TRT too
    assert not report.deployable and report.prediction is None
    res = cli("check", path, "--target", "jetson_tx2")
    assert res.returncode == 2 and "not an inference graph: its weights are still variables" in res.stdout
    assert "verdict: NO" in res.stdout


def tf2_dropout_graph(path):
    """A TF2 function with a keep_prob input feeding dropout, frozen with
    convert_variables_to_constants_v2 (the TF2 way), batch norm in inference mode."""
    t = tf()
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    rng = np.random.RandomState(0)
    kernel = t.Variable(rng.randn(3, 3, 3, 4).astype("float32"), name="conv/kernel")
    dense = t.Variable(rng.randn(8 * 8 * 4, 2).astype("float32"), name="dense/kernel")

    @t.function(input_signature=[t.TensorSpec([None, 8, 8, 3], t.float32, name="input"),
                                 t.TensorSpec([], t.float32, name="keep_prob")])
    def model(x, keep_prob):
        y = t.nn.conv2d(x, kernel, 1, "SAME")
        y, _, _ = t.compat.v1.nn.fused_batch_norm(y, t.ones([4]), t.zeros([4]), mean=t.zeros([4]),
                                                 variance=t.ones([4]), is_training=False)
        y = t.nn.dropout(t.nn.relu(y), rate=1.0 - keep_prob)
        return t.nn.softmax(t.matmul(t.reshape(y, [-1, 8 * 8 * 4]), dense), name="probabilities")

    frozen = convert_variables_to_constants_v2(model.get_concrete_function())
    path.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    return path


@pytest.mark.tf
def test_keep_prob_dropout_is_no_as_is_and_yes_after_rewrite(tmp_path, cli):
    report = check_model(tf2_dropout_graph(tmp_path / "frozen.pb"), load_target("jetson_tx2"), predict=predict_rewrite)
    onnx = report.route("onnx")
    assert onnx.blockers == 0 and [f.kind for f in onnx.accepted_but_wrong] == ["accepted_but_wrong"]
    assert "fed by placeholder keep_prob" in onnx.accepted_but_wrong[0].cause
    assert report.verdict("onnx") == "NO" and not report.deployable
    # what --auto applies: strip_dropout for the onnx route, uff_compat for the uff route's renames
    assert report.prediction == {"verdict": "YES", "passes": ["strip_dropout", "uff_compat"], "remaining": ""}
    res = cli("check", tmp_path / "frozen.pb", "--target", "jetson_tx2")
    assert res.returncode == 2
    assert "after `deploy rewrite --auto`: YES — passes strip_dropout, uff_compat (predicted" in res.stdout
    # and the prediction holds: deploy rewrite --auto, then check again
    out = tmp_path / "fixed.pb"
    res = cli("rewrite", tmp_path / "frozen.pb", "--target", "jetson_tx2", "-o", out, "--auto",
              "--outputs", "probabilities")
    assert res.returncode == 0, res.stderr
    res = cli("check", out, "--target", "jetson_tx2")
    assert res.returncode == 0 and "verdict: YES" in res.stdout


def conv_graph_with_a_tf_only_op(path):
    """A frozen inference graph: five convs with a Cumsum (no TF-TRT converter) after the second."""
    t = tf()
    v1 = t.compat.v1
    graph = t.Graph()
    with graph.as_default():
        x = v1.placeholder(t.float32, [1, 32, 32, 3], name="input")
        y = t.nn.relu(t.nn.conv2d(x, t.constant(0.1, shape=[3, 3, 3, 64]), 1, "SAME"))
        y = t.nn.relu(t.nn.conv2d(y, t.constant(0.1, shape=[3, 3, 64, 64]), 1, "SAME"))
        y = t.math.cumsum(y, axis=3, name="cumsum")
        for i in range(3):
            y = t.nn.relu(t.nn.conv2d(y, t.constant(0.1, shape=[1, 1, 64 if i == 0 else 8, 8]), 2, "SAME"))
        t.identity(t.reduce_mean(y, [1, 2]), name="output")
    path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


@pytest.mark.tf
def test_tftrt_reports_its_share_of_nodes_and_compute(tmp_path, cli):
    report = check_model(conv_graph_with_a_tf_only_op(tmp_path / "g.pb"), load_target("jetson_tx2"))
    tftrt = report.route("tftrt")
    assert report.verdict("tftrt") == "YES"
    assert [f.op for f in tftrt.findings] == ["Cumsum"]
    share = tftrt.share
    # 3x3x3x64 and 3x3x64x64 at 32x32, then 1x1 convs at 16x16, 8x8, 4x4: the first two are 98.7% of the FLOPs
    flops = 2 * 32 * 32 * (27 * 64 + 576 * 64) + 2 * (16 * 16 * 64 * 8 + 8 * 8 * 64 + 4 * 4 * 64)
    assert share["flops"] == flops and not share["estimated"]
    # two engines (before and after the Cumsum) hold every conv: all the compute, all nodes but one
    assert share["segments"] == 2 and share["compute"] == 1.0 and 0.9 < share["nodes"] < 1.0
    res = cli("check", tmp_path / "g.pb", "--target", "jetson_tx2", "--route", "tftrt")
    assert "TensorRT runs" in res.stdout and "of the compute" in res.stdout
    assert "the device needs TensorFlow with TF-TRT" in res.stdout


def test_tftrt_with_little_compute_in_tensorrt_ranks_after_full_tensorrt_routes():
    from pipeline.check.findings import CheckReport, Finding, RouteResult

    def result(route, blockers, compute=None):
        r = RouteResult(route, "t", "")
        r.findings = [Finding("blocker", route, "unsupported_op", "X", ["x"], "", "") for _ in range(blockers)]
        r.share = None if compute is None else {"nodes": compute, "compute": compute}
        return r

    report = CheckReport({}, {}, [result("onnx", 0), result("tftrt", 0, compute=0.2)], [])
    assert report.recommended.route == "onnx"
    # issue 20 point 4: the old answer (tftrt recommended, YES) was wrong: deploy run cannot take TF-TRT
    # (stages.convert.format is onnx or uff), so a YES resting on it promised an engine nobody builds
    report = CheckReport({}, {}, [result("uff", 1), result("tftrt", 0, compute=0.2)], [])
    assert report.recommended.route == "uff" and not report.deployable and report.verdict("tftrt") == "YES"
    report = CheckReport({}, {}, [result("uff", 0), result("tftrt", 0, compute=1.0)], [])
    assert report.recommended.route == "uff" and report.deployable
    report = CheckReport({}, {}, [result("uff", 1), result("onnx", 2), result("tftrt", 0, compute=0.2)], [])
    report.findings.append(Finding("blocker", "all", "not_inference_graph", "V", ["v"], "", ""))
    assert report.recommended.route == "uff"  # every route NO: TF-TRT running 20% does not win on count


def onnx_of_training_bn(tmp_path):
    """What tf2onnx makes of a graph frozen with batch norm in training mode (the field's way to an
    ONNX model that behaves differently alone and in a batch)."""
    import tf2onnx

    t = tf()
    graph = t.Graph()
    with graph.as_default():
        x = t.compat.v1.placeholder(t.float32, [None, 8, 8, 4], name="input")
        y, _, _ = t.compat.v1.nn.fused_batch_norm(x, t.ones([4]), t.zeros([4]), is_training=True)
        t.identity(t.nn.relu(y), name="output")
    model, _ = tf2onnx.convert.from_graph_def(graph.as_graph_def(), input_names=["input:0"], output_names=["output:0"],
                                              opset=13)
    path = tmp_path / "train_bn.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.tf
def test_batch_dependent_onnx_model_is_accepted_but_wrong(tmp_path):
    report = check_model(onnx_of_training_bn(tmp_path), load_target("jetson_tx2"))
    wrong = report.route("onnx").accepted_but_wrong
    assert wrong and all(f.batch_dependent for f in wrong)
    assert any("over the batch axis (axis 0)" in f.cause or "training_mode=1" in f.cause for f in wrong)
    assert report.verdict("onnx") == "NO" and not report.deployable


def test_onnx_batch_norm_training_mode_and_batch_reductions(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])
    inits = [numpy_helper.from_array(np.ones(4, "float32"), n) for n in ("s", "b", "m", "v")]
    inits.append(numpy_helper.from_array(np.array([0, 2, 3], "int64"), "axes"))
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn", training_mode=1),
             helper.make_node("ReduceMean", ["y", "axes"], ["z"], name="moments", keepdims=1),
             helper.make_node("Relu", ["z"], ["w"], name="relu")]
    out = helper.make_tensor_value_info("w", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [out], inits), opset_imports=[helper.make_opsetid("", 18)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    report = check_model(tmp_path / "m.onnx", load_target("agx_orin"))
    wrong = {f.nodes[0]: f.cause for f in report.route("onnx").accepted_but_wrong}
    assert wrong["bn"].startswith("converts without error, but batch norm in training mode (BatchNormalization "
                                  "training_mode=1)")
    assert wrong["moments"].startswith("converts without error, but ReduceMean over the batch axis (axis 0)")
    assert not report.deployable


def test_host_cpu_checks_against_onnx_runtime(tmp_path, cli):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    plain = helper.make_model(helper.make_graph([helper.make_node("HardSwish", ["x"], ["y"], name="hs")], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 14)])
    onnx.save(plain, str(tmp_path / "plain.onnx"))
    data = helper.make_tensor_value_info("data", TensorProto.UINT8, [None])
    img = helper.make_tensor_value_info("img", TensorProto.UINT8, None)
    decoder = helper.make_model(helper.make_graph([helper.make_node("ImageDecoder", ["data"], ["img"], name="decode")],
                                                  "g", [data], [img]), opset_imports=[helper.make_opsetid("", 20)])
    onnx.save(decoder, str(tmp_path / "decoder.onnx"))
    res = cli("check", tmp_path / "plain.onnx", "--target", "host_cpu")
    assert res.returncode == 0, res.stdout
    assert "for host_cpu (ONNX Runtime on this machine, no TensorRT)" in res.stdout and "None" not in res.stdout
    assert "onnx: YES — 0 blockers (opset 14, ONNX Runtime CPU kernels (onnxruntime" in res.stdout
    res = cli("check", tmp_path / "decoder.onnx", "--target", "host_cpu")
    assert res.returncode == 2 and "ONNX Runtime CPU kernels" in res.stdout and "does not support ImageDecoder" in res.stdout


@pytest.mark.tf
def test_junit_fails_only_what_makes_the_verdict_no(tmp_path, cli):
    import fixtures

    good = fixtures.onnx_model(tmp_path / "good.onnx", opset=13)
    junit = tmp_path / "good.xml"
    res = cli("check", good, "--target", "jetson_tx2", "--junit", junit)
    assert res.returncode == 0
    suites = {s.get("name"): s for s in ET.parse(str(junit)).getroot()}
    assert list(suites) == ["deploy.check.onnx"] and suites["deploy.check.onnx"].get("failures") == "0"
    # a TF graph: onnx recommended and YES, uff has blockers: reported as skipped, not failed
    model = tf2_dropout_graph(tmp_path / "frozen.pb")
    fixed = tmp_path / "fixed.pb"
    assert cli("rewrite", model, "-t", "jetson_tx2", "-o", fixed, "--pass", "strip_dropout").returncode == 0
    res = cli("check", fixed, "--target", "jetson_tx2", "--junit", junit, "--format", "json")
    assert res.returncode == 0 and json.loads(res.stdout)["verdict"] == "YES"
    suites = {s.get("name"): s for s in ET.parse(str(junit)).getroot()}
    assert suites["deploy.check.onnx"].get("failures") == "0"
    uff = suites["deploy.check.uff"]
    assert uff.get("failures") == "0" and int(uff.get("skipped")) > 0
    assert all(case.find("failure") is None for suite in suites.values() for case in suite)
    # a NO: failures on the recommended route only
    res = cli("check", model, "--target", "jetson_tx2", "--junit", junit)
    assert res.returncode == 2
    suites = {s.get("name"): s for s in ET.parse(str(junit)).getroot()}
    assert suites["deploy.check.onnx"].get("failures") == "2"  # the accepted-but-wrong dropout and the verdict
    assert suites["deploy.check.uff"].get("failures") == "0"


@pytest.mark.tf
def test_formats_by_content(tmp_path):
    import fixtures

    onnx_bytes = fixtures.onnx_model(tmp_path / "real.onnx").read_bytes()
    (tmp_path / "model.pb").write_bytes(onnx_bytes)
    assert check_model(tmp_path / "model.pb", load_target("jetson_tx2")).model["format"] == "onnx"
    frozen = tf2_dropout_graph(tmp_path / "frozen.pb").read_bytes()
    (tmp_path / "binary.pbtxt").write_bytes(frozen)
    assert check_model(tmp_path / "binary.pbtxt", load_target("jetson_tx2")).model["format"] == "frozen_pb"
    (tmp_path / "graph.onnx").write_bytes(frozen)
    assert check_model(tmp_path / "graph.onnx", load_target("jetson_tx2")).model["format"] == "frozen_pb"
