"""Issue 28 item 2, the gate's persistence rule measured against its goal: the window is the clipped mean of the
last three nights, and it also judges a night beyond the tolerance but within its one-night band ("noise"), so a
slow +5 % step whose single nights flicker in and out of the band is red within three nights, and a step whose
night drifted down by a tail is not hidden. One tail night neither makes nor hides a step (each night is clipped
to within 1.5 sigma of the three's median). The rule is pipeline.report.gate_stats.persistence_judgement; the
figures it was tuned on are scripts/bench/gate_noise.py's (docs/nightly.md, "The gate's measured quality")."""

import json
import math
from statistics import NormalDist

from pipeline.cli import main
from pipeline.report import gate_stats as gs

from reportkit import make_run

SIGMA = 0.02
# 19 reference nights whose ln spread is sigma 2 % (normal quantiles: their MAD is sigma exactly), median 4.0 ms
Z = [NormalDist().inv_cdf((i + 0.5) / 19) for i in range(19)]
REFERENCE = [4.0 * math.exp(SIGMA * z) for z in Z]


def night(change):
    """A night's p50 with ln change ``change`` from the reference's median."""
    return 4.0 * math.exp(change)


def judge(tonight, before, previous_status=None, interval=None, values=REFERENCE, allow=True):
    """level_judgement then persistence_judgement, as deploy compare runs them for one figure."""
    cur = night(tonight)
    judged = gs.level_judgement(cur, values, interval, 0.03, 2.0, True, allow)
    return judged, gs.persistence_judgement(judged, cur, [night(b) for b in before], previous_status)


def test_a_slow_step_within_its_one_night_band_is_red_by_its_third_night():
    """+5 %: tonight +4 % is beyond the tolerance but within the one-night band (noise); the nights before were
    +5 % and +5.5 %. Old: the window judged only a night out of band, so this stayed noise (exit 0)."""
    judged, result = judge(0.04, [0.05, 0.055])
    assert judged["status"] == "noise"
    assert result["status"] == "regression" and "the mean of the last 3 nights is +" in result["note"]


def test_a_tail_night_down_does_not_hide_a_step():
    """A step night at +7 %, one that drifted down by 8 % (a t3 tail), +4.4 % tonight: the plain mean of the three
    (+1.1 %) would hide the step; clipped to within 1.5 sigma of their median it stays beyond its limit."""
    judged, result = judge(0.044, [0.07, -0.08])
    assert judged["status"] == "noise" and (0.044 + 0.07 - 0.08) / 3 < judged["tol"]
    assert result["status"] == "regression"


def test_one_tail_night_up_does_not_make_a_false_alarm():
    """A +12 % tail night two nights ago, -2 % last night, +3.3 % tonight: the plain mean (+4.4 %) is beyond the
    window's limit (+3.4 %); clipped, the tail counts as +6.5 % and the mean (+2.6 %) is not."""
    judged, result = judge(0.033, [0.12, -0.02])
    assert judged["status"] == "noise"
    assert (0.12 - 0.02 + 0.033) / 3 > gs._window(judged, night(0.033), [night(0.12), night(-0.02)], True)[1]
    assert result["status"] == "noise"


def test_quiet_nights_stay_quiet_and_a_better_night_is_never_red():
    assert judge(0.035, [0.0, 0.01])[1]["status"] == "noise"
    assert judge(0.01, [0.05, 0.05])[1]["status"] == "ok"  # within the tolerance tonight: not judged by the window
    assert judge(-0.05, [0.05, 0.05])[1]["status"] in ("noise", "improved")


def test_the_window_measures_a_step_from_the_reference_before_its_own_nights():
    """A +5 % step three nights after a baseline: its first night (+5 %, noise against a prior band) passed and
    joined tonight's reference, which pulls that reference's centre up by a quarter of the step. Measured from the
    reference as it stood before the window's nights (the baseline and two quiet nights), the three nights' mean
    (+4.6 %) is beyond its limit (+4.1 %): red on the step's third night. Old: measured from tonight's reference
    (+3.75 % against +3.9 %), the step stayed noise."""
    before = [night(0.0), night(0.01), night(-0.01)]
    cur = night(0.04)
    judged = gs.level_judgement(cur, before + [night(0.05)], None, 0.03, 2.0)
    assert judged["status"] == "noise"
    result = gs.persistence_judgement(judged, cur, [night(0.05), night(0.045)], None, True, before)
    assert result["status"] == "regression" and "the mean of the last 3 nights is +4.6%" in result["note"]
    # tonight's reference as the window's (what the gate did before): the step's own first night hides it
    assert gs.persistence_judgement(judged, cur, [night(0.05), night(0.045)], None, True)["status"] == "noise"


