"""Per-route checks: which nodes a route (uff, onnx, tftrt) cannot take, from the target's op tables.

Every unsupported op is reported, grouped by op with its nodes; nothing stops at the first.
A finding's cause and fix come from the pattern or op family its nodes belong to, when they do.
"""

from collections import OrderedDict

from pipeline.check.findings import INT64_INPUT_FIX, Finding, RouteResult
from pipeline.check.op_index import OpIndex

# TF dtype names -> the ONNX/TensorRT type names the op tables use
_TYPE_NAMES = {
    "float32": "FLOAT32", "float16": "FLOAT16", "float64": "DOUBLE", "double": "DOUBLE", "int8": "INT8",
    "uint8": "UINT8", "int32": "INT32", "int64": "INT64", "bool": "BOOL", "string": "STRING",
    "float": "FLOAT32", "bfloat16": "BFLOAT16",
}
# ops every converter takes care of by itself
_BOOKKEEPING = {"Placeholder", "Const", "Identity", "NoOp"}


def onnx_runtime_label(target, table):
    """What takes the ONNX model on this target: TensorRT's ONNX parser, or ONNX Runtime (host_cpu)."""
    if target.tensorrt:
        return "TensorRT {} ONNX parser".format(target.tensorrt)
    return "ONNX Runtime CPU kernels ({})".format(table.applies_to or table.name)


def _explain(names, by_node, default_cause, default_fix, default_rewrite=None, route=None):
    for name in names:
        match = by_node.get(name)
        if match is not None and (not match.routes or route in match.routes):
            return match.cause, match.fix, match.rewrite
    return default_cause, default_fix, default_rewrite


def _plugin_finding(route, op, names, target, plugins):
    present = plugins.get(op)
    if present:
        return Finding("info", route, "plugin", op, names,
                       "TensorRT plugin {} (in TensorRT {}'s plugin library)".format(op, target.tensorrt),
                       "nothing to do: the parser maps it to the plugin")
    return Finding("blocker", route, "plugin", op, names,
                   "TensorRT plugin {} is not in TensorRT {}'s plugin library".format(op, target.tensorrt),
                   "use a plugin the target has, build and load this plugin on the device, or run it on the CPU")


def _per_op(func):
    """``func(op)`` computed once per distinct op (graphs have 100,000s of nodes and few ops)."""
    cache = {}

    def cached(op):
        if op not in cache:
            cache[op] = func(op)
        return cache[op]

    return cached


def check_uff(graph, target, table, by_node, plugins, known_plugins, skip=frozenset(), index=None):
    result = RouteResult("uff", table.name, "UFF parser, TensorRT {}".format(target.tensorrt))
    supported = _per_op(table.is_supported)
    index = index or OpIndex(graph)
    # NoOps carry no data (only control edges); the debug-family warning covers them
    bad = index.grouped(lambda op: op != "NoOp" and not supported(op), lambda n: n.name not in skip)
    for op, names in bad.items():
        if op in known_plugins:
            result.findings.append(_plugin_finding("uff", op, names, target, plugins))
            continue
        support = table.lookup(op)
        reason = getattr(support, "reason", None) or "the UFF converter has no conversion for {}".format(op)
        cause, fix, rewrite = _explain(names, by_node, reason, "replace {} with ops UFF supports, or take the onnx route".format(op),
                                       route="uff")
        if cause != reason:
            cause = "{} ({})".format(cause, reason)
        result.findings.append(Finding("blocker", "uff", "unsupported_op", op, names, cause, fix, rewrite))
    for name, dims in _dynamic_inputs(graph):
        result.findings.append(Finding(
            "blocker", "uff", "dynamic_shape", None, [name],
            "input {} has dynamic dimensions {} beyond the batch; UFF inputs need fixed C, H, W".format(name, _dims(dims)),
            "fix the input size (rewrite set_input_shape) or export with a fixed input size", "set_input_shape"))
    _accepted_but_wrong(result, graph, by_node, lambda op: table.is_supported(op))
    return result


# Ops tf2onnx's table says it handles but leaves unconverted in a TF2 while loop (a Keras LSTM/GRU
# frozen with convert_variables_to_constants_v2): seen converting with tf2onnx 1.17.0 at opsets 13-18,
# where the real conversion is NO (a Keras 3 LSTM checked with convert=True; test_advice.py checks the prediction).
_TF2ONNX_LEAVES = {
    "TensorListReserve": "tf2onnx 1.17 leaves it a TensorFlow op in the ONNX model (a TF2 while loop over a "
                         "TensorList: a Keras recurrent layer)",
}


