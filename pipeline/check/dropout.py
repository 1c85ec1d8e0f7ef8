"""Dropout left in training mode in a TensorFlow graph, and whether tf2onnx's dropout rewriter
replaces it (its exact patterns, a constant rate) or it stays random in the ONNX model.

    dropout_matches(graph)                              # [Match(kind="dropout_training", ...)]
    tf2onnx_replaces_dropout(graph, match, constant)    # True: ONNX Dropout, a no-op at inference
"""

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

