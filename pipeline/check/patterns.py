"""Why a node is in a deploy graph: recognise the subgraphs users meet, and say what fixes them.

Structural patterns are found here (dropout in training mode, batch norm in training mode,
reductions over the batch axis); op families (input pipelines, detection post-processing,
control flow, optimizer/saver/summary ops, variables...) are data in targets/ops/op_families.yaml.
Each match carries its cause, its fix and the rewrite pass that fixes it, where there is one.
"""

from dataclasses import dataclass, field
from typing import List, Optional

from pipeline.graph.analysis import FUSED_BATCH_NORM, RANDOM
from pipeline.targets.families import Family, families, family_of, tensorflow_ops  # noqa: F401


_DROPOUT_HOPS = 6


@dataclass
class Match:
    kind: str  # dropout_training | batchnorm_training | batch_reduction | family name
    nodes: List[str]
    cause: str
    fix: str
    rewrite: Optional[str] = None
    severity: str = "warning"
    batch_dependent: bool = False
    stochastic: bool = False
    family: Optional[str] = None
    boundary: List[str] = field(default_factory=list)
    routes: tuple = ()  # routes the match explains; () = every route
    explains_only: bool = False
    fed_by: List[str] = field(default_factory=list)  # placeholders fed at run time (a dropout's keep_prob)


# ------------------------------------------------------------------------------ recognisers


def find_patterns(graph):
    """All matches in a TensorFlow graph (an ONNX graph gets the stochastic/family checks only)."""
    matches = []
    matches += dropout_matches(graph)
    in_dropout = {n for m in matches for n in m.nodes}
    matches += _batchnorm_training(graph)
    matches += _batch_reductions(graph)
    matches += _families(graph, skip=in_dropout)
    return matches


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


def _batchnorm_training(graph):
    matches = []
    for node in graph.nodes.values():
        if node.op in FUSED_BATCH_NORM and node.attrs.get("is_training") is True:
            matches.append(Match(
                kind="batchnorm_training",
                nodes=[node.name],
                cause="batch norm in training mode ({} is_training=true): it normalises with the batch's own mean and "
                      "variance, so a sample's output depends on the others in its batch".format(node.op),
                fix="export with training=False (deploy's export stage does) or apply rewrite bn_inference "
                    "(uses the moving mean and variance)",
                rewrite="bn_inference",
                severity="warning",
                batch_dependent=True,
            ))
    return matches


def _batch_reductions(graph):
    """Mean/Sum/Max/Min over axis 0 of a 4-D activation (e.g. tf.nn.moments in a training-mode BN)."""
    matches = []
    for node in graph.nodes.values():
        if node.op not in ("Mean", "Sum", "Max", "Min", "Prod") or len(node.inputs) < 2:
            continue
        axes = graph.producer(node.inputs[1])
        if axes is None or axes.op != "Const":
            continue
        value = axes.attrs.get("value")
        flat = value.ints() if hasattr(value, "ints") else None
        if flat is None:
            continue
        if 0 in flat:
            matches.append(Match(
                kind="batch_reduction",
                nodes=[node.name],
                cause="{} over the batch axis (axis 0): a sample's output depends on the others in its batch "
                      "(e.g. tf.nn.moments of a training-mode batch norm)".format(node.op),
                fix="use fixed statistics at inference (batch norm with training=False, rewrite bn_inference)",
                rewrite="bn_inference",
                severity="warning",
                batch_dependent=True,
            ))
    return matches


def _families(graph, skip):
    by_family = {}
    for node in graph.nodes.values():
        if node.name in skip:
            continue
        fam = family_of(node.op)
        if fam is not None:
            by_family.setdefault(fam.name, (fam, []))[1].append(node.name)
    matches = []
    for fam, names in by_family.values():
        boundary = _boundary(graph, set(names), fam) if fam.cut else []
        matches.append(Match(
            kind=fam.name,
            family=fam.name,
            nodes=names,
            cause=fam.cause,
            fix=fam.fix.format(boundary=", ".join(boundary[:3]) or "its boundary"),
            rewrite=fam.rewrite,
            severity=fam.severity,
            batch_dependent=fam.batch_dependent,
            stochastic=fam.name == "stochastic",
            boundary=boundary,
            routes=fam.routes,
            explains_only=fam.explains_only,
        ))
    return matches


def _boundary(graph, members, fam):
    """Where to cut: after an input pipeline (its consumers outside it), before post-processing (its inputs)."""
    out = []
    if fam.name == "input_pipeline":
        for name in members:
            for consumer in graph.consumers(name):
                if consumer.name not in members and consumer.name not in out:
                    out.append(consumer.name)
    else:
        for name in members:
            for inp in graph.nodes[name].inputs:
                src_node = graph.producer(inp)
                if src_node is not None and src_node.name not in members and src_node.op != "Const" \
                        and src_node.name not in out:
                    out.append(src_node.name)
    return sorted(out)


ONNX_RANDOM = ("RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike", "Multinomial", "Bernoulli")


def find_onnx_patterns(graph):
    """ONNX graphs: random ops, and batch norm in training mode (training_mode=1, opset 14+)."""
    matches = []
    random = [n.name for n in graph.nodes.values() if n.op in ONNX_RANDOM and n.domain in ("", "ai.onnx")]
    if random:
        matches.append(Match(
            kind="stochastic", family="stochastic", nodes=random,
            cause="random-number ops make the output random (left-over dropout or augmentation from training)",
            fix="convert from an inference graph (training=False), or remove the random branch (rewrite strip_dropout)",
            rewrite="strip_dropout", severity="warning", stochastic=True))
    for node in graph.nodes.values():
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op == "BatchNormalization" and node.attrs.get("training_mode") == 1:
            matches.append(Match(
                kind="batchnorm_training", nodes=[node.name],
                cause="batch norm in training mode (BatchNormalization training_mode=1): it normalises with the batch's "
                      "own mean and variance, so a sample's output depends on the others in its batch",
                fix="convert from an inference graph (training=False; deploy's export stage does)",
                severity="warning", batch_dependent=True))
        elif node.op in ONNX_REDUCTIONS and 0 in _onnx_axes(graph, node):
            matches.append(Match(
                kind="batch_reduction", nodes=[node.name],
                cause="{} over the batch axis (axis 0): a sample's output depends on the others in its batch "
                      "(e.g. the moments of a training-mode batch norm)".format(node.op),
                fix="convert from an inference graph (batch norm with training=False; deploy's export stage does)",
                severity="warning", batch_dependent=True))
    return matches


ONNX_REDUCTIONS = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def _onnx_axes(graph, node):
    """The axes an ONNX reduction reduces: the ``axes`` attribute (older opsets) or its constant
    second input (ReduceSum 13+, the other reductions 18+)."""
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        value = graph.initializers.get(node.inputs[1])
        producer = graph.producer(node.inputs[1])
        if value is None and producer is not None and producer.op == "Constant":
            value = producer.attrs.get("value")
        axes = value.ints() if value is not None and hasattr(value, "ints") else None
        if axes is None and value is not None and getattr(value, "value", None) is not None:
            axes = [int(a) for a in value.value.flat]
    if axes is None:  # no axes: every axis, the batch axis too (unless noop_with_empty_axes)
        return [] if node.attrs.get("noop_with_empty_axes") == 1 else [0]
    return list(axes)  # a negative axis is left as it is: without the input's rank it names no axis for sure
