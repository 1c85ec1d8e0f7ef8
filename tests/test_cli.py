"""The command line: every --help works, fast, without importing anything heavy."""

import subprocess
import sys

import pytest

from conftest import ROOT, deploy

HEAVY = ("tensorflow", "keras", "tf2onnx", "onnx", "onnxruntime", "numpy", "PIL")

PROBE = """
import sys
from pipeline.cli import main
try:
    code = main({argv!r})
except SystemExit as e:
    code = e.code
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("HEAVY=" + ",".join(heavy))
sys.exit(code or 0)
"""


def probe(argv):
    return subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], cwd=str(ROOT),
                          capture_output=True, text=True)


@pytest.mark.parametrize("argv", [
    ["--help"], ["run", "--help"], ["validate", "--help"], ["schema", "--help"], ["targets", "--help"],
    ["data", "--help"], ["data", "shapes", "--help"],
    ["validate", "configs/jetson_tx2.yaml"], ["targets"], ["targets", "jetson_tx2"], ["schema"],
])
def test_light_commands_import_nothing_heavy(argv):
    res = probe(argv)
    assert res.returncode == 0, res.stderr
    assert "HEAVY=\n" in res.stdout, res.stdout


def _verbs():
    from pipeline.cli import verb_names

    return verb_names()


