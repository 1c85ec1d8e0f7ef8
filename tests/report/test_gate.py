"""The nightly gate (issue 19, "A gate that is right"; issue 22 point 3): the reference is a history
on one fingerprint, "not compared" is never a pass, each figure carries its interval, accuracy and
host figures are judged as what they are, and impossible input is refused."""

import json
import subprocess
import sys

import pytest

from pipeline.report.collect import expand_history, load_run
from pipeline.report.compare import DEFAULTS, SCHEMA, compare_runs

from conftest import ROOT
from reportkit import edit_json, make_run


def status(result, label):
    (row,) = [r for r in result["rows"] if r["label"] == label]
    return row["status"]


def night(folder, day, median, **kw):
    return make_run(folder, medians={1: median}, spread=0.02, n=1000, seed=day,
                    finished="2026-11-{:02d}T02:00:00+0000".format(day), **kw)


def nights(tmp_path, medians, start=2, **kw):
    return [night(tmp_path / "history" / "n{:02d}".format(start + i), start + i, m, **kw) for i, m in enumerate(medians)]


# --- H3: a failed night is never the reference; a night without figures never passes


@pytest.mark.parametrize("how", ["marker", "exit code", "no benchmark"])
def test_a_failed_baseline_is_not_a_reference_h3(tmp_path, how, cli):
    """Old: `deploy compare <failed night> <25 % slower night>` said PASS: 0 regressions, exit 0."""
    base = night(tmp_path / "base", 1, 4.0, failed="engine step failed" if how == "marker" else None,
                 exit_code=3 if how == "exit code" else 0)
    if how == "no benchmark":
        (base / "benchmark" / "benchmark.json").unlink()
    slow = night(tmp_path / "slow", 2, 5.0)
    result = compare_runs(load_run(base), load_run(slow))
    assert result["verdict"] == "not comparable" and "failed night" in result["reasons"][0]
    res = cli("compare", base, slow)
    assert res.returncode == 4 and "NOT COMPARABLE" in res.stdout and "never a reference" in res.stdout


def test_a_current_night_without_figures_is_no_data_h3(tmp_path, cli):
    base = night(tmp_path / "base", 1, 4.0)
    cur = night(tmp_path / "cur", 2, 4.0, exit_code=3)
    (cur / "benchmark" / "benchmark.json").unlink()
    result = compare_runs(load_run(base), load_run(cur))
    assert result["verdict"] == "no data" and "its run exited with code 3" in result["reasons"][0]
    res = cli("compare", base, cur, "--format", "json")
    assert res.returncode == 4 and json.loads(res.stdout)["verdict"] == "no data"


def test_a_current_night_that_failed_is_never_a_pass_even_with_figures(tmp_path, cli):
    """Found by the run-folder fuzzer: a current night with a FAILED marker (or a run that exited non-zero)
    but a benchmark.json passed the gate with exit 0."""
    base = night(tmp_path / "base", 1, 4.0)
    cur = night(tmp_path / "cur", 2, 4.0)
    (cur / "FAILED").write_text("on-board tests: failure\n")
    result = compare_runs(load_run(base), load_run(cur))
    assert result["verdict"] == "not comparable" and "FAILED by the workflow: on-board tests: failure" in result["reasons"][0]
    assert cli("compare", base, cur).returncode == 4


def test_a_comparison_of_nothing_is_never_a_pass_issue22(tmp_path, cli):
    """Batch sizes that do not meet, no accuracy, no check: nothing compared."""
    base = make_run(tmp_path / "base", medians={1: 4.0}, device=False, consistency=None, deployable=None)
    cur = make_run(tmp_path / "cur", medians={8: 20.0}, device=False, consistency=None, deployable=None)
    result = compare_runs(load_run(base), load_run(cur))
    assert result["verdict"] != "pass" and not result["passed"]
    assert not any(r["status"] in ("ok", "noise", "regression", "improved") for r in result["rows"])
    assert any("measured in the baseline but not tonight" in r for r in result["reasons"])
    assert cli("compare", base, cur).returncode == 4


# --- H4: a changed fingerprint is not comparable, unless expected


@pytest.mark.parametrize("key,change", [("power_mode", {"power_mode": "MAXQ"}), ("tensorrt", {"tensorrt": "8.5.2"}),
                                        ("clocks", {"clocks_locked": False}), ("board", {"board": "jetson_nano"})])
