"""Dropout left in training mode in a TensorFlow graph, and whether tf2onnx's dropout rewriter
replaces it (its exact patterns, a constant rate) or it stays random in the ONNX model; and TF1's
training switches (``placeholder_with_default`` keep_prob / is_training) at their defaults.

    dropout_matches(graph)                              # [Match(kind="dropout_training", ...)]
    tf2onnx_replaces_dropout(graph, match, constant)    # True: ONNX Dropout, a no-op at inference
    idle_branch(graph, node)                            # "is_training": node's tf.cond branch never runs unfed
    branch_findings(onnx_model, tf_by_node)             # training mode tf2onnx put inside an ONNX If body

A PlaceholderWithDefault that is not a graph input (deploy names only Placeholders as inputs) runs
at its default: TensorFlow uses it unless fed, tf2onnx keeps it as an ONNX graph input whose
initializer holds the default (ONNX Runtime uses it unless fed; TensorRT's ONNX parser reads an
input that has an initializer as a constant). Dropout whose keep probability is 1.0 (rate 0) at the
defaults keeps every unit: deterministic as converted, with a warning naming the placeholder.
"""

import math

from pipeline.check.match import Match
from pipeline.graph.analysis import RANDOM

_DROPOUT_HOPS = 6


def dropout_matches(graph):
    """RandomUniform -> ... -> Floor -> Mul (TF1) or RandomUniform -> GreaterEqual -> Cast/Select -> Mul (TF2)."""
    matches = []
    for node in graph.nodes.values():
        if node.op not in RANDOM:
            continue
        path, form = _walk_to_mask(graph, node)
        if form is None:
            continue
        nodes = set(path)
        keep_prob = _keep_prob_placeholders(graph, nodes)
        fed = " fed by placeholder {}".format(", ".join(sorted(set(keep_prob)))) if keep_prob else ""
        switch = _keeps_all_by_default(graph, path, keep_prob)
        if switch:
            matches.append(Match(
                kind="dropout_training",
                nodes=sorted(nodes),
                cause="dropout in training form ({}) whose keep probability comes from {}: unfed, it keeps every "
                      "unit, so the output is deterministic (tf2onnx keeps {} as an optional ONNX input with that "
                      "default); fed a keep probability below 1, the output is random".format(
                          form, switch, " and ".join(sorted(keep_prob))),
                fix="leave {} unfed at inference, or remove the switch: rewrite strip_dropout".format(
                    " and ".join(sorted(keep_prob))),
                rewrite="strip_dropout",
                severity="warning",
                boundary=[path[-1]],
                fed_by=sorted(set(keep_prob)),
            ))
            continue
        matches.append(Match(
            kind="dropout_training",
            nodes=sorted(nodes),
            cause="dropout left in training mode ({}){}: the output is random".format(form, fed),
            fix="exported in training mode — rebuild with training=False (deploy's export stage does) or apply rewrite strip_dropout",
            rewrite="strip_dropout",
            severity="warning",
            stochastic=True,
            boundary=[path[-1]],  # the op that applies the mask
            fed_by=sorted(set(keep_prob)),
        ))
    return matches


