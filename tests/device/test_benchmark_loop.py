"""What the throughput figure is: benchmark.json's ``loop`` carries the agent's ``copies_overlap`` (false on the
agent's TensorRT runner: one stream, copies in order; null where there are no copies: ONNX Runtime), so a
reader comparing it with trtexec's Throughput (copies overlapped by default) knows whether the two match."""

import json

import pytest

from pipeline import records
from pipeline.bench.report import result
from pipeline.errors import DeployError


def _entry(**loop):
    return {"batch_size": 2, "feed_sha256": "x", "loop": dict({"calls": 4, "seconds": 0.01}, **loop),
            "times_ms": {"total_ms": [2.0, 2.0, 4.0, 2.0], "compute_ms": [1.0] * 4, "h2d_ms": [0.2] * 4,
                         "d2h_ms": [0.1] * 4}}


@pytest.mark.parametrize("overlap", [False, True, None])
def test_the_loop_says_whether_copies_overlapped(overlap):
    assert result(_entry(copies_overlap=overlap))["loop"] == {"calls": 4, "seconds": 0.01, "copies_overlap": overlap}


def test_an_agent_that_did_not_say_leaves_it_out():
    assert result(_entry())["loop"] == {"calls": 4, "seconds": 0.01}


def _benchmark(loop):
    row = dict(result(_entry()), loop=loop)
    return {"where": {"runtime": "tensorrt"}, "model": {"name": "m", "sha256": "0" * 64, "bytes": 1},
            "settings": {}, "results": [row]}


@pytest.mark.parametrize("overlap", [False, None])
def test_benchmark_json_keeps_it_and_reads_it_back(tmp_path, overlap):
    path = tmp_path / "benchmark.json"
    records.write(path, _benchmark({"calls": 4, "seconds": 0.01, "copies_overlap": overlap}), "benchmark")
    assert records.read(path, "benchmark")["results"][0]["loop"]["copies_overlap"] is overlap


def test_a_loop_that_is_not_what_deploy_writes_is_one_line(tmp_path):
    path = tmp_path / "benchmark.json"
    path.write_text(json.dumps(_benchmark({"calls": 4, "seconds": 0.01, "copies_overlap": "no"})))
    with pytest.raises(DeployError, match="copies_overlap") as err:
        records.read(path, "benchmark")
    assert "\n" not in str(err.value)
    path.write_text(json.dumps(_benchmark({"calls": -1, "seconds": 0.01})))
    with pytest.raises(DeployError, match="calls"):
        records.read(path, "benchmark")
