"""`deploy rewrite` and the rewrite stage: load, choose passes, apply, check again, write."""

from pathlib import Path

from pipeline import records
from pipeline.errors import EXIT_NOT_DEPLOYABLE, DeployError
from pipeline.files import write_bytes
from pipeline.graph.io import write_io_json


def sample_inputs(graph, io, dataset=None, count=4, seed=0, shape=None):
    """The numeric checks' samples (pipeline.rewrite.feed.check_feed: images for one NHWC image input,
    token ids or normal values otherwise) as (arrays, source text) for the first input; a DeployError when
    they cannot be made. The rewrite itself uses ``check_feed``, which also says when nothing can be compared."""
    from pipeline.rewrite.feed import check_feed

    feed = check_feed(graph, io, dataset, count, shape, seed)
    if feed.skipped:
        raise DeployError("the numeric checks cannot feed this graph: " + feed.skipped)
    return feed.arrays[io["inputs"][0]["name"]], feed.source


def rewrite_model(model, target, pass_names=(), auto=False, options=None, reference=None, dataset=None,
                  samples=4, tolerance=1e-4, progress=None, outputs=None, dataset_asked=True):
    """Returns (TFGraph, io, receipt dict, CheckReport after). ``reference``: path of an inference-mode
    frozen graph. --auto's passes: pipeline.rewrite.plan.auto_plan. ``dataset_asked``: check_feed's."""
    from pipeline.check.checker import check_graph
    from pipeline.rewrite.apply import apply_passes, graph_io, rewrite_auto
    from pipeline.rewrite.tfgraph import view
    from pipeline.rewrite.tfgraph import TFGraph

    if str(model).endswith(".onnx"):
        raise DeployError("{}: deploy rewrite works on frozen TensorFlow graphs (.pb/.pbtxt) for now".format(model))
    from pipeline.tf.screen import screen_graph

    from pipeline.progress import Progress

    progress = progress or Progress("quiet")
    with progress.step("rewrite {}: reading".format(model)):
        graph = TFGraph.load(model)
        options = options or {}
        pass_names, first = _cut_first(graph, list(pass_names), options)
        io = graph_io(graph, model, outputs)
        screen_graph(graph.graph_def, model, outputs=[o["name"] for o in io["outputs"]])  # before anything runs
        ref = TFGraph.load(reference) if reference else None
        from pipeline.rewrite.feed import check_feed

        shape = options.get("set_input_shape", {}) if "set_input_shape" in pass_names or auto else {}
        feed = check_feed(graph, io, dataset, samples,
                          (shape.get("input"), shape["shape"]) if shape.get("shape") else None,
                          dataset_asked=dataset_asked)
    with progress.step("rewrite: checking it for {} (before)".format(target.name)):
        before = check_graph(view(graph), target)
    nodes_before = len(graph.graph_def.node)
    receipt = first + (apply_passes(graph, io, list(pass_names), options, feed, tolerance, ref, progress)
                       if pass_names else [])
    current = None if pass_names else before  # the graph's report as it is now, when no pass has run
    if auto:
        more, current = rewrite_auto(graph, io, target, options, feed, tolerance, ref, progress, report=current)
        receipt += more
    after = current
    if after is None:
        with progress.step("rewrite: checking the result for {}".format(target.name)):
            after = check_graph(view(graph), target)
    summary = {
        "model": str(model),
        "target": target.name,
        "inputs": feed.source,
        "reference": str(reference) if reference else None,
        "passes": receipt,
        "nodes": {"before": nodes_before, "after": len(graph.graph_def.node)},
        "check_before": _verdict(before),
        "check_after": _verdict(after),
        "io": io,
    }
    return graph, io, summary, after


def _cut_first(graph, pass_names, options):
    """A graph with no input to feed (a TF1 queue or reader pipeline) gets its inputs from the cut pass: applied
    first, before the graph's inputs are read and before anything runs (nothing could be fed before it), unchecked.
    Returns (the passes left, the cut's receipt entry or [])."""
    from pipeline.graph.io import INPUT_OPS
    from pipeline.rewrite import registry
    from pipeline.rewrite.engine import op_delta

    if "cut" not in pass_names or any(n.op in INPUT_OPS for n in graph.graph_def.node):
        return pass_names, []
    opts = dict(options.get("cut") or {})
    if "inputs" not in opts:
        raise DeployError("rewrite pass cut needs option inputs (stages.rewrite.options.cut.inputs)")
    before = graph.op_counts()
    sites = registry("tf")["cut"].func(graph, opts) or []
    entry = {"pass": "cut", "sites": list(sites), "ops": op_delta(before, graph.op_counts()), "changes_behaviour": False,
             "comparison": {"against": "not compared: the graph had no input to feed before the cut made them"}}
    return [n for n in pass_names if n != "cut"], [entry]


