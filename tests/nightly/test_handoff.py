"""The nightly's handoff, for real: the host job's `deploy run --until convert` (trained once for all the
boards' configs), packed with tar as the
workflow packs it, unpacked in another folder (another machine's checkout), then the device job's
`deploy run --from engine` with the agent on this machine. And why tar: unpacked without the files'
times (as an artifact zip would), the dataset's fingerprint changes and the device job says so."""

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT, deploy

pytestmark = [pytest.mark.tf, pytest.mark.slow]

CONFIG = ROOT / "configs" / "jetson_tx2.yaml"
SMALL = ["--set", "dataset.train_per_class=6", "--set", "dataset.val_per_class=2", "--set", "model.input_size=32",
         "--set", "stages.train.epochs=1", "--set", "stages.train.batch_size=8", "--set", "stages.train.run_eagerly=true",
         "--set", "stages.convert.compare_samples=2",
         "--set", "stages.benchmark.iterations=5", "--set", "stages.benchmark.warmup=1", "--set", "stages.benchmark.batch_sizes=[1, 2]"]


def summary(res):
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")][-1]


def test_the_device_job_takes_what_the_host_job_made(tmp_path):
    host, board = tmp_path / "host", tmp_path / "device"
    host.mkdir()
    board.mkdir()
    res = deploy("run", CONFIG, *SMALL, "--until", "convert", "--json", cwd=host)
    assert res.returncode == 0, res.stderr
    assert (host / "data" / "shapes").is_dir()  # dataset.generate made it, relative to the checkout

    # the host job trains once (review L5): another board's config starts from copies of the first one's
    # train / export / freeze folders, and deploy takes them as up to date (same model, dataset, training)
    nano = host / "runs" / "jetson_nano"
    nano.mkdir()
    for stage in ("train", "export", "freeze"):
        subprocess.run(["cp", "-a", str(host / "runs" / "jetson_tx2" / stage), str(nano / stage)], check=True)
    res = deploy("run", ROOT / "configs" / "jetson_nano.yaml", *SMALL, "--until", "convert", "--json", cwd=host)
    assert res.returncode == 0, res.stderr
    status = {s["name"]: s["status"] for s in summary(res)["stages"]}
    assert status["train"] == status["export"] == status["freeze"] == "cached", status
    assert status["convert"] == "ran"
    subprocess.run(["tar", "--format=posix", "-czf", str(tmp_path / "host.tar.gz"), "runs/jetson_tx2", "data/shapes"],
                   cwd=host, check=True)
    subprocess.run(["tar", "-xzf", str(tmp_path / "host.tar.gz")], cwd=board, check=True)

    device = ["--set", "device.transport=local", "--set", "device.python={}".format(sys.executable),
              "--set", "device.work_dir={}".format(tmp_path / "work")]
    res = deploy("run", CONFIG, *SMALL, *device, "--from", "engine", "--json", cwd=board)
    assert res.returncode == 0, res.stderr
    status = {s["name"]: s["status"] for s in summary(res)["stages"]}
    assert status == {"train": "cached", "export": "cached", "freeze": "cached", "check": "cached", "rewrite": "cached",
                      "convert": "cached", "engine": "pending", "benchmark": "ran"}
    bench = json.loads((board / "runs" / "jetson_tx2" / "benchmark" / "benchmark.json").read_text())
    assert bench["where"]["transport"] == "local" and [r["batch_size"] for r in bench["results"]] == [1, 2]
    assert (board / "runs" / "jetson_tx2" / "report.html").exists()

    # the nightly's device arguments (scripts/jetson/nightly-board args) force device.backend=tensorrt: on a
    # machine whose agent Python has no TensorRT the engine stage fails (review M5) instead of going pending
    # while the benchmark times ONNX Runtime and the night passes
    args = subprocess.run([str(ROOT / "scripts" / "jetson" / "nightly-board"), "args"], capture_output=True, text=True,
                          env=dict(os.environ, ROUTE="local", DEPLOY_BOARD_PYTHON=sys.executable), check=True)
    nightly = args.stdout.splitlines() + ["--set", "device.work_dir={}".format(tmp_path / "work")]
    assert "device.backend=tensorrt" in nightly
    res = deploy("run", CONFIG, *SMALL, *nightly, "--from", "engine", cwd=board)
    assert res.returncode != 0, res.stdout
    assert "TensorRT" in res.stderr.strip().splitlines()[-1], res.stderr

    # the same files without their times (an artifact zip): the dataset is not the one train used
    later = time.time() + 60
    for root, _, names in os.walk(board / "data"):
        for name in names:
            os.utime(os.path.join(root, name), (later, later))
    res = deploy("run", CONFIG, *SMALL, *device, "--from", "engine", cwd=board)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1].startswith("deploy: error: stage 'train' has no up-to-date result")
