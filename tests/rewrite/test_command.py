"""pipeline/rewrite/command.py over the shared helpers: the checks' images sized by graph/io.image_input (the
one rule for an NHWC image input), OUT's io.json written by graph/io.write_io_json and read back by graph_io.
No TensorFlow: the graphs are pipeline.graph.proto GraphDefs."""

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


@pytest.mark.parametrize("dims", [[-1, -1, -1, 3], [-1, 8, 8], [-1, 0, 8, 3]])
def test_an_input_that_is_no_fixed_size_image_is_refused(dims):
    graph = _graph(dims)
    with pytest.raises(DeployError, match="the numeric checks need a fixed-size NHWC input"):
        sample_inputs(graph, graph_io(graph.graph_def))


def test_the_io_json_beside_the_output_reads_back(tmp_path):
    graph = _graph([-1, 8, 8, 3])
    io = graph_io(graph.graph_def, outputs=["output"])
    out = tmp_path / "fixed.pb"
    write_outputs(graph, io, {"model": "m.pb", "target": "jetson_tx2", "passes": []}, out)
    written = (tmp_path / "fixed.io.json").read_text()
    assert written == json.dumps(io, indent=2, sort_keys=True) + "\n"  # the bytes deploy rewrite always wrote
    assert graph_io(TFGraph.load(out).graph_def, out) == io
