"""Read TensorFlow and ONNX models into one small graph IR, without importing TensorFlow.

    from pipeline.graph import read_model
    graph = read_model("frozen.pb")            # or .pbtxt, .meta, a SavedModel dir, .onnx, .keras/.h5
    graph.kind, graph.format                   # "tensorflow", "frozen_pb"
    graph.inputs, graph.outputs                # ["input:0"], ["probabilities:0"]
    for node in graph.topological_order():
        node.name, node.op, node.inputs, node.attrs

Modules:
    proto    TensorFlow's GraphDef / SavedModel / MetaGraphDef messages, defined by deploy itself
    view     Graph, Node, TensorValue: the IR the checker, rewrite passes and graph diff share
    readers  read_model(path, signature="serving_default") -> Graph

Only ``.keras`` / ``.h5`` need TensorFlow; every other format is read with protobuf (and ``onnx``
for ``.onnx``), fast enough for ``deploy check`` to answer in well under a second.
"""

from pipeline.graph.readers import SUPPORTED, read_model
from pipeline.graph.view import UNKNOWN_RANK, AttrPlaceholder, Graph, Node, TensorValue

__all__ = ["read_model", "SUPPORTED", "Graph", "Node", "TensorValue", "AttrPlaceholder", "UNKNOWN_RANK"]
