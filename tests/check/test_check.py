"""`deploy check`: exact findings, causes, fixes, verdicts and exit codes on models built here."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from onnx import TensorProto

import fixtures
from pipeline.check import check_model
from pipeline.rewrite.predict import predict_rewrite
from pipeline.targets import load_target

from conftest import ROOT

TX2 = None


def tx2():
    global TX2
    TX2 = TX2 or load_target("jetson_tx2")
    return TX2


def route(report, name):
    return next(r for r in report.routes if r.route == name)


def blockers(report, name):
    """{op or kind: sorted nodes} of a route's blockers (route findings and every-route findings)."""
    found = {}
    for f in route(report, name).findings + report.findings:
        if f.severity == "blocker" and f.route in (name, "all"):
            found[f.op or f.kind] = sorted(f.nodes)
    return found


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


# ------------------------------------------------------------------------------ TensorFlow graphs


@pytest.mark.tf
def test_training_graph_with_keep_prob_placeholder(models):
    # the offline prediction's op-level detail (test_ask_converter / test_field_corpus check the real conversion)
    report = check_model(fixtures.training_graph(models / "train.pb"), tx2(), convert=False, predict=predict_rewrite)
    dropout = ["dropout/GreaterEqual", "dropout/SelectV2", "dropout/random_uniform/RandomUniform"]
    assert blockers(report, "uff") == {
        "FusedBatchNormV3": ["bn/FusedBatchNormV3"], "PlaceholderWithDefault": ["keep_prob"],
        "RandomUniform": ["dropout/random_uniform/RandomUniform"], "GreaterEqual": ["dropout/GreaterEqual"],
        "SelectV2": ["dropout/SelectV2"], "Shape": ["dropout/Shape"]}  # NvUffParser rejects Shape (issue 26)
    uff_bn = next(f for f in route(report, "uff").findings if f.op == "FusedBatchNormV3")
    assert uff_bn.cause.startswith("batch norm in training mode (FusedBatchNormV3 is_training=true)")
    assert uff_bn.rewrite == "bn_inference"
    uff_random = next(f for f in route(report, "uff").findings if f.op == "RandomUniform")
    assert uff_random.cause.startswith("dropout left in training mode (RandomUniform → GreaterEqual → SelectV2 → Mul) "
                                       "fed by placeholder keep_prob: the output is random")
    assert uff_random.fix == ("exported in training mode — rebuild with training=False (deploy's export stage does) "
                              "or apply rewrite strip_dropout")
    # onnx: converts (0 blockers) but the TensorRT parser ignores RandomUniform's seed: accepted but wrong
    assert blockers(report, "onnx") == {}
    wrong = {f.op: sorted(f.nodes) for f in route(report, "onnx").accepted_but_wrong}
    assert wrong == {"GreaterEqual/RandomUniform/SelectV2": dropout, "FusedBatchNormV3": ["bn/FusedBatchNormV3"]}
    # batch dependence is reported for every route
    batch = [f for f in report.findings if f.kind == "batch_dependent"]
    assert [f.nodes for f in batch] == [["bn/FusedBatchNormV3"]] and batch[0].batch_dependent
    # accepted but wrong on the recommended route: NO as it is (a CI gate must not ship random output)
    assert not report.deployable and report.recommended.route == "onnx"
    assert [report.verdict(r) for r in ("uff", "onnx", "tftrt")] == ["NO", "NO", "NO"]
    assert report.wrong("tftrt") == 2  # what stays in TensorFlow runs in training mode too
    # the dry rewrite: strip_dropout would do, but bn_inference has no moving statistics in the graph
    p = report.prediction
    assert p["verdict"] == "NO" and p["passes"] == ["strip_dropout", "bn_inference"]
    assert p["remaining"].startswith("bn_inference: no moving mean/variance for bn/FusedBatchNormV3")


