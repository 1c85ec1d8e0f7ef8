"""Target facts: device files, op tables, the tf2onnx table, TensorRT plugins and op families.

Everything deploy knows about a Jetson is data under ``targets/`` (``DEPLOY_TARGETS_DIR`` moves it);
this package reads it. One directory resolver and one cached loader (``files``) serve them all:

    files.py      targets_dir(), op_tables_dir(), load_cached(path, parse), read_yaml(...)
    device.py     Target, load_target("jetson_tx2"), list_targets(), describe_target(...)
    optables.py   OpTable, load_op_table("onnx_trt_8.2")
    tf2onnx.py    load_tf2onnx_table(): what tf2onnx does with each TensorFlow op, per opset
    plugins.py    plugins_for("8.2.1"): TensorRT plugins per version
    families.py   families(), family_of(op), tensorflow_ops(): op families and the TF op registry

Imports only the standard library, PyYAML and pydantic.
"""

import importlib

# Re-exported lazily (PEP 562), so that importing one module of the package (say the tf2onnx table)
# does not import pydantic for the device schema.
_EXPORTS = {
    "device": ("LAST_TENSORRT_MAJOR_WITH_UFF", "OP_TABLE_KEYS", "PRECISIONS", "ROUTES", "RUNTIMES", "OnnxSupport",
               "Target", "all_targets", "describe_target", "format_target_list", "list_targets", "load_target"),
    "files": ("TARGETS_DIR", "TARGETS_DIR_ENV", "op_tables_dir", "targets_dir"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError("module 'pipeline.targets' has no attribute {!r}".format(name))
    return getattr(importlib.import_module("pipeline.targets." + _WHERE[name]), name)
