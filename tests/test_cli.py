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


def test_help_lists_every_command_and_the_exit_codes():
    res = deploy("--help")
    for word in ("run", "validate", "schema", "targets", "data"):
        assert word in res.stdout
    assert "Exit codes: 0 success, 1 bad input or config, 2 model not deployable to the target, 3 a stage failed" in " ".join(res.stdout.split())


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
    (["frob"], "deploy: error: argument COMMAND: invalid choice: 'frob' (choose from 'run', 'check', 'rewrite', "
               "'consistency', 'diff', 'unfreeze', 'report', 'compare', 'validate', 'schema', 'targets', 'ckpt', 'device', 'data') (see: deploy --help)\n"),
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