def test_the_window_s_centre_is_hodges_lehmann_robust_and_near_the_mean():
    """The median of the pairwise means: a tail night moves it little (the median's robustness), and on quiet nights
    it sits near their mean (half again the median's precision: variance pi/3 sigma^2/n, not pi/2)."""
    assert gs.hodges_lehmann([1.0, 2.0, 3.0]) == 2.0
    assert gs.hodges_lehmann([0.0, 0.0, 0.0, 0.0, 1.0]) == 0.0  # one tail of five: the median of 15 pairwise means
    assert gs.hodges_lehmann([0.0, 1.0, 3.0]) == 1.25  # neither the median (1) nor the mean (1.33)
    assert abs(gs.hodges_lehmann([math.log(v / 4.0) for v in REFERENCE])) < 1e-12  # symmetric nights: their centre
    assert gs.HL_VAR < gs.MEDIAN_VAR


def test_the_window_on_a_throughput_red_when_it_falls_not_when_it_rises():
    """Throughput: higher is better. Falling 5 % over three nights (from the reference before them) is red; the
    same nights rising is not."""
    before = [250.0, 252.5, 247.5]

    def judged(change):
        cur = 250.0 * math.exp(change)
        row = gs.level_judgement(cur, before + [250.0 * math.exp(change * 1.2)], None, 0.03, 2.0, False)
        return row, cur

    row, cur = judged(-0.04)
    assert row["status"] == "noise"
    recent = [250.0 * math.exp(-0.05), 250.0 * math.exp(-0.045)]
    assert gs.persistence_judgement(row, cur, recent, None, False, before)["status"] == "regression"
    row, cur = judged(0.04)
    recent = [250.0 * math.exp(0.05), 250.0 * math.exp(0.045)]
    assert gs.persistence_judgement(row, cur, recent, None, False, before)["status"] in ("improved", "noise")


def test_a_figure_whose_own_sampling_error_outweighs_the_drift_is_not_judged_by_the_window():
    """A p99 of few calls (its 95 % interval +-6 %: sampling sigma 3 % > the nights' 2 %): the window leaves it."""
    cur = night(0.04)
    judged, result = judge(0.04, [0.06, 0.06], interval=(cur / 1.06, cur * 1.06))
    assert judged["status"] == "noise" and result["status"] == "noise"


def test_host_figures_before_five_nights_are_never_a_regression_by_the_window():
    judged, result = judge(0.06, [0.06, 0.06], values=REFERENCE[:3], allow=False)
    assert judged["status"] == "noise" and result["status"] == "noise"


def test_an_unbounded_quantile_is_left_alone():
    judged = gs.level_judgement(4.4, REFERENCE, (4.3, math.inf), 0.03, 2.0)
    assert "d" not in judged and gs.persistence_judgement(judged, 4.4, [4.4, 4.4], "suspect") == judged


def test_the_window_is_in_the_comparison_and_a_flickering_step_is_red_through_the_cli(tmp_path, capsys):
    """Through deploy compare (pipeline.cli.main, in-process) as the workflow runs it: 19 quiet nights with a 2 %
    spread, then +6 % (suspect), +3.2 % (within its band: the chain of out-of-band nights is broken), +4.3 % (within
    its band too): red on the third night, by the window. Old: the third night passed (exit 0)."""
    def make_night(name, day, median):
        return make_run(tmp_path / name, medians={1: median}, spread=0.02, n=1000, seed=day,
                        finished="2026-11-{:02d}T02:00:00+0000".format(day) if day <= 28 else
                        "2026-12-{:02d}T02:00:00+0000".format(day - 28))

    baseline = make_night("baseline", 1, 4.0)
    history = tmp_path / "history"

    def judge_night(day, median):
        folder = make_night("history/night-{:02d}".format(day), day, median)
        code = main(["compare", str(baseline), str(folder), "--history", str(history), "--format", "json",
                     "-o", str(folder / "comparison.json")])
        return code, json.loads((folder / "comparison.json").read_text())

    order = [0, 18, 1, 17, 2, 16, 3, 15, 4, 14, 5, 13, 6, 12, 7, 11, 8, 10]  # low and high in turn, the middle last
    for day, z in enumerate([Z[i] for i in order], start=2):
        code, result = judge_night(day, 4.0 * math.exp(SIGMA * z))
        assert code == 0, result["reasons"]
    assert result["persistence"]["window_statistic"] == "clipped mean"
    assert result["persistence"]["window_reference"] == "hodges-lehmann, nights before the window"
    code, first = judge_night(20, 4.0 * math.exp(0.06))
    assert code == 0 and first["verdict"] == "suspect"
    code, second = judge_night(21, 4.0 * math.exp(0.032))
    assert code == 0 and second["verdict"] in ("pass", "suspect")
    code, third = judge_night(22, 4.0 * math.exp(0.043))
    assert code == 4 and third["verdict"] == "regression", third["rows"]
    (p50,) = [r for r in third["rows"] if r["label"] == "p50 b1 (ms)"]
    assert p50["status"] == "regression" and "mean of the last 3 nights" in p50["note"]


def test_the_settings_are_the_ones_measured():
    """The settings docs/nightly.md's figures were measured with: a change here needs gate_noise.py re-run."""
    assert (gs.WINDOW, gs.WINDOW_K, gs.WINDOW_CLIP, gs.SPREAD_CLIP) == (3, 2.5, 1.5, 2.5)
    assert (gs.FIRST_NIGHT_SIGMAS, gs.FIRST_NIGHT_FLOOR) == (4.0, 0.12)