@pytest.mark.tf
def test_constant_rate_dropout_is_rewritten_by_tf2onnx_only_in_its_patterns(models):
    # issue 20: the old answer (constant rate -> rewritten -> YES) was wrong for today's TensorFlow:
    # tf.nn.dropout applies the mask with SelectV2, which tf2onnx 1.17's dropout rewriter does not
    # match; the ONNX model keeps RandomUniformLike (test_field_corpus converts it for real)
    report = check_model(fixtures.training_graph(models / "train_rate.pb", keep_prob_placeholder=False), tx2(),
                         convert=False)
    onnx = route(report, "onnx")
    assert any("RandomUniform" in f.op for f in onnx.accepted_but_wrong)
    assert not [f for f in onnx.findings if f.kind == "pattern"]
    # the TF 1.13-1.15 form (Cast -> Mul, constant rate) is what the rewriter replaces by ONNX Dropout
    import field_graphs

    report = check_model(field_graphs.tf115_dropout(models / "tf115.pb", placeholder_rate=False), tx2(), convert=False)
    onnx = route(report, "onnx")
    assert not onnx.accepted_but_wrong and report.verdict("onnx") == "YES"
    info = [f for f in onnx.findings if f.kind == "pattern"]
    assert info and "tf2onnx's dropout rewriter turns it into ONNX Dropout" in info[0].cause


@pytest.mark.tf
def test_queue_fed_input_pipeline_says_where_to_cut(models):
    report = check_model(fixtures.queue_graph(models / "queue.pb"), tx2())
    assert [f.op for f in route(report, "onnx").findings if f.severity == "blocker"] == ["DecodeJpeg"]
    finding = route(report, "onnx").findings[0]
    assert finding.cause.startswith("the input pipeline (file reading, decoding, queues, tf.data) is baked into the graph")
    # the pipeline's own output (the cut turns the node named into the placeholder; ExpandDims was its consumer)
    assert finding.fix.startswith("cut the graph at decode (make it the input)") and finding.rewrite == "cut"
    assert set(blockers(report, "uff")) == {"FIFOQueueV2", "QueueDequeueV2", "DecodeJpeg", "Cast",
                                            "DecodeJpeg/FIFOQueueV2/QueueDequeueV2"}
    # no placeholder, a queue for input: not an inference graph, NO on every route (TF-TRT included)
    graph_level = [f for f in report.findings if f.kind == "not_inference_graph"]
    assert [sorted(f.nodes) for f in graph_level] == [["decode", "dequeue", "input_queue"]]
    assert graph_level[0].cause == ("not an inference graph: its input is a queue/reader/dataset pipeline (3 nodes: "
                                    "DecodeJpeg, FIFOQueueV2, QueueDequeueV2) and it has no placeholder to feed")
    assert graph_level[0].fix.startswith("cut the graph at decode so it becomes the input: deploy rewrite --pass cut "
                                         "--cut decode=N,H,W,C; or export the inference graph")
    assert blockers(report, "tftrt") == {"DecodeJpeg/FIFOQueueV2/QueueDequeueV2": ["decode", "dequeue", "input_queue"]}
    assert not report.deployable and report.prediction is None  # cut needs options: no automatic fix


@pytest.mark.tf
def test_nms_is_detection_post_processing(models):
    report = check_model(fixtures.nms_graph(models / "nms.pb"), tx2())
    finding = next(f for f in route(report, "uff").findings if f.op == "NonMaxSuppressionV3")
    assert finding.cause.startswith("detection post-processing (non-max suppression, top-k, Where)")
    assert "NMS plugin (EfficientNMS_TRT or BatchedNMS_TRT)" in finding.fix and "cut the graph before boxes, scores" in finding.fix


@pytest.mark.tf
def test_while_loop_is_control_flow(models):
    report = check_model(fixtures.while_graph(models / "while.pb"), tx2())
    uff = blockers(report, "uff")
    assert {"Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"} <= set(uff)
    merge = next(f for f in route(report, "uff").findings if f.op == "Merge")
    assert merge.cause.startswith("control flow (tf.while_loop / tf.cond / TensorArray) in the inference graph")
    assert blockers(report, "onnx") == {}  # tf2onnx turns it into an ONNX Loop, which TensorRT 8.2 parses