def tf2onnx_replaces_dropout(graph, match, constant=frozenset()):
    """Whether tf2onnx 1.17's dropout rewriter replaces this training-mode dropout by ONNX Dropout
    (a no-op at inference). Its patterns (tf2onnx/rewriter/dropout_rewriter.py) are
    Mul(RealDiv, Floor(Add(rate, RandomUniform))) and Mul(Mul, Cast(GreaterEqual(RandomUniform, rate)))
    with a constant scalar rate; anything else stays random in the ONNX model: a rate fed at run
    time (it warns "does not have a constant ratio"), the stateless random ops Keras 3 uses, and
    TensorFlow 2's tf.nn.dropout, which applies the mask with SelectV2. ``constant``: nodes that
    fold to constants (tf2onnx runs grappler's constant folding first)."""
    def const(tensor):
        src = graph.producer(tensor)
        return src is not None and (src.op == "Const" or src.name in constant)

    for name in match.nodes:
        node = graph.nodes.get(name)
        if node is None or node.op in RANDOM and node.op != "RandomUniform":
            return False
    for name in match.nodes:
        node = graph.nodes[name]
        if node.op == "Floor":
            add = graph.producer(node.inputs[0])
            if add is None or add.op not in ("Add", "AddV2"):
                return False
            other = [t for t in add.inputs if (graph.producer(t) or add).op != "RandomUniform"]
            return len(other) == 1 and const(other[0]) and \
                any(c.op == "Mul" and any((graph.producer(t) or c).op == "RealDiv" for t in c.inputs)
                    for c in graph.consumers(node.name))
        if node.op == "GreaterEqual":
            rate = node.inputs[1] if (graph.producer(node.inputs[0]) or node).op == "RandomUniform" else None
            casts = [c for c in graph.consumers(node.name) if c.op == "Cast"]
            return rate is not None and const(rate) and bool(casts) and all(
                any(m.op == "Mul" and any((graph.producer(t) or m).op == "Mul" for t in m.inputs)
                    for m in graph.consumers(c.name)) for c in casts)
    return False


def idle_branch(graph, node, hops=8):
    """The PlaceholderWithDefault whose default keeps ``node``'s tf.cond branch from running (TF1's
    ``tf.cond(is_training, training_fn, inference_fn)`` with ``is_training`` left unfed), or None.
    A node runs only when every data input is live; a Switch's output 1 is dead when its predicate
    is false (output 0 when true). Followed back through data inputs, never past a Merge."""
    frontier, seen = [node], {node.name}
    for _ in range(hops):
        nxt = []
        for current in frontier:
            for tensor in current.inputs:
                src = graph.producer(tensor)
                if src is None or src.name in seen:
                    continue
                seen.add(src.name)
                if src.op in ("Switch", "RefSwitch") and len(src.inputs) == 2:
                    port = tensor.partition(":")[2] or "0"
                    pred, value = _default_of(graph, src.inputs[1])
                    if pred is not None and value is not None and value.size == 1 and bool(value) == (port == "0"):
                        return pred
                elif src.op != "Merge":
                    nxt.append(src)
        frontier = nxt
    return None


def branch_findings(model, tf_by_node):
    """Accepted-but-wrong findings (route onnx) for the TF graph's random or batch-dependent matches
    whose nodes tf2onnx put inside an If or Loop body (a tf.cond branch, a while loop): the ONNX
    model's top level does not show them. ``model``: the ONNX ModelProto; ``tf_by_node``: node name
    -> Match of the TF graph (a branch its switch leaves idle is neither random nor batch-dependent)."""
    from pipeline.check.findings import Finding

    inner = {}  # node name -> (op type, the control-flow node holding it)
    stack = [(node, None) for node in model.graph.node]
    while stack:
        node, holder = stack.pop()
        if holder is not None:
            inner[node.name] = (node.op_type, holder)
        for attr in node.attribute:
            for body in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                stack += [(n, holder or "{} {}".format(node.op_type, node.name)) for n in body.node]
    findings, seen = [], set()
    for name, match in tf_by_node.items():
        if name not in inner or id(match) in seen or not (match.stochastic or match.batch_dependent):
            continue
        seen.add(id(match))
        names = [n for n in match.nodes if n in inner]
        findings.append(Finding(
            "warning", "onnx", "accepted_but_wrong", "/".join(sorted({inner[n][0] for n in names})), names,
            "converts without error, but {} (inside {}, the ONNX form of its tf.cond or loop)".format(
                match.cause, inner[names[0]][1]), match.fix, match.rewrite, match.batch_dependent))
    return findings


