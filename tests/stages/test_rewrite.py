"""The rewrite stage is glue: its dataset is the config's image folder as pipeline.data.dataset.image_folder
says (the one rule, shared with the numeric samples). No TF: the library call is replaced."""

import types

import pytest

from pipeline.config.schema import DatasetSection, RewriteOptions


class _Called(Exception):
    pass


@pytest.mark.parametrize("fmt, expected", [("folder", "images"), ("tfrecord", None)])
def test_the_stage_hands_rewrite_the_image_folder(monkeypatch, fmt, expected):
    import pipeline.data.dataset as dataset
    import pipeline.rewrite.command as command
    from pipeline.stages.rewrite import rewrite

    asked, seen = [], {}
    real = dataset.image_folder
    monkeypatch.setattr(dataset, "image_folder", lambda config: asked.append(config) or real(config))

    def rewrite_model(model, target, passes, auto, options, reference, folder, *rest, dataset_asked=True):
        seen.update(model=model, dataset=folder, options=options, asked=dataset_asked)
        raise _Called()

    monkeypatch.setattr(command, "rewrite_model", rewrite_model)
    config = types.SimpleNamespace(dataset=DatasetSection(path="images", format=fmt))
    ctx = types.SimpleNamespace(options=RewriteOptions(auto=True, checkpoint="ckpt"), config=config,
                                inputs={"frozen_graph": "frozen.pb"}, target=None, progress=None)
    with pytest.raises(_Called):
        rewrite(ctx)
    assert asked == [config] and seen["dataset"] == expected and seen["model"] == "frozen.pb"
    assert seen["options"] == {"bn_inference": {"checkpoint": "ckpt"}}
    assert seen["asked"] is False  # the config's dataset is there for every stage: a model without images ignores it


@pytest.mark.parametrize("auto, words", [
    (False, "apply the fixes deploy check names: stages.rewrite.auto: true (with stages.rewrite.checkpoint"),
    (True, "deploy rewrite runs/x/freeze/frozen.pb --target jetson_tx2 --auto -o rewritten.pb, then deploy check "
           "rewritten.pb --target jetson_tx2")])
def test_a_rewrite_that_leaves_the_model_not_deployable_says_what_to_do_next(monkeypatch, tmp_path, auto, words):
    """The stage's failure ends with the next step: auto (and the checkpoint) when it was off, else the check."""
    import pipeline.check.report as check_report
    import pipeline.rewrite.command as command
    from pipeline.errors import EXIT_NOT_DEPLOYABLE, DeployError
    from pipeline.stages.rewrite import rewrite

    class Graph:
        def serialize(self):
            return b""

    summary = {"passes": [], "nodes": 3}
    monkeypatch.setattr(command, "rewrite_model", lambda *a, **k: (Graph(), {"inputs": [], "outputs": []}, summary,
                                                               types.SimpleNamespace(deployable=False)))
    monkeypatch.setattr(check_report, "recommendation", lambda report: "onnx at opset 13: 2 accepted but wrong")
    outputs = {"frozen_graph": tmp_path / "frozen.pb", "io": tmp_path / "io.json", "receipt": tmp_path / "r.json"}
    ctx = types.SimpleNamespace(options=RewriteOptions(auto=auto), config=types.SimpleNamespace(dataset=None),
                                inputs={"frozen_graph": "runs/x/freeze/frozen.pb"}, target=types.SimpleNamespace(
                                    name="jetson_tx2"), progress=None, output=outputs.get)
    monkeypatch.setattr("pipeline.records.write", lambda *a, **k: None)
    with pytest.raises(DeployError) as e:
        rewrite(ctx)
    assert e.value.code == EXIT_NOT_DEPLOYABLE
    assert e.value.message.startswith("after rewrite the model still does not convert for jetson_tx2: onnx at opset "
                                      "13: 2 accepted but wrong; ")
    assert words in e.value.message