@pytest.mark.tf
def test_keras_model_is_checked_as_its_inference_graph(models):
    report = check_model(fixtures.keras_model(models / "m.keras"), tx2())
    assert report.model["format"] == "keras"
    assert blockers(report, "onnx") == {}
    assert not [f for f in report.findings if f.kind in ("stochastic", "batch_dependent")]  # training=False
    assert set(blockers(report, "uff")) == {"AddV2"}


def test_custom_op_is_reported_once_for_every_route(models):
    report = check_model(fixtures.custom_op_graph(models / "custom.pb"), tx2())
    custom = [f for f in report.findings if f.kind == "custom_op"]
    assert len(custom) == 1 and custom[0].nodes == ["custom"] and custom[0].severity == "blocker"
    assert "TensorFlow 2.21.0 has no such op" in custom[0].cause or "TensorFlow" in custom[0].cause
    for name in ("uff", "onnx", "tftrt"):
        assert blockers(report, name) == {"MyCustomOp": ["custom"]}
    assert not report.deployable


def test_checking_a_pb_imports_no_tensorflow(models):
    path = fixtures.custom_op_graph(models / "light.pb")
    code = ("import sys; from pipeline.cli import main; main(['check', {!r}, '--target', 'jetson_tx2']);"
            "print('TF' if 'tensorflow' in sys.modules else 'NO TF')".format(str(path)))
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True)
    assert out.stdout.strip().endswith("NO TF"), out.stderr


# ------------------------------------------------------------------------------ ONNX models


def test_onnx_opset_above_the_target(models):
    report = check_model(fixtures.onnx_model(models / "o15.onnx", opset=15), tx2())
    finding = route(report, "onnx").findings[0]
    assert (finding.kind, finding.severity) == ("opset", "blocker")
    assert finding.cause == "the model is at ONNX opset 15; TensorRT 8.2.1 parses up to opset 13"
    assert finding.fix.startswith("convert again at opset 13")
    assert route(report, "uff").verdict == "N/A" and route(report, "tftrt").verdict == "N/A"
    assert check_model(fixtures.onnx_model(models / "o15b.onnx", opset=15), load_target("xavier_nx")).deployable


def test_onnx_uint8_input(models):
    report = check_model(fixtures.onnx_model(models / "u8.onnx", input_type=TensorProto.UINT8), tx2())
    assert blockers(report, "onnx") == {"dtype": ["x"]}
    finding = route(report, "onnx").findings[0]
    assert finding.cause == "input x is UINT8; TensorRT 8.2.1 has no UINT8 tensors" and finding.rewrite == "retype_uint8_input"


def test_onnx_int64_input_is_a_warning(models):
    report = check_model(fixtures.onnx_model(models / "i64.onnx", input_type=TensorProto.INT64), tx2())
    assert blockers(report, "onnx") == {}
    assert [f.cause for f in route(report, "onnx").findings if f.kind == "dtype"] == [
        "input x is INT64; TensorRT 8.2.1 casts INT64 to INT32"]
    # its fix named `rewrite int64_to_int32`, a pass deploy does not have (deploy rewrite: "unknown rewrite pass")
    from pipeline.rewrite import registry

    for finding in route(report, "onnx").findings:
        assert finding.rewrite is None or finding.rewrite in registry(), finding.rewrite
        assert "int64_to_int32" not in finding.fix


def test_onnx_plugin_node_is_recognised_as_a_plugin(models):
    report = check_model(fixtures.onnx_model(models / "plugin.onnx", plugin=True), tx2())
    plugin = [f for f in route(report, "onnx").findings if f.op == "EfficientNMS_TRT"]
    assert len(plugin) == 1 and plugin[0].kind == "plugin", plugin