def check_tf_onnx(graph, target, table, tf2onnx, opset, by_node, plugins, known_plugins, skip=frozenset(), index=None):
    """A TensorFlow graph on the onnx route: predict tf2onnx's ONNX ops, then check them.
    ``skip``: nodes that never reach tf2onnx's op handlers (folded, rewritten, reported elsewhere)."""
    result = RouteResult("onnx", table.name, "opset {}, {} (tf2onnx prediction)".format(opset, onnx_runtime_label(target, table)),
                         opset=opset)
    no_handler, failing, emitted_bad = OrderedDict(), OrderedDict(), OrderedDict()

    @_per_op
    def verdict(op):
        if op in known_plugins:
            return "plugin", None
        if not tf2onnx.handled(op, opset):
            return "no_handler", None
        error = tf2onnx.error(op, opset) or _TF2ONNX_LEAVES.get(op)
        if error:
            return "failing", error
        return "emits", [o for o in tf2onnx.emits(op, opset) or () if not table.is_supported(o)]

    def flagged(op):  # ops whose nodes make a finding (an op that emits supported ops only makes none)
        if op in _BOOKKEEPING:
            return False
        kind, detail = verdict(op)
        return kind != "emits" or bool(detail)

    # per op, in the order of each op's first node (as walking the nodes would fill the dicts)
    # (an op tf2onnx leaves is reported even where its inputs are constants: tf2onnx does not fold it)
    for op, names in (index or OpIndex(graph)).grouped(
            flagged, lambda n: n.name not in skip or n.op in _TF2ONNX_LEAVES).items():
        kind, detail = verdict(op)
        if kind == "plugin":
            no_handler[("plugin", op)] = names
        elif kind == "no_handler":
            no_handler[("op", op)] = names
        elif kind == "failing":
            failing[op] = (names, detail)
        else:
            for onnx_op in detail:
                emitted_bad.setdefault(onnx_op, OrderedDict())[op] = names
    for (kind, op), names in no_handler.items():
        if kind == "plugin":
            result.findings.append(_plugin_finding("onnx", op, names, target, plugins))
            continue
        default = "tf2onnx has no conversion for {} at opset {}".format(op, opset)
        cause, fix, rewrite = _explain(names, by_node, default, "replace {} before conversion, or cut it out of the graph".format(op), "cut")
        if cause != default:
            cause = "{} ({})".format(cause, default)
        result.findings.append(Finding("blocker", "onnx", "unsupported_op", op, names, cause, fix, rewrite))
    for op, (names, error) in failing.items():
        default = "tf2onnx fails on {} at opset {}: {}".format(op, opset, error)
        cause, fix, rewrite = _explain(names, by_node, default, "replace {} before conversion".format(op))
        if cause != default:
            cause = "{} ({})".format(cause, default)
        result.findings.append(Finding("blocker", "onnx", "unsupported_op", op, names, cause, fix, rewrite))
    for onnx_op, sources in emitted_bad.items():
        names = [n for group in sources.values() for n in group]
        support = table.lookup(onnx_op)
        reason = getattr(support, "reason", None)
        default = "TensorFlow {} becomes ONNX {}, which the {} does not support{}".format(
            "/".join(sources), onnx_op, onnx_runtime_label(target, table), ": " + reason if reason else "")
        cause, fix, rewrite = _explain(names, by_node, default, "replace it with supported ops before conversion")
        if cause != default:
            cause = "{} ({})".format(cause, default)
        result.findings.append(Finding("blocker", "onnx", "unsupported_op", onnx_op, names, cause, fix, rewrite))
    result.findings += _dtype_findings("onnx", graph, table, target)
    result.findings += _dynamic_warnings("onnx", graph)
    _accepted_but_wrong(result, graph, by_node, _per_op(lambda op: _onnx_accepts_tf_op(op, tf2onnx, opset, table)),
                        skip=skip)
    result.accepted_but_wrong += _padded_outputs(graph, table, tf2onnx, opset, skip, target)
    return result


def _padded_outputs(graph, table, tf2onnx, opset, skip, target):
    """TensorFlow ops tf2onnx turns into an ONNX op whose output the parser pads (the table's padded_output), as
    onnx_rules finds them in a converted model: accepted but wrong."""
    from pipeline.check.onnx_rules import padded_output_text

    @_per_op
    def padded(op):
        emitted = tf2onnx.emits(op, opset) if tf2onnx.handled(op, opset) else None
        entries = [(o, table.lookup(o)) for o in emitted or ()]
        return next(((o, e.padded_output) for o, e in entries if e is not None and e.supported and e.padded_output), None)

    found = OrderedDict()
    for node in graph.nodes.values():
        hit = node.name not in skip and padded(node.op)
        if hit:
            found.setdefault((node.op,) + hit, []).append(node.name)
    parser = "TensorRT {}".format(target.tensorrt) if target.tensorrt else table.name
    return [Finding("warning", "onnx", "accepted_but_wrong", onnx_op, names, *padded_output_text(
        "TensorFlow {} (ONNX {}) {}".format(op, onnx_op, names[0]), parser, shape)) for (op, onnx_op, shape), names in found.items()]


