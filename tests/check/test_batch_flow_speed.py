"""The batch data flow of a big graph without a call per node or edge (issue 20 point 6): the same
answers whichever path the walk takes (file order already topological, or the depth-first order
for graphs whose inputs come later in the file), and no attribute decoded on the way but the
placeholders' and the batch-moving ops'. The graph is a generated frozen CNN
(scripts/bench/graph_read.py, as check_speed.py builds it)."""

import sys

import pytest

from conftest import ROOT
from pipeline.check.batch_flow import batch_axes, flagged_reductions
from pipeline.check.patterns import find_patterns
from pipeline.graph import read_model

sys.path.insert(0, str(ROOT / "scripts" / "bench"))

from graph_read import write_frozen  # noqa: E402


def test_generated_cnn_carries_the_batch_through_and_decodes_nothing(tmp_path):
    path = tmp_path / "g.pb"
    write_frozen(path, 10000)
    graph = read_model(path)
    decoded = [n.name for n in graph.nodes.values() if "attrs" in n.__dict__]  # by the reader
    carry, flagged = batch_axes(graph)
    assert flagged == [] and flagged_reductions(graph) == []
    consts = {n.name for n in graph.nodes.values() if n.op == "Const"}
    assert set(carry) == set(graph.nodes) - consts  # every data node carries the batch, on axis 0
    assert {v[0] for v in carry.values()} == {0}
    assert [m.kind for m in find_patterns(graph)] == []
    assert [n.name for n in graph.nodes.values() if "attrs" in n.__dict__] == decoded


@pytest.mark.tf
def test_file_order_and_depth_first_order_agree(tmp_path):
    """An acyclic graph whose nodes are stored consumers first (as GraphDefs edited by tools are)
    takes the depth-first path; the answers are the same as for the graph in producer-first order.
    (In a loop the back edge cut depends on where the walk starts, file order first, as before.)"""
    import field_graphs

    answers = {}
    for build in (field_graphs.batch_mean, field_graphs.keras_flatten_tf1, field_graphs.lstm_unrolled):
        graph = read_model(build(tmp_path / (build.__name__ + ".pb")))
        carry, flagged = batch_axes(graph)
        graph.nodes = dict(reversed(list(graph.nodes.items())))
        graph.invalidate()
        reversed_carry, reversed_flagged = batch_axes(graph)
        assert reversed_carry == carry and sorted(reversed_flagged) == sorted(flagged)
        answers[build.__name__] = flagged
    assert answers["batch_mean"] == [("batch_mean", 0)] and answers["keras_flatten_tf1"] == []
