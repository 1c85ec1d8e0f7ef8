"""The seed scenario end to end: a fine-tuned TF1 graph frozen with its training ops
(fused_batch_norm(is_training=True) and dropout with a keep_prob placeholder)."""

import json

import numpy as np
import pytest

import fixtures

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    directory = tmp_path_factory.mktemp("seed")
    train, ckpt, ref = fixtures.seed_scenario(directory)
    return directory, train, ckpt, ref


def _outputs(path, images):
    from pipeline.backends.tensorflow import load

    return load(path, {"inputs": [{"name": "input"}], "outputs": [{"name": "probabilities"}]}).run({"input": images})[0]


def test_check_rewrite_check_and_the_reference(scenario, cli):
    directory, train, ckpt, ref = scenario
    before = cli("check", train, "--target", "jetson_tx2", "--format", "json")
    report = json.loads(before.stdout)
    uff = next(r for r in report["routes"] if r["route"] == "uff")
    assert uff["verdict"] == "NO" and {f["op"] for f in uff["findings"]} >= {"FusedBatchNormV3", "RandomUniform"}
    onnx = next(r for r in report["routes"] if r["route"] == "onnx")
    # converted by tf2onnx (ONNX op names) or predicted (TF op names): the random dropout and the training-mode BN
    wrong = {f["op"] for f in onnx["accepted_but_wrong"]}
    assert any("RandomUniform" in op for op in wrong) and any("BatchNorm" in op for op in wrong), wrong

    out = directory / "deployable.pb"
    res = cli("rewrite", train, "--target", "jetson_tx2", "-o", out, "--auto", "--checkpoint", ckpt, "--reference", ref)
    assert res.returncode == 0, res.stderr
    assert "after rewrite: YES — onnx at opset 13: 0 blockers; uff: 0 blockers; tftrt: 0 blockers" in res.stdout
    receipt = json.loads((directory / "deployable.rewrite.json").read_text())
    assert [p["pass"] for p in receipt["passes"]] == ["strip_dropout", "bn_inference", "fold_shape", "uff_compat"]
    bn = receipt["passes"][1]
    assert bn["sites"] == ["bn/FusedBatchNormV3"] and bn["comparison"]["against"] == "the inference-mode reference"
    assert receipt["check_before"]["blockers"]["uff"] > 0 and receipt["check_after"]["deployable"]

    after = cli("check", out, "--target", "jetson_tx2", "--format", "json")
    assert after.returncode == 0
    data = json.loads(after.stdout)
    assert all(r["verdict"] == "YES" for r in data["routes"])
    assert not any(r["accepted_but_wrong"] for r in data["routes"])
    assert not [f for f in data["findings"] if f["batch_dependent"]]

    failing = cli("consistency", train)
    assert failing.returncode == 4  # "differs" (EXIT_DIFFERENT), as diff and compare
    assert "first divergence at bn/FusedBatchNormV3 (FusedBatchNormV3, is_training=true)" in failing.stdout
    passing = cli("consistency", out)
    assert passing.returncode == 0 and passing.stdout.startswith("batch consistency: PASS")

    images = np.random.RandomState(1).uniform(0, 255, (5, 8, 8, 3)).astype("float32")
    np.testing.assert_allclose(_outputs(out, images), _outputs(ref, images), atol=1e-6)

    again = cli("rewrite", train, "--target", "jetson_tx2", "-o", directory / "again.pb", "--auto",
                "--checkpoint", ckpt, "--reference", ref)
    assert again.returncode == 0
    assert (directory / "again.pb").read_bytes() == out.read_bytes()  # byte-identical, deterministic names


def test_rewrite_without_statistics_is_a_clear_error(scenario, cli):
    directory, train, _, _ = scenario
    res = cli("rewrite", train, "--target", "jetson_tx2", "-o", directory / "x.pb", "--pass", "bn_inference")
    last = res.stderr.strip().splitlines()[-1]  # after rewrite's progress lines
    assert res.returncode == 1 and last.startswith("deploy: error: bn_inference: no moving mean/variance for "
                                                   "bn/FusedBatchNormV3")
    assert not (directory / "x.pb").exists()


def test_rewrite_stage_in_deploy_run(scenario, tmp_path, cli):
    directory, train, ckpt, ref = scenario
    config = tmp_path / "c.yaml"
    config.write_text(
        "run: {{name: seed, dir: {runs}}}\n"
        "model: {{source: {train}}}\n"
        "target: jetson_tx2\n"
        "stages:\n"
        "  check:\n"
        "  rewrite: {{auto: true, checkpoint: {ckpt}, reference: {ref}}}\n"
        "  convert: {{compare_samples: 4}}\n".format(runs=tmp_path / "runs", train=train, ckpt=ckpt, ref=ref))
    res = cli("run", config, "--json")
    assert res.returncode == 0, res.stderr
    stages = {s["name"]: s for s in (json.loads(line) for line in res.stdout.splitlines())
              if s.get("event") == "summary" for s in s["stages"]}
    assert stages["check"]["status"] == "ran" and stages["rewrite"]["status"] == "ran"
    assert stages["rewrite"]["results"]["summary"].startswith("strip_dropout, bn_inference, uff_compat;")
    assert stages["convert"]["status"] == "ran"
    assert (tmp_path / "runs" / "seed" / "rewrite" / "rewrite.json").exists()
