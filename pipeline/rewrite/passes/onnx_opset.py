"""lower_opset: ONNX models down to the opset a target's TensorRT parses (see lower_opset's docstring).

Split from ``passes/onnx.py`` for size; the pass is registered there, in its place among the others.
"""

from pipeline.errors import EXIT_NOT_DEPLOYABLE, DeployError

_HIDDEN = "deploy.lower_opset.hidden"  # lower_opset's private domain for nodes the converter must not see

# Operators whose upgrade (v-1 -> v) ONNX's version converter registers as a CompatibleAdapter
# (same semantics; the new version only widens types or adds attributes/inputs whose defaults
# keep the old behaviour), plus BatchNormalization 14 (inference mode is BatchNormalization-9).
# The converter has no downgrade adapter for most of them, so lower_opset relabels such a node
# when the step down fails, and onnx.checker (full) then proves the node uses nothing newer.
_SAME_SEMANTICS = {
    14: {"Add", "CumSum", "Div", "Identity", "Mul", "Relu", "Reshape", "Sub", "BatchNormalization"},
    15: {"BatchNormalization", "Pow", "Shape"},
    16: {"ScatterElements", "ScatterND", "Identity", "Loop", "If", "Where", "Scan", "LessOrEqual",
         "GreaterOrEqual", "LeakyRelu", "PRelu"},
    18: {"Pad", "Resize", "OptionalGetElement", "OptionalHasElement", "ScatterND", "ScatterElements"},
    19: {"Equal", "AveragePool", "Cast", "CastLike", "Constant", "DequantizeLinear", "Identity", "If", "Loop",
         "Pad", "QuantizeLinear", "Reshape", "Resize", "Scan", "Shape", "Size"},
}


def lower_opset(model, options):
    """Lower the ONNX opset to options["opset"] (onnx version_converter, step by step); no-op if already <= it.

    One opset step at a time: ONNX's converter adapts what it has adapters for; the ops it has no
    downgrade adapter for but whose semantics did not change at that step (``_SAME_SEMANTICS``:
    Relu/Add/Mul/Sub/Div/Reshape/Identity 14, BatchNormalization 14/15, Pad/Resize 18, ...) are
    hidden from it and keep their form (relabelled), and onnx.checker (full) at the end proves no
    node uses a type, attribute or input newer than the target (Reshape allowzero=1 fails there).
    Attributes that change nothing are dropped first (a new attribute at its default;
    noop_with_empty_axes with constant axes). An op with no version at the target
    (LayerNormalization, GridSample at 13), or an op neither way can lower, is a DeployError naming
    the ops and nodes. Lowers ``ir_version`` to what the target needs (7 for opset 13) when that
    still checks. Other domains are left as they are. Sites: the nodes whose operator version
    changed (the graph's name when only the opset number did).
    """
    if "opset" not in options:
        raise DeployError("lower_opset: options['opset'] (the target opset, e.g. 13) is required")
    target = int(options["opset"])
    source = _default_opset(model)
    if source <= target:
        return model, []
    too_new = _ops_missing_at(model, target)
    if too_new:
        raise DeployError("lower_opset: no opset-{} version of {} (nodes: {}); re-export the model at opset {} "
                          "or replace them".format(target, ", ".join(sorted(too_new)), _first(too_new), target),
                          code=EXIT_NOT_DEPLOYABLE)
    out = model
    for version in range(source, target, -1):
        out = _step_down(out, version, target)
    left = _ops_missing_at(out, target)
    if left:
        raise DeployError("lower_opset: {} left newer than opset {} (nodes: {}); re-export the model at opset {}"
                          .format(", ".join(sorted(left)), target, _first(left), target), code=EXIT_NOT_DEPLOYABLE)
    _lower_ir_and_check(out, target)
    sites = [node_label(n) for n in model.graph.node
             if n.domain in ("", "ai.onnx") and _since(n.op_type, source) != _since(n.op_type, target)]
    return out, sites or [model.graph.name or "graph"]


def node_label(node):
    """A node's name, or op(first output) when it has none: what sites and messages show."""
    name = node.name
    op = getattr(node, "op", None) or getattr(node, "op_type", "")
    if name:
        return name
    outs = node.outputs if hasattr(node, "outputs") else node.output
    first = outs[0] if len(outs) else ""
    return "{}({})".format(op, getattr(first, "name", first))


def _default_opset(model):
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    raise DeployError("lower_opset: the model imports no default ONNX opset; it is not a valid ONNX model")


def _lower_ir_and_check(model, target):
    """Lower ``model.ir_version`` (in place) to what its opsets need when that still checks; a
    DeployError when the lowered model does not pass onnx.checker (full) at all."""
    import onnx

    needed = max(onnx.helper.find_min_ir_version_for(list(model.opset_import), True), 8 if len(model.functions) else 0)
    for ir in dict.fromkeys([min(model.ir_version, needed), model.ir_version]):
        model.ir_version = ir
        try:
            onnx.checker.check_model(model, full_check=True)
            return
        except Exception as e:
            error = str(e).strip().splitlines()[0]
    raise DeployError("lower_opset: the model lowered to opset {} is not valid: {}; re-export it at opset {}"
                      .format(target, error, target), code=EXIT_NOT_DEPLOYABLE)


