"""Config loading and validation: every rule, with its message."""

import json

import pytest

from pipeline.config import ConfigError, json_schema, load_config
from pipeline.errors import DeployError

from conftest import ROOT

GOOD = """\
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
"""


def test_good_config_gets_defaults(write):
    config = load_config(write("c.yaml", GOOD))
    assert config.stages.train.epochs == 2
    assert config.stages.train.batch_size == 32  # default owned by the schema
    assert config.stages.export.input_name == "input"  # `export:` with no value = defaults
    assert config.stages.freeze is None
    assert config.selected_stages() == ["train", "export", "convert"]
    assert config.run.dir == "runs"


def test_unknown_key_names_file_line_and_suggests(write):
    path = write("c.yaml", GOOD.replace("    epochs: 2", "    epoch: 2"))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == (
        "{}:9 stages.train.epoch: unknown key; did you mean 'epochs'? "
        "allowed: augment, batch_size, distribute, epochs, exclude_scopes, init_from, learning_rate, name_map, "
        "optimizer, run_eagerly, seed, trainable_scopes".format(path)
    )


def test_unknown_stage_suggests_closest(write):
    path = write("c.yaml", GOOD.replace("  convert:", "  convrt:"))
    with pytest.raises(ConfigError, match=r"c.yaml:11 stages.convrt: unknown key; did you mean 'convert'\?"):
        load_config(path)


