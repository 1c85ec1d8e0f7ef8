"""`deploy check`: will this model convert for this Jetson? From the target's op tables, and from
tf2onnx's real output when TensorFlow and tf2onnx are installed.

    report = check_model("frozen.pb", load_target("jetson_tx2"))
    report.deployable, report.recommended.route, report.to_dict()
    check_model("frozen.pb", target, convert=False)   # the offline prediction only

Reading .pb, .pbtxt, SavedModels, .meta and .onnx imports no TensorFlow, and nothing in the graph
runs: the onnx route of a frozen graph is converted by tf2onnx in a subprocess after the convert
stage's screening (pipeline.check.convert_probe), or predicted when tf2onnx is not installed.

The package's face: the checker is pipeline.check.checker (check_graph: a Graph view in), the file
reader pipeline.check.model (check_model); the rules live in the modules beside them.
"""

import importlib

# Re-exported lazily (PEP 562): importing one module of the package (the answer cache, the zoo) does not
# import the checker, the graph readers and the target schema (pydantic) a re-check from the cache never uses.
_WHERE = {"check_graph": "checker", "custom_ops": "checker", "CheckReport": "findings", "Finding": "findings",
          "RouteResult": "findings", "check_model": "model"}
__all__ = ["check_model", "check_graph", "custom_ops", "CheckReport", "Finding", "RouteResult"]


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))
    return getattr(importlib.import_module("pipeline.check." + _WHERE[name]), name)
