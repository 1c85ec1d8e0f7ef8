"""rewrite: make the frozen graph deployable with rewrite passes, each checked on real inputs."""

from pipeline.errors import EXIT_NOT_DEPLOYABLE, DeployError
from pipeline.stages import stage


@stage("rewrite", inputs={"frozen_graph": "freeze", "io": "freeze"},
       outputs={"frozen_graph": "frozen.pb", "io": "io.json", "receipt": "rewrite.json"},
       version=1, uses=("target", "dataset"), tools=("tensorflow",))
def rewrite(ctx):
    """Apply the configured passes (or --auto's), compare outputs after each, check the result."""
    from pipeline.check.report import recommendation
    from pipeline.data.dataset import image_folder
    from pipeline.rewrite.command import rewrite_model

    opts = ctx.options
    dataset = image_folder(ctx.config)
    options = {name: dict(values) for name, values in opts.options.items()}
    if opts.checkpoint:
        options.setdefault("bn_inference", {})["checkpoint"] = opts.checkpoint
    graph, io, summary, report = rewrite_model(
        ctx.inputs["frozen_graph"], ctx.target, opts.passes, opts.auto, options, opts.reference, dataset,
        opts.samples, opts.tolerance, ctx.progress, dataset_asked=False)
    with open(str(ctx.output("frozen_graph")), "wb") as f:
        f.write(graph.serialize())
    from pipeline.graph.io import write_io_json

    write_io_json(ctx.output("io"), io, final_newline=False)
    from pipeline import records

    records.write(ctx.output("receipt"), summary, "rewrite")  # schema deploy.rewrite/1 (pipeline.records)
    if not report.deployable:
        raise DeployError("after rewrite the model still does not convert for {}: {}; {}".format(
            ctx.target.name, recommendation(report), _next_step(opts, ctx.inputs["frozen_graph"], ctx.target.name)),
            code=EXIT_NOT_DEPLOYABLE)
    applied = [p["pass"] for p in summary["passes"] if p["sites"]]
    return {
        "summary": "{}; {}".format(", ".join(applied) if applied else "no pass changed anything", recommendation(report)),
        "passes": [{"pass": p["pass"], "sites": len(p["sites"]), "ops": p["ops"]} for p in summary["passes"]],
        "nodes": summary["nodes"],
    }


def _next_step(opts, frozen, target):
    """What to do after a rewrite that left the model not deployable."""
    if not opts.auto:
        return ("apply the fixes deploy check names: stages.rewrite.auto: true (with stages.rewrite.checkpoint: the "
                "training checkpoint, where bn_inference needs batch norm's moving statistics), or list passes in "
                "stages.rewrite.passes")
    return ("what is left and its fix: deploy rewrite {} --target {} --auto -o rewritten.pb, then deploy check "
            "rewritten.pb --target {}".format(frozen, target, target))
