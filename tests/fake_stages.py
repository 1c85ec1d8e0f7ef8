"""Cheap stand-in stages for runner tests: same names as the real ones, instant, counting calls."""

import os
import time

from pipeline.errors import StageFailed
from pipeline.stages import Stage

CALLS = []


def _train(ctx):
    CALLS.append("train")
    (ctx.out_dir / "model.txt").write_text("model epochs={}".format(ctx.options.epochs))
    if os.environ.get("FAKE_TRAIN_SLEEP"):
        (ctx.out_dir / "started").write_text("1")
        time.sleep(float(os.environ["FAKE_TRAIN_SLEEP"]))
    return {"summary": "acc 1.0", "epochs": ctx.options.epochs}


def _export(ctx):
    CALLS.append("export")
    text = ctx.inputs["keras_model"].read_text()
    if "fail" in ctx.options.input_name:
        raise StageFailed("export failed on purpose")
    (ctx.out_dir / "saved").mkdir()
    (ctx.out_dir / "saved" / "graph.txt").write_text(text.upper() + ctx.options.input_name)
    return {"summary": "exported"}


def _freeze(ctx):
    CALLS.append("freeze")
    (ctx.out_dir / "frozen.txt").write_text((ctx.inputs["saved_model"] / "graph.txt").read_text())
    return {"summary": "frozen"}


def _convert(ctx):
    CALLS.append("convert")
    (ctx.out_dir / "model.onnx").write_text("onnx")
    return {"summary": "converted"}


def _engine(ctx):
    CALLS.append("engine")
    return {}


STAGES = {
    "train": Stage("train", _train, {}, {"keras_model": "model.txt"}, uses=("model",)),
    "export": Stage("export", _export, {"keras_model": "train"}, {"saved_model": "saved"}),
    "freeze": Stage("freeze", _freeze, {"saved_model": "export"}, {"frozen_graph": "frozen.txt"}, tools=("tensorflow",)),
    "convert": Stage("convert", _convert, {"frozen_graph": "freeze"}, {"onnx": "model.onnx"}, uses=("target",)),
    "engine": Stage("engine", _engine, {"onnx": "convert"}, {"engine": "model.engine"},
                    pending_reason=lambda ctx: "no TensorRT here"),
    "benchmark": Stage("benchmark", _engine, {"engine": "engine"}, {"benchmark": "b.json"}),
}


def install():
    """Point the runner at the fake stages (for a subprocess: `python -c 'import fake_stages; ...'`)."""
    import pipeline.runner

    pipeline.runner.registry = lambda: STAGES