def _default_of(graph, tensor, hops=4):
    """(placeholder name, its default value) when ``tensor`` is an unfed PlaceholderWithDefault with a
    constant default, read through Identity (tf.cond's pred_id); (None, None) otherwise."""
    node = graph.producer(tensor)
    for _ in range(hops):
        if node is None or node.op != "Identity" or len(node.inputs) != 1:
            break
        node = graph.producer(node.inputs[0])
    if node is None or node.op != "PlaceholderWithDefault" or node.name + ":0" in graph.inputs:
        return None, None
    return node.name, _const(graph, node.inputs[0])


def _const(graph, tensor):
    import numpy as np

    node = graph.producer(tensor)
    while node is not None and node.op == "Identity" and len(node.inputs) == 1:
        node = graph.producer(node.inputs[0])
    if node is None or node.op != "Const":
        return None
    value = node.attrs.get("value")
    try:
        return np.asarray(value.array() if hasattr(value, "array") else value)
    except Exception:  # an undecodable tensor: unknown, never a guess
        return None


_ARITHMETIC = {
    "Add": lambda a, b: a + b, "AddV2": lambda a, b: a + b, "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b, "RealDiv": lambda a, b: a / b, "Div": lambda a, b: a / b,
    "Maximum": max, "Minimum": min,
}


def _scalar(graph, tensor, defaults, depth=6):
    """The value of a scalar expression of constants and unfed PlaceholderWithDefaults (at their
    defaults; their names go to ``defaults``), or None (a fed placeholder, anything else, and a value that is not a
    finite number: the model file is untrusted, and NaN or infinity decides nothing)."""
    try:
        value = _scalar_value(graph, tensor, defaults, depth)
    except (OverflowError, ZeroDivisionError, ValueError):
        return None
    return value if value is not None and math.isfinite(value) else None


def _scalar_value(graph, tensor, defaults, depth):
    node = graph.producer(tensor)
    if node is None or depth == 0:
        return None
    if node.op == "Const":
        value = _const(graph, tensor)
        return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None
    if node.op == "PlaceholderWithDefault":
        name, value = _default_of(graph, tensor)
        if name is None or value is None or value.size != 1:
            return None
        defaults.append(name)
        return float(value.reshape(-1)[0])
    data = [t for t in node.inputs if t]
    if node.op in ("Identity", "Cast", "Neg", "Reciprocal") and len(data) == 1:
        value = _scalar(graph, data[0], defaults, depth - 1)
        if value is None or node.op in ("Identity", "Cast"):
            return value
        return -value if node.op == "Neg" else (1.0 / value if value else None)
    if node.op in _ARITHMETIC and len(data) == 2:
        a, b = (_scalar(graph, t, defaults, depth - 1) for t in data)
        if a is None or b is None or (node.op in ("RealDiv", "Div") and b == 0):
            return None
        return _ARITHMETIC[node.op](a, b)
    return None


def _uniform_range(graph, tensor, depth=4):
    """[low, high) of a RandomUniform (its [0, 1)) scaled and shifted by constants (random_uniform's
    minval/maxval), or None."""
    node = graph.producer(tensor)
    if node is None or depth == 0:
        return None
    if node.op == "RandomUniform":
        return 0.0, 1.0
    data = [t for t in node.inputs if t]
    if node.op == "Identity" and len(data) == 1:
        return _uniform_range(graph, data[0], depth - 1)
    if node.op in ("Mul", "Add", "AddV2", "Sub") and len(data) == 2:
        for rand, other in ((data[0], data[1]), (data[1], data[0])):
            span, used = _uniform_range(graph, rand, depth - 1), []
            value = _scalar(graph, other, used) if span else None
            if value is None or used:  # minval/maxval: constants only
                continue
            if node.op == "Mul":
                return (span[0] * value, span[1] * value) if value > 0 else None
            if node.op == "Sub":
                return (span[0] - value, span[1] - value) if rand == data[0] else None
            return span[0] + value, span[1] + value
    return None