def test_a_changed_fingerprint_is_not_comparable_h4(tmp_path, key, change, cli):
    """Old: baseline MAXN, tonight MAXQ and 25 % slower -> PASS with a note, exit 0."""
    base = night(tmp_path / "base", 1, 4.0)
    cur = night(tmp_path / "cur", 2, 5.0, **change)
    result = compare_runs(load_run(base), load_run(cur))
    assert result["verdict"] == "not comparable" and key in result["reasons"][0]
    assert "--expect-change " + key in result["reasons"][0]
    res = cli("compare", base, cur)
    assert res.returncode == 4 and key in res.stdout
    expected = compare_runs(load_run(base), load_run(cur), expect_change=[key])
    assert expected["verdict"] == "regression" and status(expected, "p50 b1 (ms)") == "regression"
    assert any(n.startswith("expected change") for n in expected["notes"])
    res = cli("compare", base, cur, "--expect-change", key)
    assert res.returncode == 4 and "REGRESSION" in res.stdout
    same = night(tmp_path / "same", 3, 4.0, **change)
    assert cli("compare", base, same, "--expect-change", key).returncode == 0


def test_history_nights_on_another_fingerprint_are_not_the_reference_h4(tmp_path):
    base = night(tmp_path / "base", 1, 4.0)
    hist = nights(tmp_path, [4.0] * 5) + [night(tmp_path / "history" / "q{}".format(i), 10 + i, 8.0, power_mode="MAXQ")
                                          for i in range(6)]
    cur = night(tmp_path / "cur", 20, 4.02)
    result = compare_runs(load_run(base), load_run(cur), expand_history([tmp_path / "history"]))
    assert result["verdict"] == "pass" and result["reference"]["nights"] == 6
    assert any("6 history nights measured on another fingerprint" in n for n in result["notes"])
    assert len(hist) == 11


# --- H5: the reference is the nights' median, the band from all of them


def test_a_lucky_baseline_does_not_fail_typical_nights_h5(tmp_path):
    """The baseline night was 4 % faster than the board's typical level; tonight is typical (+1.5 %
    drift). Old: judged against the baseline alone, +5.7 % beyond 5 % -> regression."""
    base = night(tmp_path / "base", 1, 3.84)
    hist = nights(tmp_path, [4.0, 4.05, 3.97, 4.02, 3.99, 4.03, 3.98])
    cur = night(tmp_path / "cur", 20, 4.06)
    result = compare_runs(load_run(base), load_run(cur), [load_run(h) for h in hist])
    assert result["verdict"] == "pass", result["rows"]
    (row,) = [r for r in result["rows"] if r["label"] == "p50 b1 (ms)"]
    assert row["reference"] == pytest.approx(4.0, rel=0.01) and row["baseline"] == pytest.approx(3.84, rel=0.01)
    assert row["band"][0] < 4.0 < row["band"][1] and row["interval"][0] < row["current"] < row["interval"][1]
    slow = night(tmp_path / "slow", 21, 4.4)  # +10 % over the typical level: suspect on its first night
    assert compare_runs(load_run(base), load_run(slow), [load_run(h) for h in hist])["verdict"] == "suspect"


def test_failed_nights_are_kept_and_flagged_regressed_ones_left_out_h5(tmp_path):
    base = night(tmp_path / "base", 1, 4.0)
    nights(tmp_path, [4.0, 4.02, 3.98, 4.01])
    night(tmp_path / "history" / "n10", 10, 4.03, failed="consistency step failed")
    night(tmp_path / "history" / "n11", 11, 4.0, exit_code=3)
    broken = night(tmp_path / "history" / "n12", 12, 4.0, failed="engine step failed")
    (broken / "benchmark" / "benchmark.json").unlink()
    slow = night(tmp_path / "history" / "n13", 13, 5.0)
    (slow / "comparison.json").write_text(json.dumps({"schema": SCHEMA, "verdict": "regression"}))
    history = expand_history([tmp_path / "history"])
    assert [h["failed"] is not None for h in history] == [False] * 4 + [True] * 3 + [False]
    cur = night(tmp_path / "cur", 20, 4.0)
    result = compare_runs(load_run(base), load_run(cur), history)
    ref = result["reference"]
    assert ref["nights"] == 8 and ref["failed_nights"] == 3 and "n13" not in ref["runs"]
    assert any("3 failed nights in the reference" in n for n in result["notes"])
    assert any("called a regression, not in the reference" in n for n in result["notes"])
    assert result["verdict"] == "pass"
    again = night(tmp_path / "again", 21, 5.0)  # the slowdown stays red: its nights never become the reference
    assert compare_runs(load_run(base), load_run(again), history)["verdict"] == "regression"