def _onnx_accepts_tf_op(op, tf2onnx, opset, table):
    emitted = tf2onnx.emits(op, opset)
    return tf2onnx.handled(op, opset) and emitted is not None and all(table.is_supported(o) for o in emitted)


def check_onnx_model(graph, target, table, by_node, plugins, known_plugins, model=None):
    """An ONNX model on the onnx route: op support, plugins and attribute values of its nodes here;
    every tensor's type, the bodies of If/Loop/Scan, the table's restrictions and the opset range in
    onnx_rules.onnx_findings (on ``model``, or the ModelProto read from graph.source)."""
    from pipeline.check import onnx_rules
    from pipeline.check.onnx_types import load_model

    opset = graph.opset
    result = RouteResult("onnx", table.name, "opset {}, {}".format(opset, onnx_runtime_label(target, table)), opset=opset)
    if model is None:
        model = load_model(graph.source) if graph.source else None
    if model is not None:
        found = onnx_rules.onnx_findings(model, table, target, plugins=plugins, known_plugins=known_plugins)
        result.findings += [f for f in found if f.kind != "accepted_but_wrong"]
        result.accepted_but_wrong += [f for f in found if f.kind == "accepted_but_wrong"]
    elif opset is not None and opset > target.max_opset:
        result.findings.append(Finding(
            "blocker", "onnx", "opset", None, [],
            "the model is at ONNX opset {}; {} parses up to opset {}".format(
                opset, "TensorRT {}".format(target.tensorrt) if target.tensorrt else "ONNX Runtime", target.max_opset),
            "convert again at opset {} (deploy's convert stage picks it for the target; tf2onnx --opset {}), "
            "or lower it (rewrite lower_opset)".format(target.max_opset, target.max_opset), "lower_opset"))
    unknown = OrderedDict()
    supported = _per_op(table.is_supported)
    for node in graph.nodes.values():
        standard = node.domain in ("", "ai.onnx")
        # a standard op the parser imports natively (ScatterElements on 8.x) never reaches its plugin fallback
        if not standard or (node.op in known_plugins and not supported(node.op)):
            unknown.setdefault(node.op, []).append(node.name)
            continue
        if not supported(node.op):
            unknown.setdefault(node.op, []).append(node.name)
            continue
        support = table.lookup(node.op)
        for attr, allowed in (getattr(support, "attributes", None) or {}).items():
            value = node.attrs.get(attr)
            if value is not None and allowed and _text(value) not in [_text(a) for a in allowed]:
                result.findings.append(Finding(
                    "blocker", "onnx", "attribute", node.op, [node.name],
                    "{} {}={!r}: TensorRT {} supports {}".format(node.op, attr, _text(value), target.tensorrt,
                                                                 ", ".join(map(_text, allowed))),
                    "change the attribute before conversion (e.g. another resize mode)"))
    for op, names in unknown.items():
        node = graph.nodes[names[0]]
        if op in known_plugins:
            result.findings.append(_plugin_finding("onnx", op, names, target, plugins))
        elif node.domain not in ("", "ai.onnx"):
            result.findings.append(Finding(
                "blocker", "onnx", "custom_op", op, names,
                "custom op {}::{}: TensorRT needs a plugin registered under the name {}".format(node.domain, op, op),
                "write and load a TensorRT plugin named {}, or replace the op before conversion".format(op)))
        else:
            support = table.lookup(op)
            reason = getattr(support, "reason", None)
            cause, fix, rewrite = _explain(
                names, by_node, "the {} does not support {}{}".format(
                    onnx_runtime_label(target, table), op, ": " + reason if reason else ""),
                "replace {} with supported ops, or cut it out of the graph".format(op))
            result.findings.append(Finding("blocker", "onnx", "unsupported_op", op, names, cause, fix, rewrite))
    if model is None:
        result.findings += _dtype_findings("onnx", graph, table, target)
    result.findings += _dynamic_warnings("onnx", graph)
    _accepted_but_wrong(result, graph, by_node, lambda op: table.is_supported(op))
    return result


