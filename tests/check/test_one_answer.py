"""Issue 26 items 2, 3 and 4 (the next command): one model, one answer in every format; a prediction says
so on its verdict line; a zoo shows each verdict as it lands, on stderr, and says when one model has two
verdicts; a YES ends with the command to run next, and that command is accepted."""

import shlex
from pathlib import Path

import pytest

from conftest import deploy
from pipeline.check import zoo

ROOT = Path(__file__).resolve().parents[2]
NO_CACHE = {"DEPLOY_CHECK_CACHE": "0"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A keras.applications model and a Keras LSTM text classifier, each saved as .keras and frozen as a user
    freezes it (convert_variables_to_constants_v2): small sizes, weights=None."""
    from pipeline.tf import import_tf

    tf = import_tf()
    import keras
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    folder = tmp_path_factory.mktemp("one_answer")

    def save(model, name, spec):
        model.save(str(folder / (name + ".keras")))
        func = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec)
        (folder / (name + ".pb")).write_bytes(
            convert_variables_to_constants_v2(func).graph.as_graph_def().SerializeToString())

    save(keras.applications.MobileNetV3Small(weights=None, input_shape=(32, 32, 3), alpha=0.75),
         "mobilenet_v3", tf.TensorSpec((1, 32, 32, 3), tf.float32, name="x"))
    text = keras.Input((None,), dtype="int32")
    hidden = keras.layers.LSTM(8)(keras.layers.Embedding(500, 8)(text))
    save(keras.Model(text, keras.layers.Dense(2, activation="softmax")(hidden)), "lstm_text",
         tf.TensorSpec((1, None), tf.int32, name="x"))
    return folder


@pytest.mark.tf
@pytest.mark.slow
def test_a_keras_file_gets_its_frozen_graphs_converted_answer_in_a_zoo(models, cli):
    """The LSTM's .keras was a predicted YES while its .pb was a converted NO (newcomer_2, step 3)."""
    r = cli("check", models, "--target", "jetson_tx2", env=NO_CACHE)
    assert r.returncode == 2, r.stderr
    rows = {Path(line.split()[0]).name: line for line in r.stdout[r.stdout.index("summary: "):].splitlines()[2:]}
    assert rows["lstm_text.keras"].split()[1] == rows["lstm_text.pb"].split()[1] == "NO"
    assert rows["mobilenet_v3.keras"].split()[1] == rows["mobilenet_v3.pb"].split()[1] == "YES"
    assert "predicted" not in r.stdout[r.stdout.index("summary: "):]
    assert r.stdout.count("checked as its frozen graph") == 2  # the two .keras files
    # visible while it works: each verdict on stderr as it lands, never on stdout
    landed = [line for line in r.stderr.splitlines() if line.startswith("[")]
    assert len(landed) == 4 and landed[-1].startswith("[4/4] ")
    assert {line.split("] ", 1)[1].split(":")[0] for line in landed} == {str(models / n) for n in rows}
    assert "converting 4 models with tf2onnx over" in r.stderr
    assert not any(line.startswith("[") for line in r.stdout.splitlines())
    quiet = cli("check", models, "--target", "jetson_tx2", "--quiet", env=NO_CACHE)
    assert quiet.stderr.strip() == "" and quiet.stdout.splitlines()[-4:] == r.stdout.splitlines()[-4:]


@pytest.mark.tf
@pytest.mark.slow
def test_a_single_keras_check_is_converted_and_says_what_it_does(models):
    r = deploy("check", models / "lstm_text.keras", "--target", "agx_orin", env=NO_CACHE)
    assert r.returncode == 2 and "onnx route: converted by tf2onnx" in r.stdout
    assert "TensorListReserve" in r.stdout or "TensorList" in r.stdout
    assert "checked as its frozen graph" in r.stdout
    # visible while it works: the steps that take seconds name the model, on stderr only
    assert "freezing {} in TensorFlow for tf2onnx".format(models / "lstm_text.keras") in r.stderr
    assert "freezing" not in r.stdout


@pytest.mark.tf
def test_a_prediction_says_so_on_the_verdict_line_and_what_would_convert_it(models, cli):
    r = cli("check", models / "mobilenet_v3.pb", "--target", "jetson_tx2",
            env=dict(NO_CACHE, DEPLOY_CHECK_CONVERT="0"))
    verdict = next(line for line in r.stdout.splitlines() if line.startswith("verdict: "))
    assert verdict.startswith("verdict: YES (predicted, tf2onnx not run: DEPLOY_CHECK_CONVERT is off: unset it")
    r = cli("check", models / "mobilenet_v3.pb", "--target", "jetson_tx2", "--no-convert", env=NO_CACHE)
    verdict = next(line for line in r.stdout.splitlines() if line.startswith("verdict: "))
    assert verdict.startswith("verdict: YES (predicted, tf2onnx not run: --no-convert: check without it")


def test_without_tensorflow_the_verdict_line_says_install_deploy_tf(tmp_path, monkeypatch):
    from pipeline.check import check_model, convert_probe
    from pipeline.check.report import format_text
    from pipeline.graph import proto
    from pipeline.targets import load_target

    graph = proto.GraphDef()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = 1
    graph.node.add(name="y", op="Relu", input=["x"]).attr["T"].type = 1
    path = tmp_path / "relu.pb"
    path.write_bytes(graph.SerializeToString())
    monkeypatch.setattr(convert_probe, "available", lambda: False)
    monkeypatch.delenv("DEPLOY_CHECK_CONVERT", raising=False)
    text = format_text(check_model(path, load_target("jetson_tx2")))
    verdict = next(line for line in text.splitlines() if line.startswith("verdict: "))
    assert "(predicted, tf2onnx not run: TensorFlow or tf2onnx is not installed: install deploy[tf]" in verdict


def test_one_model_with_two_verdicts_in_a_zoo_is_named(tmp_path):
    from pipeline.check.findings import CheckReport, Finding, RouteResult

    def report(deployable, fingerprint):
        route = RouteResult("onnx", "onnx_trt_8.2", "opset 13", opset=13)
        if not deployable:
            route.findings.append(Finding("blocker", "onnx", "unsupported_op", "X", ["x"], "why", "fix"))
        made = CheckReport({"path": "m", "format": "frozen_pb"}, {"name": "jetson_tx2"}, [route], [])
        made.fingerprint = fingerprint
        return made

    entries = [zoo.ZooEntry("a.keras", report(True, "f1")), zoo.ZooEntry("a.pb", report(False, "f1"), code=2),
               zoo.ZooEntry("b.pb", report(True, "f2")), zoo.ZooEntry("c.pb", report(True, "f2"))]
    zoo._same_model_notes(entries)
    rows = {row[0]: row for row in zoo.summary_rows(entries)}
    assert "the same model (same weights) as a.pb (NO): two verdicts for one model" in rows["a.keras"][4]
    assert "as a.keras (YES)" in rows["a.pb"][4]
    assert "same model" not in rows["b.pb"][4] + rows["c.pb"][4]  # one model twice, one verdict: nothing to say


@pytest.mark.tf
def test_the_same_weights_give_the_same_fingerprint_across_formats(models):
    from pipeline.check.model import weights_fingerprint
    from pipeline.graph.readers import read_model

    pb = weights_fingerprint(read_model(models / "mobilenet_v3.pb"))
    assert pb and pb == weights_fingerprint(read_model(models / "mobilenet_v3.keras"))
    assert pb != weights_fingerprint(read_model(models / "lstm_text.pb"))


@pytest.mark.tf
def test_a_yes_ends_with_the_next_command_and_that_command_is_accepted(models, tmp_path, cli):
    r = cli("check", models / "mobilenet_v3.pb", "--target", "jetson_tx2", "--no-convert", env=NO_CACHE)
    assert r.returncode == 0
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("next: deploy run configs/jetson_tx2.yaml --set model.zoo=null --set model.source=")
    argv = shlex.split(last[len("next: deploy "):])
    assert argv[0] == "run"
    # applied: the config and overrides it names validate (deploy run would start from them)
    checked = cli("validate", *argv[1:])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # a target deploy ships no config for: a generic CONFIG, said so
    r = cli("check", models / "mobilenet_v3.pb", "--target", "agx_xavier", "--no-convert", env=NO_CACHE)
    assert "next: deploy run CONFIG --set model.zoo=null --set model.source=" in r.stdout
    assert "a config with `target: agx_xavier`" in r.stdout