def test_onnx_unsupported_attribute_value(models):
    report = check_model(fixtures.onnx_model(models / "cubic.onnx", resize_mode="cubic"), tx2())
    finding = route(report, "onnx").findings[0]
    assert finding.kind == "attribute" and finding.nodes == ["resize"]
    assert finding.cause == "Resize mode='cubic': TensorRT 8.2.1 supports nearest, linear"
    assert check_model(fixtures.onnx_model(models / "linear.onnx", resize_mode="linear"), tx2()).deployable


def test_onnx_dynamic_spatial_dims_warn(models):
    report = check_model(fixtures.onnx_model(models / "ok.onnx"), tx2())
    assert report.deployable and blockers(report, "onnx") == {}


# ------------------------------------------------------------------------------ command line


def test_cli_text_json_markdown_junit_and_exit_codes(models, tmp_path, cli):
    bad = fixtures.onnx_model(models / "cli15.onnx", opset=15)
    res = cli("check", bad, "--target", "jetson_tx2")
    assert res.returncode == 2
    assert "onnx: NO — 1 blocker" in res.stdout and "verdict: NO" in res.stdout
    res = cli("check", bad, "--target", "jetson_tx2", "--format", "json", "--junit", tmp_path / "check.xml")
    data = json.loads(res.stdout)
    assert data["schema"] == "deploy.check/2" and data["deployable"] is False and data["verdict"] == "NO"
    assert data["recommended"] == {"route": "onnx", "detail": "opset 15, TensorRT 8.2.1 ONNX parser", "blockers": 1,
                                   "accepted_but_wrong": 0}
    onnx = next(r for r in data["routes"] if r["route"] == "onnx")
    assert onnx["verdict"] == "NO" and onnx["findings"][0]["kind"] == "opset"
    suites = ET.parse(str(tmp_path / "check.xml")).getroot()
    suite = suites.find("testsuite")
    assert suite.get("name") == "deploy.check.onnx" and suite.get("failures") == "2"
    res = cli("check", bad, "--target", "xavier_nx", "--format", "markdown")
    assert res.returncode == 0 and "**Verdict: YES**" in res.stdout and "| onnx | YES | 0 | 0 |" in res.stdout


@pytest.mark.parametrize("content, message", [
    (b"", "file is empty"),
    (b"\x00\x01garbage\xff" * 10, "not a"),
    (b"<html><head><title>Model</title></head><body>404</body></html>", "not a"),
])
def test_cli_bad_files_are_one_line_errors(tmp_path, content, message, cli):
    for suffix in (".pb", ".pbtxt"):
        path = tmp_path / ("model" + suffix)
        path.write_bytes(content)
        res = cli("check", path, "--target", "jetson_tx2")
        assert res.returncode == 1, res.stderr
        assert res.stderr.startswith("deploy: error: ") and res.stderr.count("\n") == 1, res.stderr
        assert str(path) in res.stderr and "Traceback" not in res.stderr


def test_cli_unknown_target_and_route(models, cli):
    path = fixtures.onnx_model(models / "t.onnx")
    res = cli("check", path, "--target", "jetson_nan")
    assert res.returncode == 1 and "did you mean 'jetson_nano'?" in res.stderr
    res = cli("check", path, "--target", "orin_nano", "--route", "uff")
    assert res.returncode == 1 and "--route uff: orin_nano has no uff route" in res.stderr


def test_saved_model_without_variables(tmp_path, cli):
    from pipeline.graph.proto import message_class

    SavedModel = message_class("SavedModel")
    sm = SavedModel()
    meta = sm.meta_graphs.add()
    meta.meta_info_def.tags.append("serve")
    var = meta.graph_def.node.add(name="w", op="VarHandleOp")
    var.attr["dtype"].type = 1
    sig = meta.signature_def["serving_default"]
    sig.outputs["y"].name = "w:0"
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pb").write_bytes(sm.SerializeToString())
    res = cli("check", tmp_path / "sm", "--target", "jetson_tx2")
    assert res.returncode == 1 and "has no variables" in res.stderr, res.stderr