# --- the tools that measured it: scripts/bench/gate_model.py --why and scripts/bench/gate_bound.py


def _bench(name):
    import importlib.util
    import sys
    from pathlib import Path

    scripts = Path(__file__).resolve().parents[2] / "scripts"
    if str(scripts) not in sys.path:
        sys.path.insert(0, str(scripts))
    spec = importlib.util.spec_from_file_location("bench_" + name, str(scripts / "bench" / (name + ".py")))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gate_model_names_the_rule_from_the_gates_own_notes():
    """--why attributes each false alarm to the rule from the regression row's note: the words must be the ones
    persistence_judgement writes (a reworded note would count every alarm as "?")."""
    gate_model = _bench("gate_model")
    _, window = judge(0.04, [0.05, 0.055])
    _, two = judge(0.07, [0.0, 0.065], previous_status="suspect")
    _, first = judge(0.20, [0.0, 0.0])
    assert [r["status"] for r in (window, two, first)] == ["regression"] * 3
    assert gate_model.rules_of(window["note"]) == {"window"}
    assert gate_model.rules_of(two["note"]) == {"two nights"}
    assert gate_model.rules_of(first["note"]) == {"first"}
    assert gate_model.rules_of("worse by more than 4 %") == {"?"}


def test_gate_model_why_counts_every_false_alarm_once_by_reference_length():
    """The attribution adds up: each red unchanged night is counted once by reference length, and the sequences
    with any are no more than the red nights."""
    import collections

    gate_model = _bench("gate_model")
    why = collections.Counter()
    quiet, _ = gate_model.simulate("t3", 4, 12, 3, 4, [0.25], why)
    by_n = sum(v for k, v in why.items() if k[0] == "n")
    by_rule = sum(v for k, v in why.items() if k[0] == "rule")
    assert by_n == by_rule == quiet[0] and why[("sequences",)] <= min(quiet[0], 4)
    assert quiet[1] == 4 * 12


def test_gate_bound_reproduces_the_closed_form_and_the_corrections_raise_it():
    """docs/nightly.md: the closed form (pi/2 for every n) gives 87.4 % at 1 % false alarms; the exact median of
    3-20 normal nights has a smaller variance, and three tries catch more: each correction raises it, and
    neither reaches 90 %."""
    gate_bound = _bench("gate_bound")
    closed, exact, tries, known, estimated = gate_bound.bound(0.01, 0.02, math.log(1.05), 40000, 7)
    assert round(100 * closed, 1) == 87.4
    assert closed < exact <= tries < 0.90
    # a mean reference: above 90 % only for a test that knew sigma; estimating it from the nights costs more than
    # the mean gains (docs/nightly.md: 91.6 % and 83.7 % at 200,000 draws)
    assert estimated < 0.86 < 0.90 < known


def test_gate_model_by_night_keeps_the_default_runs_first_three_nights():
    """--by-night N draws a step's later nights from a generator of their own: its count by night 3 is the default
    run's, and the counts by night add up to the steps caught."""
    import collections

    gate_model = _bench("gate_model")
    default = gate_model.simulate("normal", 2, 9, 3, 0, [0.05])
    why = collections.Counter()
    quiet, caught = gate_model.simulate("normal", 2, 9, 3, 0, [0.05], why, {0.05: 5})
    assert quiet == default[0]
    by_night = [sum(why[("night", 0.05, i)] for i in range(1, j + 1)) for j in range(1, 6)]
    assert by_night[2] == default[1][0.05][0]
    assert by_night[-1] == caught[0.05][0] and caught[0.05][1] == default[1][0.05][1] == 6


def test_gate_model_oracle_and_other_k_never_exit_met_and_leave_the_gate_as_it_ships(capsys, monkeypatch):
    """--sigma-known, --window-k and --by-night change the measurement for the run only, and a run of them never says
    "met" (exit 0) even when its figures would: they measure a ceiling, not the gate as it ships."""
    from pipeline.report import gate_stats

    gate_model = _bench("gate_model")
    shipped = gate_stats.MIN_NIGHTS, gate_stats.SIGMA_PRIOR, gate_stats.WINDOW_K
    assert gate_model.main(["--drift", "uniform", "--sequences", "1", "--length", "6", "--seed", "0",
                            "--sigma-known", "0.0115", "--window-k", "2.2"]) == 1
    assert (gate_stats.MIN_NIGHTS, gate_stats.SIGMA_PRIOR, gate_stats.WINDOW_K) == shipped
    assert "| uniform |" in capsys.readouterr().out
    seen = []
    monkeypatch.setattr(gate_model, "_run", lambda args: seen.append(
        (gate_stats.MIN_NIGHTS, gate_stats.SIGMA_PRIOR, gate_stats.WINDOW_K)) or True)
    assert gate_model.main([]) == 0
    assert [gate_model.main([flag, value]) for flag, value in (("--sigma-known", "0.02"), ("--window-k", "2.2"),
                                                                ("--by-night", "4"))] == [1, 1, 1]
    assert seen == [shipped, (10 ** 9, 0.02, shipped[2]), (shipped[0], shipped[1], 2.2), shipped]