def test_the_reference_is_the_last_nights_and_a_baseline_copy_counts_once_h5(tmp_path):
    base = night(tmp_path / "base", 1, 4.0)
    copy = tmp_path / "history" / "n01"
    import shutil

    shutil.copytree(base, copy)
    nights(tmp_path, [4.0 + 0.01 * i for i in range(30)])
    cur = night(tmp_path / "cur", 40, 4.0)
    result = compare_runs(load_run(base), load_run(cur), expand_history([tmp_path / "history"]), nights=10)
    assert result["reference"]["nights"] == 10 and result["reference"]["runs"][0] == "base"
    assert result["reference"]["runs"][1:] == ["n{:02d}".format(d) for d in range(23, 32)]


# --- M2: each figure's interval; p99 judged only where the calls bound it; throughput on the median call


def test_each_row_carries_its_interval_and_a_wide_one_says_so_m2(tmp_path):
    base = make_run(tmp_path / "base", medians={1: 4.0}, spread=0.3, n=100)
    cur = make_run(tmp_path / "cur", medians={1: 4.0}, spread=0.3, n=100, seed=9)
    result = compare_runs(load_run(base), load_run(cur))
    p50, p99 = [r for r in result["rows"] if r["figure"] in ("p50_ms", "p99_ms")]
    assert p50["interval"][0] < p50["current"] < p50["interval"][1]
    assert "wider than the tolerance" in p50["note"]
    assert p99["interval"][1] is None and "cannot bound this quantile" in p99["note"]


def test_p99_of_100_calls_is_not_judged_even_with_history_m2(tmp_path):
    """Old: with >= 5 history nights p99 of 100 calls (its second-slowest call) was judged on the nights'
    MAD: 17-20 % of nights failed on p99 alone."""
    hist = [make_run(tmp_path / "h{}".format(i), medians={1: 4.0}, spread=0.02, n=100, seed=i,
                     finished="2026-11-{:02d}T02:00:00+0000".format(i + 2)) for i in range(8)]
    base = make_run(tmp_path / "base", medians={1: 4.0}, spread=0.02, n=100, seed=50, finished="2026-11-01T00:00:00+0000")
    cur = make_run(tmp_path / "cur", medians={1: 4.0}, spread=0.02, n=100, seed=51, slow_calls=0.02)
    result = compare_runs(load_run(base), load_run(cur), [load_run(h) for h in hist])
    assert status(result, "p99 b1 (ms)") == "noise" and result["verdict"] == "pass"


def test_throughput_is_the_benchmarks_measured_throughput_issue_28(tmp_path):
    """One throughput definition everywhere (issue 28, "two throughputs"): the gate judges the benchmark's
    measured throughput_ips, the figure the benchmark and the report show, not batch / p50 (old: 250 img/s
    beside the benchmark's 170). 3 % of calls stalled 20x: the board delivered fewer images per second, and
    the gate says so; the median call (p50) does not move."""
    base = make_run(tmp_path / "base", medians={1: 4.0}, spread=0.02, n=1000)
    cur = make_run(tmp_path / "cur", medians={1: 4.0}, spread=0.02, n=1000, seed=3, slow_calls=0.03)
    measured = load_run(cur)["benchmark"]["results"][0]["throughput_ips"]
    assert measured < 0.7 * 250
    result = compare_runs(load_run(base), load_run(cur))
    (row,) = [r for r in result["rows"] if r["figure"] == "throughput_ips"]
    assert row["current"] == measured and "measured" in row["note"] and row["status"] == "regression"
    assert status(result, "p50 b1 (ms)") == "ok"


# --- M1: accuracy


