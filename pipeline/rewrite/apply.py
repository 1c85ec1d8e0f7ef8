"""TensorFlow graphs through the pass runner (pipeline.rewrite.engine): their inputs and
outputs, the passes to apply, and ``--auto``'s loop (apply what pipeline.rewrite.plan picks from
``deploy check``'s report, check again).
"""

from pipeline.rewrite.engine import TFSubject, check_names, run_passes
from pipeline.rewrite.plan import ROUNDS, auto_plan


def graph_io(graph, path, outputs=None):
    """The TFGraph's inputs and outputs by pipeline.graph.io's rule (``outputs``, the io.json beside
    ``path``, else Placeholders in and sinks out)."""
    from pipeline.graph.io import graph_io as io_of

    return io_of(graph.graph_def, path, outputs)


def apply_passes(graph, io, names, options, samples, tolerance=1e-4, reference=None, progress=None):
    """Apply the TensorFlow passes ``names`` in order to ``graph`` (a TFGraph, changed in place);
    return the receipt. ``samples``: a pipeline.rewrite.feed.Feed (or the first input's array);
    ``reference``: a TFGraph of the inference-mode network (see engine)."""
    check_names(names, "tf")
    arrays, skipped = (samples.arrays, samples.skipped) if hasattr(samples, "skipped") else (samples, None)
    subject = TFSubject(graph, io, arrays, skipped)
    ref_outputs = subject.run(graph=reference) if reference is not None and not skipped else None
    return run_passes(subject, list(names), options, tolerance, ref_outputs, progress)


def auto_passes(graph, target):
    """(the passes --auto applies to this graph now (pipeline.rewrite.plan), its CheckReport)."""
    from pipeline.check.checker import check_graph
    from pipeline.rewrite.tfgraph import view

    report = check_graph(view(graph), target)
    return auto_plan(report), report


def rewrite_auto(graph, io, target, options, samples, tolerance=1e-4, reference=None, progress=None, rounds=ROUNDS,
                 report=None):
    """Apply every pass a finding of `deploy check` names, check again, repeat until nothing applies.
    ``report``: the graph's CheckReport as it is now, when the caller has it (not checked again).
    Returns (receipt, the CheckReport of the graph as it is at the end)."""
    from pipeline.progress import Progress

    progress = progress or Progress("quiet")

    def check_again():
        with progress.step("rewrite: checking it again for {}".format(target.name)):
            return auto_passes(graph, target)

    receipt, applied = [], []
    for _ in range(rounds):
        names, report = (auto_plan(report), report) if report is not None else check_again()
        names = [n for n in names if n not in applied]
        if not names:
            return receipt, report
        receipt += apply_passes(graph, io, names, options, samples, tolerance, reference, progress)
        applied += names
        report = None  # the graph changed
    return receipt, check_again()[1]
