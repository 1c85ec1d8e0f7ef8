"""The pass runner's numeric check: ``pipeline.numeric.compare_arrays`` with stages.rewrite.tolerance as atol
and rtol 0 (a max abs difference, boundary included). numpy subjects, no TensorFlow or ONNX Runtime."""

import numpy as np
import pytest

import pipeline.numeric as numeric
from pipeline.errors import StageFailed
from pipeline.rewrite.engine import run_passes
from pipeline.rewrite.pass_table import PASSES, Pass

TOL = 2.0 ** -10  # exact in binary: the boundary is the boundary


class Subject:
    """One numpy output; a pass adds its ``shift`` option to it."""

    kind, samples = "onnx", None

    def __init__(self, out, compares_changes=False):
        self.out, self.compares_changes = np.asarray(out, "float64"), compares_changes

    def apply(self, p, options):
        self.out = self.out + options["shift"]
        return ["out"]

    def op_counts(self):
        return {}

    def run(self, batch=None, fresh=False):
        return [self.out.copy()]


@pytest.fixture(autouse=True)
def passes(monkeypatch):
    monkeypatch.setitem(PASSES, "nudge", Pass("nudge", None, False, accepts=("shift",), kind="onnx"))
    monkeypatch.setitem(PASSES, "retrain", Pass("retrain", None, True, accepts=("shift",), kind="onnx"))


def nudge(out, shift, tolerance=TOL):
    return run_passes(Subject(out), ["nudge"], {"nudge": {"shift": shift}}, tolerance=tolerance)[0]["comparison"]


def test_a_pass_within_the_tolerance_passes_at_the_boundary_and_the_receipt_keeps_its_keys():
    comparison = nudge([0.0, 1.0], TOL)
    assert comparison == {"against": "the model before the pass", "max_abs_diff": TOL, "tolerance": TOL, "passed": True}
    assert list(comparison) == ["against", "max_abs_diff", "tolerance", "passed"]


def test_a_pass_just_over_the_tolerance_fails():
    with pytest.raises(StageFailed, match=r"rewrite pass nudge changed the outputs: max abs diff 0\.000977 against the "
                                          r"model before the pass \(> tolerance 0\.000976562\)"):
        nudge([0.0, 1.0], np.nextafter(TOL, 1.0))


def test_the_tolerance_is_absolute_large_outputs_get_no_relative_slack():
    assert numeric.compare_arrays([np.array([1000.0])], [np.array([1000.0625])], *numeric.tolerance("fp32"))[
        "within_tolerance"]  # the fp32 bar (atol + rtol * |ref|) would pass it
    with pytest.raises(StageFailed, match="changed the outputs: max abs diff 0.0625"):
        nudge([1000.0], 0.0625, tolerance=1e-4)


def test_the_judgement_is_numeric_compare_arrays(monkeypatch):
    calls, real = [], numeric.compare_arrays
    monkeypatch.setattr(numeric, "compare_arrays", lambda ref, got, atol, rtol: calls.append((atol, rtol)) or
                        real(ref, got, atol, rtol))
    nudge([0.0], 0.0, tolerance=3e-4)
    assert calls == [(3e-4, 0.0)]


def test_the_reference_comparison_uses_the_same_rule():
    subject = Subject([1.0, 2.0], compares_changes=True)
    receipt = run_passes(subject, ["retrain"], {"retrain": {"shift": TOL}}, tolerance=TOL,
                         reference_outputs=[np.array([1.0, 2.0])])
    assert receipt[0]["comparison"]["against"] == "the inference-mode reference" and receipt[0]["comparison"]["passed"]
    with pytest.raises(StageFailed, match="against the inference-mode reference"):
        run_passes(Subject([1.0, 2.0], compares_changes=True), ["retrain"], {"retrain": {"shift": 2 * TOL}},
                   tolerance=TOL, reference_outputs=[np.array([1.0, 2.0])])


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf - inf
def test_non_finite_outputs_fail_as_before_and_say_so():
    """NaN in both runs is "the same" under diff's rule; the pass check failed on NaN before (nan <= tolerance is
    False) and still does, now saying why."""
    with pytest.raises(StageFailed, match=r"rewrite pass nudge: the outputs compared against the model before the "
                                          r"pass are not finite \(NaN or inf\)"):
        nudge([np.nan, 1.0], 0.0)
    with pytest.raises(StageFailed, match="not finite"):
        nudge([np.inf], 0.0)