@pytest.mark.tf
def test_saved_model_only_the_signature_is_checked(models):
    path = fixtures.saved_model(models / "sm")
    # the reader's view (convert=False): with tf2onnx, a SavedModel is frozen and judged like its .pb
    report = check_model(path, tx2(), convert=False)
    assert report.model["format"] == "saved_model" and report.deployable
    assert not [f for f in report.findings if f.kind in ("stochastic", "batch_dependent")]
    variables = [f for f in report.findings if "variables" in f.cause]
    assert variables and variables[0].severity == "info"
    trained = check_model(path, tx2(), signature="train")
    assert [f.op for f in trained.findings if f.batch_dependent] == ["RandomUniform"]


def test_rewrite_auto_fixes_onnx_opset_and_uint8_input(models, cli):
    for name, kw, passes in (("r15", dict(opset=15), ["lower_opset"]),
                             ("ru8", dict(input_type=TensorProto.UINT8), ["retype_uint8_input"])):
        source = fixtures.onnx_model(models / (name + ".onnx"), **kw)
        res = cli("rewrite", source, "--target", "jetson_tx2", "-o", models / (name + "_fixed.onnx"), "--auto")
        assert res.returncode == 0, res.stderr
        assert "after rewrite: YES — onnx at opset 13: 0 blockers" in res.stdout
        receipt = json.loads((models / (name + "_fixed.rewrite.json")).read_text())
        assert [p["pass"] for p in receipt["passes"]] == passes and receipt["check_before"]["deployable"] is False
        assert cli("check", models / (name + "_fixed.onnx"), "--target", "jetson_tx2").returncode == 0


def test_a_yes_for_an_onnx_model_names_trtexec_not_a_deploy_run_that_would_refuse_it(models):
    """deploy run starts from TensorFlow: after a YES for an ONNX model the next step is its engine on the board."""
    from pipeline.check.report import next_command

    report = check_model(fixtures.onnx_model(models / "next.onnx", opset=15), load_target("xavier_nx"))
    assert report.deployable
    line = next_command(report)
    assert line.startswith("next: build its engine on the board: /usr/src/tensorrt/bin/trtexec --onnx={} "
                           "--saveEngine=next.engine --fp16".format(
        models / "next.onnx")), line
    assert "deploy run starts from a .keras/.h5 file, a SavedModel directory or a frozen .pb" in line


def test_a_yes_for_a_model_deploy_run_cannot_feed_names_tf2onnx_and_trtexec_not_deploy_run():
    """deploy run's convert stage compares, and its benchmark feeds, one NHWC image input: a YES for two inputs (NMS's
    boxes and scores) or a [N, 128] signal ends with the by-hand route, not a deploy run that stops at convert."""
    from types import SimpleNamespace

    from pipeline.check.report import next_command

    def report(inputs, fmt="frozen_pb"):
        return SimpleNamespace(deployable=True, target={"name": "jetson_tx2", "max_opset": 20}, model={
            "path": "m/nms.pb", "kind": "tensorflow", "format": fmt, "inputs": inputs, "outputs": ["Identity:0"]},
            routes=[SimpleNamespace(route="onnx", opset=13)])  # the opset checked, not the parser's max (20)

    line = next_command(report([{"name": "boxes:0", "shape": [100, 4]}, {"name": "scores:0", "shape": [100]}]))
    assert line == ("next: python -m tf2onnx.convert --graphdef m/nms.pb --inputs boxes:0,scores:0 --outputs "
                    "Identity:0 --opset 13 --output nms.onnx, then on the board: /usr/src/tensorrt/bin/trtexec "
                    "--onnx=nms.onnx --saveEngine=nms.engine --fp16  (deploy run compares and benchmarks models with one NHWC image input; "
                    "this one has boxes:0 [100, 4], scores:0 [100])")
    assert "--saved-model m/nms.pb --opset 13" in next_command(report([{"name": "x:0", "shape": [None, 128]}],
                                                                      "saved_model"))
    image = next_command(report([{"name": "image:0", "shape": [None, 96, 96, 3]}]))
    assert image.startswith("next: deploy run configs/jetson_tx2.yaml --set model.zoo=null --set model.source=m/nms.pb")


