"""The fit, leave-one-model-out and the goal statistics, on points made from known parameters."""

import math

import pytest

from pipeline.estimate.fit import GRID, MAX_SPREAD, MIN_SPREAD, Point, fit, foreign_rows, goal_statistics, \
    leave_one_out, predict_ms, spread_from
from pipeline.estimate.layers import Layer
from pipeline.estimate.roofline import Params
from tests.estimate.test_roofline import FACTS

TRUE = Params(eff_conv=GRID["eff_conv"][8], eff_other=GRID["eff_other"][5], eff_mem=GRID["eff_mem"][3],
              launch_us=GRID["launch_us"][4], spread=0.3)


def _model(i):
    return [Layer("c", "conv", flops=2e9 * (i + 1), weights=1e6, reads=1e5, writes=1e5),
            Layer("d", "depthwise", flops=5e7 * (5 - i), reads=4e6 * (i % 3 + 1), writes=4e6),
            Layer("m", "matmul", flops=1e6, weights=5e7 * (i % 2)),
            ] + [Layer("e%d" % j, "pointwise", flops=1e3, reads=1e3, writes=1e3) for j in range(20 * i)]


def _points():
    points = []
    for i in range(5):
        p = Point(model="m%d" % i, board="b", precision="fp16", batch=1, ms=1.0, layers=_model(i))
        p.ms = predict_ms(p, FACTS, TRUE)
        points.append(p)
    return points


def test_fit_recovers_the_parameters_that_made_the_points():
    params = fit(_points(), lambda board: FACTS)
    assert (params.eff_conv, params.eff_other, params.eff_mem, params.launch_us) == \
        (TRUE.eff_conv, TRUE.eff_other, TRUE.eff_mem, TRUE.launch_us)


def test_leave_one_out_never_fits_the_point_it_judges():
    points = _points()
    points[0].ms *= 3  # an outlier: fitted on the others, it is missed by about 3x
    rows = leave_one_out(points, lambda board: FACTS)
    assert [r["model"] for r in rows] == ["m0", "m1", "m2", "m3", "m4"]
    assert rows[0]["error"] == pytest.approx(1 / 3 - 1, abs=0.02)


def test_spread_and_goal_statistics():
    rows = [{"error": e, "measured_ms": 1.0, "estimate_ms": 1.0 + e} for e in (0.1, -0.2, 0.3, 0.05, 1.0)]
    spread = spread_from(rows)
    assert spread == pytest.approx(math.log(1.3))  # the 80th percentile of |log(1 + error)|
    stats = goal_statistics(rows, spread)
    assert stats["median_abs_error"] == 0.2 and stats["within_50pct"] == 0.8 and stats["points"] == 5
    assert stats["inside_range"] == 0.8 and stats["range_ratio"] == pytest.approx(1.69, abs=1e-3)
    assert spread_from([]) == MAX_SPREAD and spread_from([{"error": 0.0}]) == MIN_SPREAD
    assert spread_from([{"error": 9.0}]) == MAX_SPREAD  # never wider than 2.5x


def test_overhead_is_fitted_only_on_the_figures_that_hold_one():
    """Engine-only figures (overhead False) beside framework figures (TF-TRT's session run): the overhead is found
    on the second kind alone, and the engine's parameters are still the ones that made the points."""
    true = Params(TRUE.eff_conv, TRUE.eff_other, TRUE.eff_mem, TRUE.launch_us, 0.3, overhead_ms=GRID["overhead_ms"][7])
    points = []
    for i in range(5):
        for framework in (True, False):
            p = Point(model="m%d" % i, board="b", precision="fp16", batch=1, ms=1.0, layers=_model(i), overhead=framework)
            p.ms = predict_ms(p, FACTS, true)
            points.append(p)
    assert points[0].ms == pytest.approx(points[1].ms + true.overhead_ms)
    params = fit(points, lambda board: FACTS)
    assert (params.eff_conv, params.eff_other, params.eff_mem, params.launch_us, params.overhead_ms) == \
        (true.eff_conv, true.eff_other, true.eff_mem, true.launch_us, true.overhead_ms)


