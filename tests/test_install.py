"""`pip install deploy` without extras: `deploy check` reads .pb, .pbtxt and .onnx without TensorFlow.

Builds a fresh venv with only the base dependencies (from PyPI, as a user would) and runs the
real command line there on models written without TensorFlow.
"""

import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow

PBTXT = """
node { name: "input" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { dim { size: -1 } dim { size: 8 } } } } }
node { name: "relu" op: "Relu" input: "input" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "out" op: "MyCustomOp" input: "relu" }
"""


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory):
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    res = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "-e", str(ROOT)],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    return venv


def models(folder):
    import onnx
    from google.protobuf import text_format
    from onnx import TensorProto, helper

    from pipeline.graph import proto

    (folder / "custom.pbtxt").write_text(PBTXT)
    graph = text_format.Parse(PBTXT, proto.GraphDef())
    del graph.node[2]  # an inference graph of standard ops only
    (folder / "relu.pb").write_bytes(graph.SerializeToString())
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(folder / "relu.onnx"))


def test_check_runs_without_the_tf_extra(bare_venv, tmp_path):
    models(tmp_path)
    deploy = str(bare_venv / "bin" / "deploy")
    has_tf = subprocess.run([str(bare_venv / "bin" / "python"), "-c", "import tensorflow"], capture_output=True)
    assert has_tf.returncode != 0, "the bare venv must not have TensorFlow"
    for name, code, verdict in (("relu.pb", 0, "verdict: YES"), ("relu.onnx", 0, "verdict: YES"),
                                ("custom.pbtxt", 2, "verdict: NO")):
        res = subprocess.run([deploy, "check", str(tmp_path / name), "--target", "jetson_tx2"], capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == code, (name, res.stdout, res.stderr)
        assert verdict in res.stdout and "Traceback" not in res.stderr, (name, res.stdout, res.stderr)
