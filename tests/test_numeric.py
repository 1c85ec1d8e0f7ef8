"""pipeline.numeric: the one comparison rule every check uses (no TensorFlow)."""

import numpy as np
import pytest

from pipeline.errors import DeployError
from pipeline.numeric import ATOL, RTOL, TOLERANCES, compare_arrays, compare_runs, diff, tolerance


def test_rule_is_absolute_plus_relative_per_element():
    ref = np.array([1000.0, 0.0], "float32")
    assert diff(ref, ref + [0.05, 0.0], ATOL, RTOL)[2] is False  # 0.05 <= 1e-5 + 1e-4 * 1000
    assert diff(ref, ref + [0.0, 0.05], ATOL, RTOL)[2] is True  # near zero only atol counts
    abs_d, rel_d, over = diff(ref, ref + [0.2, 0.0], ATOL, RTOL)
    assert over and abs_d == pytest.approx(0.2, rel=1e-3) and rel_d == pytest.approx(2e-4, rel=1e-2)


def test_nan_in_both_is_the_same_and_strings_compare_by_equality():
    nan = np.array([np.nan, 1.0])
    assert diff(nan, nan.copy(), ATOL, RTOL) == (0.0, 0.0, False)
    assert diff(nan, np.array([0.0, 1.0]), ATOL, RTOL)[2]
    assert diff(np.array([b"a"]), np.array([b"a"]), ATOL, RTOL) == (0.0, 0.0, False)
    assert diff(np.array([b"a"]), np.array([b"b"]), ATOL, RTOL)[2]


def test_tolerance_per_precision_widens_from_fp32_to_int8():
    assert tolerance("fp32") == (ATOL, RTOL) and tolerance("FP16") == TOLERANCES["fp16"]
    assert tolerance("fp32") < tolerance("fp16") < tolerance("int8")
    # fp16 rounding of values near 1 (half an ulp: 4.9e-4) passes fp16's bar, fails fp32's
    ref = np.linspace(0.5, 1.0, 64).astype("float32")
    got = ref.astype("float16").astype("float32")
    assert not diff(ref, got, *tolerance("fp16"))[2] and diff(ref, got, *tolerance("fp32"))[2]
    with pytest.raises(DeployError, match="precision 'fp8': expected one of fp32, fp16, int8"):
        tolerance("fp8")


def test_compare_arrays_judges_two_runs_by_the_one_rule():
    ref = [np.zeros(3), np.array([1000.0, 0.0])]
    found = compare_arrays(ref, [np.zeros(3), np.array([1000.05, 0.0])], ATOL, RTOL)
    assert found["within_tolerance"] and found["finite"] and found["max_abs_diff"] == pytest.approx(0.05)
    assert [o["size"] for o in found["outputs"]] == [3, 2]
    assert found["outputs"][1]["sum_abs_diff"] == pytest.approx(0.05)
    assert compare_arrays([np.zeros(0)], [np.zeros(0)], ATOL, RTOL)["max_abs_diff"] == 0.0
    assert compare_arrays([], [], ATOL, RTOL) == {"outputs": [], "max_abs_diff": 0.0, "within_tolerance": True,
                                                  "finite": True}
    shapes = compare_arrays([np.zeros((1, 2))], [np.zeros((2, 2))], ATOL, RTOL)  # no broadcasting
    assert not shapes["within_tolerance"] and shapes["max_abs_diff"] == float("inf")
    assert not compare_arrays([np.array([np.nan])], [np.array([np.nan])], ATOL, RTOL)["finite"]


def test_one_absolute_tolerance_is_atol_with_rtol_0_boundary_included():
    """stages.convert.tolerance and stages.rewrite.tolerance are a max abs difference: passed as atol with
    rtol 0, the verdict is max |diff| <= tolerance, as it was before they went through compare_arrays."""
    tol = 2.0 ** -10  # exact in binary: the boundary is the boundary
    assert compare_arrays([np.zeros(2)], [np.array([0.0, tol])], tol, 0.0)["within_tolerance"]
    assert not compare_arrays([np.zeros(2)], [np.array([0.0, np.nextafter(tol, 1.0)])], tol, 0.0)["within_tolerance"]
    big = [np.array([1000.0])]
    assert compare_arrays(big, [big[0] + 0.05], ATOL, RTOL)["within_tolerance"]  # the fp32 bar: relative counts
    assert not compare_arrays(big, [big[0] + 0.05], 1e-4, 0.0)["within_tolerance"]  # abs only: it does not


class _Session:
    def __init__(self, fn, outputs=("out",)):
        self.inputs, self.output_names, self._fn = [("x", (None, 2), "float32")], list(outputs), fn

    def run(self, feed):
        return self._fn(feed["x"])


def test_compare_runs_judges_each_batch_with_compare_arrays(monkeypatch):
    import pipeline.numeric as numeric

    calls = []
    real = numeric.compare_arrays
    monkeypatch.setattr(numeric, "compare_arrays", lambda *a: calls.append(a[2:]) or real(*a))
    images = np.arange(10, dtype="float32").reshape(5, 2)
    ref = _Session(lambda x: [x * 1.0, x.sum(1, keepdims=True)], outputs=("a", "b"))
    got = _Session(lambda x: [x + 0.5, x.sum(1, keepdims=True)], outputs=("a", "b"))
    found = compare_runs(ref, got, images, 0.5, 0.0, batch=2)
    assert calls == [(0.5, 0.0)] * 3  # batches of 2, 2 and 1
    assert found["outputs"] == {"a": {"max_abs_diff": 0.5, "mean_abs_diff": 0.5}, "b": {"max_abs_diff": 0.0,
                                                                                       "mean_abs_diff": 0.0}}
    assert found["within_tolerance"] and found["finite"] and found["max_abs_diff"] == 0.5
    assert not compare_runs(ref, got, images, 0.25, 0.0, batch=2)["within_tolerance"]
