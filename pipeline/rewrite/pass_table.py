"""The pass table and the decorator that fills it (``@rewrite_pass``); the pass modules import this,
never the package, so that pipeline.rewrite can load them (``registry()``) without a circle."""

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