def _keeps_all_by_default(graph, path, keep_prob):
    """"placeholder keep_prob (default 1.0)" when the dropout on ``path`` keeps every unit with its
    keep-probability placeholders unfed at their defaults; None when its mask is random."""
    if not keep_prob:
        return None
    for name in path:
        node = graph.nodes[name]
        if node.op == "Floor":  # mask = floor(keep_prob + uniform): 1 everywhere for keep_prob 1
            add = graph.producer(node.inputs[0])
            if add is None or add.op not in ("Add", "AddV2") or len(add.inputs) != 2:
                return None
            for rand, other in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
                span, defaults = _uniform_range(graph, rand), []
                keep = _scalar(graph, other, defaults) if span else None
                if keep is not None and defaults and math.floor(keep + span[0]) >= 1 and \
                        math.floor(keep + span[0]) == math.ceil(keep + span[1]) - 1:
                    return _named(graph, defaults)
            return None
        if node.op in ("GreaterEqual", "Greater", "Less", "LessEqual") and len(node.inputs) == 2:
            defaults = []
            span = _uniform_range(graph, node.inputs[0])
            if span is not None:  # uniform OP threshold: true for every draw = keep every unit
                rate = _scalar(graph, node.inputs[1], defaults)
                always = rate is not None and {"GreaterEqual": rate <= span[0], "Greater": rate < span[0],
                                               "Less": span[1] <= rate, "LessEqual": span[1] <= rate}[node.op]
            else:
                span = _uniform_range(graph, node.inputs[1])
                rate = _scalar(graph, node.inputs[0], defaults) if span else None
                always = rate is not None and {"GreaterEqual": span[1] <= rate, "Greater": span[1] <= rate,
                                               "Less": rate < span[0], "LessEqual": rate <= span[0]}[node.op]
            return _named(graph, defaults) if always and defaults else None
    return None


def _named(graph, defaults):
    parts = []
    for name in sorted(set(defaults)):
        _, value = _default_of(graph, name)
        parts.append("placeholder {} (PlaceholderWithDefault, default {})".format(name, float(value.reshape(-1)[0])))
    return " and ".join(parts)


def _keep_prob_placeholders(graph, nodes, hops=3):
    """Scalar placeholders feeding the dropout arithmetic (a keep_prob or rate fed at run time),
    directly or through a few ops (rate = 1 - keep_prob)."""
    found, frontier, seen = set(), list(nodes), set(nodes)
    for _ in range(hops):
        nxt = []
        for name in frontier:
            for inp in graph.nodes[name].inputs:
                src = graph.producer(inp)
                if src is None or src.name in seen or src.op == "Const":
                    continue
                seen.add(src.name)
                if src.op in ("Placeholder", "PlaceholderWithDefault"):
                    if src.attrs.get("shape") == []:
                        found.add(src.name)
                elif src.op not in RANDOM:
                    nxt.append(src.name)
        frontier = nxt
    return found


def _walk_to_mask(graph, start):
    """Breadth-first from a random op to the mask-forming op; returns (nodes on the way, form)."""
    frontier = [(start.name, [start.name])]
    seen = {start.name}
    for _ in range(_DROPOUT_HOPS):
        nxt = []
        for name, path in frontier:
            for consumer in graph.consumers(name):
                if consumer.name in seen:
                    continue
                seen.add(consumer.name)
                p = path + [consumer.name]
                if consumer.op == "Floor":
                    return p + _applied_by(graph, consumer, ("Mul",)), "RandomUniform → Floor → Mul"
                if consumer.op in ("GreaterEqual", "Greater", "Less", "LessEqual"):
                    tail = _applied_by(graph, consumer, ("Cast", "Select", "SelectV2"))
                    if tail:
                        tail += _applied_by(graph, graph.nodes[tail[-1]], ("Mul",))
                    return p + tail, "RandomUniform → {} → {} → Mul".format(
                        consumer.op, graph.nodes[tail[0]].op if tail else "Cast")
                nxt.append((consumer.name, p))
        frontier = nxt
    return [], None


def _applied_by(graph, node, ops):
    for consumer in graph.consumers(node.name):
        if consumer.op in ops:
            return [consumer.name]
    return []

