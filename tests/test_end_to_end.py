"""The shipped TX2 config, shrunk with --set, run end to end through the real command line."""

import json

import pytest

from pipeline.files import sha256_path

from conftest import ROOT, copy_stages, deploy, tiny_args

pytestmark = [pytest.mark.tf, pytest.mark.slow]

STATS = ("mean_ms", "std_ms", "min_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms", "throughput_ips", "iterations")


@pytest.fixture(scope="module")
def tiny(tiny_tx2):
    """The session's shared tiny run's root (tests/conftest.py's tiny_tx2): data/ and runs/jetson_tx2, whose
    `deploy run` test_tx2_config_end_to_end_then_cached asserts on."""
    return tiny_tx2.root


def shrink(root, *extra):
    return tiny_args(root, *extra)


def events(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_tx2_config_end_to_end_then_cached(tiny, tiny_tx2):
    res = tiny_tx2.result  # deploy run configs/jetson_tx2.yaml *shrink(tiny) --json, run once for the session
    assert res.returncode == 0, res.stderr
    summary = events(res.stdout)[-1]
    assert summary["event"] == "summary" and summary["exit_code"] == 0
    status = {s["name"]: s["status"] for s in summary["stages"]}
    assert status == {"train": "ran", "export": "ran", "freeze": "ran", "check": "ran", "rewrite": "ran", "convert": "ran",
                      "engine": "pending", "benchmark": "ran"}
    engine = [s for s in summary["stages"] if s["name"] == "engine"][0]
    assert "TensorRT 8.2.1 builds on the jetson_tx2" in engine["message"] and "add a device: section" in engine["message"]

    run = tiny / "runs" / "jetson_tx2"
    for path in ("train/model.keras", "train/history.json", "train/checkpoints/epoch_001.weights.h5",
                 "export/saved_model/saved_model.pb", "freeze/frozen.pb", "freeze/io.json",
                 "convert/model.onnx", "convert/comparison.json", "benchmark/benchmark.json"):
        assert (run / path).exists(), path
    check = json.loads((run / "check" / "check.json").read_text())
    assert check["deployable"] is True and check["recommended"]["route"] == "onnx"
    for stage in ("train", "export", "freeze", "check", "rewrite", "convert", "benchmark"):
        manifest = json.loads((run / stage / "manifest.json").read_text())
        assert manifest["status"] == "ok"
        assert {"tensorflow", "tf2onnx", "onnx", "onnxruntime", "python"} <= set(manifest["tools"]) or \
            {"tensorflow-cpu", "tf2onnx", "onnx", "onnxruntime", "python"} <= set(manifest["tools"])

    history = json.loads((run / "train" / "history.json").read_text())
    assert history["classes"] == ["circle", "cross", "square", "triangle"]
    assert {"loss", "accuracy", "val_loss", "val_accuracy"} <= set(history["epochs"][0])

    receipt = json.loads((run / "rewrite" / "rewrite.json").read_text())
    assert [p["pass"] for p in receipt["passes"]] == ["fold_constants", "fold_batchnorm", "fold_pad"]
    assert receipt["nodes"]["after"] < receipt["nodes"]["before"]
    assert all(p["comparison"]["passed"] for p in receipt["passes"] if "comparison" in p)
    io = json.loads((run / "freeze" / "io.json").read_text())
    assert io["inputs"][0]["tensor"] == "input:0" and io["inputs"][0]["shape"] == [None, 32, 32, 3]
    assert io["outputs"][0]["tensor"] == "probabilities:0"

    comparison = json.loads((run / "convert" / "comparison.json").read_text())
    assert comparison["samples"] == 4 and comparison["inputs"].startswith("dataset")
    assert 0 <= comparison["max_abs_diff"] <= 1e-4

    import onnx

    model = onnx.load(str(run / "convert" / "model.onnx"))
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) == 13  # TensorRT 8.2

    record = json.loads((run / "run.json").read_text())
    assert [(s["name"], s["status"]) for s in record["stages"]] == list(status.items()) and record["exit_code"] == 0
    page = (run / "report.html").read_text()
    assert page.count("<svg") == 3 and "<h2>Latency and throughput</h2>" in page  # latency CDF, throughput, training
    assert "report: " not in res.stderr and summary["report"] == str(run / "report.html")
    same = deploy("compare", run, run)
    assert same.returncode == 0 and same.stdout.strip().splitlines()[-1].startswith("PASS: "), same.stdout + same.stderr

    bench = json.loads((run / "benchmark" / "benchmark.json").read_text())
    assert bench["where"]["on_target_device"] is False and bench["where"]["target"] == "jetson_tx2"
    assert [r["batch_size"] for r in bench["results"]] == [1, 4]
    assert bench["consistency"]["passed"] is True and bench["consistency"]["batch_sizes"] == [4]
    for r in bench["results"]:
        for key in STATS:
            assert key in r, key
        assert r["iterations"] == 5
        assert 0 < r["min_ms"] <= r["p50_ms"] <= r["p90_ms"] <= r["p95_ms"] <= r["p99_ms"] <= r["max_ms"]
        assert r["throughput_ips"] > 0
        assert len(r["percentiles_ms"]) == 101 and r["percentiles_ms"] == sorted(r["percentiles_ms"])

    again = deploy("run", ROOT / "configs" / "jetson_tx2.yaml", *shrink(tiny), "--json")
    assert again.returncode == 0, again.stderr
    status = {s["name"]: s["status"] for s in events(again.stdout)[-1]["stages"]}
    assert status == {"train": "cached", "export": "cached", "freeze": "cached", "check": "cached", "rewrite": "cached", "convert": "cached",
                      "engine": "pending", "benchmark": "cached"}
    assert "tensorflow" not in again.stderr.lower()


