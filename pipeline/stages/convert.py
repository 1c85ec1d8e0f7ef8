"""convert: frozen graph to ONNX with tf2onnx at the target's opset, checked and compared with TF.

The work is ``pipeline.convert``'s; this stage turns the config into its arguments and its results into
model.onnx and comparison.json.
"""

from pipeline import records
from pipeline.convert import choose_opset, compare_with_tf, converter_max_opset, image_size, to_onnx
from pipeline.errors import StageFailed
from pipeline.stages import stage


@stage(
    "convert",
    inputs={"frozen_graph": "freeze", "io": "freeze"},
    outputs={"onnx": "model.onnx", "comparison": "comparison.json"},
    version=2,
    uses=("target", "dataset"),
    tools=("tensorflow", "tf2onnx", "onnx", "onnxruntime"),
)
def convert(ctx):
    """Convert to ONNX (tf2onnx), run onnx.checker, compare with TensorFlow on dataset images."""
    opset = choose_opset(ctx.options.opset, ctx.target, converter_max_opset())
    from pipeline.graph.io import graph_io, read_io_json
    from pipeline.tf.graph import load_graph_def

    frozen = ctx.inputs["frozen_graph"]
    graph_def = load_graph_def(frozen)
    io = read_io_json(ctx.inputs["io"]) if "io" in ctx.inputs else graph_io(graph_def, frozen)
    from pipeline.tf.screen import screen_graph

    # tf2onnx's grappler pass evaluates constant subgraphs: screen before it sees the graph
    screen_graph(graph_def, frozen, outputs=[o["name"] for o in io["outputs"]])
    model = to_onnx(graph_def, io, opset)
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as e:
        raise StageFailed("onnx.checker rejects the converted model: {}".format(str(e).splitlines()[0]))
    onnx.save(model, str(ctx.output("onnx")))
    from pipeline.data.dataset import dataset_samples

    from pipeline.graph.io import image_input

    size = image_size(io, frozen, ctx.target.name)
    images, source = dataset_samples(ctx.config, ctx.options.compare_samples, size, image_input(io["inputs"])[3])
    comparison = compare_with_tf(graph_def, io, ctx.output("onnx"), images, source=source,
                                 tolerance=ctx.options.tolerance, frozen_graph=frozen)
    if not comparison["within_tolerance"]:
        from pipeline.convert.mismatch import explain_mismatch

        comparison["why"] = explain_mismatch(frozen, graph_def, io, model, images, ctx.options.tolerance)
    records.write(ctx.output("comparison"), comparison, "conversion")
    if not comparison["within_tolerance"]:
        raise StageFailed(
            "ONNX Runtime and TensorFlow outputs differ by {:.3g} (> stages.convert.tolerance {:g}) on {}{}".format(
                comparison["max_abs_diff"], ctx.options.tolerance, comparison["inputs"],
                ": " + comparison["why"] if comparison["why"] else ""))
    ops = sorted({n.op_type for n in model.graph.node})
    return {
        "summary": "opset {}, {} nodes, max diff {:.2g}".format(opset, len(model.graph.node), comparison["max_abs_diff"]),
        "opset": opset,
        "nodes": len(model.graph.node),
        "op_types": ops,
        "max_abs_diff": comparison["max_abs_diff"],
    }
