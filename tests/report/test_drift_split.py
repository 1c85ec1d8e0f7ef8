"""scripts/drift_split.py (issue 28 item 1, "measure whether drift lives between runs or between nights"): run
folders benchmarked several times a night, each a complete run folder as deploy writes it (reportkit.make_run),
split into the spread between runs of one night and the spread of the nights' levels."""

import json
import math
import sys
from pathlib import Path

import pytest

from reportkit import make_run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import drift_split  # noqa: E402

NIGHTS = [0.0, 0.05, -0.04, 0.03, -0.02, 0.01]  # the nights' levels (ln), sigma about 3 %
RUNS = [0.0, 0.004, -0.004]  # three runs a night, +-0.4 %


def campaign(root, night_levels, run_offsets):
    for d, level in enumerate(night_levels):
        for r, offset in enumerate(run_offsets):
            # runs at 23:40, 00:00, 00:20: one night across midnight (a night starts at 12:00 UTC)
            when = "2026-11-{:02d}T23:40:00+0000".format(d + 1) if r == 0 else "2026-11-{:02d}T00:{:02d}:00+0000".format(
                d + 2, 20 * (r - 1))
            make_run(root / "n{}r{}".format(d, r), medians={1: 4.0 * math.exp(level + offset)}, spread=0.01, n=1000,
                     seed=10 * d + r, finished=when)
    return root


def test_drift_between_nights_is_found_there(tmp_path, capsys):
    assert drift_split.main([str(campaign(tmp_path, NIGHTS, RUNS)), "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["nights"] == 6 and result["runs"] == 18 and result["where"] == "between nights"
    assert 0.02 < result["sigma_nights"] < 0.045 and result["sigma_runs"] < 0.008


def test_drift_between_runs_is_found_there(tmp_path, capsys):
    """Nights at one level, runs of a night 3 % apart: a same-night re-run is worth it."""
    assert drift_split.main([str(campaign(tmp_path, [0.0] * 6, [0.0, 0.03, -0.03]))]) == 0
    out = capsys.readouterr().out
    assert "the drift lives mostly between runs" in out and "re-run a suspect night" in out


def test_one_run_a_night_is_a_one_line_error(tmp_path, capsys):
    assert drift_split.main([str(campaign(tmp_path, NIGHTS, [0.0]))]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("drift_split: error: 0 nights with two runs or more")


@pytest.mark.parametrize("when,night", [("2026-11-03T23:40:00+0000", "2026-11-03"),
                                        ("2026-11-04T00:20:00+0000", "2026-11-03"),
                                        ("2026-11-04T13:00:00+0100", "2026-11-04")])
def test_a_night_runs_from_noon_to_noon_utc(when, night):
    assert drift_split.night_of(when, 12) == night


def test_a_run_without_a_readable_finish_time_is_left_out():
    assert drift_split.night_of("yesterday", 12) is None and drift_split.night_of(None, 12) is None