def test_export_twice_is_byte_identical_and_frozen_names_are_stable(tiny):
    """The first run exported in a child process (train had loaded TensorFlow); this one, with train
    cached, exports in deploy's own process: both paths give the same bytes."""
    run = tiny / "runs" / "jetson_tx2"
    first = sha256_path(run / "export" / "saved_model")
    frozen = sha256_path(run / "freeze" / "frozen.pb")
    res = deploy("run", ROOT / "configs" / "jetson_tx2.yaml", *shrink(tiny), "--force", "export", "--force", "freeze",
                 "--until", "freeze", "--quiet")
    assert res.returncode == 0, res.stderr
    assert sha256_path(run / "export" / "saved_model") == first
    assert sha256_path(run / "freeze" / "frozen.pb") == frozen

    from pipeline.tf.graph import load_graph_def

    names = [n.name for n in load_graph_def(run / "freeze" / "frozen.pb").node]
    assert not [n for n in names if n.startswith("unknown")]  # variables keep their names
    assert "input" in names and "probabilities" in names
    assert any(n.endswith("Conv1/kernel") for n in names)


def test_human_output_has_stage_lines_and_summary_table(tiny):
    res = deploy("run", ROOT / "configs" / "jetson_tx2.yaml", *shrink(tiny))
    assert res.returncode == 0
    assert "stage      status   time  result" in res.stdout  # the result on stdout, progress on stderr
    assert "engine     pending" in res.stdout
    assert "train      cached" in res.stdout
    assert "stage      status" not in res.stderr


def test_init_from_restores_what_matches_and_lists_the_rest(tiny):
    source = tiny / "runs" / "jetson_tx2" / "train" / "model.keras"
    common = shrink(tiny, "run.name=finetune", "model.num_classes=5", "stages.train.init_from={}".format(source))
    res = deploy("run", ROOT / "configs" / "jetson_tx2.yaml", *common, "--until", "train", "--quiet")
    assert res.returncode == 1  # a 4-class head into a 5-class model: named, with the fix
    assert "stages.train.init_from:" in res.stderr and "probabilities" in res.stderr and "exclude_scopes" in res.stderr
    res = deploy("run", ROOT / "configs" / "jetson_tx2.yaml", *common, "--set", "stages.train.exclude_scopes=[probabilities]",
                 "--until", "train", "--quiet")
    assert res.returncode == 0, res.stderr
    restore = json.loads((tiny / "runs" / "finetune" / "train" / "history.json").read_text())["restore"]
    assert sorted(restore["excluded"]) == ["probabilities/bias", "probabilities/kernel"]
    assert len(restore["restored"]) == 260 and restore["new"] == [] and restore["shape_mismatch"] == []
    from pipeline.train.checkpoints import read_weights

    saved = read_weights(tiny / "runs" / "finetune" / "train" / "checkpoints" / "epoch_001.weights.h5")
    # the epoch checkpoint holds every variable of the new model (and the optimizer's), the new head included
    assert len(saved) >= 262 and saved["probabilities/vars/0"].shape == (1280, 5)
    report = deploy("ckpt", "diff", source, "--config", ROOT / "configs" / "jetson_tx2.yaml", *common)
    assert report.returncode == 1  # where deploy run stops, ckpt diff stops too, after the report, with the fix
    assert "shape mismatch  2  probabilities/kernel" in report.stdout or "probabilities/kernel (1280, 4) vs (1280, 5)" in report.stdout
    assert "add stages.train.exclude_scopes: [probabilities]" in report.stderr
    report = deploy("ckpt", "diff", source, "--config", ROOT / "configs" / "jetson_tx2.yaml", *common,
                    "--set", "stages.train.exclude_scopes=[probabilities]")
    assert report.returncode == 0, report.stderr
    listing = deploy("ckpt", "inspect", source)
    assert listing.returncode == 0 and "probabilities/kernel" in listing.stdout


