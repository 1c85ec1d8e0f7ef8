"""Issue 28 item 1, "red means persistent": a figure out of band on one night is suspect (exit 0, amber,
the night kept); a regression when it persists (the previous night out of band too, or the median of the
last three nights beyond its band) or when it is too large to be drift on its first night. Not comparable,
no data and a failed night stay red at once. Each night is judged by the real `deploy compare`
(pipeline.cli.main in-process), its comparison.json written into the night as the workflow does."""

import json
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.report.collect import load_run
from pipeline.report.compare import compare_runs

from reportkit import edit_json, make_run


def make_night(folder, day, median, **kw):
    return make_run(folder, medians={1: median}, spread=0.02, n=1000, seed=day,
                    finished="2026-11-{:02d}T02:00:00+0000".format(day), **kw)


class Board:
    """A board's nightly home: a baseline, then nights judged by deploy compare against it and the history."""

    def __init__(self, root, quiet=(4.0, 4.02, 3.98, 4.01, 3.99, 4.0, 4.02, 3.98)):
        self.root, self.day = root, 1
        self.baseline = make_night(root / "baseline", 1, 4.0)
        for m in quiet:
            self.night(m)

    def night(self, median, **kw):
        self.day += 1
        folder = make_night(self.root / "history" / "night-{:02d}".format(self.day), self.day, median, **kw)
        code = main(["compare", str(self.baseline), str(folder), "--history", str(self.root / "history"),
                     "--format", "json", "-o", str(folder / "comparison.json")])
        verdict = json.loads((folder / "comparison.json").read_text())
        return code, verdict


def p50(result):
    (row,) = [r for r in result["rows"] if r["label"] == "p50 b1 (ms)"]
    return row


def test_one_night_out_of_band_is_suspect_and_the_next_confirms_it(tmp_path, capsys):
    """Old: a +8 % night was red at once (exit 4); drift of sigma 2 % makes that 4-5 % of quiet nights."""
    board = Board(tmp_path)
    code, first = board.night(4.32)  # +8 %: beyond the band, below the first-night size
    assert code == 0 and first["verdict"] == "suspect" and first["passed"] is True
    assert p50(first)["status"] == "suspect" and "persists" in p50(first)["note"]
    assert first["suspects"] >= 1 and first["regressions"] == 0
    assert "suspect" in first["reasons"][0]
    code, second = board.night(4.33)  # still +8 %: two nights running
    assert code == 4 and second["verdict"] == "regression"
    assert p50(second)["status"] == "regression" and "night before too (suspect)" in p50(second)["note"]
    code, third = board.night(4.31)  # and it stays red (the regressed night is not the reference)
    assert code == 4 and third["verdict"] == "regression"


def test_a_suspect_night_that_does_not_persist_clears(tmp_path, capsys):
    board = Board(tmp_path)
    assert board.night(4.32)[1]["verdict"] == "suspect"
    code, after = board.night(4.01)
    assert code == 0 and after["verdict"] == "pass"
    code, later = board.night(4.0)  # the suspect night, cleared by the pass after it, is back in the reference
    assert code == 0 and later["reference"]["nights"] == 11  # baseline, 8 quiet, the suspect, the pass


def test_a_night_far_faster_waits_a_night_before_it_joins_the_reference(tmp_path, capsys):
    """A new baseline, then a night 15 % faster (a tail night, improved): in a two-night reference it would be half
    the median, and an unchanged night after it would look 8 % slower (old: suspect, then red for nothing on the
    next unchanged night). It joins the reference once a later night was judged without it."""
    board = Board(tmp_path, quiet=())
    code, fast = board.night(3.4)
    assert code == 0 and fast["verdict"] == "pass" and p50(fast)["status"] == "improved"
    code, after = board.night(4.0)
    assert code == 0 and after["verdict"] == "pass", after["reasons"]
    assert after["reference"]["runs"] == ["baseline"]
    code, later = board.night(4.0)
    assert code == 0 and later["verdict"] == "pass"
    assert later["reference"]["runs"] == ["baseline", "night-02", "night-03"]  # the fast night, after a night's wait


def test_the_window_through_the_cli_measures_from_the_reference_before_its_nights(tmp_path, capsys):
    """Eight quiet nights, then a step whose first two nights are within the tolerance (+2.8 %, +2.9 %: ok, the first
    joins the reference) and tonight +3.7 %: measured from the reference before the window's nights, the three
    nights' mean is beyond the tolerance, red by the window. Measured from tonight's reference (the step's own
    first night in it: what deploy compare did before), tonight stayed suspect."""
    board = Board(tmp_path)
    assert [board.night(m)[0] for m in (4.115, 4.108)] == [0, 0]
    code, third = board.night(4.145)
    assert code == 4 and "the mean of the last 3 nights" in p50(third)["note"], p50(third)


def test_a_night_that_finished_after_the_current_run_is_not_in_its_reference(tmp_path):
    """Re-judging an old night against the whole archive: nights after it are not its reference (nor its window's)."""
    runs = [load_run(make_night(tmp_path / "n{:02d}".format(d), d, 4.0 if d < 5 else 5.0)) for d in range(2, 9)]
    base = load_run(make_night(tmp_path / "base", 1, 4.0))
    result = compare_runs(base, runs[2], history=runs)
    assert result["reference"]["runs"] == ["base", "n02", "n03"]
    assert any("finished after this run" in n for n in result["notes"])


def test_a_night_named_twice_in_the_history_is_one_night(tmp_path, capsys):
    from pipeline.report.collect import expand_history

    board = Board(tmp_path, quiet=(4.0, 4.02))
    history = board.root / "history"
    runs = expand_history([history, history / "night-03", history / "night-03"])
    assert [Path(r["dir"]).name for r in runs] == ["night-02", "night-03"]


