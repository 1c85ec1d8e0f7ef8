"""deploy compare: a regression gate that tells a slower model from a noisy measurement."""

import xml.etree.ElementTree as ET

import pytest

from pipeline.report.collect import load_run
from pipeline.report.compare import compare_runs, history_band, quantile_interval

from conftest import deploy
from reportkit import bench_rows, make_run


def verdicts(result):
    return {r["label"]: r["status"] for r in result["rows"]}


def test_same_model_measured_twice_is_not_a_regression(tmp_path):
    """Wide spread, few calls: the two medians differ by more than 5 % by chance, and the gate says noise."""
    for seed in range(20):
        base = load_run(make_run(tmp_path / "a{}".format(seed), medians={1: 4.0}, spread=0.5, n=40, seed=seed))
        cur = load_run(make_run(tmp_path / "b{}".format(seed), medians={1: 4.0}, spread=0.5, n=40, seed=seed + 100))
        result = compare_runs(base, cur)
        assert result["passed"], result["rows"]
    row = [r for r in result["rows"] if r["label"] == "p50 b1 (ms)"][0]
    assert row["status"] in ("ok", "noise")


def test_a_real_slowdown_is_a_regression(tmp_path):
    base = load_run(make_run(tmp_path / "base", medians={1: 4.0, 8: 20.0}))
    cur = load_run(make_run(tmp_path / "cur", medians={1: 5.0, 8: 20.0}, seed=7))
    result = compare_runs(base, cur)
    v = verdicts(result)
    assert v["p50 b1 (ms)"] == "regression" and v["throughput b1 (img/s)"] == "regression"
    assert v["p50 b8 (ms)"] in ("ok", "noise")
    assert not result["passed"]
    faster = compare_runs(cur, base)
    assert verdicts(faster)["p50 b1 (ms)"] == "improved" and faster["passed"]


def test_history_spread_absorbs_night_to_night_noise(tmp_path):
    """Tight runs (each run's interval is narrow) but nights that vary by ±10 %: an 8 % change is noise."""
    nights = [load_run(make_run(tmp_path / "n{}".format(i), medians={1: m}, spread=0.02, seed=i))
              for i, m in enumerate((4.0, 4.4, 3.7, 4.3, 3.9))]
    base = load_run(make_run(tmp_path / "base", medians={1: 4.0}, spread=0.02, seed=50))
    cur = load_run(make_run(tmp_path / "cur", medians={1: 4.32}, spread=0.02, seed=51))
    # no history: the runs alone disagree, but one night out of band is suspect, not red (issue 28: red means persistent)
    assert verdicts(compare_runs(base, cur))["p50 b1 (ms)"] == "suspect"
    assert verdicts(compare_runs(base, cur, history=nights))["p50 b1 (ms)"] == "noise"
    slow = load_run(make_run(tmp_path / "slow", medians={1: 6.0}, spread=0.02, seed=52))
    assert verdicts(compare_runs(base, slow, history=nights))["p50 b1 (ms)"] == "regression"


def test_accuracy_consistency_and_check_regressions(tmp_path):
    base = load_run(make_run(tmp_path / "base"))
    cur = load_run(make_run(tmp_path / "cur", top1=0.85, consistency=False, deployable=False))
    v = verdicts(compare_runs(base, cur))
    assert v["engine top-1 agreement"] == "regression"
    assert v["batch consistency"] == "regression" and v["check: deployable"] == "regression"
    small = load_run(make_run(tmp_path / "small", top1=0.985))
    assert verdicts(compare_runs(base, small))["engine top-1 agreement"] == "ok"
    # changed (issue 19, M1): 0.99 -> 0.93 on 16 images is one image, which no longer fails the gate
    one = load_run(make_run(tmp_path / "one", top1=0.93))
    assert verdicts(compare_runs(base, one))["engine top-1 agreement"] == "ok"


