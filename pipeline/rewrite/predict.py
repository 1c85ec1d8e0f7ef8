"""What `deploy rewrite --auto` would make of a graph that is NO as it is: a dry run in memory.

When every finding that makes the verdict NO has a rewrite pass that needs no option, the passes
`--auto` would pick (pipeline.rewrite.plan.auto_plan, dry run: passes that evaluate part of the graph
in TensorFlow are left out) are applied to a copy of the graph (no file written, nothing run) and the
graph is checked again:

    prediction = predict_rewrite("frozen.pb", target, report)
    # {"verdict": "YES", "passes": ["strip_dropout", "bn_inference"], "remaining": ""}

It is a prediction of the structure: `deploy rewrite` applies the same passes and checks the
numbers after each. The check verb and the check stage ask it of a NO (check_model(..., predict=predict_rewrite));
check/ never imports rewrite/.
"""

from pipeline.errors import DeployError
from pipeline.rewrite.plan import ROUNDS, auto_plan, blocking_findings


def predict_rewrite(path, target, report):
    """The dry run's outcome, or None when it does not apply (deployable already, not a frozen
    TensorFlow graph, or a finding no option-free pass fixes)."""
    from pipeline.rewrite import registry as pass_registry

    if report.deployable or report.model.get("kind") != "tensorflow" or report.model.get("format") not in ("frozen_pb", "pbtxt"):
        return None
    registry = pass_registry()
    blocking = blocking_findings(report)
    if not blocking or any(f.rewrite not in registry or registry[f.rewrite].needs for f in blocking):
        return None
    return _dry_run(path, target, registry)


def _dry_run(path, target, registry):
    from pipeline.check.checker import check_graph
    from pipeline.rewrite.apply import graph_io
    from pipeline.rewrite.tfgraph import TFGraph, view

    graph = TFGraph.load(path)
    outputs = [o["name"] for o in graph_io(graph, path)["outputs"]]
    applied, problems, report = [], [], None
    for _ in range(ROUNDS):
        report = check_graph(view(graph), target)
        names = [n for n in auto_plan(report, dry_run=True) if n not in applied]
        if not names:
            break
        for name in names:
            try:
                registry[name].func(graph, {"_outputs": outputs})
            except DeployError as e:
                problems.append(e.message)
            applied.append(name)
            graph.prune(outputs)
        report = None  # the graph changed
    if report is None:
        report = check_graph(view(graph), target)
    remaining = "; ".join(problems)
    if not report.deployable and not remaining:
        left = blocking_findings(report)
        remaining = "still: " + ", ".join(sorted({"{} ({})".format(f.op or f.kind, f.kind) for f in left}))
    return {"verdict": "YES" if report.deployable else "NO", "passes": applied, "remaining": remaining}
