"""The on-board tests of the nightly's ssh route (`pytest -m jetson tests/nightly/test_on_board_ssh.py`): a
runner machine drives a board (TX2 and Nano on JetPack 4.6, which cannot host a current runner) over
`device.transport: ssh`, and these tests build, run and time an engine there through the agent on the board's
own Python, and probe it. The board comes from the variables `scripts/jetson/nightly-board resolve` sets:
DEPLOY_BOARD_HOST (required: skipped without it), DEPLOY_BOARD_USER, DEPLOY_BOARD_PORT, DEPLOY_BOARD_IDENTITY,
DEPLOY_BOARD_KNOWN_HOSTS, DEPLOY_BOARD_PYTHON (default /usr/bin/python3). Skipped when that Python has no
TensorRT; the nightly then fails the step (scripts/jetson/junit-ran: every test skipped verified nothing)."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "device"))

from devicekit import tiny_onnx  # noqa: E402

pytestmark = pytest.mark.jetson


def board_section():
    from pipeline.config.schema import DeviceSection

    host = os.environ.get("DEPLOY_BOARD_HOST")
    if not host:
        pytest.skip("DEPLOY_BOARD_HOST is not set (the nightly's ssh route sets it: scripts/jetson/nightly-board)")
    fields = {"transport": "ssh", "host": host, "python": os.environ.get("DEPLOY_BOARD_PYTHON") or "/usr/bin/python3",
              "work_dir": os.environ.get("DEPLOY_BOARD_WORK_DIR") or "~/.cache/deploy-device-tests"}
    for key, var in (("user", "DEPLOY_BOARD_USER"), ("port", "DEPLOY_BOARD_PORT"),
                     ("identity_file", "DEPLOY_BOARD_IDENTITY"), ("known_hosts_file", "DEPLOY_BOARD_KNOWN_HOSTS")):
        if os.environ.get(var):
            fields[key] = os.environ[var]
    return DeviceSection(**fields)


@pytest.fixture(scope="module")
def board():
    from pipeline.device.client import Device

    section = board_section()
    device = Device(section)
    if not device.ping()["has"].get("tensorrt"):
        device.transport.close()
        pytest.skip("{} on {} has no TensorRT bindings (DEPLOY_BOARD_PYTHON: the board's python3)".format(
            section.python, section.host))
    yield device
    device.transport.close()


def test_the_probe_over_ssh_knows_this_board(board):
    facts = board.probe()
    assert facts["tensorrt"] and facts["l4t"] and facts["board"]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_agent_builds_runs_and_times_an_engine_over_ssh(board, tmp_path, precision):
    from pipeline.backends import load_onnx
    from pipeline.backends.device import DeviceSession
    from pipeline.numeric import tolerance

    model = tiny_onnx(tmp_path / "m.onnx", size=32)
    remote = board.transport.send(model)
    engine = "{}/m-{}.engine".format(board.transport.work, precision)
    profile = {"input": {"min": [1, 32, 32, 3], "opt": [4, 32, 32, 3], "max": [8, 32, 32, 3]}}
    built = board.call({"command": "build", "onnx": remote, "engine": engine, "precision": precision,
                        "workspace_mb": 256, "profile": profile}, what="the engine build")
    assert built["engine_bytes"] > 0
    batch = np.random.default_rng(0).uniform(0, 255, (4, 32, 32, 3)).astype(np.float32)
    got = DeviceSession(board, engine, "tensorrt").run({"input": batch})[0]
    atol, rtol = tolerance(precision)
    np.testing.assert_allclose(got, load_onnx(model).run({"input": batch})[0], atol=atol, rtol=rtol)
    answer = board.call({"command": "benchmark", "model": engine, "backend": "tensorrt", "batch_sizes": [1, 4],
                         "warmup": 5, "iterations": 20})
    for r in answer["results"]:
        assert len(r["times_ms"]["total_ms"]) == 20 and min(r["times_ms"]["compute_ms"]) > 0