def _load_onnx(model_path):
    """The model with its external data, once every location is inside the model's folder."""
    import onnx

    from pipeline.backends.external_data import check_external_data

    model = onnx.load(str(model_path), load_external_data=False)
    check_external_data(model, model_path)
    onnx.load_external_data_for_model(model, str(Path(model_path).resolve().parent))
    return model


def _verdict(report):
    best = report.recommended
    return {"deployable": report.deployable, "recommended": best.route if best else None,
            "blockers": {r.route: report.total_blockers(r.route) for r in report.routes if r.applicable}}


def check_output(out, suffix=".pb"):
    """-o problems found before any work: the wrong suffix, a directory, a missing parent folder."""
    out = Path(out)
    if out.suffix != suffix:
        raise DeployError("-o {}: the rewritten model is {}; name it *{}".format(
            out, "a frozen .pb" if suffix == ".pb" else "an .onnx model", suffix))
    if out.is_dir():
        raise DeployError("-o {}: is a directory; give a file name (*{})".format(out, suffix))
    if not out.parent.exists():
        raise DeployError("-o {}: directory {} does not exist".format(out, out.parent))


def write_outputs(graph, io, summary, out):
    """OUT (frozen graph), OUT's io.json and rewrite.json beside it, each written atomically."""
    out = Path(out)
    check_output(out)
    write_bytes(out, graph.serialize())
    write_io_json(out.with_name(out.stem + ".io.json"), io)
    records.write(out.with_name(out.stem + ".rewrite.json"), summary, "rewrite")  # schema deploy.rewrite/1


def write_onnx_outputs(model, summary, out):
    """OUT (.onnx) and its .rewrite.json receipt, each written atomically."""
    if not str(out).endswith(".onnx"):
        raise DeployError("-o {}: an ONNX model is rewritten to an .onnx file".format(out))
    write_bytes(out, model.SerializeToString())
    records.write(str(out)[:-5] + ".rewrite.json", summary, "rewrite")  # schema deploy.rewrite/1


def exit_code(report):
    return 0 if report.deployable else EXIT_NOT_DEPLOYABLE


# ------------------------------------------------------------------------------ ONNX models


def rewrite_onnx(model_path, target, pass_names=(), auto=False, options=None, samples=4, tolerance=1e-4, progress=None):
    """ONNX passes (pipeline.rewrite.passes.onnx) in order through the pass runner, each compared with ONNX
    Runtime unless it changes behaviour by design. Returns (ModelProto, receipt dict, CheckReport after)."""
    import onnx

    from pipeline.check.checker import check_graph
    from pipeline.graph.onnx_reader import onnx_model_view
    from pipeline.graph.readers import read_model
    from pipeline.rewrite.engine import ONNXSubject, check_names, run_passes
    from pipeline.rewrite.plan import auto_plan

    from pipeline.progress import Progress

    progress = progress or Progress("quiet")
    options = dict(options or {})
    options.setdefault("lower_opset", {}).setdefault("opset", target.max_opset)
    with progress.step("rewrite {}: reading and checking it for {} (before)".format(model_path, target.name)):
        before = check_graph(read_model(model_path), target)
    names = list(pass_names)
    if auto:
        names += [n for n in auto_plan(before, kind="onnx") if n not in names]
    check_names(names, "onnx")
    model = _load_onnx(model_path)
    nodes_before = len(model.graph.node)
    subject = ONNXSubject(model, _onnx_feed(model, samples))
    receipt = run_passes(subject, names, options, tolerance, progress=progress)
    model = subject.model
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".onnx") as tmp, \
            progress.step("rewrite: checking the result for {}".format(target.name)):
        # the view is of the model in memory; the file is there because the ONNX checks read the ModelProto
        # from the view's source (check/routes.py check_onnx_model, check/patterns.py _onnx_axes)
        onnx.save(model, tmp.name)
        after = check_graph(onnx_model_view(model, tmp.name), target)
    summary = {"model": str(model_path), "target": target.name, "passes": receipt,
               "nodes": {"before": nodes_before, "after": len(model.graph.node)},
               "check_before": _verdict(before), "check_after": _verdict(after)}
    return model, summary, after


def _onnx_feed(model, count):
    import numpy as np

    from pipeline.graph.onnx_reader import onnx_dtype_name

    init = {i.name for i in model.graph.initializer}
    feed, rng = {}, np.random.RandomState(0)
    for value in model.graph.input:
        if value.name in init:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else (count if i == 0 else 1)
                for i, d in enumerate(value.type.tensor_type.shape.dim)]
        dtype = onnx_dtype_name(value.type.tensor_type.elem_type)
        feed[value.name] = rng.uniform(0, 255, dims).astype(dtype if dtype != "uint8" else "uint8")
    return feed
