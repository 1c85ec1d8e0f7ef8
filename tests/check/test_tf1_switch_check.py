"""`deploy check` on TF1's training switches, judged on tf2onnx's real output: unfed at their
defaults (keep_prob 1.0, is_training False) the graph is YES with a warning naming each switch;
is_training left True is NO (the training-mode batch norm tf2onnx put inside an ONNX If body);
`deploy rewrite --pass strip_dropout`'s "after rewrite" says what `deploy check` of its output says."""

import pytest
from test_tf1_switch import switch_graph

from pipeline.check import check_model
from pipeline.rewrite.predict import predict_rewrite
from pipeline.targets import load_target


def onnx_route(report):
    return next(r for r in report.routes if r.route == "onnx")


@pytest.mark.tf
@pytest.mark.slow
def test_switches_at_their_defaults_are_yes_on_the_converted_model(tmp_path):
    report = check_model(switch_graph(tmp_path / "off.pb"), load_target("jetson_tx2"), routes=["onnx"],
                         predict=predict_rewrite)
    onnx = onnx_route(report)
    assert onnx.basis == "converted" and not onnx.accepted_but_wrong and report.verdict("onnx") == "YES"
    assert report.deployable and report.prediction is None  # was NO: "the output is random"
    switches = {f.nodes[0]: f for f in report.findings if f.kind == "training_switch"}
    assert set(switches) == {"keep_prob", "is_training"} and all(f.severity == "warning" for f in switches.values())
    assert "unfed, the inference branch runs" in switches["is_training"].cause
    assert not [f for f in report.findings if f.batch_dependent or f.kind == "stochastic"]


@pytest.mark.tf
@pytest.mark.slow
def test_near_miss_is_training_left_true_is_no_on_the_converted_model(tmp_path):
    report = check_model(switch_graph(tmp_path / "on.pb", training_default=True), load_target("jetson_tx2"),
                         routes=["onnx"])
    onnx = onnx_route(report)
    assert onnx.basis == "converted" and report.verdict("onnx") == "NO"
    (wrong,) = onnx.accepted_but_wrong
    assert wrong.nodes == ["bn/cond/FusedBatchNormV3"] and wrong.batch_dependent
    assert "inside If " in wrong.cause


@pytest.mark.tf
@pytest.mark.slow
def test_strip_dropout_verdict_is_the_check_of_its_output(tmp_path):
    from pipeline.rewrite.command import rewrite_model, write_outputs

    target = load_target("jetson_tx2")
    graph, io, summary, after = rewrite_model(switch_graph(tmp_path / "off.pb"), target, pass_names=["strip_dropout"],
                                              samples=2)
    out = tmp_path / "out.pb"
    write_outputs(graph, io, summary, str(out))
    checked = check_model(out, target)
    assert after.deployable and checked.deployable  # was: "after rewrite: NO" and `deploy check out.pb`: YES