def test_bad_value_lists_allowed(write):
    path = write("c.yaml", GOOD + "  engine:\n    precision: fp8\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == "{}:13 stages.engine.precision: 'fp8' is not one of 'fp32', 'fp16', 'int8'".format(path)


def test_wrong_type(write):
    path = write("c.yaml", GOOD.replace("epochs: 2", "epochs: many"))
    with pytest.raises(ConfigError, match=r"c.yaml:9 stages.train.epochs: Input should be a valid integer.*\(got 'many'\)"):
        load_config(path)


def test_out_of_range(write):
    path = write("c.yaml", GOOD.replace("input_size: 32", "input_size: 8"))
    with pytest.raises(ConfigError, match=r"c.yaml:5 model.input_size: Input should be greater than or equal to 32"):
        load_config(path)


def test_missing_required_key(write):
    path = write("c.yaml", GOOD.replace("target: host_cpu\n", ""))
    with pytest.raises(ConfigError, match=r"c.yaml target: required key is missing"):
        load_config(path)


@pytest.mark.parametrize("bad, message", [
    ("[]", "List should have at least 1 item"),
    ("[0]", "batch sizes must be 1 to 1024"),
    ("[1.5]", "Input should be a valid integer"),
])
def test_benchmark_batch_sizes(write, bad, message):
    path = write("c.yaml", GOOD + "  benchmark:\n    batch_sizes: {}\n".format(bad))
    with pytest.raises(ConfigError, match=r"c.yaml:13 stages.benchmark.batch_sizes.*" + message):
        load_config(path)


def test_model_needs_zoo_or_source(write):
    path = write("c.yaml", GOOD.replace("  zoo: small_cnn\n", ""))
    with pytest.raises(ConfigError, match=r"c.yaml:3 model: give one of model.zoo \(mobilenet_v2, small_cnn\) or model.source"):
        load_config(path)


def test_a_source_under_a_base_that_names_a_zoo_model_says_zoo_null(tmp_path, cli):
    """Copying a shipped config and setting model.source: base.yaml's model.zoo stays (mappings merge), and the
    error says how to drop it, not "give exactly one" to a user who gave one."""
    (tmp_path / "m.pb").write_bytes(b"")
    config = tmp_path / "mine.yaml"
    config.write_text("extends: {}\nrun: {{name: mine}}\ntarget: jetson_tx2\nmodel:\n  source: {}\n".format(
        ROOT / "configs" / "base.yaml", tmp_path / "m.pb"))
    res = cli("validate", config)
    assert res.returncode == 1 and res.stderr.strip() == (
        "deploy: error: {}:4 model: model.zoo (mobilenet_v2) and model.source are both set; give one: to start from "
        "model.source, set `zoo: null` under model: (a base config, extends:, may set model.zoo)".format(config))
    config.write_text(config.read_text() + "  zoo: null\n")
    assert cli("validate", config).returncode == 0


def test_every_problem_is_reported(write):
    path = write("c.yaml", GOOD.replace("epochs: 2", "epochs: 0").replace("input_size: 32", "input_sise: 32"))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert len(e.value.problems) == 2
    assert any("model.input_sise: unknown key; did you mean 'input_size'?" in p for p in e.value.problems)
    assert any("stages.train.epochs: Input should be greater than or equal to 1" in p for p in e.value.problems)


def test_extends_merges_and_errors_point_at_the_right_file(write):
    base = write("base.yaml", GOOD)
    child = write("child.yaml", "extends: base.yaml\nrun:\n  name: child\nstages:\n  train:\n    epochs: 5\n")
    config = load_config(child)
    assert config.run.name == "child"
    assert config.stages.train.epochs == 5
    assert config.model.zoo == "small_cnn"  # from the base
    assert config.stages.export is not None  # base's stages are kept
    write("child.yaml", "extends: base.yaml\nstages:\n  train:\n    epochs: -1\n")
    with pytest.raises(ConfigError, match=r"child.yaml:4 stages.train.epochs"):
        load_config(child)
    write("base.yaml", GOOD.replace("zoo: small_cnn", "zoo: resnet"))
    write("child.yaml", "extends: base.yaml\n")
    with pytest.raises(ConfigError, match=r"base.yaml:4 model.zoo: 'resnet' is not one of"):
        load_config(child)
    assert base.exists()


def test_extends_missing_and_loop(write):
    path = write("c.yaml", "extends: nothere.yaml\n" + GOOD)
    with pytest.raises(DeployError, match=r"c.yaml:1 extends: base config .*nothere.yaml not found"):
        load_config(path)
    a = write("a.yaml", "extends: b.yaml\n")
    write("b.yaml", "extends: a.yaml\n")
    with pytest.raises(DeployError, match=r"'extends' loops back"):
        load_config(a)


def test_set_overrides_and_its_errors(write):
    path = write("c.yaml", GOOD)
    config = load_config(path, ["stages.train.epochs=1", "stages.benchmark.batch_sizes=[1, 4]", "run.name=other"])
    assert config.stages.train.epochs == 1
    assert config.stages.benchmark.batch_sizes == [1, 4]
    assert config.run.name == "other"
    with pytest.raises(ConfigError, match=r"^--set stages.train.epochs: Input should be a valid integer"):
        load_config(path, ["stages.train.epochs=abc"])
    with pytest.raises(ConfigError, match=r"^--set stages.trian: unknown key; did you mean 'train'\?"):
        load_config(path, ["stages.trian.epochs=1"])
    with pytest.raises(DeployError, match=r"--set 'epochs': expected KEY.PATH=VALUE"):
        load_config(path, ["epochs"])


@pytest.mark.parametrize("text, message", [
    ("", "config file is empty"),
    ("- a\n- b\n", "a config is a mapping of keys"),
    ("run:\n  name: [x\n", "c.yaml:3 invalid YAML"),
    ("<html><body>not yaml: at all</body>\n  x: : y", "invalid YAML"),
])
def test_unreadable_configs(write, text, message):
    with pytest.raises(DeployError, match=message):
        load_config(write("c.yaml", text))


def test_missing_config_file(tmp_path):
    with pytest.raises(DeployError, match=r"nope.yaml: config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_target_is_checked_with_suggestion_and_capabilities(write):
    config = load_config(write("c.yaml", GOOD.replace("host_cpu", "jetson_tx")))
    with pytest.raises(DeployError, match=r"c.yaml:6 target: unknown target 'jetson_tx': did you mean 'jetson_tx2'\?"):
        config.load_target()
    config = load_config(write("c.yaml", GOOD.replace("host_cpu", "jetson_tx2") + "  engine:\n    precision: int8\n"))
    with pytest.raises(DeployError, match=r"c.yaml:13 stages.engine.precision: int8 is not supported on jetson_tx2 \(it has fp32, fp16\)"):
        config.load_target()
    config = load_config(write("c.yaml", GOOD.replace("host_cpu", "jetson_tx2")), ["stages.convert.opset=15"])
    with pytest.raises(DeployError, match=r"--set stages.convert.opset: 15 is above what TensorRT 8.2.1 on jetson_tx2 parses \(max 13\)"):
        config.load_target()


@pytest.mark.parametrize("name", ["jetson_tx2", "jetson_nano", "xavier_nx", "agx_orin"])
def test_shipped_configs_validate(name):
    config = load_config(ROOT / "configs" / (name + ".yaml"))
    target = config.load_target()
    assert target.name == name
    assert config.run.name == name
    assert config.selected_stages() == ["train", "export", "freeze", "check", "rewrite", "convert", "engine", "benchmark"]
    assert config.model.zoo == "mobilenet_v2" and config.model.alpha == 0.35


def test_schema_is_json_schema_of_the_config():
    schema = json_schema()
    assert set(schema["properties"]) >= {"run", "model", "dataset", "target", "stages", "extends"}
    assert "TrainOptions" in json.dumps(schema)


def test_cli_validate_and_schema(write, cli):
    ok = cli("validate", ROOT / "configs" / "jetson_tx2.yaml")
    assert ok.returncode == 0, ok.stderr
    assert "ok (run jetson_tx2, target jetson_tx2" in ok.stdout
    bad = write("c.yaml", GOOD.replace("epochs: 2", "epoch: 2").replace("input_size: 32", "input_size: 3"))
    res = cli("validate", bad)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("deploy: error: ") for line in lines)
    res = cli("run", bad)
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and "(and 1 more problem: deploy validate shows all)" in res.stderr
    assert "Traceback" not in res.stderr
    schema = cli("schema")
    assert schema.returncode == 0 and json.loads(schema.stdout)["title"] == "deploy config"


def test_config_reference_doc_is_up_to_date():
    from pipeline.config.docs import reference_markdown

    assert (ROOT / "docs" / "config.md").read_text() == reference_markdown(), \
        "regenerate: python -m pipeline.config.docs > docs/config.md"


def test_validate_checks_the_paths_a_config_names(tmp_path, cli):
    ckpt = tmp_path / "train" / "model.ckpt-60"
    ckpt.parent.mkdir()
    (tmp_path / "train" / "model.ckpt-60.index").write_bytes(b"")
    config = tmp_path / "c.yaml"
    config.write_text("run: {{name: x, dir: {r}}}\nmodel: {{zoo: small_cnn}}\ntarget: host_cpu\n"
                      "dataset: {{path: {r}/nope}}\nstages:\n  train: {{init_from: {r}/missing.keras}}\n".format(r=tmp_path))
    res = cli("validate", config)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert lines == [  # in the file's order
        "deploy: error: {}:4 dataset.path: {}/nope not found; point it at the dataset, or set dataset.generate: "
        "shapes".format(config, tmp_path),
        "deploy: error: {}:6 stages.train.init_from: {}/missing.keras not found; give a checkpoint (directory or "
        "prefix, e.g. dir/model.ckpt-60), a .keras/.weights.h5/.h5 file or a frozen .pb".format(config, tmp_path)]
    config.write_text("run: {{name: x, dir: {r}}}\nmodel: {{source: {r}/mine.keras}}\ntarget: host_cpu\n"
                      "dataset: {{path: {r}/gen, generate: shapes}}\nstages:\n  train: {{init_from: {c}}}\n".format(
                          r=tmp_path, c=ckpt))
    res = cli("validate", config)
    assert res.returncode == 1 and res.stderr.strip().splitlines() == [
        "deploy: error: {}:2 model.source: {}/mine.keras not found; give a .keras/.h5 file, a SavedModel directory or "
        "a frozen .pb".format(config, tmp_path)]  # the checkpoint prefix exists; a generated dataset may be missing


def test_validate_refuses_a_model_source_deploy_run_cannot_start_from(tmp_path, cli):
    """An ONNX model or a TF1 meta graph is checked by deploy check but is not a start of the pipeline: validate says
    so (what to do instead), as deploy run would, instead of "ok"."""
    for name, words in (("m.onnx", "is an ONNX model: deploy run starts from a .keras/.h5 file, a SavedModel "
                                   "directory or a frozen .pb; build its engine on the board: /usr/src/tensorrt/bin/trtexec --onnx="),
                        ("m.meta", "is a TF1 meta graph: deploy run starts from"),
                        ("m.tflite", "is not a .keras/.h5 file, a SavedModel directory or a frozen .pb")):
        (tmp_path / name).write_bytes(b"\x08\x07")
        config = tmp_path / "c.yaml"
        config.write_text("run: {{name: x, dir: {r}}}\nmodel: {{source: {r}/{n}}}\ntarget: host_cpu\n"
                          "dataset: {{path: {r}/gen, generate: shapes}}\nstages: {{check: {{}}}}\n".format(r=tmp_path, n=name))
        res = cli("validate", config)
        assert res.returncode == 1, res.stdout
        assert res.stderr.strip().splitlines() == ["deploy: error: {}:2 model.source: {}/{} {}".format(
            config, tmp_path, name, words)] if name == "m.tflite" else words in res.stderr, res.stderr


def _bomb():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append("{0}: &{0} [{1}]".format(name, ",".join(["*" + prev] * 9)))
        prev = name
    return "\n".join(lines) + "\nrun: {name: x}\n"


@pytest.mark.parametrize("text, message", [
    (_bomb(), "{path}: the config expands to more than 100,000 values (YAML aliases that multiply); write it out "
              "without the nested aliases"),
    ("a: " + "[" * 3000 + "]" * 3000 + "\n", "{path}:1 the config is nested more than 64 levels deep; a config has a few"),
    ("a: &a [1, 2]\nb: &b [*b, 1]\n", "{path}:2 a YAML alias refers to itself (a recursive structure); remove it"),
    ("run: {name: x}\nrun: {name: y}\n", "{path}:2 run: key written twice (first at line 1); keep one"),
    ("run:\n  name: x\n  name: y\n", "{path}:3 run.name: key written twice (first at line 2); keep one"),
])
def test_hostile_yaml_is_one_line_and_bounded(tmp_path, text, message):
    from conftest import deploy

    path = tmp_path / "c.yaml"
    path.write_text(text)
    res = deploy("validate", path, timeout=60)  # bounded: the bomb takes well under a second (scripts/bench)
    assert res.returncode == 1
    assert res.stderr == "deploy: error: " + message.format(path=path) + "\n"


@pytest.mark.parametrize("override, message", [
    ("stages.train.learning_rate=.nan", "--set stages.train.learning_rate: Input should be a finite number"),
    ("stages.convert.tolerance=.inf", "--set stages.convert.tolerance: Input should be a finite number"),
    ("stages.train.seed=-1", "--set stages.train.seed: Input should be greater than or equal to 0"),
    ("stages.rewrite.passes=[strip_dropuot]", "--set stages.rewrite: unknown rewrite pass 'strip_dropuot' (did you "
                                              "mean 'strip_dropout'?)"),
    ("stages.rewrite.options={cut: {input: x}}", "--set stages.rewrite: rewrite pass cut has no option 'input'; it "
                                                 "takes: inputs"),
    ("stages.benchmark.batch_sizes=[1,100000]", "--set stages.benchmark.batch_sizes: batch sizes must be 1 to 1024"),
    # D5: DLA runs fp16/int8 only, and has no dynamic shapes (one static batch size per DLA engine)
    ("stages.engine={dla_core: 0, precision: fp32}", "--set stages.engine: dla_core 0 with precision fp32: DLA runs "
                                                     "fp16 and int8 only; set stages.engine.precision: fp16 (or int8)"),
    ("stages.engine={dla_core: 1}", "--set stages: a DLA engine (stages.engine.dla_core: 1) has one static batch size, "
                                    "but stages.benchmark.batch_sizes has [1, 8]; benchmark one batch size on DLA"),
])
def test_values_that_make_no_sense_are_refused_at_validation(override, message, cli):
    from conftest import ROOT

    res = cli("validate", ROOT / "configs" / "jetson_tx2.yaml", "--set", override)
    assert res.returncode == 1 and res.stderr.startswith("deploy: error: " + message), res.stderr


@pytest.mark.parametrize("argv", [["consistency", "m.pb", "--samples", "0"], ["consistency", "m.pb", "--tolerance", "nan"],
                                  ["rewrite", "m.pb", "-t", "jetson_tx2", "-o", "o.pb", "--auto", "--tolerance", "-1"]])
def test_flag_values_that_make_no_sense(argv, cli):
    res = cli(*argv)
    assert res.returncode == 1 and res.stderr.startswith("deploy: error: argument --") and res.stderr.count("\n") == 1


def test_check_routes_are_the_targets_routes():
    """stages.check.routes takes targets.device's Route: a route added there is a route the config takes."""
    import subprocess
    import sys

    code = ("import typing, pipeline.targets.device as device\n"
            "device.Route = typing.Literal[device.ROUTES + ('new_route',)]\n"
            "from pipeline.config.schema import CheckOptions\n"
            "print(CheckOptions(routes=['new_route', 'onnx']).routes)\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout == "['new_route', 'onnx']\n", res.stderr


def test_the_routes_deploy_run_takes_have_one_home():
    """stages.convert.format's choices, the check's verdict routes and the engine's auto route all read
    targets.device.RUNNABLE_ROUTES."""
    from pipeline.check import findings
    from pipeline.config.schema import ConvertOptions
    from pipeline.device.engine import choose_route
    from pipeline.targets.device import ROUTES, RUNNABLE_ROUTES

    assert findings.RUNNABLE_ROUTES is RUNNABLE_ROUTES and set(RUNNABLE_ROUTES) < set(ROUTES)
    schema = ConvertOptions.model_json_schema()["properties"]["format"]
    assert schema["enum"] == list(RUNNABLE_ROUTES) + ["auto"]
    assert choose_route("auto", "tftrt", ROUTES) == "onnx" and choose_route("auto", "uff", ROUTES) == "uff"


def test_validate_lists_every_target_problem_with_the_schema_problems(tmp_path, capsys):
    """Issue 26, item 5: int8 on a TX2 *and* opset 15 *and* a typo. Before: only the typo (schema problems hid the
    target's), then only int8 (one target problem at a time)."""
    from pipeline.cli import main

    config = tmp_path / "c.yaml"
    config.write_text("extends: {}\nstages:\n  engine:\n    precision: int8\n  convert:\n    opset: 15\n"
                      "  train:\n    epochz: 3\n".format(ROOT / "configs" / "jetson_tx2.yaml"))
    assert main(["validate", str(config)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line.split(" ", 3)[3].split(":")[0] for line in lines] == [  # in the file's order
        "stages.engine.precision", "stages.convert.opset", "stages.train.epochz"], lines
    assert "{}:4 stages.engine.precision: int8 is not supported on jetson_tx2".format(config) in lines[0]
    assert "{}:6 stages.convert.opset: 15 is above what TensorRT".format(config) in lines[1]
    assert main(["validate", str(config), "--format", "json"]) == 1
    shape = json.loads(capsys.readouterr().out)["error"]
    assert shape["exit_code"] == 1 and len(shape["problems"]) == 3 and shape["message"] == shape["problems"][0]
    config.write_text(config.read_text().replace("epochz", "epochs"))  # the target's problems alone: both, at once
    assert main(["validate", str(config)]) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == 2


def test_run_eagerly_is_a_train_option_and_refused_with_distribute(write):
    assert load_config(write("c.yaml", GOOD.replace("epochs: 2", "epochs: 2\n    run_eagerly: true"))) \
        .stages.train.run_eagerly is True
    assert load_config(write("d.yaml", GOOD)).stages.train.run_eagerly is False
    path = write("e.yaml", GOOD.replace("epochs: 2", "epochs: 2\n    run_eagerly: true\n    distribute: {strategy: mirrored}"))
    with pytest.raises(ConfigError, match=r"e.yaml:\d+ stages.train: run_eagerly is not possible with distribute"):
        load_config(path)


def test_validate_refuses_a_benchmark_batch_above_the_engine_s_and_a_dla_core_the_target_lacks(cli):
    """Both failed only on the board, after the host stages (pipeline/device/engine.py); validate now says so first."""
    res = cli("validate", ROOT / "configs" / "jetson_tx2.yaml", "--set", "stages.benchmark.batch_sizes=[16]")
    assert res.returncode == 1 and "stages.benchmark.batch_sizes has 16 but stages.engine.max_batch_size is 8" in res.stderr
    assert cli("validate", ROOT / "configs" / "jetson_tx2.yaml", "--set", "stages.benchmark.batch_sizes=[16]", "--set",
               "stages.engine.max_batch_size=16").returncode == 0
    res = cli("validate", ROOT / "configs" / "jetson_tx2.yaml", "--set", "stages.engine.dla_core=0", "--set",
              "stages.engine.precision=fp16", "--set", "stages.benchmark.batch_sizes=[8]")
    assert res.returncode == 1 and res.stderr.strip().splitlines() == [
        "deploy: error: --set stages.engine.dla_core: 0: jetson_tx2 has no DLA cores; remove dla_core"], res.stderr
    res = cli("validate", ROOT / "configs" / "agx_orin.yaml", "--set", "stages.engine.dla_core=1", "--set",
              "stages.engine.precision=fp16", "--set", "stages.benchmark.batch_sizes=[8]")
    assert res.returncode == 0, res.stderr


def test_validate_lists_the_problems_in_the_file_s_order(tmp_path, cli):
    """The schema met stages.engine (a field before benchmark) first and listed line 12 above line 10."""
    config = tmp_path / "c.yaml"
    config.write_text("extends: {}\nrun:\n  name: t\ntarget: jetson_tx2\nmodel:\n  zoo: small_cnn\nstages:\n"
                      "  benchmark:\n    iterations: 10\n    batch_size: [1, 4]\n  engine:\n    precison: fp32\n".format(
                          ROOT / "configs" / "base.yaml"))
    res = cli("validate", config)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and [line.split(" ")[2] for line in lines] == [
        "{}:10".format(config), "{}:12".format(config)], lines
    from pipeline.config.loading import in_file_order

    assert in_file_order(["b.yaml:9 x: 1", "--set y: 2", "a.yaml:3 z: 3", "b.yaml:2 w: 4"]) == [
        "b.yaml:2 w: 4", "b.yaml:9 x: 1", "a.yaml:3 z: 3", "--set y: 2"]
