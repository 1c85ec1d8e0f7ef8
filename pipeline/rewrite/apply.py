"""TensorFlow graphs through the pass runner (pipeline.rewrite.engine): their inputs and
outputs, the passes to apply, and ``--auto`` (apply what ``deploy check`` names, check again).
"""

from pipeline.rewrite import order, registry
from pipeline.rewrite.engine import TFSubject, check_names, run_passes


def graph_io(graph, path, outputs=None):
    """The TFGraph's inputs and outputs by pipeline.graph.io's rule (``outputs``, the io.json beside
    ``path``, else Placeholders in and sinks out)."""
    from pipeline.graph.io import graph_io as io_of

    return io_of(graph.graph_def, path, outputs)


def apply_passes(graph, io, names, options, samples, tolerance=1e-4, reference=None, progress=None):
    """Apply the TensorFlow passes ``names`` in order to ``graph`` (a TFGraph, changed in place);
    return the receipt. ``reference``: a TFGraph of the inference-mode network (see engine)."""
    check_names(names, "tf")
    subject = TFSubject(graph, io, samples)
    ref_outputs = subject.run(graph=reference) if reference is not None else None
    return run_passes(subject, list(names), options, tolerance, ref_outputs, progress)


def auto_passes(graph, target):
    """The passes `deploy check` names as fixes for this graph's findings, runnable without options."""
    from pipeline.check import check_graph
    from pipeline.rewrite.tfgraph import view

    report = check_graph(view(graph), target)
    passes = registry("tf")
    wanted = set()
    findings = report.findings + [f for r in report.routes for f in r.findings + r.accepted_but_wrong]
    for f in findings:
        if f.rewrite in passes and not passes[f.rewrite].needs and (f.severity == "blocker" or f.batch_dependent
                                                                       or f.kind == "accepted_but_wrong"):
            wanted.add(f.rewrite)
    return [n for n in order("tf") if n in wanted], report


def rewrite_auto(graph, io, target, options, samples, tolerance=1e-4, reference=None, progress=None, rounds=5):
    """Apply every pass a finding of `deploy check` names, check again, repeat until nothing applies."""
    receipt, applied = [], []
    for _ in range(rounds):
        names, report = auto_passes(graph, target)
        names = [n for n in names if n not in applied]
        if not names:
            return receipt, report
        receipt += apply_passes(graph, io, names, options, samples, tolerance, reference, progress)
        applied += names
    return receipt, auto_passes(graph, target)[1]
