"""The shipped calibration is what the stored layer tables and the published figures give (no TensorFlow):
the fit is reproducible, judged leave-one-model-out, and the torch2trt figures never enter it."""

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
    assert points and all(p.source != script.T2T_NANO and p.source != script.T2T_XAVIER for p in points)
    rows = leave_one_out(points, script.facts_of)
    assert len(rows) == len(points)
    expected = fit(points, script.facts_of, MAX_SPREAD).to_dict()
    default = shipped()["default"]
    assert {k: default[k] for k in expected} == pytest.approx(expected)
    assert math.exp(2 * default["spread"]) == pytest.approx(2.5)  # transferred to a board without figures
    for board, entry in shipped()["boards"].items():
        assert entry["spread"] == pytest.approx(spread_from([r for r in rows if r["board"] == board]))