def test_leave_one_out_leaves_out_the_model_family_from_every_source(monkeypatch):
    """resnet50 from one source and resnet50_c3 (family resnet50) from another: judging one, neither is fitted."""
    points = _points()
    points.append(Point(model="m0_c3", board="b2", precision="fp16", batch=1, ms=points[0].ms, layers=_model(0),
                        family="m0"))
    fitted = _models_fitted(monkeypatch)
    rows = leave_one_out(points, lambda board: FACTS)
    assert [r["model"] for r in rows] == ["m0", "m1", "m2", "m3", "m4", "m0_c3"]
    assert "m0_c3" not in fitted[0] and "m0" not in fitted[5]
    assert "m0_c3" in fitted[1] and "m0" in fitted[1]


def _models_fitted(monkeypatch):
    """A list that gets, per call of pipeline.estimate.fit.fit, the set of models it was fitted on."""
    import pipeline.estimate.fit as fitmod

    fitted = []
    real = fitmod.fit

    def spy(rest, facts_of, *args, **kwargs):
        fitted.append({p.model for p in rest})
        return real(rest, facts_of, *args, **kwargs)

    monkeypatch.setattr(fitmod, "fit", spy)
    return fitted


def test_fit_recovers_k_half_from_models_of_short_and_long_reductions():
    """Points made with k_half 64 on models mixing 1x1 (K 64) and 3x3 (K 2304) convolutions: the fit finds it."""
    from dataclasses import replace

    true = replace(TRUE, k_half=float(GRID["k_half"][3]))
    points = []
    for i in range(5):
        layers = _model(i) + [Layer("k1", "conv", flops=2 * 64 * 2e6 * (5 - i), writes=2e6 * (5 - i)),
                              Layer("k3", "conv", flops=2 * 2304 * 2e5 * (i + 1), writes=2e5 * (i + 1))]
        p = Point(model="m%d" % i, board="b", precision="fp16", batch=1, ms=1.0, layers=layers)
        p.ms = predict_ms(p, FACTS, true)
        points.append(p)
    params = fit(points, lambda board: FACTS)
    assert (params.eff_conv, params.k_half, params.launch_us) == (true.eff_conv, true.k_half, true.launch_us)


def test_foreign_setups_widen_the_range_and_never_enter_the_fit(monkeypatch):
    """Figures of another setup (TF-TRT with its session run, another JetPack or power mode) are estimated by the fit
    without their model family, engine only; their errors join the leave-one-out errors in the range's width, so a
    source whose models agree with each other cannot give a range narrower than the setups disagree."""
    points = _points()
    factors = (1.0, 1.1, 1.6, 2.0, 1.3)  # how much slower each model is in the other setup
    foreign = [Point(model="m%d_other" % i, board="b", precision="fp16", batch=1, layers=_model(i), overhead=True,
                     family="m%d" % i, ms=predict_ms(points[i], FACTS, TRUE) * f) for i, f in enumerate(factors)]
    fitted = _models_fitted(monkeypatch)
    far = foreign_rows(points, foreign, lambda board: FACTS)
    assert [r["model"] for r in far] == [p.model for p in foreign]
    assert all(("m%d" % i) not in models and not any(m.endswith("_other") for m in models)
               for i, models in enumerate(fitted))
    # the fit on the four other models recovers the parameters that made the points: the error is the setup's
    assert [r["error"] for r in far] == pytest.approx([1 / f - 1 for f in factors], abs=0.02)
    loo = leave_one_out(points, lambda board: FACTS)
    assert spread_from(loo) == MIN_SPREAD  # the source's models predict each other exactly
    # 10 rows: the 80th percentile is the 8th smallest |log error| (six ~0, then 1.1, 1.3, 1.6, 2.0): the foreign 1.3x
    assert spread_from(loo + far) == pytest.approx(math.log(1.3), abs=0.02)
