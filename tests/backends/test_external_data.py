"""ONNX external data is read only from inside the model's folder: absolute paths, '..' and
symlinks out are one-line errors before ONNX Runtime, onnx or onnx-graphsurgeon read anything."""

import os

import numpy as np
import pytest

from pipeline.errors import DeployError
from pipeline.backends.external_data import check_external_data

pytestmark = pytest.mark.tf  # onnxruntime


def external_model(path, location):
    """x @ w, with w's 16 floats stored in ``location`` (as onnx.save_model(..., save_as_external_data) writes)."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones([4, 4], np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "64")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path.write_bytes(model.SerializeToString())
    return model


@pytest.fixture
def models(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(16, dtype=np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(np.ones(16, np.float32).tobytes())
    os.symlink(str(secret), str(folder / "link.bin"))
    return {
        "absolute": (folder / "abs.onnx", str(secret), "an absolute path"),
        "climbs": (folder / "up.onnx", "../secret.bin", "a path that climbs out of the model's folder ('..')"),
        "symlink": (folder / "link.onnx", "link.bin", "a symlink that leads out of the model's folder"),
        "missing": (folder / "missing.onnx", "nope.bin", "a file that does not exist"),
        "inside": (folder / "ok.onnx", "weights.bin", None),
    }


def message(path, location, problem):
    return ("deploy: error: {}: tensor 'w' keeps its data in {!r}, {}; deploy reads external data only from files "
            "inside the model's folder: move the data file next to the model and convert it again\n".format(
                path, location, problem))


@pytest.mark.parametrize("case", ["absolute", "climbs", "symlink", "missing", "inside"])
def test_locations(models, case):
    path, location, problem = models[case]
    model = external_model(path, location)
    if problem is None:
        check_external_data(model, path)
        return
    with pytest.raises(DeployError) as err:
        check_external_data(model, path)
    assert problem in err.value.message


@pytest.mark.parametrize("case", ["absolute", "climbs", "symlink"])
def test_commands_refuse_escaping_data(models, tmp_path, case, cli):
    path, location, problem = models[case]
    external_model(path, location)
    res = cli("consistency", path, "--samples", "1")  # the one error line (a progress line first if slow)
    assert res.returncode == 1 and res.stderr.endswith(message(path, location, problem)), res.stderr
    assert "Traceback" not in res.stderr
    assert res.stderr == message(path, location, problem) or res.stderr.startswith("consistency: reading ")
    out = tmp_path / "out.onnx"
    res = cli("rewrite", path, "-t", "jetson_tx2", "-o", out, "--auto")
    assert res.returncode == 1 and res.stderr.endswith(message(path, location, problem)), res.stderr
    assert not out.exists()


def test_data_inside_the_folder_is_read(models, tmp_path):
    path, location, _ = models["inside"]
    external_model(path, location)
    from pipeline.backends.onnxruntime import load

    out = load(path).run({"x": np.ones([1, 4], np.float32)})[0]
    np.testing.assert_array_equal(out, np.full([1, 4], 4.0, np.float32))