def test_different_hardware_is_not_compared(tmp_path):
    base = load_run(make_run(tmp_path / "tx2", medians={1: 4.0}))
    cur = load_run(make_run(tmp_path / "nano", medians={1: 9.0}, board="jetson_nano"))
    result = compare_runs(base, cur)
    assert not any(r["label"].startswith("p50") for r in result["rows"])
    assert any("different hardware" in n and "jetson_nano" in n for n in result["reasons"])
    assert result["verdict"] == "not comparable" and not result["passed"]  # changed (issue 19, H4): was a pass


def test_quantile_interval_and_band():
    row = bench_rows({1: 4.0}, spread=0.1, n=400)[0]
    lo, hi = quantile_interval(row, 0.5)
    assert lo < row["p50_ms"] < hi and (hi - lo) / row["p50_ms"] < 0.05
    assert quantile_interval({"p50_ms": 1.0}, 0.5) is None  # no percentiles_ms (an older benchmark.json)
    assert history_band([1.0, 2.0, 3.0, 4.0], 3) is None  # too few nights to say
    med, half = history_band([4.0, 4.4, 3.7, 4.3, 3.9], 3)
    assert med == 4.0 and half == pytest.approx(3 * 1.4826 * 0.3)


def test_cli_exit_codes_formats_and_junit(tmp_path):
    base = make_run(tmp_path / "base", medians={1: 4.0})
    cur = make_run(tmp_path / "cur", medians={1: 6.0}, seed=3)
    res = deploy("compare", base, base)
    assert res.returncode == 0 and "PASS:" in res.stdout
    junit = tmp_path / "compare.xml"
    res = deploy("compare", base, cur, "--format", "markdown", "--junit", junit)
    assert res.returncode == 4 and "**regression**" in res.stdout
    suite = ET.parse(junit).getroot()
    assert int(suite.get("failures")) >= 2 and suite.find("testcase/failure") is not None
    res = deploy("compare", base, cur, "--tolerance", "0.6")
    assert res.returncode == 0, res.stdout
    res = deploy("compare", base, tmp_path / "nope")
    assert res.returncode == 1 and "no such run folder" in res.stderr


def _desktop_gpu(folder, gpu):
    """A run whose benchmark ran on a workstation's NVIDIA GPU (transport: local, TensorRT from PyPI)."""
    import json

    path = folder / "benchmark" / "benchmark.json"
    bench = json.loads(path.read_text())
    bench["where"]["on_target_device"] = False
    bench["where"]["fingerprint"] = {"kind": "desktop-gpu", "gpu": gpu, "gpu_driver": "550.54.14", "board": None,
                                     "model": None, "l4t": None, "jetpack": None, "tensorrt": "8.2.1", "cuda": "12.4",
                                     "machine": "x86_64", "python": "3.10.12", "hostname": "ws"}
    path.write_text(json.dumps(bench))
    return folder


def test_a_desktop_gpu_run_is_never_compared_with_a_board_run(tmp_path):
    """Same TensorRT, same batch sizes: a desktop GPU's figures still say nothing about a Jetson's."""
    board = load_run(make_run(tmp_path / "tx2", medians={1: 4.0}))
    desk = load_run(_desktop_gpu(make_run(tmp_path / "desk", medians={1: 0.4}), "NVIDIA GeForce RTX 4090"))
    for result in (compare_runs(board, desk), compare_runs(desk, board)):
        assert not any(r["label"].startswith(("p50", "p99", "throughput")) for r in result["rows"])
        (note,) = [n for n in result["reasons"] if n.startswith("latency not compared")]
        assert "a desktop GPU (NVIDIA GeForce RTX 4090)" in note and "a Jetson" in note
    other = load_run(_desktop_gpu(make_run(tmp_path / "desk2", medians={1: 0.9}), "NVIDIA RTX A2000"))
    result = compare_runs(desk, other)  # two desktop GPUs: different hardware, not compared either
    assert not any(r["label"].startswith("p50") for r in result["rows"])
    assert any("different hardware" in n and "NVIDIA RTX A2000" in n for n in result["reasons"])
    same = load_run(_desktop_gpu(make_run(tmp_path / "desk3", medians={1: 0.4}, seed=5), "NVIDIA GeForce RTX 4090"))
    assert any(r["label"].startswith("p50") for r in compare_runs(desk, same)["rows"])
