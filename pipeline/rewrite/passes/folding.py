"""Folding that keeps behaviour: constant subgraphs evaluated once, batch norm into its convolution, Pad into it, no-op casts."""

from pipeline.graph.analysis import FUSED_BATCH_NORM
from pipeline.rewrite.pass_table import rewrite_pass
from pipeline.rewrite.tfgraph import split_tensor, view


@rewrite_pass("fold_constants", runs_graph=True)
def fold_constants(graph, options):
    """Subgraphs computed from constants only are evaluated once (TensorFlow) and become Const nodes.

    Never what needs a fed input (a Placeholder reached through data or control edges, a loop's
    back edges included), nor control flow or anything inside a loop or cond frame (a frozen LSTM's
    while loop): TensorFlow could not run it without a feed, or the Const would leave its frame."""
    from pipeline.graph.analysis import constant_subgraph

    outputs = set(options.get("_outputs", ()))
    folded = _feed_free(graph, constant_subgraph(view(graph)), outputs)
    if not folded:
        return []
    # evaluate only the frontier: folded nodes something non-folded reads (or an output)
    frontier = sorted(n for n in folded if n in outputs or any(c.name not in folded for c in graph.consumers(n)))
    values = _evaluate(graph, frontier)
    for name in frontier:
        if name in values:
            graph.set_const(graph.node(name), values[name])
    # sites: the nodes replaced and the folded nodes nothing reads any more (a frontier node with no
    # numpy value, a TensorList's variant, stays, and so do the nodes it reads)
    from pipeline.rewrite.passes.control_flow import readers

    read_by, gone = readers(graph), set(values)
    while True:
        more = {n for n in folded - gone if n not in outputs and all(r in gone for r in read_by.get(n, ()))}
        if not more:
            return sorted(gone)
        gone |= more


def _feed_free(graph, folded, outputs=()):
    """``folded`` less what needs a feed, loops (their ops, their frames) and function calls; then, until
    nothing changes, less every node one of whose inputs (data or control) is neither a Const nor
    still folded, and every node that would be evaluated (read from outside, an output) although it
    may not have a value: inside a cond branch (a constant predicate's dead side), or read at a port
    other than 0 (a Const has one output). A constant cond's Merge still folds."""
    from pipeline.rewrite.passes.control_flow import FUNCTIONAL_OPS, LOOP_OPS, feed_dependent, frame_nodes

    nodes = graph.nodes
    unsafe = feed_dependent(graph) | frame_nodes(graph, seeds=("Enter", "RefEnter"), leaves=("Exit", "RefExit"))
    merges = {n.name for n in nodes.values() if n.op in ("Merge", "RefMerge")}
    branches = frame_nodes(graph, seeds=("Switch", "RefSwitch"), leaves=("Merge", "RefMerge")) - merges
    kept = {n for n in folded if n not in unsafe and nodes[n].op not in LOOP_OPS + FUNCTIONAL_OPS}
    outputs = set(outputs)
    while True:
        lost = {n for n in kept if any(split_tensor(t)[0] not in kept and getattr(nodes.get(split_tensor(t)[0]), "op", None)
                                       != "Const" for t in nodes[n].input)}
        for reader in nodes.values():
            if reader.name in kept:
                continue
            for tensor in reader.input:
                name, port = split_tensor(tensor)
                if name in kept and (port > 0 or (port == 0 and name in branches)):  # -1: a control edge
                    lost.add(name)
        lost |= {n for n in kept & outputs if n in branches}
        if not lost:
            return kept
        kept -= lost


_FOLDED_DTYPES = ("float32", "float64", "int32", "int64", "float16", "uint8", "bool")


def _evaluate(graph, names):
    """name -> numpy value of each of ``names`` whose type set_const can hold (not a variant or a string)."""
    from pipeline.tf import import_tf
    from pipeline.tf.screen import screen_graph

    screen_graph(graph.graph_def, "the graph", outputs=names)
    tf = import_tf()
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.graph_util.import_graph_def(tf.compat.v1.GraphDef.FromString(graph.serialize()), name="")
    tensors = [tf_graph.get_tensor_by_name(n + ":0") for n in names]
    wanted = [(n, t) for n, t in zip(names, tensors) if t.dtype.name in _FOLDED_DTYPES]
    if not wanted:
        return {}
    import numpy as np

    with tf.compat.v1.Session(graph=tf_graph) as sess:
        values = sess.run([t for _, t in wanted])
    return {n: np.asarray(v) for (n, _), v in zip(wanted, values) if str(np.asarray(v).dtype) in _FOLDED_DTYPES}


_CONV_OPS = ("Conv2D", "DepthwiseConv2dNative", "MatMul")


@rewrite_pass("fold_batchnorm")
def fold_batchnorm(graph, options):
    """Inference batch norm folded into the Conv2D / DepthwiseConv2dNative / MatMul before it: fused
    (FusedBatchNorm*, is_training=false) or decomposed (Mul by a constant, then Add of a constant); the
    convolution's own bias between them (Keras' Conv2D, use_bias=True, then BatchNormalization) folds too."""
    import numpy as np

    sites = []
    for node in list(graph.graph_def.node):
        if node.name not in graph.nodes:
            continue
        conv = graph.producer(node.input[0]) if node.input else None
        conv, own_bias = _under_own_bias(graph, conv)
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
        if own_bias is not None and np.size(own_bias) not in (1, channels):
            continue
        scale = np.broadcast_to(np.ravel(scale), (channels,))
        bias = np.broadcast_to(np.ravel(bias), (channels,))
        if own_bias is not None:  # (conv + b) * scale + bias = conv * scale + (b * scale + bias)
            bias = np.broadcast_to(np.ravel(own_bias), (channels,)) * scale + bias
        new_w = weights * scale.reshape(weights.shape[2:]) if conv.op == "DepthwiseConv2dNative" else weights * scale
        kernel = graph.add_const(conv.name + "/folded_kernel", new_w.astype(np.float32))
        conv.input[1] = kernel.name
        biases = graph.add_const(add.name + "/folded_bias", bias.astype(np.float32))
        _to_bias_add(add, split_tensor(conv.name)[0], biases.name)
        sites.append(add.name)
    graph.changed()
    return sites


def _under_own_bias(graph, node):
    """(the convolution, its bias values) when ``node`` is a BiasAdd of a constant on a convolution read by nothing
    else, else (node, None)."""
    if node is None or node.op != "BiasAdd" or len(graph.consumers(node.name)) != 1 or len(node.input) < 2 \
            or graph.attr(node, "data_format", "NHWC") != "NHWC":
        return node, None
    inner = graph.producer(node.input[0])
    bias = graph.const_value(graph.producer(node.input[1]))
    if inner is None or inner.op not in _CONV_OPS or bias is None:
        return node, None
    return inner, bias


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
