"""pipeline.numeric: the one comparison rule every check uses (no TensorFlow)."""

import numpy as np
import pytest

from pipeline.errors import DeployError
from pipeline.numeric import ATOL, RTOL, TOLERANCES, diff, max_abs_diff, tolerance


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


def test_max_abs_diff_over_output_lists():
    assert max_abs_diff([np.zeros(3), np.ones(2)], [np.zeros(3), np.array([1.0, 3.5])]) == 2.5
    assert max_abs_diff([np.zeros(0)], [np.zeros(0)]) == 0.0 and max_abs_diff([], []) == 0.0
