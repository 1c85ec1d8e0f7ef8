"""Training-mode ops out of a frozen graph: dropout becomes identity, batch norm runs on its moving statistics.

Both change behaviour by design: the runner compares them, after the last of them, with an
inference-mode reference or with the properties they promise (deterministic, batch-independent).
"""

from pipeline.graph.analysis import FUSED_BATCH_NORM
from pipeline.errors import DeployError
from pipeline.rewrite.pass_table import rewrite_pass
from pipeline.rewrite.tfgraph import split_tensor, view


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
                "bn_inference: no moving mean/variance for {} (looked for {} in the graph{}{}); pass the training "
                "checkpoint (--checkpoint / stages.rewrite.checkpoint) or re-export with training=False".format(
                    node.name, " or ".join(" and ".join(pair) for pair in _stat_names(node.name)),
                    ", in its tf.cond's inference branch" if _in_cond(graph, node) else "",
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
    """<scope>/moving_mean and <scope>/moving_variance for the node's scope, and above it only past a tf.cond's
    scope (its branch sits in <bn scope>/cond/ or cond_N/): a parent scope's statistics may be another layer's; a
    node at the root: the root's."""
    import re

    parts = name.split("/")[:-1]
    names = [("/".join(parts) + "/" if parts else "") + s for s in ("moving_mean", "moving_variance")]
    names = [tuple(names)]
    while parts and re.fullmatch(r"cond(_\d+)?", parts[-1]):
        parts = parts[:-1]
        prefix = "/".join(parts) + "/" if parts else ""
        names.append((prefix + "moving_mean", prefix + "moving_variance"))
    return names


def _moving_stats(graph, node):
    """Moving statistics kept in the graph: the node's own mean/variance inputs when not empty
    (through Identity and a tf.cond's Switch to the Const that holds them); those of the inference
    branch of the same tf.cond (the FusedBatchNorm with is_training false on the other input of the
    Merge this node feeds: TF1's ``tf.cond(is_training, ...)`` batch norm); or Const nodes named
    <scope>/moving_mean and <scope>/moving_variance."""
    own = _stats_of(graph, node)
    if own is not None:
        return own
    for merge in graph.consumers(node.name):
        if merge.op != "Merge":
            continue
        for tensor in merge.input:
            other = _through(graph, tensor)
            if other is not None and other is not node and other.op in FUSED_BATCH_NORM and \
                    graph.attr(other, "is_training") is False:
                stats = _stats_of(graph, other)
                if stats is not None:
                    return stats
    for names in _stat_names(node.name):
        found = [graph.const_value(graph.nodes.get(n)) for n in names]
        if all(v is not None and v.size for v in found):
            return found[0], found[1]
    return None


def _in_cond(graph, node):
    return any(c.op == "Merge" for c in graph.consumers(node.name))


def _stats_of(graph, node):
    mean, var = (graph.const_value(_through(graph, node.input[i])) for i in (3, 4))
    if mean is not None and var is not None and mean.size and var.size:
        return mean, var
    return None


def _through(graph, tensor, hops=8):
    """The node behind ``tensor``, read through Identity and Switch (a tf.cond's way into its branches)."""
    node = graph.producer(tensor)
    for _ in range(hops):
        if node is None or node.op not in ("Identity", "Switch", "RefSwitch") or not node.input:
            break
        node = graph.producer(node.input[0])
    return node


def _checkpoint_reader(path):
    from pipeline.tf import import_tf

    tf = import_tf()
    try:
        return tf.train.load_checkpoint(str(path))
    except (ValueError, tf.errors.OpError) as e:
        raise DeployError("--checkpoint {}: cannot read the checkpoint ({})".format(path, str(e).splitlines()[0]))


def _stats_from_checkpoint(reader, node):
    for names in _stat_names(node.name):
        if all(reader.has_tensor(n) for n in names):
            return reader.get_tensor(names[0]), reader.get_tensor(names[1])
    return None
