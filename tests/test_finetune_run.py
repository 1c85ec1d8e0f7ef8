"""Fine-tuning in `deploy run` and `deploy ckpt` as users name their checkpoints: a checkpoint
prefix (dir/model.ckpt-60), the user's own .keras model with init_from, deploy's own checkpoint
folder, a SavedModel's variables/, and ckpt diff failing where the run would."""

import json

import pytest

from conftest import deploy

pytestmark = [pytest.mark.tf, pytest.mark.slow]


def _config(tmp_path, name, model, train):
    path = tmp_path / (name + ".yaml")
    path.write_text(
        "run: {{name: {name}, dir: {runs}}}\nmodel: {model}\n"
        "dataset: {{path: {data}, generate: shapes, train_per_class: 4, val_per_class: 2}}\n"
        "target: host_cpu\nstages:\n  train: {train}\n".format(
            name=name, runs=tmp_path / "runs", model=model, data=tmp_path / "data", train=train))
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A small_cnn trained one epoch by deploy (its checkpoints/ folder and model.keras)."""
    tmp = tmp_path_factory.mktemp("ft")
    config = _config(tmp, "base", "{zoo: small_cnn, input_size: 32}", "{epochs: 1, batch_size: 8}")
    res = deploy("run", config, "--until", "train", "--quiet")
    assert res.returncode == 0, res.stderr
    return tmp, tmp / "runs" / "base" / "train"


def test_init_from_a_checkpoint_prefix(trained, tmp_path, cli):
    from pipeline.tf import import_tf

    tf = import_tf()
    import keras

    _, train_dir = trained
    model = keras.models.load_model(str(train_dir / "model.keras"))
    prefix = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt" / "model.ckpt"))
    assert prefix.endswith("model.ckpt-1") and not (tmp_path / "ckpt" / "model.ckpt-1").exists()  # a prefix, not a file
    config = _config(tmp_path, "prefix", "{zoo: small_cnn, input_size: 32}",
                     "{{epochs: 1, batch_size: 8, init_from: {}}}".format(prefix))
    assert cli("ckpt", "inspect", prefix).returncode == 0
    res = deploy("run", config, "--until", "train", "--quiet")
    assert res.returncode == 0, res.stderr
    history = json.loads((tmp_path / "runs" / "prefix" / "train" / "history.json").read_text())
    assert history["restore"]["restored"] and not history["restore"]["shape_mismatch"]


def test_init_from_into_the_users_own_keras_model(trained, tmp_path):
    _, train_dir = trained
    config = _config(tmp_path, "own", "{{source: {}}}".format(train_dir / "model.keras"),
                     "{{epochs: 1, batch_size: 8, init_from: {}}}".format(train_dir / "checkpoints"))
    res = deploy("run", config, "--until", "train", "--json")
    assert res.returncode == 0, res.stderr
    stages = [json.loads(line) for line in res.stdout.splitlines() if '"summary"' in line][-1]["stages"]
    assert stages[0]["name"] == "train" and stages[0]["status"] == "ran"  # not skipped: it fine-tunes the model
    history = json.loads((tmp_path / "runs" / "own" / "train" / "history.json").read_text())
    assert history["restore"]["restored"]


def test_ckpt_inspect_reads_deploys_checkpoint_folder_and_a_saved_model(trained, tmp_path, cli):
    from pipeline.tf import import_tf

    tf = import_tf()
    _, train_dir = trained
    res = cli("ckpt", "inspect", train_dir / "checkpoints")
    assert res.returncode == 0, res.stderr
    assert "epoch_001.weights.h5" in res.stdout or "variables" in res.stdout
    module = tf.Module()
    module.w = tf.Variable(tf.ones([3, 2]), name="dense/kernel")
    tf.saved_model.save(module, str(tmp_path / "sm"))
    res = cli("ckpt", "inspect", tmp_path / "sm" / "variables")
    assert res.returncode == 0 and "(3, 2)" in res.stdout, res.stderr
    res = cli("ckpt", "inspect", tmp_path / "sm")
    assert res.returncode == 0 and "(3, 2)" in res.stdout, res.stderr


def test_ckpt_diff_exits_non_zero_where_the_run_would_fail(trained, tmp_path, cli):
    tmp, train_dir = trained
    five = _config(tmp_path, "five", "{zoo: small_cnn, input_size: 32, num_classes: 5}", "{epochs: 1}")
    res = cli("ckpt", "diff", train_dir / "model.keras", "--config", five)
    assert res.returncode == 1
    assert "shape mismatch" in res.stdout  # the report is printed first
    assert "add stages.train.exclude_scopes: [" in res.stderr.strip().splitlines()[-1]
    from pipeline.tf import import_tf

    tf = import_tf()
    module = tf.Module()
    module.v = tf.Variable(tf.ones([7, 7, 7]), name="unrelated")
    prefix = tf.train.Checkpoint(m=module).save(str(tmp_path / "other" / "ckpt"))
    same = _config(tmp_path, "same", "{zoo: small_cnn, input_size: 32, num_classes: 4}", "{epochs: 1}")
    res = cli("ckpt", "diff", prefix, "--config", same)
    assert res.returncode == 1 and "stages.train.name_map" in res.stderr.strip().splitlines()[-1]
    res = cli("ckpt", "diff", train_dir / "model.keras", "--config", same)
    assert res.returncode == 0, res.stderr
