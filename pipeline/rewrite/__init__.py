"""Rewrite passes: small functions registered by name that make a graph deployable.

    @rewrite_pass("strip_dropout", changes_behaviour=True)
    def strip_dropout(graph, options):     # kind="tf": graph is a TFGraph, changed in place
        ...
        return ["dropout/mul"]             # the sites it changed ([] = nothing to do)

    @rewrite_pass("lower_opset", kind="onnx")
    def lower_opset(model, options):       # kind="onnx": an onnx.ModelProto, never edited in place
        return new_model, sites

One registry for both kinds. The order passes run in when several are chosen (``order(kind)``),
``deploy rewrite --help``, the config's validation and the pass tables in docs/rewrite.md are all
made from it (``registry(kind)``; the table and the decorator are
``pipeline.rewrite.pass_table``): passes register in the order of ``pipeline/rewrite/passes/`` (shapes, training
mode, clean-ups, folding, substitutions, ONNX), each module in definition order.

The pass runner (``pipeline.rewrite.engine``), not the pass, prunes to the outputs, keeps the
output names, counts ops before and after, runs the numeric check and writes the receipt.
"""

from pipeline.rewrite.pass_table import KINDS, PASSES, Pass, rewrite_pass

__all__ = ["KINDS", "Pass", "rewrite_pass", "registry", "order"]


def registry(kind="tf"):
    """The registered passes of ``kind`` ("tf", "onnx"; None: all) by name, in run order.
    Imports the pass modules (nothing heavy: onnx and TensorFlow load when a pass runs)."""
    from pipeline.rewrite import passes  # noqa: F401 - registers

    return {name: p for name, p in PASSES.items() if kind is None or p.kind == kind}


def order(kind="tf"):
    """Pass names of ``kind`` in the order they run when several are chosen (--auto)."""
    return tuple(registry(kind))
