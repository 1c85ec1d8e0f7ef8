"""stages.train.distribute: MirroredStrategy, and MultiWorkerMirroredStrategy across two worker
processes on 127.0.0.1 that must finish the same steps with identical weights."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from pipeline.data.shapes import generate_shapes

from conftest import ROOT, deploy

pytestmark = [pytest.mark.tf, pytest.mark.slow]

CONFIG = """\
run: {{name: {name}, dir: {root}/runs}}
model: {{zoo: small_cnn, input_size: 32}}
dataset: {{path: {root}/data}}
target: host_cpu
stages:
  train: {{epochs: 2, batch_size: 8, distribute: {{strategy: {strategy}}}}}
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("dist")
    generate_shapes(root / "data", image_size=32, train_per_class=6, val_per_class=2)
    return root


def _config(root, name, strategy):
    path = root / (name + ".yaml")
    path.write_text(CONFIG.format(name=name, root=root, strategy=strategy))
    return path


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _weights(root, name):
    from pipeline.tf import import_tf

    import_tf()
    import keras

    model = keras.models.load_model(str(root / "runs" / name / "train" / "model.keras"), compile=False)
    return np.concatenate([w.ravel() for w in model.get_weights()])


def test_mirrored(root):
    res = deploy("run", _config(root, "mirrored", "mirrored"), "--json")
    assert res.returncode == 0, res.stderr
    history = json.loads((root / "runs" / "mirrored" / "train" / "history.json").read_text())
    assert len(history["epochs"]) == 2 and {"loss", "accuracy", "val_loss", "val_accuracy"} <= set(history["epochs"][0])
    assert (root / "runs" / "mirrored" / "train" / "checkpoints" / "epoch_002.weights.h5").exists()


def test_two_workers_finish_the_same_steps_with_identical_weights(root):
    ports = [_free_port(), _free_port()]
    procs = []
    for index in range(2):
        env = dict(os.environ, TF_CONFIG=json.dumps({
            "cluster": {"worker": ["127.0.0.1:{}".format(p) for p in ports]}, "task": {"type": "worker", "index": index}}))
        procs.append(subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(_config(root, "w{}".format(index), "multi_worker")),
                                       "--quiet"], cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err
    histories = [json.loads((root / "runs" / "w{}".format(i) / "train" / "history.json").read_text()) for i in range(2)]
    assert len(histories[0]["epochs"]) == len(histories[1]["epochs"]) == 2
    assert histories[0]["epochs"] == histories[1]["epochs"]  # same steps, same all-reduced losses
    np.testing.assert_array_equal(_weights(root, "w0"), _weights(root, "w1"))


def test_multi_worker_without_tf_config(root):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    res = subprocess.run([sys.executable, "-m", "pipeline", "run", str(_config(root, "lonely", "multi_worker"))],
                         cwd=str(ROOT), env=env, capture_output=True, text=True)
    assert res.returncode == 1 and "multi_worker needs TF_CONFIG" in res.stderr