@pytest.mark.parametrize("verb", _verbs(), ids=" ".join)
def test_every_verb_has_help_and_imports_nothing_heavy(verb):
    """Over the parser's own list of verbs and actions (a new verb is tested without being named here)."""
    res = probe(verb + ["--help"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage: deploy " + " ".join(verb)), res.stdout
    assert "HEAVY=\n" in res.stdout, res.stdout


def test_the_verb_list_is_the_parser():
    from pipeline.cli import VERBS

    top = [v[0] for v in _verbs() if len(v) == 1]
    assert top == ["run", "check", "estimate", "rewrite", "consistency", "diff", "unfreeze", "report", "compare", "validate",
                   "schema", "targets", "ckpt", "device", "data"]
    assert [m.__name__.rsplit(".", 1)[1] for m in VERBS] == top  # one module per verb, named after it
    assert ["ckpt", "inspect"] in _verbs() and ["device", "probe"] in _verbs() and ["data", "shapes"] in _verbs()


def test_route_choices_come_from_the_targets_list():
    from pipeline.targets.device import ROUTES

    res = deploy("check", "model.pb", "-t", "jetson_tx2", "--route", "trt")
    assert res.returncode == 1
    assert res.stderr == "deploy: error: argument --route: invalid choice: 'trt' (choose from {}) (see: deploy check " \
                         "--help)\n".format(", ".join(repr(r) for r in ROUTES))


@pytest.mark.parametrize("flags, named", [
    (["--cut", "a/b"], "--cut"),
    (["--input-shape", "input=1,8,8,3", "--outputs", "out"], "--input-shape, --outputs"),
    (["--checkpoint", "c", "--reference", "r.pb", "--dataset", "d"], "--checkpoint, --reference, --dataset"),
])
def test_rewrite_refuses_tensorflow_flags_for_onnx(tmp_path, flags, named):
    res = deploy("rewrite", tmp_path / "m.onnx", "-t", "jetson_tx2", "-o", tmp_path / "out.onnx", "--auto", *flags)
    assert res.returncode == 1
    assert res.stderr == "deploy: error: {}: only for a TensorFlow graph; {} is an ONNX model\n".format(
        named, tmp_path / "m.onnx")
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("flag, value", [("--input-shape", "input=1,x,3"), ("--cut", "node=a")])
def test_rewrite_dims_are_parsed_by_argparse(tmp_path, flag, value):
    res = deploy("rewrite", tmp_path / "m.pb", "-t", "jetson_tx2", "-o", tmp_path / "o.pb", "--auto", flag, value)
    assert res.returncode == 1
    assert res.stderr.startswith("deploy: error: argument {}: ".format(flag))
    assert "expected comma-separated dimensions, e.g. 1,224,224,3" in res.stderr


def test_rewrite_pass_options_from_flags():
    from pipeline.cli.verbs.rewrite import pass_options
    from pipeline.cli.args import named_dims, node_dims

    assert pass_options() == {"bn_inference": {}}
    assert pass_options("c.ckpt", named_dims("1,?,8,3"), [node_dims("a/b=1,4"), node_dims("c")]) == {
        "bn_inference": {"checkpoint": "c.ckpt"},
        "set_input_shape": {"input": None, "shape": [1, None, 8, 3]},
        "cut": {"inputs": {"a/b": [1, 4], "c": None}}}


def test_json_is_a_deprecated_alias_of_format_json():
    from pipeline.cli import build_parser

    parser = build_parser()
    for argv in (["run", "c.yaml"], ["device", "probe", "c.yaml"]):
        assert parser.parse_args(argv).format == "text"
        assert parser.parse_args(argv + ["--json"]).format == "json"
        assert parser.parse_args(argv + ["--format", "json"]).format == "json"
    assert "deprecated: the same as --format json" in deploy("run", "--help").stdout


def test_run_json_errors_are_events_on_stdout():
    import json

    for flag in (["--json"], ["--format", "json"]):
        res = deploy("run", "configs/nope.yaml", *flag)
        assert res.returncode == 1
        assert json.loads(res.stdout) == {"event": "error", "error": {
            "message": "configs/nope.yaml: config file not found", "exit_code": 1}}


def test_ckpt_diff_takes_the_config_first(tmp_path):
    """deploy ckpt diff CONFIG CHECKPOINT, like every verb; CHECKPOINT --config CONFIG still works."""
    from pipeline.cli import build_parser

    parser = build_parser()
    assert vars(parser.parse_args(["ckpt", "diff", "c.yaml", "m.keras"]))["config"] == "c.yaml"
    for argv, message in [
        (["c.yaml"], "deploy: error: deploy ckpt diff: the following arguments are required: CHECKPOINT"),
        (["c.yaml", "m.keras", "--config", "d.yaml"], "deploy: error: deploy ckpt diff: CONFIG given twice"),
        (["m.keras", "--config", str(tmp_path / "none.yaml")], "deploy: error: {}: config file not found".format(
            tmp_path / "none.yaml")),
    ]:
        res = deploy("ckpt", "diff", *argv)
        assert res.returncode == 1 and res.stderr.startswith(message), res.stderr


def test_help_lists_every_command_and_the_exit_codes():
    res = deploy("--help")
    for word in ("run", "validate", "schema", "targets", "data"):
        assert word in res.stdout
    assert "Exit codes: 0 success, 1 bad input or config, 2 model not deployable to the target, 3 a stage failed" in " ".join(res.stdout.split())


def test_each_command_s_help_line_is_a_whole_sentence():
    """deploy --help's line per verb is its docstring's first sentence, whole (it was the first docstring line, cut
    mid-sentence: "compare ... noise-aware, and red", "check ... the onnx route")."""
    from pipeline.cli.args import first_sentence

    joined = " ".join(deploy("--help").stdout.split())
    assert "noise-aware, and red only for a change that persists." in joined
    assert "check Will this model convert for this Jetson? estimate" in joined
    assert first_sentence("One. Two.") == "One." and first_sentence("e.g.x and more") == "e.g.x and more"


def test_no_command_prints_usage_and_fails():
    res = deploy()
    assert res.returncode == 1 and "usage: deploy" in res.stderr


def test_targets_lists_devices_and_shows_one():
    res = deploy("targets")
    assert res.returncode == 0
    for name in ("jetson_tx2", "jetson_nano", "xavier_nx", "agx_orin", "host_cpu"):
        assert name in res.stdout
    res = deploy("targets", "jetson_tx2")
    assert res.returncode == 0 and "8.2.1" in res.stdout
    res = deploy("targets", "jetson_tx")
    assert res.returncode == 1
    assert res.stderr.startswith("deploy: error: unknown target 'jetson_tx': did you mean 'jetson_tx2'?")


def test_data_shapes_command(tmp_path):
    res = deploy("data", "shapes", tmp_path / "shapes", "--size", "32", "--train-per-class", "3", "--val-per-class", "1")
    assert res.returncode == 0, res.stderr
    assert "4 classes (circle, cross, square, triangle), 12 train / 4 val images at 32x32" in res.stdout
    assert len(list((tmp_path / "shapes" / "train" / "circle").glob("*.png"))) == 3
    again = deploy("data", "shapes", tmp_path / "shapes")
    assert again.returncode == 1 and "already exists and is not empty" in again.stderr
    assert "Traceback" not in again.stderr


def test_run_with_missing_config():
    res = deploy("run", "configs/nope.yaml")
    assert res.returncode == 1
    assert res.stderr == "deploy: error: configs/nope.yaml: config file not found\n"


CUSTOM_OP_PBTXT = """
node { name: "input" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "out" op: "MyCustomOp" input: "input" }
"""


@pytest.mark.parametrize("argv, message", [
    (["check", "model.pb"], "deploy: error: the following arguments are required: --target/-t (see: deploy check --help)\n"),
    (["check", "model.pb", "-t", "jetson_tx2", "--frob"], "deploy: error: unrecognized arguments: --frob (see: deploy --help)\n"),
    (["frob"], "deploy: error: argument COMMAND: invalid choice: 'frob' (choose from {}) (see: deploy --help)\n".format(
        ", ".join(repr(v[0]) for v in _verbs() if len(v) == 1))),  # the parser's own list, in its order
    (["run"], "deploy: error: the following arguments are required: config (see: deploy run --help)\n"),
])
def test_flag_errors_are_one_line_and_bad_input(argv, message):
    res = deploy(*argv)
    assert res.returncode == 1  # bad input; 2 means "not deployable"
    assert res.stderr == message


def test_closed_pipe_keeps_the_exit_code(tmp_path):
    """`deploy check model | head`: the reader going away never turns a non-zero result into 0."""
    model = tmp_path / "custom.pbtxt"
    model.write_text(CUSTOM_OP_PBTXT)
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "check", str(model), "-t", "jetson_tx2"], cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before deploy writes anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 2, err
    assert "Traceback" not in err and "Exception ignored" not in err


FAKE_RUN = """
import sys
sys.path.insert(0, {tests!r})
import fake_stages
fake_stages.install()
from pipeline.cli import main
sys.exit(main({argv!r}))
"""


def test_run_prints_its_summary_on_stdout_and_progress_on_stderr(tmp_path):
    """The result (the summary table, the report's path) on stdout; progress and errors on stderr."""
    config = tmp_path / "c.yaml"
    config.write_text("run:\n  name: demo\n  dir: {}\nmodel:\n  zoo: small_cnn\ntarget: host_cpu\n"
                      "stages:\n  train:\n    epochs: 2\n  export:\n  freeze:\n".format(tmp_path / "runs"))
    res = subprocess.run([sys.executable, "-c", FAKE_RUN.format(tests=str(ROOT / "tests"),
                          argv=["run", str(config), "--no-report"])], cwd=str(ROOT), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.lstrip().startswith("stage ") and "train" in res.stdout and "freeze" in res.stdout
    assert "deploy run {}".format(config) in res.stderr and "status   time" not in res.stderr
    quiet = subprocess.run([sys.executable, "-c", FAKE_RUN.format(tests=str(ROOT / "tests"),
                            argv=["run", str(config), "--no-report", "--quiet"])], cwd=str(ROOT), capture_output=True,
                           text=True)
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""


def test_targets_and_validate_and_ckpt_take_format_json():
    import json

    one = deploy("targets", "jetson_tx2", "--format", "json")
    assert one.returncode == 0 and json.loads(one.stdout)["name"] == "jetson_tx2"
    every = deploy("targets", "--format", "json")
    assert "jetson_tx2" in [t["name"] for t in json.loads(every.stdout)]
    res = deploy("validate", "configs/jetson_tx2.yaml", "--format", "json")
    assert res.returncode == 0
    assert json.loads(res.stdout)["ok"] is True and json.loads(res.stdout)["target"] == "jetson_tx2"
    assert "--format {text,json}" in deploy("ckpt", "inspect", "--help").stdout


# ------------------------------------------------------------------------------ one convention per verb (issue 26, item 6)

NO_FORMAT = {("schema",): "prints the JSON Schema of a config: JSON is its only form"}


def _leaf_parsers():
    import argparse

    from pipeline.cli import build_parser

    def walk(parser, prefix):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield tuple(prefix), parser
        for action in subs:
            for name, child in action.choices.items():
                yield from walk(child, prefix + [name])

    return dict(walk(build_parser(), []))


def test_every_verb_that_reports_takes_format_json():
    """Before: rewrite, unfreeze, data shapes and ckpt diff refused --format."""
    leaves = _leaf_parsers()
    missing = [" ".join(v) for v, p in leaves.items() if v and "--format" not in p._option_string_actions
               and v not in NO_FORMAT]
    assert missing == []
    assert all("json" in p._option_string_actions["--format"].choices for v, p in leaves.items()
               if v and v not in NO_FORMAT and v != ("report",))  # report: html (the page) or markdown


@pytest.mark.parametrize("argv", [
    ["check", "missing.pb", "-t", "jetson_tx2"], ["diff", "missing.pb", "other.pb"],
    ["consistency", "missing.pb"], ["rewrite", "missing.pb", "-t", "jetson_tx2", "-o", "out.pb", "--auto"],
    ["unfreeze", "missing.pb", "-o", "out"], ["targets", "no_such_board"], ["ckpt", "inspect", "missing.ckpt"],
    ["validate", "configs/nope.yaml"], ["device", "probe", "configs/nope.yaml"], ["ckpt", "diff", "configs/nope.yaml", "m"],
])
def test_an_error_under_format_json_has_one_shape(argv, capsys):
    """Before, three shapes: {"event": "error", "message", "code"} (run, device probe), {"status": "error",
    "error", "code"} on stderr (consistency), nothing on stdout (the rest)."""
    import json

    from pipeline.cli import main

    code = main(argv + ["--format", "json"])
    out, err = capsys.readouterr()
    shape = json.loads(out)
    assert code == 1 and set(shape) == {"error"} and shape["error"]["exit_code"] == 1, out
    assert set(shape["error"]) <= {"message", "exit_code", "problems"} and shape["error"]["message"]
    assert err.splitlines()[-1].startswith("deploy: error: ")


@pytest.mark.parametrize("verb", [["rewrite", "m.pb", "-t", "jetson_tx2", "-o", "o.pb"], ["consistency", "m.pb"]])
def test_tolerance_is_a_deprecated_alias_of_atol(verb, capsys):
    """--tolerance meant an absolute tolerance in rewrite and consistency and a relative latency change in
    compare: --atol is the absolute one everywhere; the old spelling still works and says so."""
    from pipeline.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(verb + ["--atol", "0.01"]).atol == 0.01
    assert "deprecated" not in capsys.readouterr().err
    assert parser.parse_args(verb + ["--tolerance", "0.02"]).atol == 0.02
    assert "deploy: warning: --tolerance is deprecated: use --atol" in capsys.readouterr().err
    assert "|a - b| <= atol" in parser._subparsers._group_actions[0].choices[verb[0]].format_help()


def test_data_shapes_takes_format_json(tmp_path, capsys):
    import json

    from pipeline.cli import main

    assert main(["data", "shapes", str(tmp_path / "d"), "--size", "16", "--train-per-class", "1",
                 "--val-per-class", "0", "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["train"] == 4 and summary["val"] == 0 and len(summary["classes"]) == 4


def test_data_shapes_makes_the_dataset_a_config_generates():
    """README: `deploy data shapes DIR` makes the dataset the shipped configs use: its defaults are the config's
    dataset section's (a dataset made first is the one deploy run then trains on: it generates only a missing one)."""
    from pipeline.cli import build_parser
    from pipeline.config.schema import DatasetSection

    args = build_parser().parse_args(["data", "shapes", "somewhere"])
    fields = DatasetSection.model_fields
    assert (args.train_per_class, args.val_per_class) == (fields["train_per_class"].default,
                                                          fields["val_per_class"].default)
