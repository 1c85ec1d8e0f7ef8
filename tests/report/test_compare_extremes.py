"""Issue 29 item 1 (the gate's part): `deploy compare` with extreme but valid figures gives a line or a valid
comparison.json, never a traceback or non-JSON output; its numbers are checked when the command line is parsed."""

import json

import pytest

from pipeline.cli import main

from reportkit import edit_json, make_run


def pair(tmp_path):
    base = make_run(tmp_path / "base", medians={1: 4.0}, spread=0.02, n=200, seed=1)
    cur = make_run(tmp_path / "cur", medians={1: 4.0}, spread=0.02, n=200, seed=2, finished="2026-11-25T02:00:00+0000")
    return base, cur


def rows(fn):
    def change(bench):
        for row in bench["results"]:
            fn(row)
    return change


def denormal(row):
    for key in ("mean_ms", "std_ms", "min_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms"):
        row[key] = 5e-324
    row["percentiles_ms"] = [5e-324] * 101


CASES = {
    "iterations 10^400": ("cur", rows(lambda r: r.update(iterations=10 ** 400))),
    "batch_size 10^30": ("cur", rows(lambda r: r.update(batch_size=10 ** 30))),
    "denormal latencies tonight": ("cur", rows(denormal)),
    "denormal latencies in the baseline": ("base", rows(denormal)),
    "throughput 1e308": ("cur", rows(lambda r: r.update(throughput_ips=1e308))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_extreme_figures_never_traceback_issue_29(tmp_path, capsys, case):
    """Old: OverflowError (iterations 10^400, batch_size 10^30) and ValueError "Out of range float values are not
    JSON compliant" (5e-324: an infinite relative change), both tracebacks."""
    base, cur = pair(tmp_path)
    which, change = CASES[case]
    edit_json((base if which == "base" else cur) / "benchmark" / "benchmark.json", change)
    out = tmp_path / "comparison.json"
    code = main(["compare", str(base), str(cur), "--format", "json", "-o", str(out)])
    captured = capsys.readouterr()
    assert code in (1, 4), captured
    if code == 1:  # refused by the record's schema: one line naming the file
        assert captured.err.count("\n") == 1 and "benchmark.json" in captured.err and not out.exists()
    else:
        result = json.loads(out.read_text())  # strict JSON: no Infinity, no NaN
        json.dumps(result, allow_nan=False)
        assert json.loads(captured.out)["verdict"] == result["verdict"]


@pytest.mark.parametrize("flag,value", [("--k", "1e300"), ("--k", "0"), ("--k", "nan"), ("--k", "inf"), ("--k", "-1"),
                                        ("--latency-tolerance", "2"), ("--tolerance", "nan"), ("--tolerance", "-0.1"),
                                        ("--accuracy-tolerance", "1e300"), ("--nights", "0"), ("--nights", "10" * 200),
                                        ("--nights", "1e3")])
def test_compare_numbers_are_bounded_at_parsing_issue_29(tmp_path, capsys, flag, value):
    """Old: --k 1e300 ended in "OverflowError: math range error" (traceback); --k 0.5e-300 and --nights 10^400
    were accepted."""
    base, cur = pair(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["compare", str(base), str(cur), flag, value])
    assert stop.value.code == 1  # deploy's usage errors: one line, exit 1
    err = capsys.readouterr().err
    assert err.startswith("deploy: error: argument ") and flag in err.split(":")[2] and err.count("\n") == 1
    assert "must be" in err or "is not a" in err


def test_the_largest_k_still_compares(tmp_path, capsys):
    base, cur = pair(tmp_path)
    assert main(["compare", str(base), str(cur), "--k", "10", "--latency-tolerance", "0"]) == 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_gate_arithmetic_itself_is_safe_past_the_schema_issue_29(tmp_path, case):
    """The record schema (pipeline/records) now bounds these figures; the gate does not rely on it: the same
    figures handed to compare_runs directly give a finite, strict-JSON comparison (old: OverflowError, or an
    infinite change that json.dumps(allow_nan=False) refused)."""
    from pipeline.report.collect import load_run
    from pipeline.report.compare import compare_runs

    base, cur = (load_run(p) for p in pair(tmp_path))
    which, change = CASES[case]
    change((base if which == "base" else cur)["benchmark"])
    history = [dict(base, dir=str(tmp_path / "h{}".format(i)), when="2026-11-2{}".format(i)) for i in range(6)]
    for k in (2.0, 1e300):
        result = compare_runs(base, cur, history, k=k)
        json.dumps(result, allow_nan=False)
        assert result["verdict"] in ("pass", "suspect", "regression", "not comparable", "no data")
        for row in result["rows"]:
            assert row["change"] is None or -1 <= row["change"] <= 1e6


def test_level_judgement_with_huge_k_and_denormals():
    from pipeline.report.gate_stats import level_judgement, persistence_judgement

    for cur, values, k in ((5e-324, [4.0] * 6, 1e300), (4.0, [5e-324] * 6, 2.0), (1e308, [5e-324], 1e300)):
        row = level_judgement(cur, values, None, 0.03, k)
        row = persistence_judgement(row, cur, [cur, cur], "suspect")
        json.dumps({key: v for key, v in row.items()}, allow_nan=False)
