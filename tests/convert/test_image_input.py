"""deploy run's convert stage compares through one NHWC image input; a model without one stops there with the way
on by hand (deploy check prints tf2onnx's and trtexec's commands), not a bare refusal."""

import pytest

from pipeline.convert import image_size
from pipeline.errors import DeployError


def test_two_inputs_or_a_signal_stop_convert_with_the_way_by_hand(monkeypatch):
    import pipeline.check.patterns as patterns

    monkeypatch.setattr(patterns, "keep_prob_input", lambda frozen, names: None)
    two = {"inputs": [{"name": "boxes:0", "shape": [100, 4]}, {"name": "scores:0", "shape": [100]}]}
    with pytest.raises(DeployError) as e:
        image_size(two, "runs/x/freeze/frozen.pb", "jetson_tx2")
    assert e.value.message == (
        "convert compares models with one image input; this graph has 2 (boxes:0, scores:0): deploy run takes image "
        "models; deploy check runs/x/freeze/frozen.pb --target jetson_tx2 prints the tf2onnx and trtexec commands that "
        "take this one to an engine")
    with pytest.raises(DeployError, match=r"input audio:0 has shape \[None, 128\]; convert needs a fixed-size NHWC "
                                          r"image input: deploy run takes image models; deploy check f.pb"):
        image_size({"inputs": [{"name": "audio:0", "shape": [None, 128]}]}, "f.pb")
    assert image_size({"inputs": [{"name": "x:0", "shape": [None, 96, 80, 3]}]}, "f.pb") == (96, 80)
