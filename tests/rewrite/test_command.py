"""pipeline/rewrite/command.py over the shared helpers: the checks' images sized by graph/io.image_input (the
one rule for an NHWC image input), OUT's io.json written by graph/io.write_io_json and read back by graph_io.
No TensorFlow: the graphs are pipeline.graph.proto GraphDefs and onnx ModelProtos built here."""

import json

import pytest

from pipeline.errors import DeployError
from pipeline.graph import proto
from pipeline.graph.io import graph_io
from pipeline.rewrite.command import sample_inputs, write_outputs
from pipeline.rewrite.tfgraph import TFGraph


def _graph(dims):
    """input (Placeholder of shape ``dims``, -1 unknown) -> Relu "output"."""
    graph_def = proto.GraphDef()
    x = graph_def.node.add(name="input", op="Placeholder")
    x.attr["dtype"].type = 1  # DT_FLOAT
    for d in dims:
        x.attr["shape"].shape.dim.add(size=d)
    y = graph_def.node.add(name="output", op="Relu", input=["input"])
    y.attr["T"].type = 1
    return TFGraph(graph_def)


@pytest.mark.parametrize("channels", [3, 1])
def test_the_images_have_the_inputs_size_and_channels(channels):
    graph = _graph([-1, 8, 6, channels])
    images, source = sample_inputs(graph, graph_io(graph.graph_def), None, count=2)
    assert images.shape == (2, 8, 6, channels) and source == "random pixels, seed 0"


@pytest.mark.parametrize("dims, message", [
    ([-1, -1, -1, 3], "an image of unknown height or width, which the numeric checks cannot guess; give it with "
                      "--pass set_input_shape --input-shape input=1,224,224,3"),
    ([-1, 0, 8, 3], "the numeric checks cannot feed this graph: input input has shape \\[\\?,0,8,3\\] \\(an empty"),
])
def test_an_input_the_checks_cannot_feed_is_refused_with_what_to_do(dims, message):
    graph = _graph(dims)
    with pytest.raises(DeployError, match=message):
        sample_inputs(graph, graph_io(graph.graph_def))


def test_a_float_input_that_is_no_image_gets_normal_values():
    """Before: "the numeric checks need a fixed-size NHWC input" for any other input (issue 26, item 4)."""
    graph = _graph([-1, 8, 8])
    samples, source = sample_inputs(graph, graph_io(graph.graph_def), count=2)
    assert samples.shape == (2, 8, 8) and "normal values shape [2,8,8]" in source


def test_the_io_json_beside_the_output_reads_back(tmp_path):
    graph = _graph([-1, 8, 8, 3])
    io = graph_io(graph.graph_def, outputs=["output"])
    out = tmp_path / "fixed.pb"
    write_outputs(graph, io, {"model": "m.pb", "target": "jetson_tx2", "passes": []}, out)
    written = (tmp_path / "fixed.io.json").read_text()
    assert written == json.dumps(io, indent=2, sort_keys=True) + "\n"  # the bytes deploy rewrite always wrote
    assert graph_io(TFGraph.load(out).graph_def, out) == io


# ------------------------------------------------------------------------------ ONNX models


def _onnx_model(path, opset):
    """x[1,3,8,8] -> Conv (c) -> c - ReduceMean(c, axes=[0]) at ``opset``. The mean over the batch axis is a
    finding the check reads from the ModelProto itself (check/patterns.py: _onnx_axes), not from the view."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("ReduceMean", ["c"], ["m"], name="mean", axes=[0], keepdims=1),
         helper.make_node("Sub", ["c", "m"], ["y"], name="sub")], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 8])],
        [numpy_helper.from_array(np.ones((2, 3, 3, 3), "float32"), "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), str(path))
    return path


def test_onnx_rewrite_checks_the_model_in_memory_and_reads_the_file_no_more(tmp_path, monkeypatch):
    """read_model once (the check before); onnx.load of the file twice (the check's ModelProto,
    check/onnx_types.load_model, and the model the passes change), none more for the node count. The check
    after is of the model in memory and says what a check of that model written to a file says."""
    import onnx

    import pipeline.graph.readers as readers
    from pipeline.check.checker import check_graph
    from pipeline.rewrite.command import rewrite_onnx
    from pipeline.targets import load_target

    source = _onnx_model(tmp_path / "m15.onnx", opset=15)
    target = load_target("jetson_tx2")
    calls = {"read_model": [], "onnx.load": []}
    read_model, load = readers.read_model, onnx.load
    monkeypatch.setattr(readers, "read_model", lambda path, *a, **kw: calls["read_model"].append(str(path)) or
                        read_model(path, *a, **kw))
    monkeypatch.setattr(onnx, "load", lambda path, *a, **kw: calls["onnx.load"].append(str(path)) or
                        load(path, *a, **kw))
    model, summary, after = rewrite_onnx(source, target, ["lower_opset"])
    assert calls["read_model"] == [str(source)] and calls["onnx.load"].count(str(source)) == 2
    monkeypatch.undo()
    assert summary["nodes"] == {"before": 3, "after": len(model.graph.node)}
    assert [p["pass"] for p in summary["passes"]] == ["lower_opset"] and model.opset_import[0].version == 13
    assert summary["check_before"]["blockers"]["onnx"] == 1 and summary["check_after"]["blockers"]["onnx"] == 0
    written = tmp_path / "written.onnx"
    onnx.save(model, str(written))
    again = check_graph(readers.read_model(written), target)
    assert after.to_dict()["routes"] == again.to_dict()["routes"]
    assert [f.nodes for f in after.route("onnx").accepted_but_wrong] == [["mean"]]  # read from the ModelProto


@pytest.mark.tf
def test_a_queue_fed_graph_is_cut_where_the_check_says_and_then_has_an_input(tmp_path):
    """The check's advice for a TF1 queue pipeline named the first consumer outside it (the cut pass then replaced
    that node, a conv and its weights, by a placeholder), and deploy rewrite refused the graph before the cut could
    run ("found 0 Placeholders"): the cut now names the pipeline's own output, and runs first, unchecked."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "check"))
    import fixtures

    from pipeline.check import check_model
    from pipeline.rewrite.command import rewrite_model
    from pipeline.targets import load_target

    path = fixtures.queue_graph(tmp_path / "queue.pb")
    report = check_model(path, load_target("jetson_tx2"), convert=False)
    fixes = [f.fix for r in report.routes for f in r.findings + report.findings if "--cut" in f.fix]
    assert fixes and all("--cut decode=" in fix for fix in fixes), fixes
    graph, io, summary, after = rewrite_model(path, load_target("jetson_tx2"), ["cut"],
                                              options={"cut": {"inputs": {"decode": [8, 8, 3]}}}, outputs=["output"])
    assert [i["name"] for i in io["inputs"]] == ["decode"] and summary["passes"][0]["pass"] == "cut"
    assert summary["passes"][0]["comparison"]["against"].startswith("not compared: the graph had no input")
    assert not any(f.kind == "not_inference_graph" for f in after.findings)
