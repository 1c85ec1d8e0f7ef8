"""Rewrite passes: small functions registered by name that make a graph deployable.

    @rewrite_pass("strip_dropout", changes_behaviour=True)
    def strip_dropout(graph, options):     # graph: TFGraph
        ...
        return ["dropout/mul"]             # the sites it changed ([] = nothing to do)

The pass runner (``pipeline.rewrite.apply``), not the pass, prunes to the outputs, keeps the
output names, counts ops before and after, runs the numeric check and writes the receipt.
"""

from dataclasses import dataclass, field
from typing import Callable, Dict, Tuple

# The order passes run in when several are chosen (--auto, or a config listing them out of order
# is kept as listed): behaviour-changing clean-ups first, then simplifications, then substitutions.
CANONICAL_ORDER = ("cut", "set_input_shape", "strip_dropout", "bn_inference", "remove_identity", "prune",
                   "fold_constants", "fold_batchnorm", "fold_pad", "drop_noop_cast", "substitute_activations",
                   "uff_compat")


@dataclass
class Pass:
    name: str
    func: Callable
    changes_behaviour: bool  # compared with the inference-mode reference, not with the graph before it
    needs: Tuple[str, ...] = ()  # option keys it cannot run without (never applied by --auto)
    doc: str = ""
    runs_graph: bool = False  # evaluates part of the graph in TensorFlow (a dry run, as in deploy check, skips it)
    accepts: Tuple[str, ...] = ()  # option keys it reads (stages.rewrite.options.<pass>.<key>; validated)
    options: Dict = field(default_factory=dict)


PASSES: Dict[str, Pass] = {}


def rewrite_pass(name, changes_behaviour=False, needs=(), runs_graph=False, accepts=()):
    def register(func):
        doc = (func.__doc__ or "").strip().splitlines()
        PASSES[name] = Pass(name, func, changes_behaviour, tuple(needs), doc[0] if doc else "", runs_graph=runs_graph,
                            accepts=tuple(needs) + tuple(a for a in accepts if a not in needs))
        return func

    return register


def passes():
    """Every registered TensorFlow pass by name (imports the pass modules; nothing heavy)."""
    import pipeline.rewrite.tf_passes  # noqa: F401 - registers

    return PASSES
