"""check: will the frozen graph convert for the target? The same check as `deploy check`."""

from pipeline.errors import EXIT_NOT_DEPLOYABLE, DeployError
from pipeline.stages import stage


@stage("check", inputs={"frozen_graph": "freeze"}, outputs={"report": "check.json", "markdown": "check.md"},
       version=1, uses=("target",), tools=("tf2onnx", "onnx"))
def check(ctx):
    """Check the frozen graph against the target's op tables; stop on blockers unless told not to."""
    import json

    from pipeline.check import check_model
    from pipeline.check.report import format_markdown, format_text, recommendation

    report = check_model(ctx.inputs["frozen_graph"], ctx.target, routes=ctx.options.routes)
    with open(str(ctx.output("report")), "w") as f:
        json.dump(report.to_dict(), f, indent=2, sort_keys=True)
    with open(str(ctx.output("markdown")), "w") as f:
        f.write(format_markdown(report))
    summary = recommendation(report)
    rewrite_follows = ctx.config.stages.rewrite is not None
    if not report.deployable and ctx.options.on_blockers == "fail" and not rewrite_follows:
        ctx.progress.log(format_text(report))
        raise DeployError("the model does not convert for {}: {} (stages.check.on_blockers: continue to go on)".format(
            ctx.target.name, summary), code=EXIT_NOT_DEPLOYABLE)
    best = report.recommended
    return {
        "summary": ("recommended " if report.deployable else "NOT deployable; ") + summary,
        "deployable": report.deployable,
        "recommended_route": best.route if best else None,
        "blockers": {r.route: report.total_blockers(r.route) for r in report.routes if r.applicable},
    }
