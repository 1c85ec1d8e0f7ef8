"""deploy run loads a Keras model as deploy check loaded it: a custom layer class with --custom-objects FILE.py, a
Lambda layer with --trust-model; and a check's YES names those flags in its next command (before: check said YES
with them, and the printed deploy run failed at export, advising to "save it again with model.save")."""

from types import SimpleNamespace

import pytest

LAYER = '''
import keras


class Scale(keras.layers.Layer):
    def __init__(self, factor=2.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x):
        return x * self.factor

    def get_config(self):
        return dict(super().get_config(), factor=self.factor)
'''


def _custom_model(tmp_path):
    import runpy

    from pipeline.tf import import_tf

    import_tf()
    import keras

    objects = tmp_path / "objects.py"
    objects.write_text(LAYER)
    scale = runpy.run_path(str(objects))["Scale"]
    inputs = keras.Input((4, 4, 3))
    model = keras.Model(inputs, keras.layers.Dense(2)(scale()(inputs)))
    model.save(str(tmp_path / "custom.keras"))
    return tmp_path / "custom.keras", objects


@pytest.mark.tf
def test_the_export_loader_takes_the_user_s_custom_objects_and_says_so_without_them(tmp_path, monkeypatch):
    from pipeline.errors import DeployError
    from pipeline.tf.keras_model import CUSTOM_OBJECTS_ENV
    from pipeline.tf.keras_model import load_keras_model

    path, objects = _custom_model(tmp_path)
    monkeypatch.delenv(CUSTOM_OBJECTS_ENV, raising=False)
    with pytest.raises(DeployError, match="pass --custom-objects FILE.py"):
        load_keras_model(path)
    monkeypatch.setenv(CUSTOM_OBJECTS_ENV, str(objects))
    model = load_keras_model(path)
    assert [type(layer).__name__ for layer in model.layers][1] == "Scale"


def test_a_yes_names_the_opt_ins_the_check_ran_with(monkeypatch):
    from pipeline.check.report import next_command
    from pipeline.tf.keras_model import CUSTOM_OBJECTS_ENV
    from pipeline.tf.screen import TRUST_ENV

    report = SimpleNamespace(deployable=True, target={"name": "jetson_tx2", "max_opset": 13}, routes=[], model={
        "path": "m.keras", "kind": "tensorflow", "format": "keras", "inputs": [{"name": "x", "shape": [None, 8, 8, 3]}]})
    monkeypatch.delenv(CUSTOM_OBJECTS_ENV, raising=False)
    monkeypatch.delenv(TRUST_ENV, raising=False)
    assert next_command(report).endswith("--set model.source=m.keras")
    monkeypatch.setenv(CUSTOM_OBJECTS_ENV, "/abs/objects.py")
    monkeypatch.setenv(TRUST_ENV, "1")
    assert next_command(report).endswith("--set model.source=m.keras --custom-objects /abs/objects.py --trust-model")
