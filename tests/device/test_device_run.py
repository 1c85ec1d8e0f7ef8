"""`deploy run` with `device: ssh`: the shipped TX2 config, shrunk, drives the agent on a real sshd on
127.0.0.1 (its ONNX Runtime backend: no TensorRT here) and gets benchmark.json back; the re-run is all
cached and sends nothing. The host stages (train to convert) are the session's shared tiny run's
(tests/conftest.py's tiny_tx2), copied in and cached by their keys: this test is about the device's."""

import json

import pytest

from conftest import ROOT, copy_stages, deploy
from devicekit import sshd_server  # noqa: F401  (the `sshd` fixture)

pytestmark = [pytest.mark.tf, pytest.mark.slow]


def _args(root, data, sshd):
    sets = [
        "run.dir={}".format(root / "runs"), "dataset.path={}".format(data), "model.input_size=32",
        "stages.train.epochs=1", "stages.train.batch_size=8", "stages.convert.compare_samples=4",
        "stages.benchmark.warmup=2", "stages.benchmark.iterations=5", "stages.benchmark.batch_sizes=[1, 4]",
        "device.transport=ssh", "device.host=127.0.0.1", "device.port={}".format(sshd.port), "device.user={}".format(sshd.user),
        "device.identity_file={}".format(sshd.key), "device.known_hosts_file={}".format(sshd.known_hosts),
        "device.work_dir={}".format(root / "board"), "device.python={}".format(__import__("sys").executable),
    ]
    args = []
    for s in sets:
        args += ["--set", s]
    return args


def test_run_over_ssh_then_cached(tmp_path, sshd, tiny_tx2):
    copy_stages(tiny_tx2, tmp_path / "runs" / "jetson_tx2", ("train", "export", "freeze", "check", "rewrite", "convert"))
    res = deploy("run", ROOT / "configs" / "jetson_tx2.yaml", *_args(tmp_path, tiny_tx2.data, sshd))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "engine    pending: TensorRT is not on {}@127.0.0.1:{}".format(sshd.user, sshd.port) in res.stderr
    assert "device: sending model.onnx" in res.stderr
    report = json.loads((tmp_path / "runs" / "jetson_tx2" / "benchmark" / "benchmark.json").read_text())
    where = report["where"]
    assert where["transport"] == "ssh" and where["runtime"] == "onnxruntime"
    assert where["on_target_device"] is False and "not jetson_tx2 numbers" in where["note"]
    assert where["fingerprint"]["board"] is None and where["fingerprint"]["python"]
    assert [r["batch_size"] for r in report["results"]] == [1, 4]
    assert all(r["iterations"] == 5 and r["p50_ms"] > 0 for r in report["results"])
    assert report["consistency"]["passed"] is True
    assert (tmp_path / "board" / "blobs").is_dir()

    again = deploy("run", ROOT / "configs" / "jetson_tx2.yaml", *_args(tmp_path, tiny_tx2.data, sshd))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "benchmark cached" in again.stderr and "sending" not in again.stderr
