"""Shapes and cuts: fix an input's shape, make inner nodes new inputs (both need options; --auto never guesses them)."""

from pipeline.errors import DeployError
from pipeline.rewrite.pass_table import rewrite_pass


@rewrite_pass("cut", needs=("inputs",))
def cut(graph, options):
    """New inputs at named nodes (``inputs: {node: shape}``): everything before them is dropped."""
    from pipeline.graph.proto import DataType

    sites = []
    for name, dims in (options.get("inputs") or {}).items():
        if name not in graph.nodes:
            raise DeployError("cut: no node {!r} in the graph".format(name))
        node = graph.node(name)
        dtype = graph.attr(node, "T") or graph.attr(node, "dtype") or graph.attr(node, "DstT") or "float32"
        node.op = "Placeholder"
        del node.input[:]
        node.attr.clear()
        node.attr["dtype"].type = DataType["DT_" + {"float32": "FLOAT", "int32": "INT32", "uint8": "UINT8",
                                                     "int64": "INT64", "float16": "HALF"}.get(str(dtype), "FLOAT")]
        for d in dims or []:
            node.attr["shape"].shape.dim.add(size=-1 if d is None else int(d))
        if not dims:
            node.attr["shape"].shape.unknown_rank = True
        sites.append(name)
    graph.changed()
    return sites


@rewrite_pass("set_input_shape", needs=("shape",), accepts=("input",))
def set_input_shape(graph, options):
    """Fix a graph input's shape (e.g. [1, 224, 224, 3]): option ``input`` (default: the only one) and ``shape``."""
    inputs = graph.placeholders()
    name = options.get("input") or (inputs[0] if len(inputs) == 1 else None)
    if name not in inputs:
        raise DeployError("set_input_shape: input {!r} is not a graph input (inputs: {})".format(name, ", ".join(inputs)))
    node = graph.node(name)
    shape = node.attr["shape"].shape
    shape.Clear()
    for d in options["shape"]:
        shape.dim.add(size=-1 if d is None else int(d))
    return [name]
