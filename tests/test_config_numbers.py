"""Issue 29: the config's numbers mean what they say. A boolean is not a number (``device.port: true`` was
read as port 1), and the numbers that set the length of the work are bounded (``stages.train.epochs``
10**30 was accepted and ran until killed): each is one line naming the key."""

import pytest

from pipeline.config import ConfigError, load_config

from conftest import ROOT, deploy

CONFIG = """\
run:
  name: demo
model:
  zoo: small_cnn
  input_size: 32
target: host_cpu
stages:
  train:
    epochs: 2
  export:
  convert:
  benchmark:
"""


def _problems(write, overrides):
    with pytest.raises(ConfigError) as e:
        load_config(write("c.yaml", CONFIG), overrides)
    return e.value.problems


@pytest.mark.parametrize("override,key", [
    ("device.port=true", "device.port"),
    ("device.port=yes", "device.port"),
    ("device.connect_timeout_s=true", "device.connect_timeout_s"),
    ("stages.train.epochs=on", "stages.train.epochs"),
    ("stages.train.batch_size=true", "stages.train.batch_size"),
    ("stages.train.learning_rate=true", "stages.train.learning_rate"),
    ("stages.benchmark.iterations=true", "stages.benchmark.iterations"),
    ("stages.benchmark.batch_sizes=[true, 8]", "stages.benchmark.batch_sizes"),
    ("stages.convert.opset=true", "stages.convert.opset"),
    ("model.alpha=false", "model.alpha"),
])
def test_a_boolean_is_not_a_number(write, override, key):
    extra = ["device.host=board"] if override.startswith("device.") else []
    problems = _problems(write, [override] + extra)
    assert len(problems) == 1 and key + ":" in problems[0] and "a boolean, not a number" in problems[0], problems


@pytest.mark.parametrize("override,key,most", [
    ("stages.train.epochs=" + str(10 ** 30), "stages.train.epochs", "10000"),
    ("stages.train.epochs=" + str(10 ** 400), "stages.train.epochs", "10000"),
    ("stages.benchmark.iterations=10000001", "stages.benchmark.iterations", "1000000"),
    ("stages.benchmark.warmup=" + str(10 ** 12), "stages.benchmark.warmup", "1000000"),
    ("stages.benchmark.duration_s=1e9", "stages.benchmark.duration_s", "3600"),
    ("stages.benchmark.batch_sizes=[" + ", ".join(["1"] * 65) + "]", "stages.benchmark.batch_sizes", "64"),
    ("stages.train.seed=" + str(2 ** 32), "stages.train.seed", "4294967295"),
    ("dataset.seed=" + str(2 ** 40), "dataset.seed", "4294967295"),
    ("dataset.train_per_class=" + str(10 ** 9), "dataset.train_per_class", "100000"),
    ("stages.engine.workspace_mb=" + str(10 ** 12), "stages.engine.workspace_mb", "1048576"),
])
def test_the_length_of_the_work_is_bounded(write, override, key, most):
    extra = ["dataset.path=data/shapes", "dataset.generate=shapes"] if override.startswith("dataset.") else []
    extra += ["stages.engine.precision=fp32"] if override.startswith("stages.engine") else []
    problems = _problems(write, [override] + extra)
    assert len(problems) == 1 and key + ":" in problems[0] and most in problems[0], problems


def test_the_edges_of_the_ranges_and_plain_numbers_are_read(write):
    config = load_config(write("c.yaml", CONFIG), [
        "stages.train.epochs=10000", "stages.benchmark.iterations=1000000", "stages.benchmark.batch_sizes=[1, 1024]",
        "stages.train.seed=4294967295", "device.port=65535", "device.host=board", "device.connect_timeout_s=1",
        "model.alpha=1", "stages.benchmark.duration_s=3600"])
    assert config.stages.train.epochs == 10000 and config.device.port == 65535 and config.model.alpha == 1.0
    assert config.device.connect_timeout_s == 1.0 and config.stages.benchmark.batch_sizes == [1, 1024]


def test_deploy_run_refuses_ten_to_the_thirty_epochs_at_once(write, tmp_path):
    """Old: accepted, and the train stage ran until killed."""
    path = write("c.yaml", CONFIG.replace("epochs: 2", "epochs: " + str(10 ** 30)))
    res = deploy("run", path, cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}, timeout=120)
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    lines = [line for line in res.stderr.strip().splitlines() if "stages.train.epochs" in line]
    assert lines and "less than or equal to 10000" in lines[0], res.stderr
    assert not (tmp_path / "runs").exists()


def test_a_huge_value_is_cut_in_the_error_line(write):
    """A 400-digit epochs is named, not printed whole: the line shows 80 characters and the length."""
    problems = _problems(write, ["stages.train.epochs=" + "9" * 400])
    assert len(problems) == 1 and "stages.train.epochs" in problems[0] and "(400 characters)" in problems[0], problems
    assert len(problems[0]) < 300, problems[0]
