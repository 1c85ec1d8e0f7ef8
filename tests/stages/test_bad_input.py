"""Bad input to `deploy run`: a one-line error naming the file or key, exit 1, nothing left behind."""

from pipeline.data.shapes import generate_shapes


CONFIG = """\
run:
  name: bad
  dir: {root}/runs
model:
  zoo: {zoo}
  input_size: {size}
dataset:
  path: {root}/data
target: jetson_tx2
stages:
  train:
    epochs: 1
{extra}"""


def config(tmp_path, zoo="small_cnn", size=32, extra=""):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.format(root=tmp_path, zoo=zoo, size=size, extra=extra))
    return path


def check_failed(res, message, tmp_path):
    assert res.returncode == 1, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[-1].startswith("deploy: error: ") and message in lines[-1], res.stderr
    assert "Traceback" not in res.stderr
    run = tmp_path / "runs" / "bad"
    assert not (run / "train").exists() and not list(run.glob(".tmp-*"))


def test_missing_dataset_folder(tmp_path, cli):
    res = cli("run", config(tmp_path))
    check_failed(res, "dataset.path: {}/data not found; point it at an image folder, or set dataset.generate: shapes".format(tmp_path), tmp_path)


def test_empty_dataset_folder(tmp_path, cli):
    (tmp_path / "data").mkdir()
    res = cli("run", config(tmp_path))
    check_failed(res, "dataset folder {}/data has no class subfolders".format(tmp_path), tmp_path)


def test_class_folder_without_images(tmp_path, cli):
    generate_shapes(tmp_path / "data", image_size=32, train_per_class=2, val_per_class=1)
    for f in (tmp_path / "data" / "train" / "cross").iterdir():
        f.unlink()
    res = cli("run", config(tmp_path))
    check_failed(res, "dataset folder {}/data/train/cross has no images".format(tmp_path), tmp_path)


def test_unreadable_image(tmp_path, cli):
    generate_shapes(tmp_path / "data", image_size=32, train_per_class=2, val_per_class=1)
    bad = tmp_path / "data" / "train" / "circle" / "circle_0001.png"
    bad.write_bytes(b"<html>not an image</html>")
    res = cli("run", config(tmp_path))
    check_failed(res, "image file {} is not a readable image".format(bad), tmp_path)


def test_missing_init_from(tmp_path, cli):
    generate_shapes(tmp_path / "data", image_size=32, train_per_class=2, val_per_class=1)
    res = cli("run", config(tmp_path), "--set", "stages.train.init_from={}/nope.keras".format(tmp_path))
    check_failed(res, "stages.train.init_from: {}/nope.keras not found".format(tmp_path), tmp_path)


def test_unknown_model_name(tmp_path, cli):
    res = cli("run", config(tmp_path, zoo="resnet50"))
    assert res.returncode == 1
    assert "c.yaml:5 model.zoo: 'resnet50' is not one of 'mobilenet_v2', 'small_cnn'" in res.stderr


def test_input_size_the_model_cannot_take(tmp_path, cli):
    res = cli("run", config(tmp_path, size=16))
    assert res.returncode == 1
    assert "c.yaml:6 model.input_size: Input should be greater than or equal to 32" in res.stderr


def test_model_source_missing(tmp_path, cli):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.format(root=tmp_path, zoo="small_cnn", size=32, extra="  convert:\n")
                    .replace("  zoo: small_cnn", "  source: {}/frozen.pb".format(tmp_path)))
    res = cli("run", path)
    assert res.returncode == 1 and "model.source: {}/frozen.pb not found".format(tmp_path) in res.stderr
    # where, as deploy validate says it (it lost the file:line in deploy run)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "source:" in text)
    assert "deploy: error: {}:{} model.source: ".format(path, line) in res.stderr, res.stderr
