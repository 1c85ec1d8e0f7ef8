"""The TF-TRT share of a big graph without the old hot spots (issue 20, point 6): the same figures,
computed without decoding every node's attributes (the weights' values are never decoded) and with
the engine clusters found once. The graph is a generated frozen CNN (scripts/bench/graph_read.py,
deploy's own protobuf module, as check_speed.py builds it)."""

import sys

from conftest import ROOT
from pipeline.check.compute import tftrt_share
from pipeline.graph import read_model

sys.path.insert(0, str(ROOT / "scripts" / "bench"))

from graph_read import write_frozen  # noqa: E402

CONV_FLOPS = 2 * 3 * 3 * 16 * 16 * 32 * 32  # a 3x3x16x16 conv, SAME, stride 1, on 32x32


def test_share_of_a_generated_cnn_reads_only_what_it_needs(tmp_path):
    path = tmp_path / "g.pb"
    write_frozen(path, 10000)
    graph = read_model(path)
    blocks = sum(n.op == "Conv2D" for n in graph.nodes.values())
    assert blocks == 1999
    decoded = [n.name for n in graph.nodes.values() if "attrs" in n.__dict__]  # by the reader (the input's shape)
    share = tftrt_share(graph, lambda op: True)
    assert share == {"nodes": 1.0, "compute": 1.0, "flops": blocks * CONV_FLOPS, "segments": 1, "estimated": False}
    # no node's attributes were decoded (a Const's weights, a conv's other attributes): the old code
    # decoded every node it looked at, most of a 200,000-node check's time
    assert [n.name for n in graph.nodes.values() if "attrs" in n.__dict__] == decoded


def test_share_segments_and_unknown_sizes(tmp_path):
    path = tmp_path / "g.pb"
    write_frozen(path, 1000)
    graph = read_model(path)
    # Relu not convertible: each block's Conv2D + BiasAdd is a 2-node cluster, below TF-TRT's minimum of 3
    share = tftrt_share(graph, lambda op: op != "Relu")
    assert (share["nodes"], share["segments"], share["compute"]) == (0.0, 0, 0.0)
    # BiasAdd not convertible: Relu of one block + Conv2D of the next are 2 nodes; nothing either
    assert tftrt_share(graph, lambda op: op != "BiasAdd")["segments"] == 0
    # an unknown spatial size: every conv's FLOPs are guessed from one position
    graph = read_model(path)
    graph.input_shapes = {"input:0": [None, None, None, 16]}
    share = tftrt_share(graph, lambda op: True)
    assert share["estimated"] is True and share["flops"] == 199 * 2 * 3 * 3 * 16 * 16
