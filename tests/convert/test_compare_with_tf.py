"""convert's comparison: ``pipeline.numeric.compare_runs`` with stages.convert.tolerance as atol and rtol 0, so
its verdict is max abs diff <= tolerance as documented. numpy sessions stand in for TensorFlow and ONNX Runtime."""

import numpy as np
import pytest

import pipeline.backends as backends
import pipeline.backends.tensorflow as tensorflow_backend
import pipeline.numeric as numeric
from pipeline.convert import compare_with_tf
from pipeline.errors import StageFailed

TOL = 2.0 ** -10  # exact in binary: the boundary is the boundary
KEYS = ["inputs", "samples", "tolerance", "outputs", "max_abs_diff", "within_tolerance", "runtimes"]


class Session:
    label = {"runtime": "numpy"}

    def __init__(self, shift):
        self.inputs, self.output_names, self.shift = [("input", (None, 2, 2, 3), "float32")], ["probabilities"], shift

    def run(self, feed):
        x = feed["input"]
        return [x.reshape(len(x), -1) + np.float32(self.shift)]


def compare(monkeypatch, shift, tolerance=TOL, value=0.0):
    monkeypatch.setattr(tensorflow_backend, "TensorFlowSession", lambda graph_def, io, source: Session(0.0))
    monkeypatch.setattr(backends, "load_onnx", lambda path: Session(shift))
    images = np.full((3, 2, 2, 3), value, "float32")
    return compare_with_tf(None, {}, "model.onnx", images, source="test images", tolerance=tolerance)


def test_within_the_tolerance_at_the_boundary_and_comparison_json_keeps_its_keys(monkeypatch):
    comparison = compare(monkeypatch, TOL)
    assert comparison["within_tolerance"] is True and comparison["max_abs_diff"] == TOL
    assert list(comparison) == KEYS and comparison["tolerance"] == TOL and comparison["samples"] == 3
    assert comparison["outputs"] == {"probabilities": {"max_abs_diff": TOL, "mean_abs_diff": TOL}}


def test_just_over_the_tolerance_is_not_within(monkeypatch):
    assert compare(monkeypatch, TOL + 2.0 ** -14)["within_tolerance"] is False


def test_the_tolerance_is_absolute_large_outputs_get_no_relative_slack(monkeypatch):
    comparison = compare(monkeypatch, 0.0625, tolerance=1e-4, value=1000.0)  # fp32's atol + rtol * 1000 is 0.1
    assert comparison["max_abs_diff"] == 0.0625 and comparison["within_tolerance"] is False


def test_the_judgement_is_numeric_compare_runs_and_compare_arrays(monkeypatch):
    calls, runs, arrays = [], numeric.compare_runs, numeric.compare_arrays
    monkeypatch.setattr(numeric, "compare_runs", lambda ref, got, images, atol, rtol, batch: calls.append(
        ("runs", atol, rtol)) or runs(ref, got, images, atol, rtol, batch=batch))
    monkeypatch.setattr(numeric, "compare_arrays", lambda ref, got, atol, rtol: calls.append(("arrays", atol, rtol)) or
                        arrays(ref, got, atol, rtol))
    compare(monkeypatch, 0.0, tolerance=3e-4)
    assert calls == [("runs", 3e-4, 0.0), ("arrays", 3e-4, 0.0)]  # one batch of all the images


def test_non_finite_outputs_fail(monkeypatch):
    with pytest.raises(StageFailed, match="non-finite outputs on test images"):
        compare(monkeypatch, np.nan)
