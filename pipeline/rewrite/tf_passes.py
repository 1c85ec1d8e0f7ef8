"""Rewrite passes on frozen TensorFlow graphs. Each returns the sites it changed ([] = nothing to do).

The runner prunes to the outputs after every pass, so a pass only rewires and replaces.
"""

from pipeline.check.patterns import FUSED_BATCH_NORM
from pipeline.errors import DeployError
from pipeline.rewrite import rewrite_pass
from pipeline.rewrite.tfgraph import split_tensor

_PASS_THROUGH = ("Identity", "CheckNumerics", "CheckNumericsV2", "StopGradient", "PreventGradient", "Snapshot")
_CONTROL_ONLY = ("NoOp", "Assert")


def view(graph):
    from pipeline.graph.tf_reader import frozen_view

    return frozen_view(graph.graph_def, "<rewrite>", "frozen_pb")


# ------------------------------------------------------------------------------ training-mode ops


@rewrite_pass("strip_dropout", changes_behaviour=True)
def strip_dropout(graph, options):
    """Every dropout subgraph (TF1 Floor form, TF2 GreaterEqual/Select form, keep_prob placeholders) becomes identity."""
    from pipeline.check.patterns import dropout_matches

    sites = []
    for match in dropout_matches(view(graph)):
        applied = match.boundary[0]
        apply_node = graph.nodes.get(applied)
        if apply_node is None or apply_node.op not in ("Mul", "Select", "SelectV2"):
            raise DeployError("strip_dropout: cannot find where the dropout at {} applies its mask (found {}); "
                              "cut the graph around it instead".format(match.nodes[0], applied))
        data = _unmasked_input(graph, apply_node, set(match.nodes))
        graph.rewire(apply_node.name, _unscaled(graph, data))
        sites.append(apply_node.name)
    return sites


def _unmasked_input(graph, node, mask_nodes):
    """The input of the masking op that carries the activation (not the mask)."""
    candidates = list(node.input[1:2]) if node.op in ("Select", "SelectV2") else list(node.input)
    for tensor in candidates:
        if not _depends_on(graph, tensor, mask_nodes):
            return tensor
    raise DeployError("strip_dropout: {} has no input free of the dropout mask".format(node.name))


def _depends_on(graph, tensor, names, hops=8):
    frontier = [split_tensor(tensor)[0]]
    for _ in range(hops):
        if any(n in names for n in frontier):
            return True
        nxt = []
        for name in frontier:
            node = graph.nodes.get(name)
            if node is not None:
                nxt += [split_tensor(t)[0] for t in node.input if not t.startswith("^")]
        frontier = nxt
    return False


def _unscaled(graph, tensor):
    """x for x / keep_prob or x * (1 / (1 - rate)): the inverted-dropout scaling goes with the mask."""
    node = graph.producer(tensor)
    if node is None or node.op not in ("RealDiv", "Mul") or len(node.input) != 2:
        return tensor
    sides = ((0, 1),) if node.op == "RealDiv" else ((0, 1), (1, 0))
    for data, scale in sides:
        if _is_scalar_expr(graph, graph.producer(node.input[scale])):
            return node.input[data]
    return tensor


def _is_scalar_expr(graph, node, depth=4):
    """A scalar constant, a scalar placeholder (keep_prob), or arithmetic on those only."""
    if node is None or depth == 0:
        return False
    if node.op == "Const":
        value = graph.const_value(node)
        return value is not None and value.size == 1
    if node.op in ("Placeholder", "PlaceholderWithDefault"):
        return graph.attr(node, "shape") == []
    data = [t for t in node.input if not t.startswith("^")]
    return bool(data) and all(_is_scalar_expr(graph, graph.producer(t), depth - 1) for t in data)


@rewrite_pass("bn_inference", changes_behaviour=True, accepts=("checkpoint",))
def bn_inference(graph, options):
    """FusedBatchNorm* with is_training=true becomes its inference form, on the moving mean and variance
    (from constants in the graph, or from ``checkpoint``)."""
    sites = []
    reader = None
    for node in list(graph.graph_def.node):
        if node.op not in FUSED_BATCH_NORM or graph.attr(node, "is_training") is not True:
            continue
        stats = _moving_stats(graph, node)
        if stats is None and options.get("checkpoint"):
            reader = reader or _checkpoint_reader(options["checkpoint"])
            stats = _stats_from_checkpoint(reader, node)
        if stats is None:
            raise DeployError(
                "bn_inference: no moving mean/variance for {} (looked for {} in the graph{}); pass the training "
                "checkpoint (--checkpoint / stages.rewrite.checkpoint) or re-export with training=False".format(
                    node.name, " and ".join(_stat_names(node.name)),
                    " and in " + options["checkpoint"] if options.get("checkpoint") else ""))
        mean = graph.add_const(node.name + "/moving_mean", stats[0].astype("float32"))
        variance = graph.add_const(node.name + "/moving_variance", stats[1].astype("float32"))
        node.input[3], node.input[4] = mean.name, variance.name
        node.attr["is_training"].b = False
        if "exponential_avg_factor" in node.attr:
            node.attr["exponential_avg_factor"].f = 1.0
        sites.append(node.name)
    graph.changed()
    return sites


