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

    def rewrite_model(model, target, passes, auto, options, reference, folder, *rest):
        seen.update(model=model, dataset=folder, options=options)
        raise _Called()

    monkeypatch.setattr(command, "rewrite_model", rewrite_model)
    config = types.SimpleNamespace(dataset=DatasetSection(path="images", format=fmt))
    ctx = types.SimpleNamespace(options=RewriteOptions(auto=True, checkpoint="ckpt"), config=config,
                                inputs={"frozen_graph": "frozen.pb"}, target=None, progress=None)
    with pytest.raises(_Called):
        rewrite(ctx)
    assert asked == [config] and seen["dataset"] == expected and seen["model"] == "frozen.pb"
    assert seen["options"] == {"bn_inference": {"checkpoint": "ckpt"}}
