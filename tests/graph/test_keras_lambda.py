"""A Keras model with a Lambda layer (Python code pickled into the file), saved by Keras as .keras
and .h5 (issue 20, point 7): read for check and diff from its stored config and weights, the
Lambda an opaque PyFunc node that is reported on every route, its code never run."""

import json

import pytest

from conftest import deploy

pytestmark = pytest.mark.tf
NO_CONVERT = {"DEPLOY_CHECK_CONVERT": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}


@pytest.fixture(scope="module")
def lambda_models(tmp_path_factory):
    """conv -> Lambda (writes a marker file when run, then t * 2 + 1) -> pooling -> dense, saved by
    Keras as .keras and .h5; the marker is removed after saving."""
    import keras

    folder = tmp_path_factory.mktemp("keras_lambda")
    marker = folder / "lambda_ran"

    # a lambda, as the field writes it; the marker path is a constant in its code (Keras 3.15 cannot
    # load a lambda with default arguments even when trusted: JSON turns the defaults tuple into a list)
    scale = eval("lambda t: (open({!r}, 'w').close(), t * 2.0 + 1.0)[1]".format(str(marker)))

    inputs = keras.Input((8, 8, 3), name="input")
    x = keras.layers.Conv2D(4, 3, name="conv")(inputs)
    x = keras.layers.Lambda(scale, name="scale")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    model = keras.Model(inputs, keras.layers.Dense(2, name="dense")(x))
    model.save(str(folder / "model.keras"))
    model.save(str(folder / "model.h5"))
    marker.unlink()
    return folder


@pytest.mark.parametrize("name", ["model.keras", "model.h5"])
def test_lambda_model_is_checked_without_running_the_lambda(lambda_models, name):
    r = deploy("check", lambda_models / name, "--target", "jetson_tx2", "--format", "json", env=NO_CONVERT)
    assert r.returncode == 2, r.stderr  # NO: Python code no converter translates
    assert not (lambda_models / "lambda_ran").exists()  # the Lambda's code never ran
    report = json.loads(r.stdout)
    assert report["model"]["format"] == "keras"
    lambda_node = [n for f in report["findings"] for n in f["nodes"] if n.endswith("/keras_lambda_not_run")]
    assert len(lambda_node) == 1 and "/scale" in lambda_node[0]
    every = next(f for f in report["findings"] if f["op"] == "PyFunc")
    assert every["kind"] == "acts_outside_graph" and "--trust-model" in every["cause"]
    for route in ("uff", "onnx"):
        found = next(r for r in report["routes"] if r["route"] == route)
        assert [f["nodes"] for f in found["findings"] if f["op"] == "PyFunc" and f["severity"] == "blocker"] == [
            lambda_node]
    # the rest of the model is read from the stored config and weights
    assert report["model"]["inputs"][0]["shape"] == [None, 8, 8, 3]


def test_lambda_models_diff(lambda_models):
    r = deploy("diff", lambda_models / "model.keras", lambda_models / "model.h5", "--format", "json", env=NO_CONVERT)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["identical_up_to_renaming"] and not data["values"]  # the same weights, read from each file
    assert not (lambda_models / "lambda_ran").exists()


def test_trust_model_loads_the_lambda_for_real(lambda_models):
    r = deploy("check", lambda_models / "model.keras", "--target", "jetson_tx2", "--format", "json", "--trust-model",
               env=NO_CONVERT)
    assert (lambda_models / "lambda_ran").exists()  # trusted: Keras ran the code to trace it
    (lambda_models / "lambda_ran").unlink()
    report = json.loads(r.stdout)
    assert not [n for f in report["findings"] for n in f["nodes"] if n.endswith("keras_lambda_not_run")]
    assert r.returncode == 0, r.stdout[-2000:]
