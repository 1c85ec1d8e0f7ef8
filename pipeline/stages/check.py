"""check: will the frozen graph convert for the target? The same check as `deploy check`.

tf2onnx runs once in `deploy run` where it can: the convert stage converts right after this one, so
the check predicts the onnx route (`deploy check --no-convert`: "predicted, tf2onnx not run", said
in the summary) and a YES goes on to the real conversion. A NO stops the run, so before stopping
the check asks tf2onnx itself (where TensorFlow and tf2onnx are installed): a run is never stopped
on a prediction stricter than the converter (the prediction is never YES where the conversion is
NO; it can be NO where tf2onnx converts, e.g. a dynamic LSTM's TensorArrays). The summary says which.
"""

from pipeline.errors import EXIT_NOT_DEPLOYABLE, DeployError
from pipeline.stages import stage


@stage("check", inputs={"frozen_graph": "freeze"}, outputs={"report": "check.json", "markdown": "check.md"},
       version=2, uses=("target",), tools=("tf2onnx", "onnx"))
def check(ctx):
    """Check the frozen graph against the target's op tables; stop on blockers unless told not to."""
    from pipeline import records
    from pipeline.check import check_model, convert_probe
    from pipeline.check.findings import CONVERTED, PREDICTED
    from pipeline.check.report import format_markdown, format_text, recommendation

    from pipeline.rewrite.predict import predict_rewrite

    frozen = ctx.inputs["frozen_graph"]
    report = check_model(frozen, ctx.target, routes=ctx.options.routes, convert=False)
    onnx = _onnx_route(report)
    if not report.deployable and onnx is not None and onnx.basis == PREDICTED and convert_probe.available():
        report = check_model(frozen, ctx.target, routes=ctx.options.routes)  # tf2onnx decides
        onnx = _onnx_route(report)
    if not report.deployable:  # what `deploy rewrite --auto` would make of it, asked once, of the last report
        report.prediction = predict_rewrite(frozen, ctx.target, report)
    records.write(ctx.output("report"), report.to_dict(), "check")
    with open(str(ctx.output("markdown")), "w") as f:
        f.write(format_markdown(report))
    summary = recommendation(report)
    if onnx is not None and onnx.basis == PREDICTED:
        summary += "; onnx route predicted, tf2onnx not run (the convert stage runs it next)"
    elif onnx is not None and onnx.basis == CONVERTED:
        summary += "; onnx route judged on tf2onnx's real output (converted here: the prediction said NO)"
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
        "onnx_basis": onnx.basis if onnx is not None else None,
        "blockers": {r.route: report.total_blockers(r.route) for r in report.routes if r.applicable},
    }


def _onnx_route(report):
    return next((r for r in report.routes if r.route == "onnx" and r.applicable), None)