def test_model_source_frozen_graph_skips_to_convert(tiny, tmp_path):
    frozen = tiny / "runs" / "jetson_tx2" / "freeze" / "frozen.pb"
    config = tmp_path / "c.yaml"
    config.write_text(
        "run: {{name: from_pb, dir: {runs}}}\n"
        "model: {{source: {frozen}}}\n"
        "dataset: {{path: {data}}}\n"
        "target: jetson_nano\n"
        "stages:\n  train:\n  export:\n  freeze:\n  convert:\n  benchmark: {{iterations: 3, batch_sizes: [2]}}\n".format(
            runs=tmp_path / "runs", frozen=frozen, data=tiny / "data"))
    res = deploy("run", config, "--json")
    assert res.returncode == 0, res.stderr
    stages = {s["name"]: (s["status"], s["message"]) for s in events(res.stdout)[-1]["stages"]}
    assert stages["train"] == stages["export"] == stages["freeze"] == ("skipped", "model.source gives the model")
    assert stages["convert"][0] == "ran" and stages["benchmark"][0] == "ran"


def test_convert_fails_above_tolerance_and_leaves_nothing(tiny, tiny_tx2):
    comparison = json.loads((tiny / "runs" / "jetson_tx2" / "convert" / "comparison.json").read_text())
    if comparison["max_abs_diff"] == 0:
        pytest.skip("TensorFlow and ONNX Runtime agree exactly on this model")
    tolerance = comparison["max_abs_diff"] / 2
    # the same model (train / export / freeze folders copied, taken as cached by their keys): check, rewrite and
    # convert run on it with the strict tolerance
    copy_stages(tiny_tx2, tiny / "runs" / "strict", ("train", "export", "freeze"))
    res = deploy("run", ROOT / "configs" / "jetson_tx2.yaml",
                 *shrink(tiny, "run.name=strict", "stages.convert.tolerance={!r}".format(tolerance)), "--until", "convert")
    assert res.returncode == 3, res.stderr
    assert "deploy: error: stage convert: ONNX Runtime and TensorFlow outputs differ by" in res.stderr
    assert not (tiny / "runs" / "strict" / "convert").exists()
    assert (tiny / "runs" / "strict" / "freeze" / "frozen.pb").exists()


def test_train_from_tfrecords(tiny, tmp_path):
    import tensorflow as tf

    from pipeline.data.folder import index_image_folder

    index = index_image_folder(tiny / "data", verify=False)
    with tf.io.TFRecordWriter(str(tmp_path / "train.tfrecord")) as writer:
        for path, label in index.train + index.val:
            example = tf.train.Example(features=tf.train.Features(feature={
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[open(path, "rb").read()])),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }))
            writer.write(example.SerializeToString())
    res = deploy("run", ROOT / "configs" / "jetson_tx2.yaml",
                 *shrink(tiny, "run.name=tfrecord", "model.zoo=small_cnn", "dataset.format=tfrecord",
                         "dataset.path={}/*.tfrecord".format(tmp_path)), "--until", "train", "--json")
    assert res.returncode == 0, res.stderr
    train = [s for s in events(res.stdout)[-1]["stages"] if s["name"] == "train"][0]
    assert train["status"] == "ran" and train["results"]["num_classes"] == 4
    assert train["results"]["train_images"] + train["results"]["val_images"] == 32
