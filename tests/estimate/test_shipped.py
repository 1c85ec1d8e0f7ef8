"""The shipped calibration is what the stored layer tables and the published figures give (no TensorFlow):
the fit is reproducible, judged leave-one-model-out, its range's width derived from the leave-one-out errors and
the published figures of other setups, and the torch2trt figures never enter either."""

import importlib.util
import json
import math

import pytest

from pipeline.estimate.calibration import shipped
from pipeline.estimate.fit import MAX_SPREAD, fit, leave_one_out, spread_from
from pipeline.targets.files import targets_dir

pytestmark = pytest.mark.slow


def _script():
    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("estimate_calibrate", ROOT / "scripts" / "bench" / "estimate_calibrate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shipped_fit_is_the_fit_of_the_calibration_points():
    script = _script()
    tables = json.loads((targets_dir() / "estimate" / "layer_tables.json").read_text())
    points = script.points_of(script.CALIBRATION_POINTS, tables)
    assert points and all(p.source not in (script.T2T_NANO, script.T2T_XAVIER) for p in points)
    expected = fit(points, script.facts_of, MAX_SPREAD).to_dict()
    default = shipped()["default"]
    assert {k: default[k] for k in expected} == pytest.approx(expected)
    assert math.exp(2 * default["spread"]) == pytest.approx(2.5)  # transferred to a board in no group
    foreign = script.points_of(script.FOREIGN_POINTS, tables)
    assert foreign and all(p.source not in (script.T2T_NANO, script.T2T_XAVIER) for p in foreign)
    boards, rows, far = script.group_fit(points, foreign)
    assert len(rows) == len(points)  # every point judged leave-one-model-out within its group
    assert len(far) == len(foreign)  # every other setup's figure judged by its group's fit without its family
    spread = spread_from(rows + far)
    # the range is derived from both: wider than the one source's own leave-one-out spread, never above 2.5x
    assert spread_from(rows) < spread <= MAX_SPREAD
    for board, entry in shipped()["boards"].items():
        members = next(m for m in script.GROUPS.values() if board in m)
        mine = [p for p in points if p.board in members]
        again = fit(mine, script.facts_of, spread).to_dict()
        assert {k: entry[k] for k in again} == pytest.approx(again)
        assert entry == boards[board]
        assert entry["spread"] == pytest.approx(spread)


def test_every_board_of_a_fitted_architecture_shares_its_fit():
    """Xavier NX and AGX Xavier (Volta) get one fit; the Orin NX (no figures) gets the Ampere boards' fit."""
    boards = shipped()["boards"]
    assert boards["orin_nx"]["eff_conv"] == boards["agx_orin"]["eff_conv"]
    assert boards["xavier_nx"] == boards["agx_xavier"]
    assert "Ampere" in boards["orin_nx"]["basis"] and "none of this board" in boards["orin_nx"]["basis"]
    assert boards["jetson_nano"]["group"] != boards["agx_xavier"]["group"]


def test_engine_only_figures_carry_no_fitted_overhead():
    """A per-call overhead is fitted only for figures that hold one (a framework's session run): NetsPresso's
    engine-only latencies get none, so it never stands in for the engine's own time."""
    script = _script()
    tables = json.loads((targets_dir() / "estimate" / "layer_tables.json").read_text())
    points = script.points_of(script.CALIBRATION_POINTS, tables)
    assert points and not any(p.overhead for p in points)
    tf_trt = script.points_of(script.TF_TRT_POINTS, tables)
    assert tf_trt and all(p.overhead for p in tf_trt)
