"""`deploy rewrite` and the rewrite stage: load, choose passes, apply, check again, write."""

import json

from pipeline.errors import EXIT_NOT_DEPLOYABLE, DeployError
from pipeline.files import write_bytes, write_text


def sample_inputs(graph, io, dataset=None, count=4, seed=0):
    """Real images from an image folder when given, else seeded random pixels, at the input's size."""
    import numpy as np

    node = graph.node(io["inputs"][0]["name"])
    shape = graph.attr(node, "shape")
    if not shape or len(shape) != 4 or any(d is None or d < 0 for d in shape[1:]):
        raise DeployError("input {} has shape {}; the numeric checks need a fixed-size NHWC input "
                          "(apply set_input_shape first)".format(node.name, shape))
    if dataset:
        from pipeline.data.folder import index_image_folder, load_images

        index = index_image_folder(dataset, verify=False)
        paths = [p for p, _ in index.val + index.train][:count]
        return load_images(paths, (shape[1], shape[2])), "dataset {} ({} images)".format(dataset, len(paths))
    rng = np.random.RandomState(seed)
    return rng.uniform(0, 255, size=(count, shape[1], shape[2], shape[3])).astype("float32"), "random (seed {})".format(seed)


def rewrite_model(model, target, pass_names=(), auto=False, options=None, reference=None, dataset=None,
                  samples=4, tolerance=1e-4, progress=None, outputs=None):
    """Returns (TFGraph, io, receipt dict). ``reference``: path of an inference-mode frozen graph."""
    from pipeline.check import check_graph
    from pipeline.rewrite.apply import apply_passes, graph_io, rewrite_auto
    from pipeline.rewrite.tf_passes import view
    from pipeline.rewrite.tfgraph import TFGraph

    if str(model).endswith(".onnx"):
        raise DeployError("{}: deploy rewrite works on frozen TensorFlow graphs (.pb/.pbtxt) for now".format(model))
    graph = TFGraph.load(model)
    io = graph_io(graph, model, outputs)
    ref = TFGraph.load(reference) if reference else None
    images, source = sample_inputs(graph, io, dataset, samples)
    before = check_graph(view(graph), target)
    nodes_before = len(graph.graph_def.node)
    options = options or {}
    receipt = apply_passes(graph, io, list(pass_names), options, images, tolerance, ref, progress) if pass_names else []
    if auto:
        more, _ = rewrite_auto(graph, io, target, options, images, tolerance, ref, progress)
        receipt += more
    after = check_graph(view(graph), target)
    summary = {
        "model": str(model),
        "target": target.name,
        "inputs": source,
        "reference": str(reference) if reference else None,
        "passes": receipt,
        "nodes": {"before": nodes_before, "after": len(graph.graph_def.node)},
        "check_before": _verdict(before),
        "check_after": _verdict(after),
        "io": io,
    }
    return graph, io, summary, after


def _verdict(report):
    best = report.recommended
    return {"deployable": report.deployable, "recommended": best.route if best else None,
            "blockers": {r.route: report.total_blockers(r.route) for r in report.routes if r.applicable}}


def write_outputs(graph, io, summary, out):
    """OUT (frozen graph), OUT's io.json and rewrite.json beside it, each written atomically."""
    from pathlib import Path

    out = Path(out)
    if out.suffix not in (".pb",):
        raise DeployError("-o {}: the rewritten graph is a frozen .pb; name it *.pb".format(out))
    if not out.parent.exists():
        raise DeployError("-o {}: directory {} does not exist".format(out, out.parent))
    write_bytes(out, graph.serialize())
    write_text(out.with_name(out.stem + ".io.json"), json.dumps(io, indent=2, sort_keys=True) + "\n")
    write_text(out.with_name(out.stem + ".rewrite.json"), json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")


def exit_code(report):
    return 0 if report.deployable else EXIT_NOT_DEPLOYABLE
