"""freeze: variables to constants, pruned to the inference outputs, with deterministic names."""

from pipeline.stages import stage


@stage("freeze", inputs={"saved_model": "export"}, outputs={"frozen_graph": "frozen.pb", "io": "io.json"}, version=1,
       tools=("tensorflow",))
def freeze(ctx):
    """Freeze the SavedModel's serving signature into frozen.pb and describe its tensors in io.json."""
    from collections import Counter

    from pipeline.graph.io import write_io_json
    from pipeline.tf.freeze import freeze_saved_model, write_graph_def

    graph_def, io = freeze_saved_model(ctx.inputs["saved_model"])
    write_graph_def(graph_def, ctx.output("frozen_graph"))
    for entry in io["inputs"] + io["outputs"]:
        entry["tensor"] = entry["name"] + ":0"
    write_io_json(ctx.output("io"), io, final_newline=False)
    ops = Counter(n.op for n in graph_def.node)
    return {
        "summary": "{} nodes, {} weights".format(len(graph_def.node), ops.get("Const", 0)),
        "nodes": len(graph_def.node),
        "ops": dict(sorted(ops.items())),
        "inputs": [i["tensor"] for i in io["inputs"]],
        "outputs": [o["tensor"] for o in io["outputs"]],
    }