def _stat_names(name):
    scope = name.rsplit("/", 1)[0] if "/" in name else ""
    prefix = scope + "/" if scope else ""
    return prefix + "moving_mean", prefix + "moving_variance"


def _moving_stats(graph, node):
    """Moving statistics kept in the graph: the node's own mean/variance inputs when not empty,
    or Const nodes named <scope>/moving_mean and <scope>/moving_variance."""
    mean, var = graph.const_value(graph.producer(node.input[3])), graph.const_value(graph.producer(node.input[4]))
    if mean is not None and var is not None and mean.size and var.size:
        return mean, var
    names = _stat_names(node.name)
    nodes = graph.nodes
    found = [graph.const_value(nodes.get(n)) for n in names]
    if all(v is not None and v.size for v in found):
        return found[0], found[1]
    return None


def _checkpoint_reader(path):
    from pipeline.tf import import_tf

    tf = import_tf()
    try:
        return tf.train.load_checkpoint(str(path))
    except (ValueError, tf.errors.OpError) as e:
        raise DeployError("--checkpoint {}: cannot read the checkpoint ({})".format(path, str(e).splitlines()[0]))


def _stats_from_checkpoint(reader, node):
    names = _stat_names(node.name)
    if all(reader.has_tensor(n) for n in names):
        return reader.get_tensor(names[0]), reader.get_tensor(names[1])
    return None


# ------------------------------------------------------------------------------ clean-ups


@rewrite_pass("remove_identity")
def remove_identity(graph, options):
    """Identity, CheckNumerics, StopGradient, Snapshot bypassed; NoOp and Assert removed (outputs kept)."""
    outputs = set(options.get("_outputs", ()))
    sites = []
    for node in list(graph.graph_def.node):
        if node.name in outputs:
            continue
        data = [t for t in node.input if not t.startswith("^")]
        if node.op in _PASS_THROUGH and len(data) == 1:
            graph.rewire(node.name, data[0])
            sites.append(node.name)
        elif node.op in _CONTROL_ONLY:
            sites.append(node.name)
    removable = [s for s in sites if not graph.consumers(s)]
    graph.remove(removable)
    return sites


@rewrite_pass("prune")
def prune(graph, options):
    """Drop every node the outputs do not need."""
    return graph.prune(options["_outputs"])


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


# ------------------------------------------------------------------------------ shapes and cuts


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


# ------------------------------------------------------------------------------ folding


@rewrite_pass("fold_constants", runs_graph=True)
def fold_constants(graph, options):
    """Subgraphs computed from constants only are evaluated once (TensorFlow) and become Const nodes."""
    from pipeline.graph.analysis import constant_subgraph

    folded = constant_subgraph(view(graph))
    if not folded:
        return []
    # evaluate only the frontier: folded nodes something non-folded reads (or an output)
    outputs = set(options.get("_outputs", ()))
    frontier = sorted(n for n in folded if n in outputs or any(c.name not in folded for c in graph.consumers(n)))
    import numpy as np

    values = _evaluate(graph, frontier)
    for name, value in zip(frontier, values):
        value = np.asarray(value)
        if str(value.dtype) in ("float32", "float64", "int32", "int64", "float16", "uint8", "bool"):
            graph.set_const(graph.node(name), value)
    return sorted(folded)


def _evaluate(graph, names):
    from pipeline.tf import import_tf
    from pipeline.tf.screen import screen_graph

    screen_graph(graph.graph_def, "the graph", outputs=names)
    tf = import_tf()
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.graph_util.import_graph_def(tf.compat.v1.GraphDef.FromString(graph.serialize()), name="")
    with tf.compat.v1.Session(graph=tf_graph) as sess:
        return sess.run([tf_graph.get_tensor_by_name(n + ":0") for n in names])


_CONV_OPS = ("Conv2D", "DepthwiseConv2dNative", "MatMul")


