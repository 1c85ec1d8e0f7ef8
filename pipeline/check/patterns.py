"""Why a node is in a deploy graph: recognise the subgraphs users meet, and say what fixes them.

Structural patterns are found here and in the modules beside it: dropout in training mode
(dropout.py), batch norm in training mode, reductions over the batch axis (the batch is followed
through the data flow in batch_flow.py; onnx_batch.py for ONNX); op families (input pipelines,
detection post-processing, control flow, optimizer/saver/summary ops, variables...) are data in
targets/ops/op_families.yaml. Each match carries its cause, its fix and the rewrite pass that
fixes it, where there is one.
"""

from pipeline.check.batch_flow import batch_axes, flagged_reductions
from pipeline.check.dropout import dropout_matches, idle_branch
from pipeline.check.match import Match
from pipeline.graph.analysis import FUSED_BATCH_NORM
from pipeline.targets.families import Family, families, family_of, tensorflow_ops  # noqa: F401

__all__ = ["Match", "find_patterns", "find_onnx_patterns", "dropout_matches", "keep_prob_input", "batch_axes", "tensorflow_ops",
           "ONNX_RANDOM", "ONNX_REDUCTIONS"]


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


def _batchnorm_training(graph):
    matches = []
    for node in [n for n in graph.nodes.values() if n.op in FUSED_BATCH_NORM]:
        if node.attrs.get("is_training") is not True:
            continue
        switch = idle_branch(graph, node)
        if switch is not None:  # TF1's tf.cond(is_training, ...) with is_training left at its default False
            matches.append(Match(
                kind="batchnorm_training",
                nodes=[node.name],
                cause="batch norm in training mode ({} is_training=true) in the tf.cond branch that {} (a "
                      "PlaceholderWithDefault) selects only when fed True: unfed, the inference branch runs (fed "
                      "True, a sample's output depends on the others in its batch)".format(node.op, switch),
                fix="leave {} unfed at inference, or make both branches inference: rewrite bn_inference".format(switch),
                rewrite="bn_inference",
                severity="info",
                explains_only=True,
                fed_by=[switch],
            ))
        else:
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
    """Reductions over an axis that carries the batch: batch-dependent (e.g. tf.nn.moments of a
    training-mode batch norm over axis 0). Which tensors carry the batch, and on which axis, is
    propagated from the inputs (batch_axes); a reduction of a tensor that carries none — shape
    arithmetic such as Keras Flatten's Shape -> StridedSlice -> Prod -> Pack -> Reshape — never is."""
    flagged = flagged_reductions(graph)
    matches = []
    for name, axis in flagged:
        node = graph.nodes[name]
        matches.append(Match(
            kind="batch_reduction",
            nodes=[name],
            cause="{} over the batch axis (axis {}): a sample's output depends on the others in its batch "
                  "(e.g. tf.nn.moments of a training-mode batch norm)".format(node.op, axis),
            fix="use fixed statistics at inference (batch norm with training=False, rewrite bn_inference)",
            rewrite="bn_inference",
            severity="warning",
            batch_dependent=True,
        ))
    return matches


def _families(graph, skip):
    values = graph.nodes.values()
    fam_of = {}  # family_of once per op type, not per node
    for op in {n.op for n in values}:
        fam = family_of(op)
        if fam is not None:
            fam_of[op] = fam
    by_family = {}
    if fam_of:
        for name, op in [(n.name, n.op) for n in values if n.op in fam_of]:
            if name not in skip:
                fam = fam_of[op]
                by_family.setdefault(fam.name, (fam, []))[1].append(name)
    if "debug" in by_family:
        by_family["debug"] = (by_family["debug"][0], _removable(graph, by_family["debug"][1]))
    matches = []
    for fam, names in by_family.values():
        if not names:
            continue
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


def _removable(graph, names):
    """The debug-family nodes rewrite remove_identity removes: not a loop's or a cond's own NoOp or
    pass-through (inside its frame, or one control flow waits on), which it leaves alone because
    removing them breaks the loop (pipeline.graph.frames)."""
    from pipeline.graph.frames import held_by_control_flow, tf_edges

    held = held_by_control_flow(tf_edges(graph)) if graph.kind == "tensorflow" else set()
    return [n for n in names if n not in held]


def _boundary(graph, members, fam):
    """Where to cut: an input pipeline's own nodes that the model reads (the cut pass turns the node named into a
    placeholder: naming its consumer, the first conv, would drop that conv and its weights), before post-processing
    (its inputs)."""
    out = []
    if fam.name == "input_pipeline":
        for name in members:
            if any(consumer.name not in members for consumer in graph.consumers(name)) and name not in out:
                out.append(name)
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
    for name, op, axis in _onnx_axes(graph):
        matches.append(Match(
            kind="batch_reduction", nodes=[name],
            cause="{} over the batch axis (axis {}): a sample's output depends on the others in its batch "
                  "(e.g. the moments of a training-mode batch norm)".format(op, axis),
            fix="convert from an inference graph (batch norm with training=False; deploy's export stage does)",
            severity="warning", batch_dependent=True))
    return matches


ONNX_REDUCTIONS = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def _onnx_axes(graph):
    """[(node, op, batch axis)] of the nodes that mix the samples of a batch (onnx_batch.batch_reductions:
    the batch axis is propagated from the graph inputs; shape arithmetic never carries it). Read from
    the model file the graph came from; a graph with no readable file claims none."""
    from pipeline.check.onnx_batch import batch_reductions
    from pipeline.check.onnx_types import load_model

    model = load_model(graph.source) if graph.source else None
    if model is None:
        return []
    return [(name, op, axis) for name, op, axis in batch_reductions(model) if name in graph.nodes]


def keep_prob_input(graph_def_path, input_names):
    """The input among ``input_names`` (node names) that feeds dropout as its keep probability or
    rate, or None."""
    from pipeline.graph.readers import read_model

    graph = read_model(graph_def_path)
    for match in find_patterns(graph):
        if match.kind != "dropout_training":
            continue
        for name in input_names:
            if name in match.fed_by:
                return name
    return None