def _drop_idle_attributes(model, version):
    """``model``, or a copy without attributes that change nothing and block the step down from
    ``version``: one an op got at ``version`` holding its default value (the same as absent), and
    noop_with_empty_axes when a constant non-empty axes input is given (tf2onnx writes it on
    ReduceMean-18; the converter's 18->17 adapter moves the axes to an attribute but keeps it, and
    ReduceMean-13 rejects it)."""
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    constants = {t.name: t for t in out.graph.initializer}
    constants.update({n.output[0]: n.attribute[0].t for n in out.graph.node
                      if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"})
    dropped = False
    for node in _default_nodes(out):
        new, old = _schema(node.op_type, version), _schema(node.op_type, version - 1)
        if new is None or old is None or new.since_version != version:
            continue
        for attr in list(node.attribute):
            if attr.name in old.attributes:
                continue
            spec = new.attributes.get(attr.name)
            default = spec is not None and spec.default_value.name and (
                onnx.helper.get_attribute_value(attr) == onnx.helper.get_attribute_value(spec.default_value))
            axes = node.input[1] if attr.name == "noop_with_empty_axes" and len(node.input) > 1 else ""
            given = axes in constants and onnx.numpy_helper.to_array(constants[axes]).size > 0
            if default or given:
                node.attribute.remove(attr)
                dropped = True
    return out if dropped else model


def _schema(op, opset):
    import onnx

    try:
        return onnx.defs.get_schema(op, opset, "")
    except Exception:
        return None


def _nodes(model):
    """Every node of the model, If/Loop/Scan bodies included."""
    stack = list(model.graph.node)
    while stack:
        node = stack.pop()
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                stack.extend(sub.node)
        yield node


def _default_nodes(model):
    """Every default-domain node, subgraphs included (their op versions follow the model's opset)."""
    return (node for node in _nodes(model) if node.domain in ("", "ai.onnx"))


def _since(op, opset):
    """since_version of ``op``'s schema at ``opset`` (None: no such op then)."""
    schema = _schema(op, opset)
    return schema.since_version if schema is not None else None


def _ops_missing_at(model, opset):
    """{op: [node labels]} for default-domain ops with no schema at ``opset``."""
    missing = {}
    for node in _default_nodes(model):
        if _since(node.op_type, opset) is None:
            missing.setdefault(node.op_type, []).append(node_label(node))
    return missing


def _ops_changed_at(model, version):
    """{op: [node labels]} for default-domain ops that got a new version at opset ``version``."""
    changed = {}
    for node in _default_nodes(model):
        if _since(node.op_type, version) == version:
            changed.setdefault(node.op_type, []).append(node_label(node))
    return changed


def _first(by_op, count=3):
    names = [name for names in by_op.values() for name in names]
    return ", ".join(names[:count]) + (", ..." if len(names) > count else "")


def _step_down(model, version, target):
    """``model`` at opset ``version - 1``. The converter's adapters first; when it has none for some
    ops that kept their semantics at ``version`` (``_SAME_SEMANTICS``), those nodes are hidden from
    it in a private domain (so they keep their form: relabelled) while it adapts the rest."""
    import onnx

    model = _drop_idle_attributes(model, version)
    try:
        return onnx.version_converter.convert_version(model, version - 1)
    except Exception as e:
        error = e
    changed = _ops_changed_at(model, version)
    same = {op for op in changed if op in _SAME_SEMANTICS.get(version, ())}
    if same:
        hidden = onnx.ModelProto()
        hidden.CopyFrom(model)
        for node in _nodes(hidden):
            if node.domain in ("", "ai.onnx") and node.op_type in same:
                node.domain = _HIDDEN
        hidden.opset_import.add(domain=_HIDDEN, version=1)
        try:
            lowered = onnx.version_converter.convert_version(hidden, version - 1)
        except Exception as e:
            error = e
        else:
            for node in _nodes(lowered):
                if node.domain == _HIDDEN:
                    node.domain = ""
            kept = [imp for imp in lowered.opset_import if imp.domain != _HIDDEN]
            del lowered.opset_import[:]
            lowered.opset_import.extend(kept)
            return lowered
    blocking = {op: nodes for op, nodes in changed.items() if op not in same} or changed
    reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
    raise DeployError("lower_opset: cannot lower {} from opset {} to {} (nodes: {}): {}; re-export the model at "
                      "opset {}".format(", ".join(sorted(blocking)) or "the model", version, version - 1,
                                        _first(blocking) or "-", reason, target), code=EXIT_NOT_DEPLOYABLE)
