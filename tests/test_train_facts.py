"""Two train facts the config reads, each in one home: the zoo's names are the keys of
pipeline.train.zoo.BUILDERS (the schema's model.zoo takes exactly those), and "init_from must name
weights" is pipeline.train.fit.check_init_from (deploy validate, the train stage and fit call it)."""

import subprocess
import sys
from types import SimpleNamespace

import pytest

from pipeline.config import ConfigError, load_config
from pipeline.config.schema import ModelSection
from pipeline.errors import DeployError
from pipeline.train.fit import check_init_from
from pipeline.train.zoo import BUILDERS, ZOO

from conftest import ROOT

WHAT_TO_GIVE = ("give a checkpoint (directory or prefix, e.g. dir/model.ckpt-60), a .keras/.weights.h5/.h5 file "
                "or a frozen .pb")


def test_the_zoo_names_are_the_builders():
    assert ZOO == tuple(BUILDERS) == ("mobilenet_v2", "small_cnn")
    assert all(callable(build) for build in BUILDERS.values())


@pytest.mark.parametrize("name", ZOO)
def test_the_schema_takes_every_zoo_name(name):
    assert ModelSection(zoo=name).zoo == name


def test_the_schema_refuses_a_name_the_zoo_has_not(write):
    with pytest.raises(ConfigError, match=r"c.yaml:2 model.zoo: 'resnet50' is not one of 'mobilenet_v2', 'small_cnn'"):
        load_config(write("c.yaml", "run: {name: x}\nmodel: {zoo: resnet50}\ntarget: host_cpu\nstages: {export: }\n"))
    with pytest.raises(ValueError, match=r"give one of model.zoo \(mobilenet_v2, small_cnn\) or model.source"):
        ModelSection()


def test_the_config_reads_the_zoo_without_keras():
    code = ("import sys\nimport pipeline.config\nimport pipeline.train.zoo\n"
            "print(sorted(m for m in ('tensorflow', 'keras', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_init_from_that_is_there_passes(tmp_path):
    (tmp_path / "model.keras").write_bytes(b"")
    (tmp_path / "model.ckpt-60.index").write_bytes(b"")
    for given in (None, "", tmp_path / "model.keras", tmp_path / "model.ckpt-60", tmp_path):
        check_init_from(given and str(given))


def test_init_from_that_is_not_there_is_one_line_naming_key_file_and_what_to_give(tmp_path):
    missing = tmp_path / "nope.keras"
    with pytest.raises(DeployError) as e:
        check_init_from(str(missing))
    assert e.value.message == "stages.train.init_from: {} not found; {}".format(missing, WHAT_TO_GIVE)
    with pytest.raises(DeployError) as e:
        check_init_from(str(missing), "c.yaml:9")
    assert e.value.message == "c.yaml:9 stages.train.init_from: {} not found; {}".format(missing, WHAT_TO_GIVE)


def test_validate_and_the_train_stage_say_the_same(write, tmp_path):
    """Config.path_problems and the train stage both go through check_init_from, with the config's line."""
    from pipeline.stages import StageContext
    from pipeline.stages.train import train

    missing = tmp_path / "nope.keras"
    path = write("c.yaml", "run: {{name: x, dir: {r}}}\nmodel: {{zoo: small_cnn}}\ntarget: host_cpu\n"
                           "stages:\n  train: {{init_from: {m}}}\n".format(r=tmp_path, m=missing))
    config = load_config(path)
    expected = "{}:5 stages.train.init_from: {} not found; {}".format(path, missing, WHAT_TO_GIVE)
    assert config.path_problems() == [expected]
    ctx = StageContext(name="train", out_dir=tmp_path / "out", inputs={}, options=config.stages.train, config=config,
                       target=None, progress=SimpleNamespace())
    with pytest.raises(DeployError) as e:
        train(ctx)
    assert e.value.message == expected