def test_a_red_run_of_nights_that_agree_with_each_other_says_the_baseline_may_be_the_outlier(tmp_path, capsys):
    """A baseline night 8 % faster than the board's level (a tail night made the baseline): every night since sits
    +8 % from it and the reference is the baseline alone, so the gate is red night after night, as for a real step
    on the night after the baseline. From the third such night the comparison says so and what to do; quiet nights
    and a step that does not agree with itself get no such line."""
    board = Board(tmp_path, quiet=())
    nights = [board.night(m) for m in (4.32, 4.33, 4.31, 4.32)]
    assert [code for code, _ in nights] == [0, 4, 4, 4]
    hints = [[n for n in result["notes"] if "baseline may be the outlier" in n] for _, result in nights]
    assert hints[:2] == [[], []]
    assert hints[2] and "the 3 nights since it agree with each other" in hints[2][0] and "+8." in hints[2][0]
    assert "update_baseline" in hints[3][0] and "the 4 nights since it" in hints[3][0]
    capsys.readouterr()
    code = main(["compare", str(board.baseline), str(board.root / "history" / "night-05"), "--history",
                 str(board.root / "history")])
    assert code == 4 and "note: the baseline may be the outlier" in capsys.readouterr().out


def test_no_outlier_hint_once_the_reference_holds_five_nights_or_when_the_nights_disagree(tmp_path, capsys):
    board = Board(tmp_path)  # eight quiet nights: the reference is long enough to know the level
    nights = [board.night(m) for m in (4.32, 4.33, 4.31)]
    assert nights[-1][0] == 4 and not any("outlier" in n for n in nights[-1][1]["notes"])
    other = Board(tmp_path / "other", quiet=())
    nights = [other.night(m) for m in (4.32, 4.6, 4.9)]  # red, but the nights move apart: a drift, not an outlier
    assert nights[-1][0] == 4 and not any("outlier" in n for n in nights[-1][1]["notes"])


def test_the_window_confirms_a_slow_step_that_flickers(tmp_path, capsys):
    """+5 %, out of band, back inside on the next night (+2.5 %), out again: no two consecutive nights, but the
    clipped mean of the last three (+5 %) is beyond its band: a regression on the third night."""
    board = Board(tmp_path)
    assert board.night(4.2)[1]["verdict"] == "suspect"
    assert board.night(4.1)[1]["verdict"] == "pass"
    code, third = board.night(4.2)
    assert code == 4 and third["verdict"] == "regression"
    assert "mean of the last 3 nights" in p50(third)["note"]


def test_a_large_step_is_red_on_its_first_night(tmp_path, capsys):
    board = Board(tmp_path)
    code, result = board.night(5.0)  # +25 %
    assert code == 4 and result["verdict"] == "regression" and "on its first night" in p50(result)["note"]


@pytest.mark.parametrize("how", ["no data", "failed", "not comparable"])
def test_no_data_a_failed_night_and_not_comparable_stay_red_at_once(tmp_path, capsys, how):
    board = Board(tmp_path, quiet=(4.0, 4.01))
    kw = {"failed": "engine step failed"} if how == "failed" else {"power_mode": "MAXQ"} if how == "not comparable" else {}
    board.day += 1
    folder = make_night(tmp_path / "history" / "night-x", board.day, 4.0, **kw)
    if how == "no data":
        (folder / "benchmark" / "benchmark.json").unlink()
    code = main(["compare", str(board.baseline), str(folder), "--history", str(tmp_path / "history")])
    assert code == 4


def test_a_throttled_night_is_flagged_not_judged(tmp_path, capsys):
    """Issue 28 item 3: a night whose GPU clock moved during the timed loop (tegrastats) is not the board's
    steady state: verdict "throttled" (exit 0, a warning), its figures not judged, and it stays out of the
    reference. Old: judged like any night (a +30 % regression)."""
    board = Board(tmp_path)

    def hot(bench):
        for row in bench["results"]:
            row["power"] = {"samples": 40, "rails_mw": {}, "temps_max_c": {"GPU": 97.5},
                            "clocks_mhz": {"gpu": {"min": 420.75, "max": 1300.5}}}

    board.day += 1
    folder = make_night(tmp_path / "history" / "night-hot", board.day, 5.2)
    edit_json(folder / "benchmark" / "benchmark.json", hot)
    code = main(["compare", str(board.baseline), str(folder), "--history", str(tmp_path / "history"),
                 "-o", str(folder / "comparison.json")])
    result = json.loads((folder / "comparison.json").read_text())
    assert code == 0 and result["verdict"] == "throttled" and result["regressions"] == 0
    assert "GPU clock moved from 1300.5 to 420.75 MHz" in result["reasons"][0]
    code, after = board.night(4.0)
    assert code == 0 and after["verdict"] == "pass" and "1 history night throttled" in " ".join(after["notes"])


def test_the_comparison_names_the_benchmark_it_judged(tmp_path):
    """For deploy report's stale-comparison rule (H6): comparison.json carries the sha256 of the benchmark.json
    it judged and when that benchmark was made; a re-run benchmark has another digest."""
    import hashlib

    base, cur = make_night(tmp_path / "b", 1, 4.0), make_night(tmp_path / "c", 2, 4.0)
    result = compare_runs(load_run(base), load_run(cur))
    digest = hashlib.sha256((cur / "benchmark" / "benchmark.json").read_bytes()).hexdigest()
    assert result["current"]["benchmark"] == {"sha256": digest, "made": "2026-11-02T02:00:00+0000"}
    assert result["baseline"]["benchmark"]["sha256"] != digest
