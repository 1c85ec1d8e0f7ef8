"""The conversion routes by name: plain data, no pydantic, so that a reader of a check report (the answer
cache's hit, pipeline.check.findings) need not import the device schema (pipeline.targets.device)."""

ROUTES = ("uff", "onnx", "tftrt")  # UFF parser, ONNX parser, TF-TRT
RUNNABLE_ROUTES = ("onnx", "uff")  # the routes deploy run builds an engine from (stages.convert.format)
