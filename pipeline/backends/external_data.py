"""ONNX external data stays inside the model's folder.

An ONNX model can keep its weights in other files (``TensorProto.data_location == EXTERNAL``,
``external_data: location=...``). A model from someone else could name ``/etc/shadow``,
``../../.ssh/id_rsa`` or a symlink that leads out of its folder, and a loader would read that file
into the weights (ONNX Runtime, ``onnx.load``, onnx-graphsurgeon). Before deploy loads a model's
external data, every location is checked:

    check_external_data(model_proto, "model.onnx")   # DeployError naming the tensor and location

Relative, inside the model's folder once symlinks are resolved, and an existing file: anything
else is a one-line error. Nothing is read.
"""

import os
from pathlib import Path

from pipeline.errors import DeployError


def external_tensors(model):
    """(tensor name, location) of every tensor stored outside the model file: initializers,
    sparse initializers, constants in node attributes, in the main graph, every subgraph and
    every local function."""
    import onnx

    def in_nodes(nodes):
        for node in nodes:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    yield attr.t
                elif attr.type == onnx.AttributeProto.TENSORS:
                    yield from attr.tensors
                elif attr.type == onnx.AttributeProto.GRAPH:
                    yield from in_graph(attr.g)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    for g in attr.graphs:
                        yield from in_graph(g)

    def in_graph(graph):
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield sparse.values
            yield sparse.indices
        yield from in_nodes(graph.node)

    def everything():
        yield from in_graph(model.graph)
        for function in model.functions:
            yield from in_nodes(function.node)

    for tensor in everything():
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            entries = {e.key: e.value for e in tensor.external_data}
            yield tensor.name, entries.get("location", "")


def check_external_data(model, model_path):
    """Refuse a model whose external data lies outside its folder (or is missing)."""
    folder = Path(model_path).resolve().parent
    for name, location in external_tensors(model):
        problem = _location_problem(folder, location)
        if problem:
            raise DeployError("{}: tensor {!r} keeps its data in {!r}, {}; deploy reads external data only from files "
                              "inside the model's folder: move the data file next to the model and convert it "
                              "again".format(model_path, name, location, problem))


def _location_problem(folder, location):
    if not location:
        return "an empty location"
    if "\x00" in location:
        return "a location with a NUL byte"
    if os.path.isabs(location) or location.startswith(("\\", "/")) or (len(location) > 1 and location[1] == ":"):
        return "an absolute path"
    if ".." in Path(location.replace("\\", "/")).parts:
        return "a path that climbs out of the model's folder ('..')"
    target = (folder / location).resolve()
    if folder != target and folder not in target.parents:
        return "a symlink that leads out of the model's folder"
    if not target.is_file():
        return "a file that does not exist"
    return None