@rewrite_pass("fold_batchnorm")
def fold_batchnorm(graph, options):
    """Inference batch norm folded into the Conv2D / DepthwiseConv2dNative / MatMul before it: fused
    (FusedBatchNorm*, is_training=false) or decomposed (Mul by a constant, then Add of a constant)."""
    import numpy as np

    sites = []
    for node in list(graph.graph_def.node):
        if node.name not in graph.nodes:
            continue
        conv = graph.producer(node.input[0]) if node.input else None
        if conv is None or conv.op not in _CONV_OPS or len(graph.consumers(conv.name)) != 1:
            continue
        weights = graph.const_value(graph.producer(conv.input[1]))
        if weights is None or weights.dtype != np.float32:
            continue
        if node.op in FUSED_BATCH_NORM and graph.attr(node, "is_training") is not True:
            values = [graph.const_value(graph.producer(t)) for t in node.input[1:5]]
            if any(v is None or not v.size for v in values) or graph.attr(node, "data_format", "NHWC") != "NHWC":
                continue
            gamma, beta, mean, var = values
            scale = gamma / np.sqrt(var + graph.attr(node, "epsilon", 1e-3))
            bias, add = beta - mean * scale, node
        elif node.op == "Mul" and len(graph.consumers(node.name)) == 1:
            scale = graph.const_value(graph.producer(node.input[1]))
            add = graph.consumers(node.name)[0]
            if scale is None or add.op not in ("Add", "AddV2", "BiasAdd") or split_tensor(add.input[0])[0] != node.name:
                continue
            bias = graph.const_value(graph.producer(add.input[1]))
            if bias is None:
                continue
        else:
            continue
        channels = weights.shape[-1] if conv.op != "DepthwiseConv2dNative" else weights.shape[2] * weights.shape[3]
        if np.size(scale) not in (1, channels) or np.size(bias) not in (1, channels):
            continue
        scale = np.broadcast_to(np.ravel(scale), (channels,))
        bias = np.broadcast_to(np.ravel(bias), (channels,))
        new_w = weights * scale.reshape(weights.shape[2:]) if conv.op == "DepthwiseConv2dNative" else weights * scale
        kernel = graph.add_const(conv.name + "/folded_kernel", new_w.astype(np.float32))
        conv.input[1] = kernel.name
        biases = graph.add_const(add.name + "/folded_bias", bias.astype(np.float32))
        _to_bias_add(add, split_tensor(conv.name)[0], biases.name)
        sites.append(add.name)
    graph.changed()
    return sites


def _to_bias_add(node, value, bias):
    from pipeline.graph.proto import DataType

    node.op = "BiasAdd"
    del node.input[:]
    node.input.extend([value, bias])
    for key in list(node.attr):
        del node.attr[key]
    node.attr["T"].type = DataType["DT_FLOAT"]
    node.attr["data_format"].s = b"NHWC"


@rewrite_pass("fold_pad")
def fold_pad(graph, options):
    """A zero Pad of the spatial dims before a VALID Conv2D / DepthwiseConv2dNative becomes the
    convolution's explicit padding (one op fewer per strided block in MobileNets)."""
    sites = []
    for pad in list(graph.graph_def.node):
        if pad.op != "Pad" or len(graph.consumers(pad.name)) != 1:
            continue
        conv = graph.consumers(pad.name)[0]
        paddings = graph.const_value(graph.producer(pad.input[1]))
        if conv.op not in ("Conv2D", "DepthwiseConv2dNative") or split_tensor(conv.input[0])[0] != pad.name \
                or graph.attr(conv, "padding") != "VALID" or graph.attr(conv, "data_format", "NHWC") != "NHWC" \
                or paddings is None or paddings.shape != (4, 2) or paddings[0].any() or paddings[3].any():
            continue
        conv.input[0] = pad.input[0]
        conv.attr["padding"].s = b"EXPLICIT"
        explicit = conv.attr["explicit_paddings"].list
        del explicit.i[:]
        explicit.i.extend(int(v) for v in paddings.reshape(-1))
        sites.append(pad.name)
    graph.changed()
    return sites


# ------------------------------------------------------------------------------ substitutions


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


@rewrite_pass("drop_noop_cast")
def drop_noop_cast(graph, options):
    """Cast nodes whose source and destination types are the same are bypassed (UFF has no Cast)."""
    outputs = set(options.get("_outputs", ()))
    sites = []
    for node in list(graph.graph_def.node):
        if node.op == "Cast" and node.name not in outputs and node.attr["SrcT"].type == node.attr["DstT"].type:
            graph.rewire(node.name, node.input[0])
            sites.append(node.name)
    return sites