def test_accuracy_needs_more_than_one_image_and_val_accuracy_is_not_a_device_gate_m1(tmp_path):
    base = load_run(make_run(tmp_path / "base", top1=1.0))
    one = load_run(make_run(tmp_path / "one", top1=0.9375, val_accuracy=0.5))  # one image of 16 flipped
    result = compare_runs(base, one)
    assert status(result, "engine top-1 agreement") == "ok" and "one image" in str(result["rows"])
    assert status(result, "validation accuracy (host training)") == "not compared"
    two = load_run(make_run(tmp_path / "two", top1=0.875))
    assert status(compare_runs(base, two), "engine top-1 agreement") == "regression"
    many = load_run(make_run(tmp_path / "many", top1=0.97, accuracy_images=200))  # 6 of 200 images
    assert status(compare_runs(base, many), "engine top-1 agreement") == "regression"


# --- host figures


def test_host_cpu_differences_need_five_nights(tmp_path):
    """Two re-runs on a loaded host differed by 45 %: without history that is noise, labelled host CPU."""
    base = make_run(tmp_path / "base", medians={1: 4.0}, device=False, spread=0.02, n=1000)
    cur = make_run(tmp_path / "cur", medians={1: 5.8}, device=False, spread=0.02, n=1000, seed=4)
    result = compare_runs(load_run(base), load_run(cur))
    assert result["hardware"]["kind"] == "host-cpu" and "not Jetson figures" in result["hardware"]["label"]
    assert status(result, "p50 b1 (ms)") == "noise" and result["verdict"] == "pass"
    assert any("host CPU" in n for n in result["notes"])
    hist = [make_run(tmp_path / "h{}".format(i), medians={1: m}, device=False, spread=0.02, n=1000, seed=i,
                     finished="2026-11-{:02d}T02:00:00+0000".format(i + 2)) for i, m in enumerate([4.0, 4.1, 3.9, 4.05, 3.95])]
    judged = compare_runs(load_run(base), load_run(cur), [load_run(h) for h in hist])
    assert status(judged, "p50 b1 (ms)") == "regression" and judged["verdict"] == "regression"


# --- issue 22 point 3: impossible figures are refused, one line naming file and key


@pytest.mark.parametrize("key,value", [("p50_ms", float("nan")), ("p99_ms", float("inf")), ("mean_ms", -1.0),
                                       ("throughput_ips", 0.0), ("p50_ms", "4.0"), ("batch_size", [1])])
def test_impossible_latency_is_refused(tmp_path, key, value, cli):
    base = make_run(tmp_path / "base", medians={1: 4.0})
    cur = make_run(tmp_path / "cur", medians={1: 4.0})
    edit_json(cur / "benchmark" / "benchmark.json", lambda d: d["results"][0].__setitem__(key, value))
    res = cli("compare", base, cur)
    assert res.returncode == 1 and res.stdout == ""
    (line,) = res.stderr.strip().splitlines()
    assert "benchmark.json" in line and "results[0].{}".format(key) in line


@pytest.mark.parametrize("rel,path,value", [("check/check.json", ("deployable",), "no"),
                                            ("benchmark/benchmark.json", ("consistency", "passed"), "false"),
                                            ("benchmark/benchmark.json", ("where", "fingerprint", "clocks_locked"), "no")])
def test_strings_where_booleans_belong_are_refused(tmp_path, rel, path, value, cli):
    base = make_run(tmp_path / "base")
    cur = make_run(tmp_path / "cur")

    def change(d):
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value

    edit_json(cur / rel, change)
    res = cli("compare", base, cur)
    assert res.returncode == 1
    (line,) = res.stderr.strip().splitlines()
    assert rel.split("/")[-1] in line and ".".join(path) in line and "boolean" in line


def test_non_finite_history_nights_are_refused(tmp_path, cli):
    """Old: a NaN night in --history hid a real 2x slowdown."""
    base = make_run(tmp_path / "base", medians={1: 4.0})
    for i in range(6):
        make_run(tmp_path / "hist" / "n{}".format(i), medians={1: 4.0}, seed=i)
    edit_json(tmp_path / "hist" / "n3" / "benchmark" / "benchmark.json",
              lambda d: d["results"][0].update(p50_ms=float("nan"), percentiles_ms=[float("nan")] * 101))
    slow = make_run(tmp_path / "slow", medians={1: 8.0})
    res = cli("compare", base, slow, "--history", tmp_path / "hist")
    assert res.returncode == 1 and "n3" in res.stderr and "p50_ms" in res.stderr