@pytest.mark.tf
def test_the_tf2onnx_command_a_two_input_yes_names_converts_the_model(models, tmp_path):
    """The printed command is tf2onnx's real CLI: run it."""
    import shlex

    from pipeline.check.report import next_command

    tf = fixtures._tf()
    graph = tf.Graph()
    with graph.as_default():
        boxes = tf.compat.v1.placeholder(tf.float32, [16, 4], name="boxes")
        scores = tf.compat.v1.placeholder(tf.float32, [16], name="scores")
        keep = tf.image.non_max_suppression(boxes, scores, 4, iou_threshold=0.5)
        tf.identity(tf.gather(boxes, keep), name="picked")
    path = models / "two_inputs.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    report = check_model(path, load_target("xavier_nx"), convert=False)
    assert report.deployable
    line = next_command(report)
    command = line[len("next: "):line.index(", then on the board")]
    assert command.startswith("python -m tf2onnx.convert --graphdef")
    argv = shlex.split(command)
    res = subprocess.run([sys.executable] + argv[1:], cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (tmp_path / "two_inputs.onnx").stat().st_size > 0


@pytest.mark.tf
def test_tf_nms_is_accepted_but_wrong_on_the_8_2_parser_predicted_and_converted_alike(models):
    """The prediction (tf2onnx's table: NonMaxSuppressionV3 becomes ONNX NonMaxSuppression) says what the walk of
    tf2onnx's real output says: the 8.2 parser pads NMS's output (docs/check.md)."""
    path = fixtures.nms_graph(models / "nms_pad.pb")
    found = []
    for convert in (False, True):
        report = check_model(path, tx2(), convert=convert)
        wrong = route(report, "onnx").accepted_but_wrong
        found.append([(f.op, "pads its output to a fixed [max_output_boxes_per_class, 3]" in f.cause) for f in wrong])
        assert not report.deployable
    assert found[0] == found[1] == [("NonMaxSuppression", True)]
    assert check_model(path, load_target("xavier_nx"), convert=False).deployable


def test_the_trtexec_the_host_names_is_where_the_agent_looks_first():
    """One fact, two copies (the agent runs on the board on its own, Python 3.6, without pipeline.files): they agree."""
    from pipeline.device.agent.trtexec_build import CANDIDATES
    from pipeline.files import TRTEXEC

    assert TRTEXEC == CANDIDATES[0]


def test_tftrt_says_why_every_op_converts_yet_tensorrt_runs_a_fraction(models):
    """An id model (Gather, Mean, a couple of ops): every op has a TF-TRT converter, but no connected run reaches
    the minimum segment size. The route said "every node converts" beside "TensorRT runs 0% of the nodes"."""
    import onnx  # noqa: F401 - the check's ONNX side is installed (the route is TF-TRT's, built from the graph)
    from pipeline.check.routes import check_tftrt
    from pipeline.graph import proto
    from pipeline.graph.tf_reader import frozen_view
    from pipeline.targets.optables import load_op_table

    graph_def = proto.GraphDef()
    x = graph_def.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = proto.DataType["DT_FLOAT"]
    graph_def.node.add(name="relu", op="Relu", input=["x"]).attr["T"].type = proto.DataType["DT_FLOAT"]
    result = check_tftrt(frozen_view(graph_def, "g.pb", "frozen_pb"), tx2(), load_op_table("tftrt"), {})
    assert result.share["nodes"] < 1.0 and "every node converts" not in result.note
    assert result.note.startswith("every op has a converter, but connected runs of fewer than 3 nodes")
