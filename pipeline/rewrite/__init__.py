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
made from it (``registry(kind)``): passes register in the order of ``pipeline/rewrite/passes/`` (shapes, training
mode, clean-ups, folding, substitutions, ONNX), each module in definition order.

The pass runner (``pipeline.rewrite.engine``), not the pass, prunes to the outputs, keeps the
output names, counts ops before and after, runs the numeric check and writes the receipt.
"""

from dataclasses import dataclass
from typing import Callable, Dict, Tuple

KINDS = {"tf": "TensorFlow frozen graphs", "onnx": "ONNX models"}


@dataclass
class Pass:
    name: str
    func: Callable
    changes_behaviour: bool  # compared with the inference-mode reference, not with the graph before it
    needs: Tuple[str, ...] = ()  # option keys it cannot run without (never applied by --auto)
    doc: str = ""  # the first line of its docstring (--help, receipts)
    runs_graph: bool = False  # evaluates part of the graph in TensorFlow (a dry run, as in deploy check, skips it)
    accepts: Tuple[str, ...] = ()  # option keys it reads (stages.rewrite.options.<pass>.<key>; validated)
    kind: str = "tf"  # "tf" | "onnx": what it rewrites (see the module doc)
    description: str = ""  # its docstring's first paragraph (the docs' pass tables)


PASSES: Dict[str, Pass] = {}


def rewrite_pass(name, kind="tf", changes_behaviour=False, needs=(), runs_graph=False, accepts=()):
    if kind not in KINDS:
        raise ValueError("rewrite pass {}: kind must be one of {}".format(name, ", ".join(KINDS)))

    def register(func):
        text = (func.__doc__ or "").strip()
        paragraph = " ".join(text.split("\n\n")[0].split())
        PASSES[name] = Pass(name, func, changes_behaviour, tuple(needs), text.splitlines()[0] if text else "",
                            runs_graph=runs_graph, accepts=tuple(needs) + tuple(a for a in accepts if a not in needs),
                            kind=kind, description=paragraph)
        return func

    return register


def registry(kind="tf"):
    """The registered passes of ``kind`` ("tf", "onnx"; None: all) by name, in run order.
    Imports the pass modules (nothing heavy: onnx and TensorFlow load when a pass runs)."""
    import pipeline.rewrite.passes  # noqa: F401 - registers

    return {name: p for name, p in PASSES.items() if kind is None or p.kind == kind}


def order(kind="tf"):
    """Pass names of ``kind`` in the order they run when several are chosen (--auto)."""
    return tuple(registry(kind))