def check_tftrt(graph, target, table, by_node, skip=frozenset(), share=None, index=None):
    """TF-TRT: nodes it cannot convert stay in TensorFlow (not blockers); the share of nodes and of
    compute its engines take is reported, and what runs wrong runs wrong in TensorFlow too.
    ``share``: its FLOPs half already under way (pipeline.check.background), else computed here."""
    from pipeline.check.compute import tftrt_share

    result = RouteResult("tftrt", table.name, "TF-TRT (TensorRT {}) inside TensorFlow".format(target.tensorrt))
    supported = _per_op(table.is_supported)
    index = index or OpIndex(graph)
    stay = index.grouped(lambda op: op not in _BOOKKEEPING and not supported(op), lambda n: n.name not in skip)
    for op, names in stay.items():
        result.findings.append(Finding(
            "info", "tftrt", "stays_in_tensorflow", op, names,
            "TF-TRT has no converter for {}: these nodes run in TensorFlow, outside the TensorRT engines".format(op),
            "nothing blocks; for speed, replace {} or take the onnx/uff route".format(op)))
    total = sum(len(names) for names in stay.values())
    result.share = tftrt_share(graph, supported, skip, flops=share, index=index)
    if total:
        result.note = "{} node(s) stay in TensorFlow".format(total)
    elif result.share and result.share.get("nodes", 1.0) < 1.0:  # converters for every op, but segments too small
        from pipeline.check.compute import MINIMUM_SEGMENT_SIZE

        result.note = ("every op has a converter, but connected runs of fewer than {} nodes stay in TensorFlow "
                       "(TF-TRT's minimum_segment_size)".format(MINIMUM_SEGMENT_SIZE))
    else:
        result.note = "every node converts"
    _accepted_but_wrong(result, graph, by_node, lambda op: True, skip=skip)
    return result


def _accepted_but_wrong(result, graph, by_node, accepts, skip=()):
    """Stochastic or batch-dependent subgraphs the route converts without complaint."""
    seen = set()
    for name, match in by_node.items():
        if id(match) in seen or name in skip or not (match.stochastic or match.batch_dependent):
            continue
        seen.add(id(match))
        ops = sorted({graph.nodes[n].op for n in match.nodes if n in graph.nodes})
        if ops and all(accepts(op) for op in ops):
            result.accepted_but_wrong.append(Finding(
                "warning", result.route, "accepted_but_wrong", "/".join(ops), list(match.nodes),
                "converts without error, but {}".format(match.cause), match.fix, match.rewrite, match.batch_dependent))


def _dtype_findings(route, graph, table, target):
    from pipeline.targets.optables import normalize_type

    accepted = set(getattr(table, "data_types", None) or ())
    if not accepted:
        return []
    # the parser's own input types (convertDtype at the table's commit): INT32 on 8.x although
    # operators.md's data-type line leaves it out; UINT8 from 8.5 on (network I/O only)
    io_types = set(getattr(table, "io_types", None) or ())
    quantized = set(getattr(table, "quantized_types", None) or ())
    findings = []
    for tensor, dtype in _input_types(graph):
        name = _TYPE_NAMES.get(dtype, dtype.upper())
        if name in accepted and normalize_type(name) not in quantized or (name == "FLOAT32" and "FLOAT" in accepted):
            continue
        if normalize_type(name) in io_types and normalize_type(name) not in quantized:
            continue
        if name == "INT64":
            findings.append(Finding("warning", route, "dtype", None, [tensor],
                                    "input {} is INT64; TensorRT {} casts INT64 to INT32".format(tensor, target.tensorrt),
                                    INT64_INPUT_FIX))
        elif normalize_type(name) in quantized:
            findings.append(Finding("blocker", route, "dtype", None, [tensor],
                                    "input {} is {}; TensorRT {} takes {} only through QuantizeLinear/DequantizeLinear, "
                                    "never as a network input".format(tensor, name, target.tensorrt, name),
                                    "feed float32 and quantize inside the model, or let TensorRT calibrate (int8 precision)"))
        else:
            findings.append(Finding("blocker", route, "dtype", None, [tensor],
                                    "input {} is {}; TensorRT {} has no {} tensors".format(tensor, name, target.tensorrt, name),
                                    "feed float32 instead (rewrite retype_uint8_input) and convert on the host side", "retype_uint8_input"))
    return findings


def _input_types(graph):
    from pipeline.graph.analysis import input_dtype

    for tensor in graph.inputs:
        dtype = input_dtype(graph, tensor)
        if dtype:
            yield tensor, dtype


def _dynamic_inputs(graph):
    for tensor, dims in (graph.input_shapes or {}).items():
        if dims and any(d is None or isinstance(d, str) for d in list(dims)[1:]):
            yield tensor, dims


def _dynamic_warnings(route, graph):
    return [Finding("warning", route, "dynamic_shape", None, [tensor],
                    "input {} has dynamic dimensions {} beyond the batch; the engine needs an optimization profile "
                    "(min/opt/max shapes)".format(tensor, _dims(dims)),
                    "fix the input size (rewrite set_input_shape) or give a profile when building the engine",
                    "set_input_shape")
            for tensor, dims in _dynamic_inputs(graph)]


def _dims(dims):
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)