@pytest.mark.parametrize("data", [[1, 2], {"results": "none"}, {"results": [{"batch_size": 1, "percentiles_ms": [1.0] * 7}]}])
def test_benchmark_of_the_wrong_shape_is_refused(tmp_path, data, cli):
    base = make_run(tmp_path / "base")
    cur = make_run(tmp_path / "cur")
    (cur / "benchmark" / "benchmark.json").write_text(json.dumps(data))
    res = cli("compare", base, cur)
    assert res.returncode == 1 and "benchmark.json" in res.stderr and len(res.stderr.strip().splitlines()) == 1


# --- the CLI's contract


def test_cli_writes_the_comparison_and_fails_on_not_comparable_in_junit(tmp_path, cli):
    import xml.etree.ElementTree as ET

    base = night(tmp_path / "base", 1, 4.0)
    cur = night(tmp_path / "cur", 2, 4.0, power_mode="MAXQ")
    out, junit = cur / "comparison.json", tmp_path / "junit.xml"
    res = cli("compare", base, cur, "-o", out, "--junit", junit, "--format", "markdown")
    assert res.returncode == 4 and "**not comparable**" in res.stdout
    data = json.loads(out.read_text())
    assert data["schema"] == SCHEMA and data["verdict"] == "not comparable" and data["reasons"]
    assert set(data) >= {"baseline", "current", "reference", "hardware", "rows"}
    assert data["reference"]["fingerprint"]["power_mode"] == "MAXN" and data["hardware"]["kind"] == "jetson"
    assert ET.parse(junit).getroot().get("failures") == "1"
    assert load_run(cur)["gate"]["verdict"] == "not comparable"  # what the report reads


def test_cli_defaults_are_the_gates(cli):
    from pipeline.cli import build_parser

    args = build_parser().parse_args(["compare", "a", "b"])
    assert (args.tolerance, args.k, args.nights, args.accuracy_tolerance) == (
        DEFAULTS["tolerance"], DEFAULTS["k"], DEFAULTS["nights"], DEFAULTS["accuracy_tolerance"])
    for bad in (["--k", "inf"], ["--nights", "0"], ["--tolerance", "nan"], ["--expect-change", "weather"]):
        res = cli("compare", "a", "b", *bad)
        assert res.returncode == 1, bad


# --- the measured quality (scripts/bench/gate_noise.py)


def test_gate_noise_drives_the_real_gate_deterministically():
    """scripts/bench/gate_noise.py runs `deploy compare` through the CLI's entry night after night: the same
    arguments give the same figures (issue 28 item 2: seeded, deterministic), each with its Wilson interval."""
    cmd = [sys.executable, str(ROOT / "scripts" / "bench" / "gate_noise.py"), "--drift", "t3", "--sequences", "1",
           "--length", "6", "--calls", "300", "--steps", "0.25"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    strip = lambda out: [line for line in out.splitlines() if not line.startswith("(")]  # noqa: E731
    assert first.returncode in (0, 1) and strip(first.stdout) == strip(second.stdout), first.stderr
    assert first.stdout.startswith("$ python scripts/bench/gate_noise.py")
    (row,) = [line for line in first.stdout.splitlines() if line.startswith("| t3 |")]
    assert "(0/6; 0.0-39.0)" in row and "100.0 % (2/2; " in row  # 6 quiet nights; 2 steps of +25 %, both red
    assert "- t3: false alarms NOT met" in first.stdout  # 6 nights cannot show <= 2 % at 95 %: said so


@pytest.mark.parametrize("rel,change,key", [
    ("run.json", lambda d: d.update(stages=["train"]), "stages[0]"),
    ("run.json", lambda d: d.update(finished=20261124), "finished"),
    ("train/manifest.json", lambda d: d.update(duration_s="2.5"), "duration_s"),
    ("train/history.json", lambda d: d.update(epochs=[0.5, 0.6]), "epochs[0]"),
    ("benchmark/benchmark.json", lambda d: d.update(where="tx2"), "where"),
    ("benchmark/benchmark.json", lambda d: d["results"][0].update(iterations=-5), "results[0].iterations"),
])
def test_json_of_the_wrong_shape_is_one_line_not_a_traceback_issue22(tmp_path, rel, change, key, cli):
    base = make_run(tmp_path / "base")
    cur = make_run(tmp_path / "cur")
    edit_json(cur / rel, change)
    for res in (cli("compare", base, cur), cli("compare", base, base, "--history", cur)):
        assert res.returncode == 1 and "Traceback" not in res.stderr
        (line,) = res.stderr.strip().splitlines()
        assert rel.split("/")[-1] in line and key in line
