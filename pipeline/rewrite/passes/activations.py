"""Op substitutions for a route that lacks an op: activations as ops every route has, UFF's op names."""

from pipeline.rewrite.pass_table import rewrite_pass
from pipeline.rewrite.tfgraph import split_tensor


@rewrite_pass("substitute_activations", accepts=("ops",))
def substitute_activations(graph, options):
    """Activations written with ops every route has: LeakyRelu -> Maximum(x, alpha*x),
    Elu -> Select(x > 0, x, Exp(x) - 1), Relu6 -> Minimum(Relu(x), 6). Option ``ops``: which
    to replace (default: all three)."""
    wanted = set(options.get("ops") or ("LeakyRelu", "Elu", "Relu6"))
    sites = []
    for node in list(graph.graph_def.node):
        if node.op not in wanted or node.name not in graph.nodes:
            continue
        x = node.input[0]
        name = node.name
        if node.op == "LeakyRelu":
            alpha = graph.add_const(name + "/alpha", _scalar(graph.attr(node, "alpha", 0.2)))
            scaled = _add_op(graph, name + "/scaled", "Mul", [x, alpha.name])
            _become(node, "Maximum", [x, scaled.name])
        elif node.op == "Elu":
            zero = graph.add_const(name + "/zero", _scalar(0.0))
            one = graph.add_const(name + "/one", _scalar(1.0))
            positive = _add_op(graph, name + "/positive", "Greater", [x, zero.name], t_attr=True)
            exp = _add_op(graph, name + "/exp", "Exp", [x])
            negative = _add_op(graph, name + "/negative", "Sub", [exp.name, one.name])
            _become(node, "SelectV2", [positive.name, x, negative.name])
        else:  # Relu6
            six = graph.add_const(name + "/six", _scalar(6.0))
            relu = _add_op(graph, name + "/relu", "Relu", [x])
            _become(node, "Minimum", [relu.name, six.name])
        sites.append(name)
    graph.changed()
    return sites


def _scalar(value):
    import numpy as np

    return np.asarray(value, dtype="float32")


def _add_op(graph, name, op, inputs, t_attr=True):
    from pipeline.graph.proto import DataType

    node = graph.graph_def.node.add(name=graph.unique(name), op=op)
    node.input.extend(inputs)
    if t_attr:
        node.attr["T"].type = DataType["DT_FLOAT"]
    graph.changed()
    return node


def _become(node, op, inputs):
    """Turn ``node`` into ``op`` on ``inputs`` in place: consumers keep reading it by name."""
    from pipeline.graph.proto import DataType

    node.op = op
    del node.input[:]
    node.input.extend(inputs)
    node.attr.clear()
    node.attr["T"].type = DataType["DT_FLOAT"]


@rewrite_pass("uff_compat")
def uff_compat(graph, options):
    """AddV2 becomes Add and FusedBatchNormV3 (inference) becomes FusedBatchNorm: the names UFF knows."""
    sites = []
    for node in graph.graph_def.node:
        if node.op == "AddV2":
            node.op = "Add"
            sites.append(node.name)
        elif node.op in ("FusedBatchNormV3", "FusedBatchNormV2") and graph.attr(node, "is_training") is not True:
            if any(split_tensor(t)[1] >= 5 for c in graph.consumers(node.name) for t in c.input
                   if split_tensor(t)[0] == node.name):
                continue  # something reads the V3-only reserve_space_3 output
            node.op = "FusedBatchNorm"
            for key in ("U",):
                if key in node.attr:
                    del node.attr[key]
            sites.append(node.name)
    graph.changed()
    return sites
