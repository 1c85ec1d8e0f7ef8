"""Issue 26 item 2: `deploy rewrite`, `unfreeze`, `diff` and `consistency` name a step on stderr only once it has
run past the threshold (pipeline.progress.Progress.step: 2 s, $DEPLOY_PROGRESS_AFTER), then its time; a quick
input leaves stderr empty; --quiet silences every step; stdout is the same either way. The threshold is set
here (30 s: every step here is quick; 0: every step is named at once), never waited for."""

import pytest

from conftest import deploy

AFTER = "DEPLOY_PROGRESS_AFTER"


def _onnx(path, batch=None):
    """x (N, 8, 8, 3) -> Relu -> Sigmoid -> y: a tiny image model with a dynamic batch."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch or "N", 8, 8, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch or "N", 8, 8, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                               helper.make_node("Sigmoid", ["r"], ["y"], name="sigmoid")], "tiny", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def _three_ways(*argv):
    """The command quick (threshold 30 s), every step named at once (0), and quiet at 0."""
    quick = deploy(*argv, env={AFTER: "30"})
    named = deploy(*argv, env={AFTER: "0"})
    quiet = deploy(*argv, "--quiet", env={AFTER: "0"})
    for res in (quick, named, quiet):
        assert "Traceback" not in res.stderr, res.stderr
    assert quick.returncode == named.returncode == quiet.returncode
    return quick, named, quiet


def _steps(stderr, prefix):
    """Every line names a step of this verb: "<step> ...", a detail under it, or "<step>: done in X s"."""
    lines = stderr.splitlines()
    assert lines and all(line.startswith(prefix) or line.startswith("  ") for line in lines), stderr
    started = [line[:-4] for line in lines if line.endswith(" ...")]
    done = [line.split(": done in ")[0] for line in lines if ": done in " in line]
    assert started and started == done, stderr  # each step named, then its end, in order
    return started


def test_diff_names_slow_steps_only(tmp_path):
    a, b = _onnx(tmp_path / "a.onnx"), _onnx(tmp_path / "b.onnx")
    quick, named, quiet = _three_ways("diff", a, b)
    assert quick.returncode == 0 and quick.stderr == "" and quiet.stderr == ""
    assert quick.stdout == named.stdout == quiet.stdout
    steps = _steps(named.stderr, "diff: ")
    assert steps[0].startswith("diff: reading ") and steps[1].startswith("diff: matching 3 and 3 nodes")


def test_consistency_names_slow_steps_only(tmp_path):
    model = _onnx(tmp_path / "m.onnx")
    quick, named, quiet = _three_ways("consistency", model, "--samples", "2", "--batch-sizes", "2")
    assert quick.returncode == 0, quick.stderr
    assert quick.stderr == "" and quiet.stderr == ""
    assert quick.stdout == named.stdout == quiet.stdout
    steps = _steps(named.stderr, "consistency: ")
    assert steps == ["consistency: reading {}".format(model), "consistency: 2 image(s) alone and in batches of 2"]
    # a slow step's details (the estimate, images done) follow its name
    assert "  consistency: 2 images x batch 2 (" in named.stderr and "  consistency: image 2/2 done" in named.stderr


def test_rewrite_of_an_onnx_model_names_slow_steps_only_and_prints_its_receipt_on_stdout(tmp_path):
    model = _onnx(tmp_path / "m.onnx")
    outs = [tmp_path / "q.onnx", tmp_path / "n.onnx", tmp_path / "s.onnx"]
    argv = lambda out: ("rewrite", model, "-t", "jetson_tx2", "-o", out, "--pass", "lower_opset")  # noqa: E731
    quick = deploy(*argv(outs[0]), env={AFTER: "30"})
    named = deploy(*argv(outs[1]), env={AFTER: "0"})
    quiet = deploy(*argv(outs[2]), "--quiet", env={AFTER: "0"})
    assert quick.returncode == named.returncode == quiet.returncode == 0, named.stderr
    assert quick.stderr == "" and quiet.stderr == ""
    for res, out in zip((quick, named, quiet), outs):
        lines = res.stdout.splitlines()
        assert lines[0].startswith("  lower_opset ") and "site(s)" in lines[0], res.stdout
        assert lines[-2].startswith("wrote {} (2 -> 2 nodes); receipt ".format(out))
        assert lines[-1].startswith("after rewrite: YES")
    steps = _steps(named.stderr, "rewrite")
    assert steps == ["rewrite {}: reading and checking it for jetson_tx2 (before)".format(model),
                     "rewrite: pass lower_opset (1 of 1)", "rewrite: checking the result for jetson_tx2"]


@pytest.mark.tf
def test_rewrite_and_unfreeze_of_a_frozen_graph_name_slow_steps_only(tmp_path):
    from pipeline.tf import import_tf

    tf = import_tf()
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    kernel = tf.Variable(tf.random.stateless_normal([3, 3, 3, 4], seed=[1, 2]))
    function = tf.function(lambda x: tf.identity(tf.nn.relu(tf.nn.conv2d(x, kernel, 1, "SAME")), name="out"))
    frozen = convert_variables_to_constants_v2(function.get_concrete_function(
        tf.TensorSpec([None, 8, 8, 3], tf.float32, name="input")))
    model = tmp_path / "frozen.pb"
    model.write_bytes(frozen.graph.as_graph_def().SerializeToString())

    runs = {}
    for name, env, quiet in (("quick", "30", ()), ("named", "0", ()), ("quiet", "0", ("--quiet",))):
        runs[name] = deploy("rewrite", model, "-t", "jetson_tx2", "-o", tmp_path / (name + ".pb"), "--pass",
                            "remove_identity", *quiet, env={AFTER: env})
        assert runs[name].returncode == 0, runs[name].stderr
        assert "  remove_identity " in runs[name].stdout and "numeric checks: " in runs[name].stdout
    assert runs["quick"].stderr == "" and runs["quiet"].stderr == ""
    assert _steps(runs["named"].stderr, "rewrite") == [
        "rewrite {}: reading".format(model), "rewrite: checking it for jetson_tx2 (before)",
        "rewrite: pass remove_identity (1 of 1)", "rewrite: checking the result for jetson_tx2"]

    for name, env, quiet in (("quick", "30", ()), ("named", "0", ()), ("quiet", "0", ("--quiet",))):
        runs[name] = deploy("unfreeze", model, "-o", tmp_path / ("unfrozen_" + name), *quiet, env={AFTER: env})
        assert runs[name].returncode == 0, runs[name].stderr
    assert runs["quick"].stderr == "" and runs["quiet"].stderr == ""
    steps = _steps(runs["named"].stderr, "unfreeze")
    assert [s.rsplit("(", 1)[1] for s in steps] == ["step 1 of 3)", "step 2 of 3)", "step 3 of 3)"]
