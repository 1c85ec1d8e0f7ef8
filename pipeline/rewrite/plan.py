"""Which passes `--auto` applies: one rule for `deploy rewrite --auto` (TensorFlow and ONNX), the
rewrite stage's ``auto: true`` and `deploy check`'s "after `deploy rewrite --auto`" prediction.

    names = auto_plan(report)                     # a CheckReport in, pass names in run order out
    names = auto_plan(report, kind="onnx")
    names = auto_plan(report, dry_run=True)       # the prediction: no pass that runs the graph

The rule (docs/rewrite.md): every pass a finding of `deploy check` names as its fix, for a blocker,
an accepted-but-wrong subgraph or a batch-dependent op, on any route; passes that need options
(``cut``, ``set_input_shape``) are never guessed. A pure function of the report: nothing is read,
checked or run here. ``ROUNDS``: how often --auto applies passes and checks again at most.
"""

ROUNDS = 5


def auto_plan(report, kind="tf", dry_run=False):
    """The pass names of ``kind`` that --auto applies for ``report`` (a CheckReport), in run order.
    ``dry_run``: leave out the passes that evaluate part of the graph in TensorFlow."""
    from pipeline.rewrite import order, registry

    passes = registry(kind)
    findings = report.findings + [f for r in report.routes for f in r.findings + r.accepted_but_wrong]
    wanted = {f.rewrite for f in findings
              if f.rewrite in passes and not passes[f.rewrite].needs
              and (f.severity == "blocker" or f.batch_dependent or f.kind == "accepted_but_wrong")}
    return [n for n in order(kind) if n in wanted and not (dry_run and passes[n].runs_graph)]


def blocking_findings(report):
    """What makes the verdict NO on the recommended route: its blockers (own and graph-level) and
    what it accepts but runs wrong."""
    best = report.recommended
    if best is None:
        return []
    own = [f for f in best.findings if f.severity == "blocker"]
    common = [f for f in report.findings if f.severity == "blocker" and f.route in ("all", best.route)]
    return own + common + list(best.accepted_but_wrong)
