#!/usr/bin/env python3
"""Measure which ONNX ops tf2onnx emits for common TensorFlow ops; write targets/ops/tf2onnx.json.

    python scripts/gen_tf2onnx_table.py [--out targets/ops/tf2onnx.json] [--opsets 13,17,18] [--only Conv2D,Relu6]

Two facts per TF op, both read from the installed tf2onnx rather than typed in:
  handlers  the opsets at which tf2onnx's handler registry (tf2onnx.handler.tf_op) has a handler
            for the op (ONNX domain; a handler registered at opset N serves every opset >= N);
  emits     the ONNX op types in the model that tf2onnx.convert.from_graph_def (the call deploy's
            convert stage makes) returns for a tiny tf.compat.v1 graph holding that op, per opset,
            or the error when it cannot convert it.
A case may build a baseline graph too (the same graph without the op under test); the op's
emission is then the multiset difference, so pass-through ops (Identity, StopGradient...) measure
as [] and scaffolding ops (a Neg before and after) are not charged to them.

from_graph_def does not raise on an unsupported op: it logs "Unsupported ops: ..." and leaves the
TF node in the ONNX graph. A conversion counts as failed when it raised, when tf2onnx logged an
error, or when the model holds a node that is no ONNX op at that opset. Every converted model is
also passed to onnx.checker and run in onnxruntime (CPU) on random inputs next to TensorFlow;
complaints and differing outputs are kept as notes on the variant (they flag conversions that are
not faithful; they do not make a conversion count as failed).
--only prints the measurements as YAML instead of writing the table.
"""

import argparse
import collections
import copy
import datetime
import logging
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: make `pipeline` importable

OUT = ROOT / "targets" / "ops" / "tf2onnx.json"
OPSETS = (13, 17, 18)  # TensorRT 8.2 (JetPack 4.6) parses <= 13, 8.5 <= 17; tf2onnx 1.17 goes up to 18
BOOKKEEPING = ("Constant", "Identity")  # emitted around real work; any ONNX consumer takes them
COMMAND = "python scripts/gen_tf2onnx_table.py"


def load_tf():
    """TensorFlow and tf2onnx with their start-up and conversion chatter silenced."""
    from pipeline.tf import import_tf

    tf = import_tf()
    import tf2onnx

    tf2onnx.logging.set_level(logging.ERROR)
    return tf


# ---------------------------------------------------------------- the handler registry

def handler_registry():
    """{domain: {tf_op: [opsets with a handler]}} from tf2onnx.handler.tf_op, TF front end only."""
    import tf2onnx.tfonnx  # noqa: F401  importing it registers every handler (tf2onnx.onnx_opset.*)
    from tf2onnx.handler import tf_op

    out = {}
    for domain, per_opset in tf_op.get_opsets().items():
        ops = out.setdefault(domain or "ai.onnx", {})
        for opset, handlers in enumerate(per_opset):
            for name in handlers:
                ops.setdefault(name, []).append(opset)
    # TFL_* are the TFLite front end's ops (com.google.tensorflow holds only those): no TF graph has them.
    return {d: {op: v for op, v in sorted(ops.items()) if not op.startswith("TFL_")}
            for d, ops in out.items() if d != "com.google.tensorflow"}


# ---------------------------------------------------------------- one conversion

class _Errors(logging.Handler):
    """Collects what tf2onnx logs at ERROR while a conversion runs (and keeps it off stderr)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def _walk(graph):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _walk(attr.g)
            for sub in attr.graphs:
                yield from _walk(sub)


def _op_name(node):
    return node.op_type if node.domain in ("", "ai.onnx") else "{}:{}".format(node.domain, node.op_type)


def _first_line(text):
    text = str(text).strip()
    return text.splitlines()[0] if text else ""


def _error_text(records):
    """One line: the 'Unsupported ops' summary, else the first failure with its exception."""
    for r in records:
        if r.getMessage().startswith("Unsupported ops"):
            return _first_line(r.getMessage())
    r = records[0]
    line = re.sub(r" \(fct=<.*?>\)", "", _first_line(r.getMessage()))  # drop the handler's repr
    if r.exc_info and r.exc_info[1] is not None:
        exc = r.exc_info[1]
        line = "{}: {}: {}".format(line, type(exc).__name__, _first_line(exc) or "(no message)")
    return line


def convert(graph_def, inputs, outputs, opset):
    """from_graph_def at `opset` -> (model or None, Counter of ONNX op types incl. subgraphs, error or None)."""
    import tf2onnx

    log = logging.getLogger("tf2onnx")
    catcher, propagate = _Errors(), log.propagate
    log.addHandler(catcher)
    log.propagate = False
    try:
        model, _ = tf2onnx.convert.from_graph_def(copy.deepcopy(graph_def), input_names=list(inputs),
                                                  output_names=list(outputs), opset=opset)
    except Exception as e:  # noqa: BLE001  tf2onnx raises anything; the message is the measurement
        return None, None, "{}: {}".format(type(e).__name__, _first_line(e))
    finally:
        log.removeHandler(catcher)
        log.propagate = propagate
    if catcher.records:
        return None, None, _error_text(catcher.records)
    nodes = list(_walk(model.graph))
    not_onnx = sorted({_op_name(n) for n in nodes if n.domain in ("", "ai.onnx") and not _is_onnx(n.op_type, opset)})
    if not_onnx:
        return None, None, "not ONNX ops at opset {}: {}".format(opset, ", ".join(not_onnx))
    return model, collections.Counter(_op_name(n) for n in nodes), None


def _is_onnx(op_type, opset):
    import onnx

    try:
        onnx.defs.get_schema(op_type, opset, "")
        return True
    except onnx.defs.SchemaError:
        return False


def feeds_for(tf, graph_def, inputs, given=None, seed=0):
    """Random values for the graph's placeholders: floats in [0.1, 1), ints in [1, 3], random bools.

    A None dimension becomes 2. Returns None when an input is a string (nothing to compare).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    nodes = {n.name: n for n in graph_def.node}
    feeds = {}
    for name in inputs:
        attr = nodes[name.split(":")[0]].attr
        if given and name in given:
            feeds[name] = np.asarray(given[name]).astype(tf.as_dtype(attr["dtype"].type).as_numpy_dtype)
            continue
        dtype = tf.as_dtype(attr["dtype"].type)
        shape = tuple(2 if d.size < 0 else d.size for d in attr["shape"].shape.dim)
        if dtype == tf.string:
            return None
        if dtype == tf.bool:
            value = rng.random(shape) < 0.5
        elif dtype.is_integer:
            value = rng.integers(1, 4, size=shape)
        else:
            value = rng.uniform(0.1, 1.0, size=shape)
        feeds[name] = np.asarray(value).astype(dtype.as_numpy_dtype)
    return feeds


def run_tf(tf, graph_def, outputs, feeds):
    """TensorFlow's outputs, grappler off: the kernels' own semantics are the reference.

    (With grappler on, TF 2.21 computes Neg(CheckNumerics(Neg(x))) as -x.)
    """
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    with tf.Graph().as_default() as graph:
        tf.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph, config=config) as sess:
            return sess.run(list(outputs), feed_dict=feeds)


def model_checks(model, feeds=None, expected=None):
    """onnx.checker, onnxruntime load and run (compared with TF's outputs): {} when all agree.

    TensorRT parses the model, not onnxruntime; these only flag conversions that are not faithful.
    """
    import numpy as np
    import onnx
    import onnxruntime

    notes = {}
    try:
        onnx.checker.check_model(model)
    except Exception as e:  # noqa: BLE001
        notes["checker_error"] = _first_line(e)
    try:
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only: no deprecation chatter on stderr
        onnxruntime.set_default_logger_severity(3)
        session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        notes["onnxruntime_error"] = _first_line(e)
        return notes
    if feeds is None or expected is None:
        return notes
    names = [i.name for i in session.get_inputs() + session.get_overridable_initializers()]
    try:
        got = session.run(None, {n: feeds[n] for n in names if n in feeds})
    except Exception as e:  # noqa: BLE001
        notes["onnxruntime_error"] = "run: " + _first_line(e)
        return notes
    for i, (want, have) in enumerate(zip(expected, got)):
        want, have = np.asarray(want), np.asarray(have)
        if want.shape != have.shape:
            notes["differs_from_tf"] = "output {}: shape {} vs TF {}".format(i, list(have.shape), list(want.shape))
            break
        if want.dtype.kind in "fc":
            bad = not np.allclose(have.astype(np.float64), want.astype(np.float64), rtol=1e-3, atol=1e-4)
        else:
            bad = not np.array_equal(have, want)
        if bad:
            diff = float(np.max(np.abs(have.astype(np.float64) - want.astype(np.float64))))
            notes["differs_from_tf"] = "output {}: max abs diff {:.3g}".format(i, diff)
            break
    return notes


# ---------------------------------------------------------------- one case

def build(tf, builder, control_flow_v1=False):
    """Run a case's builder in a fresh graph -> (graph_def, input names, output names)."""
    if control_flow_v1:
        tf.compat.v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as graph:
            inputs, outputs = builder(tf)
    finally:
        if control_flow_v1:
            tf.compat.v1.enable_control_flow_v2()
    return graph.as_graph_def(), [t.name for t in inputs], [t.name for t in outputs]


def measure_case(case, opsets=OPSETS, tf=None):
    """Measure one case at each opset.

    -> {"after_grappler": [TF ops], opset: {"emits": [...]} or {"error": "..."}, plus model_checks() notes}
    """
    from tf2onnx import tf_loader

    tf = tf or load_tf()
    graph_def, inputs, outputs = build(tf, case.build, case.control_flow_v1)
    present = {n.op for n in graph_def.node}
    missing = [op for op in case.covers if op not in present]
    if missing:
        raise RuntimeError("case {} / {}: the graph has no {} (it has {})".format(
            case.tf_op, case.variant, missing, sorted(present)))
    with tf.Graph().as_default():  # grappler, as from_graph_def runs it before any handler
        optimized = tf_loader.tf_optimize(inputs, outputs, copy.deepcopy(graph_def))
    left = {n.op for n in optimized.node}
    node = next(n for n in graph_def.node if n.op == case.tf_op)
    result = {"attrs": node_attrs(tf, node), "after_grappler": sorted(left - {"Const", "Placeholder"}),
              "kept_by_grappler": bool(left & set(case.covers))}
    feeds = feeds_for(tf, graph_def, inputs, case.feeds) if case.compare else None
    expected = None
    if feeds is not None:
        try:
            expected = run_tf(tf, graph_def, outputs, feeds)
        except Exception as e:  # noqa: BLE001  nothing to compare with; say so in the table
            result["tf_error"] = _first_line(getattr(e, "message", e))
    base = build(tf, case.baseline, case.control_flow_v1) if case.baseline else None
    for opset in opsets:
        model, counts, error = convert(graph_def, inputs, outputs, opset)
        if error:
            result[opset] = {"error": error}
            continue
        if base is not None:
            _, base_counts, base_error = convert(*base, opset)
            if base_error:
                raise RuntimeError("case {} / {}: baseline fails at opset {}: {}".format(
                    case.tf_op, case.variant, opset, base_error))
            counts = counts - base_counts
        result[opset] = {"emits": sorted(counts)}
        result[opset].update(model_checks(model, feeds, expected))
    return result


def node_attrs(tf, node):
    """The TF node's scalar attributes (and int lists: strides, ksize...) as plain YAML values."""
    out = {}
    for name in sorted(node.attr):
        a = node.attr[name]
        kind = a.WhichOneof("value")
        if name.startswith("_") or kind not in ("s", "i", "f", "b", "type", "list"):
            continue
        if kind == "list":
            if not a.list.i or a.list.type or a.list.s:
                continue
            value = list(a.list.i)
        elif kind == "type":
            value = tf.as_dtype(a.type).name
        elif kind == "s":
            value = a.s.decode("utf-8", "replace")
        else:
            value = getattr(a, kind)
        out[name] = round(value, 6) if isinstance(value, float) else value
    return out


def measure_op(tf_op, opsets=OPSETS, tf=None, cache=None):
    """All cases of one TF op -> the table's emits/errors/variants entries for it.

    cache: a dict reused across calls, so a case filed under several TF ops is measured once.
    """
    cases = [c for c in CASES if c.tf_op == tf_op]
    if not cases:
        raise KeyError("no case for TF op {!r}".format(tf_op))
    cache = {} if cache is None else cache
    measured = []
    for c in cases:
        key = (id(c.build), id(c.baseline), c.variant, tuple(opsets))
        if key not in cache:
            cache[key] = measure_case(c, opsets, tf)
        measured.append((c, cache[key]))
    return summarize(tf_op, measured, opsets)


def summarize(tf_op, measured, opsets):
    """Fold a TF op's variants into {"emits": {opset: [...]}, "errors": {opset: "..."}, "variants": [...]}.

    emits[opset] is the union over the variants that converted; errors[opset] is set only when no
    variant converted at that opset (the first variant's error).
    """
    emits, errors, variants = {}, {}, []
    for case, result in measured:
        v = {"variant": case.variant, "tf_ops": list(case.covers), "attrs": result["attrs"]}
        if case.note:
            v["note"] = case.note
        if case.baseline:
            v["baseline"] = case.baseline_note or "the same graph without {}".format(tf_op)
        if "tf_error" in result:
            v["tf_error"] = result["tf_error"]  # TensorFlow could not run the graph: nothing compared
        if not result["kept_by_grappler"]:
            v["after_grappler"] = result["after_grappler"]  # grappler folded, removed or lowered the op
        v["emits"], v["errors"] = {}, {}
        for opset in opsets:
            r = result[opset]
            key = str(opset)
            if "error" in r:
                v["errors"][key] = r["error"]
            else:
                v["emits"][key] = r["emits"]
                emits.setdefault(key, set()).update(r["emits"])
            for note in ("checker_error", "onnxruntime_error", "differs_from_tf"):
                if note in r:
                    v.setdefault(note, {})[key] = r[note]
        if not v["errors"]:
            del v["errors"]
        if not v["emits"]:
            del v["emits"]
        variants.append(v)
    for opset in opsets:
        key = str(opset)
        if key not in emits:
            errors[key] = next(v["errors"][key] for v in variants if key in v.get("errors", {}))
    return {"emits": {k: sorted(s) for k, s in emits.items()}, "errors": errors, "variants": variants}


# ---------------------------------------------------------------- the table

def versions():
    import importlib.metadata as md

    import onnx
    import onnxruntime
    import tensorflow as tf
    import tf2onnx

    return {"tf2onnx": tf2onnx.__version__, "tensorflow": tf.__version__, "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__, "python": "{}.{}".format(*sys.version_info[:2]),
            "numpy": md.version("numpy")}


HEADER = """\
# tf2onnx's TF -> ONNX op mapping, measured. Generated: do not edit; re-run the command below.
#
# handlers: TF op -> {min_opset, opsets} from tf2onnx's handler registry (tf2onnx.handler.tf_op),
#   ONNX domain. A handler registered at opset N serves every opset >= N up to tf2onnx's max_opset,
#   so tf2onnx has a handler for `op` at opset K iff min_opset <= K. opsets lists where the handler
#   changes. TFL_* (TFLite front end) left out.
# handlers_other_domains: the same for handlers that need an extra opset (com.microsoft,
#   ai.onnx.contrib); tf2onnx uses them only when asked (--extra_opset), deploy never does.
# without_handler: TF ops with no handler that still convert, measured: converted_by grappler
#   (tf2onnx runs it first; it removed the op) or tf2onnx (its rewriters turn tf.while_loop /
#   tf.cond v1 ops into Loop / If; ops hanging only off control dependencies are dropped).
# emits: TF op -> {opset: sorted unique ONNX op types}, measured with tf2onnx.convert.from_graph_def
#   on tiny tf.compat.v1 graphs (float32 NHWC placeholders of small fixed shapes, constants where
#   the op needs them), the union over the op's variants that converted. Subgraph ops (Loop/If
#   bodies) count. A key "domain:Op" is an op outside the ONNX domain. [] = the op leaves no node.
#   Missing opset = no variant converted there (see errors). For an opset not measured, use the
#   nearest measured opset below it.
# errors: TF op -> {opset: first line of tf2onnx's error} when no variant converted.
# variants: TF op -> what was tried: per variant the TF ops in the graph, attrs (the op's TF node
#   attributes: scalars and int lists, to match a graph's node against), emits / errors per
#   opset, differs_from_tf (onnxruntime's outputs on random inputs differ from TensorFlow's, grappler
#   off: rtol 1e-3, atol 1e-4; not checked for random ops), after_grappler (only when grappler,
#   which tf2onnx runs first, folded, removed or lowered the op: the TF ops it left, Const and
#   Placeholder aside), checker_error / onnxruntime_error (the converted model did not pass
#   onnx.checker / load or run in onnxruntime).
# max_opset: the highest opset tf2onnx converts to (tf2onnx.constants.OPSET_TO_IR_VERSION);
#   above_max_opset: what from_graph_def says when asked for max_opset + 1 (a Relu graph).
# bookkeeping: ONNX ops emitted around the real work (constants, renames); recorded in emits.
"""


def generate(opsets=OPSETS, only=None, progress=True):
    tf = load_tf()
    registry = handler_registry()
    onnx_handlers = registry.pop("ai.onnx")
    ops = [] if only is None else list(only)
    if only is None:
        for c in CASES:
            if c.tf_op not in ops:
                ops.append(c.tf_op)
    per_op, cache = {}, {}
    for i, op in enumerate(ops, 1):
        per_op[op] = measure_op(op, opsets, tf, cache)
        if progress:
            e = per_op[op]
            print("[{}/{}] {}: {}".format(i, len(ops), op, e["errors"] or {k: v for k, v in e["emits"].items()}),
                  file=sys.stderr)
    from tf2onnx import constants

    max_opset = max(constants.OPSET_TO_IR_VERSION)
    relu = next(c for c in CASES if c.tf_op == "Relu")
    _, _, above = convert(*build(tf, relu.build), max_opset + 1)  # measured: tf2onnx refuses it
    table = {"tool": "tf2onnx"}
    table.update(versions())
    table.update({
        "generated": datetime.date.today().isoformat(),
        "generated_by": COMMAND,
        "entry_point": "tf2onnx.convert.from_graph_def(graph_def, input_names, output_names, opset)",
        "max_opset": max_opset,
        "above_max_opset": above,
        "opsets_measured": list(opsets),
        "bookkeeping": list(BOOKKEEPING),
        "counts": {"handlers": len(onnx_handlers), "measured": len(per_op),
                   "variants": sum(len(e["variants"]) for e in per_op.values()),
                   "failing_everywhere": sum(1 for e in per_op.values() if not e["emits"])},
        "handlers": {op: {"min_opset": v[0], "opsets": v} for op, v in onnx_handlers.items()},
        "handlers_other_domains": {d: {op: {"min_opset": v[0], "opsets": v} for op, v in ops_.items()}
                                   for d, ops_ in registry.items()},
        "without_handler": _without_handler(per_op, onnx_handlers),
        "emits": {op: e["emits"] for op, e in sorted(per_op.items()) if e["emits"]},
        "errors": {op: e["errors"] for op, e in sorted(per_op.items()) if e["errors"]},
        "variants": {op: e["variants"] for op, e in sorted(per_op.items())},
    })
    return table


def _without_handler(per_op, handlers):
    out = {}
    for op, e in sorted(per_op.items()):
        if op in handlers or not e["emits"]:
            continue
        grappler = all("after_grappler" in v for v in e["variants"] if v.get("emits"))
        out[op] = {"converted_by": "grappler" if grappler else "tf2onnx", "opsets": sorted(map(int, e["emits"]))}
    return out


def dump(table, header=True):
    """JSON (read in ~2 ms; the same table as YAML takes ~100 ms to parse, too slow for `deploy check`).
    The header's explanation of every key goes first, under "_about"."""
    import json

    about = [line[2:] if line.startswith("# ") else line.lstrip("#") for line in HEADER.splitlines()]
    body = dict({"_about": about} if header else {}, **table)
    return json.dumps(body, indent=1, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- the cases: tiny graphs, one TF op each
# A builder takes the tensorflow module and returns (input placeholders, output tensors).

Case = collections.namedtuple("Case", "tf_op variant build covers baseline baseline_note note control_flow_v1 compare "
                                     "feeds")
CASES = []


def case(tf_ops, variant, build, covers=None, baseline=None, baseline_note=None, note=None, control_flow_v1=False,
         compare=True, feeds=None):
    """feeds: {input name: value} for inputs random values would not fit (compare=False: no comparison)."""
    """File the measurement of `build` under each TF op in tf_ops (a name or a tuple of names)."""
    names = (tf_ops,) if isinstance(tf_ops, str) else tuple(tf_ops)
    for name in names:
        CASES.append(Case(name, variant, build, tuple(covers or names), baseline, baseline_note, note,
                          control_flow_v1, compare, feeds or {}))


def ph(tf, shape=(1, 8, 8, 3), dtype="float32", name="x"):
    return tf.compat.v1.placeholder(tf.as_dtype(dtype), shape, name=name)


def raw(tf, op, **kwargs):
    return getattr(tf.raw_ops, op)(name="op", **kwargs)


def unary(op, arg="x", shape=(1, 8, 8, 3), dtype="float32", **attrs):
    def b(tf):
        x = ph(tf, shape, dtype)
        out = raw(tf, op, **{arg: x}, **attrs)
        return [x], list(out) if isinstance(out, (list, tuple)) else [out]
    return b


def binary(op, y=(0.5, 1.0, 2.0), dtype="float32", x_dtype=None, names=("x", "y")):
    """x: placeholder [1,8,8,3]; y: a constant broadcast along channels."""
    def b(tf):
        x = ph(tf, dtype=x_dtype or dtype)
        return [x], [raw(tf, op, **{names[0]: x, names[1]: tf.constant(y, tf.as_dtype(dtype))})]
    return b


def two_inputs(op, shape=(1, 8, 8, 3), dtype="float32", names=("x", "y"), **attrs):
    def b(tf):
        x, y = ph(tf, shape, dtype, "x"), ph(tf, shape, dtype, "y")
        return [x, y], [raw(tf, op, **{names[0]: x, names[1]: y}, **attrs)]
    return b


def with_consts(op, inputs, consts, outputs=None, **attrs):
    """inputs: {arg: (shape, dtype)} placeholders; consts: {arg: value or (value, dtype)}."""
    def b(tf):
        phs = {arg: ph(tf, shape, dtype, arg) for arg, (shape, dtype) in inputs.items()}
        kw = dict(phs)
        for arg, value in consts.items():
            kw[arg] = tf.constant(value[0], tf.as_dtype(value[1])) if isinstance(value, tuple) else tf.constant(value)
        out = raw(tf, op, **kw, **attrs)
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        return list(phs.values()), out if outputs is None else [out[i] for i in outputs]
    return b


def neg_neg(tf):
    x = ph(tf)
    return [x], [tf.negative(tf.negative(x), name="out")]


def sandwich(wrap):
    """x -> Neg -> wrap -> Neg; measured against neg_neg, so a removed op emits []."""
    def b(tf):
        x = ph(tf)
        return [x], [tf.negative(wrap(tf, tf.negative(x)), name="out")]
    return b


def after_control_dep(make):
    """neg_neg computed under a control dependency on make(tf, x)."""
    def b(tf):
        x = ph(tf)
        dep = make(tf, x)
        with tf.control_dependencies([dep]):
            return [x], [tf.negative(tf.negative(x), name="out")]
    return b


NHWC = ((1, 8, 8, 3), "float32")
F32, I32, I64, BOOL = "float32", "int32", "int64", "bool"
W33 = [[[[0.1 * (i + j + k + m) for m in range(4)] for k in range(3)] for j in range(3)] for i in range(3)]  # 3x3x3x4

# -- convolution, matmul
case("Conv2D", "3x3 SAME stride 1, constant filter", with_consts("Conv2D", {"input": NHWC}, {"filter": W33},
     strides=[1, 1, 1, 1], padding="SAME"))
case("Conv2D", "3x3 VALID stride 2", with_consts("Conv2D", {"input": NHWC}, {"filter": W33},
     strides=[1, 2, 2, 1], padding="VALID"))
case("Conv2D", "3x3 SAME dilations 2", with_consts("Conv2D", {"input": NHWC}, {"filter": W33},
     strides=[1, 1, 1, 1], padding="SAME", dilations=[1, 2, 2, 1]))
case("DepthwiseConv2dNative", "3x3 SAME multiplier 1", with_consts("DepthwiseConv2dNative", {"input": NHWC},
     {"filter": [[[[0.1]] * 3] * 3] * 3}, strides=[1, 1, 1, 1], padding="SAME"))
case("DepthwiseConv2dNative", "3x3 VALID stride 2 multiplier 2", with_consts("DepthwiseConv2dNative",
     {"input": NHWC}, {"filter": [[[[0.1, 0.2]] * 3] * 3] * 3}, strides=[1, 2, 2, 1], padding="VALID"))
case("Conv2DBackpropInput", "conv2d_transpose 3x3 stride 2 SAME, constant output shape",
     with_consts("Conv2DBackpropInput", {"out_backprop": ((1, 8, 8, 4), F32)},
                 {"input_sizes": [1, 16, 16, 3], "filter": W33}, strides=[1, 2, 2, 1], padding="SAME"))
case("MatMul", "[2,4] x constant [4,3]", with_consts("MatMul", {"a": ((2, 4), F32)}, {"b": [[0.5] * 3] * 4}))
case("MatMul", "transpose_b, both placeholders", two_inputs("MatMul", (2, 4), names=("a", "b"), transpose_b=True))
case("BatchMatMulV2", "[2,3,4] x [2,4,5]", with_consts("BatchMatMulV2", {"x": ((2, 3, 4), F32),
     "y": ((2, 4, 5), F32)}, {}))
case("BatchMatMulV2", "[2,3,4] x [4,5] broadcast", with_consts("BatchMatMulV2", {"x": ((2, 3, 4), F32),
     "y": ((4, 5), F32)}, {}))
case("BatchMatMul", "[2,3,4] x [2,4,5]", with_consts("BatchMatMul", {"x": ((2, 3, 4), F32), "y": ((2, 4, 5), F32)}, {}))
case("BiasAdd", "NHWC, constant bias", with_consts("BiasAdd", {"value": NHWC}, {"bias": [0.1, 0.2, 0.3]}))


def _conv_bias(tf, with_bias=True):
    x = ph(tf)
    y = tf.nn.conv2d(x, tf.constant(W33), strides=1, padding="SAME")
    return [x], [tf.nn.bias_add(y, tf.constant([0.1, 0.2, 0.3, 0.4])) if with_bias else y]


case("BiasAdd", "after Conv2D (fused into Conv's bias)", _conv_bias, covers=("Conv2D", "BiasAdd"),
     baseline=lambda tf: _conv_bias(tf, False), baseline_note="the same Conv2D without BiasAdd")

# -- elementwise
for _op in ("Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow", "SquaredDifference", "FloorDiv",
            "FloorMod", "DivNoNan", "TruncateDiv"):
    case(_op, "float32 x, constant [3] broadcast", binary(_op))
case("AddV2", "int32, two placeholders", two_inputs("AddV2", (4,), I32))
case("Mul", "two placeholders", two_inputs("Mul"))
case("FloorDiv", "int32 x, int32 constant", binary("FloorDiv", (2, 3, 4), I32))
case("AddN", "three placeholders", lambda tf: (lambda a, b, c: ([a, b, c], [raw(tf, "AddN", inputs=[a, b, c])]))(
     ph(tf, name="a"), ph(tf, name="b"), ph(tf, name="c")))
for _op, _arg in (("Relu", "features"), ("Relu6", "features"), ("Elu", "features"), ("Selu", "features"),
                  ("Softplus", "features"), ("Softsign", "features"), ("Sigmoid", "x"), ("Tanh", "x"),
                  ("Square", "x"), ("Sqrt", "x"), ("Rsqrt", "x"), ("Exp", "x"), ("Log", "x"), ("Floor", "x"),
                  ("Ceil", "x"), ("Round", "x"), ("Rint", "x"), ("Abs", "x"), ("Neg", "x"), ("Reciprocal", "x"),
                  ("Sign", "x"), ("Erf", "x"), ("Sin", "x"), ("Cos", "x"), ("Atan", "x"), ("IsNan", "x")):
    case(_op, "float32 [1,8,8,3]", unary(_op, _arg))
case("LeakyRelu", "alpha 0.2", unary("LeakyRelu", "features", alpha=0.2))
case("ClipByValue", "constant 0..6", with_consts("ClipByValue", {"t": NHWC},
     {"clip_value_min": 0.0, "clip_value_max": 6.0}))
case("Softmax", "[1,10]", unary("Softmax", "logits", (1, 10)))
case("Softmax", "[1,8,8,3], last axis", unary("Softmax", "logits"))
case("LogSoftmax", "[1,10]", unary("LogSoftmax", "logits", (1, 10)))
case("LRN", "depth_radius 2", unary("LRN", "input", depth_radius=2, bias=1.0, alpha=1e-4, beta=0.75))
case("L2Loss", "float32 [1,8,8,3]", unary("L2Loss", "t"))
case("FakeQuantWithMinMaxVars", "constant min -6 max 6, 8 bits", with_consts("FakeQuantWithMinMaxVars",
     {"inputs": NHWC}, {"min": -6.0, "max": 6.0}))
case("FakeQuantWithMinMaxArgs", "min -6 max 6, 8 bits", unary("FakeQuantWithMinMaxArgs", "inputs", min=-6.0, max=6.0))

# -- comparison, logic, select
for _op in ("Less", "Greater", "Equal", "NotEqual", "LessEqual", "GreaterEqual"):
    case(_op, "float32 x, constant [3]", binary(_op))
case("Equal", "int32, two placeholders", two_inputs("Equal", (4,), I32))
for _op in ("LogicalAnd", "LogicalOr"):
    case(_op, "two bool placeholders", two_inputs(_op, (4, 5), BOOL))
case("LogicalNot", "bool [4,5]", unary("LogicalNot", "x", (4, 5), BOOL))
case("Select", "bool condition of the same shape", with_consts("Select", {"condition": ((4, 5), BOOL),
     "x": ((4, 5), F32), "y": ((4, 5), F32)}, {}))
case("Select", "bool condition [4] picks rows", with_consts("Select", {"condition": ((4,), BOOL),
     "x": ((4, 5), F32), "y": ((4, 5), F32)}, {}))
case("SelectV2", "broadcast condition [1,1,1,3], constant else", with_consts("SelectV2", {
     "condition": ((1, 1, 1, 3), BOOL), "t": NHWC}, {"e": 0.0}))
case("Where", "bool [4,5] -> coordinates", unary("Where", "condition", (4, 5), BOOL))
case("Where", "float32 [4,5] (non-zero)", unary("Where", "condition", (4, 5)))

# -- reductions
for _op in ("Mean", "Sum", "Max", "Min", "Prod"):
    case(_op, "axes [1,2] keep_dims False", with_consts(_op, {"input": NHWC}, {"axis": [1, 2]}))
case("Mean", "axes [1,2] keep_dims True", with_consts("Mean", {"input": NHWC}, {"axis": [1, 2]}, keep_dims=True))
case("Sum", "axis -1 keep_dims True", with_consts("Sum", {"input": NHWC}, {"axis": [-1]}, keep_dims=True))
for _op in ("All", "Any"):
    case(_op, "bool [4,5] axis 1", with_consts(_op, {"input": ((4, 5), BOOL)}, {"axis": [1]}))
case("ArgMax", "axis -1, int64 out", with_consts("ArgMax", {"input": NHWC}, {"dimension": -1}))
case("ArgMax", "axis -1, int32 out", with_consts("ArgMax", {"input": NHWC}, {"dimension": -1}, output_type="int32"))
case("ArgMin", "axis -1, int64 out", with_consts("ArgMin", {"input": NHWC}, {"dimension": -1}))
case("TopKV2", "[1,10] k=5 constant", with_consts("TopKV2", {"input": ((1, 10), F32)}, {"k": 5}))
case("Cumsum", "axis 1", with_consts("Cumsum", {"x": NHWC}, {"axis": 1}))
case("Cumsum", "axis 1 exclusive reverse", with_consts("Cumsum", {"x": NHWC}, {"axis": 1}, exclusive=True,
     reverse=True))

# -- pooling, normalization
for _op, _arg in (("MaxPool", "input"), ("AvgPool", "value")):
    case(_op, "2x2 stride 2 VALID", unary(_op, _arg, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"))
    case(_op, "3x3 stride 1 SAME", unary(_op, _arg, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME"))
_BN = {"scale": [1.0, 1.1, 1.2], "offset": [0.0, 0.1, 0.2], "mean": [0.5, 0.5, 0.5], "variance": [1.0, 2.0, 3.0]}
for _op in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"):
    case(_op, "inference (is_training False), constant params", with_consts(_op, {"x": NHWC}, _BN, outputs=[0],
         is_training=False, epsilon=1e-3))
case("FusedBatchNormV3", "training mode (is_training True, empty mean/variance)", with_consts(
     "FusedBatchNormV3", {"x": NHWC}, dict(_BN, mean=([], F32), variance=([], F32)), outputs=[0], is_training=True))
case("FusedBatchNorm", "training mode (is_training True, empty mean/variance)", with_consts(
     "FusedBatchNorm", {"x": NHWC}, dict(_BN, mean=([], F32), variance=([], F32)), outputs=[0], is_training=True))

# -- shape, layout, indexing
_PADS = [[0, 0], [1, 1], [2, 2], [0, 0]]
case("Pad", "constant paddings", with_consts("Pad", {"input": NHWC}, {"paddings": _PADS}))
case("PadV2", "constant paddings, constant value 1", with_consts("PadV2", {"input": NHWC},
     {"paddings": _PADS, "constant_values": 1.0}))
for _mode in ("REFLECT", "SYMMETRIC"):
    case("MirrorPad", _mode, with_consts("MirrorPad", {"input": NHWC}, {"paddings": _PADS}, mode=_mode))
case("ConcatV2", "two placeholders, axis -1", lambda tf: (lambda x, y: ([x, y], [raw(tf, "ConcatV2", values=[x, y],
     axis=tf.constant(-1))]))(ph(tf, name="x"), ph(tf, name="y")))
case("Split", "num_split 3 on axis -1", with_consts("Split", {"value": NHWC}, {"axis": -1}, num_split=3))
case("SplitV", "size_splits [1,2] on axis -1", with_consts("SplitV", {"value": NHWC},
     {"size_splits": [1, 2], "axis": -1}, num_split=2))
case("Slice", "constant begin/size", with_consts("Slice", {"input": NHWC}, {"begin": [0, 1, 1, 0],
     "size": [1, 4, 4, -1]}))
for _name, _fn in (("x[:, 1:5, 2:6, :]", lambda x: x[:, 1:5, 2:6, :]),
                   ("x[:, ::2, ::2, :] strides", lambda x: x[:, ::2, ::2, :]),
                   ("x[..., ::-1] reversed channels (RGB<->BGR)", lambda x: x[..., ::-1]),
                   ("x[:, 0] shrink_axis_mask", lambda x: x[:, 0]),
                   ("x[None, :, 3:] new_axis_mask", lambda x: x[None, :, 3:])):
    case("StridedSlice", _name, lambda tf, _fn=_fn: (lambda x: ([x], [_fn(x)]))(ph(tf)))
case("Reshape", "constant shape [1,-1]", with_consts("Reshape", {"tensor": NHWC}, {"shape": [1, -1]}))
case("Reshape", "shape from a placeholder", with_consts("Reshape", {"tensor": NHWC, "shape": ((2,), I32)}, {}),
     feeds={"shape:0": [4, 48]})
case("Squeeze", "[1,1,1,3] squeeze_dims [1,2]", unary("Squeeze", "input", (1, 1, 1, 3), axis=[1, 2]))
case("Squeeze", "[1,1,1,3] all size-1 dims", unary("Squeeze", "input", (1, 1, 1, 3)))
case("ExpandDims", "axis 0", with_consts("ExpandDims", {"input": NHWC}, {"axis": 0}))
case("ExpandDims", "axis -1", with_consts("ExpandDims", {"input": NHWC}, {"axis": -1}))
case("Transpose", "perm [0,3,1,2]", with_consts("Transpose", {"x": NHWC}, {"perm": [0, 3, 1, 2]}))
case("Shape", "fixed-shape input [1,8,8,3]", unary("Shape", "input"))
case("Shape", "input [None,8,8,3] (dynamic batch)", unary("Shape", "input", (None, 8, 8, 3)))
case("Size", "fixed-shape input [1,8,8,3]", unary("Size", "input"))
case("Size", "input [None,8,8,3] (dynamic batch)", unary("Size", "input", (None, 8, 8, 3)))
case("Fill", "dims from an int32 placeholder [4], constant value", with_consts("Fill", {"dims": ((4,), I32)},
     {"value": 1.0}))
case("Fill", "dims and value from placeholders", with_consts("Fill", {"dims": ((4,), I32), "value": ((), F32)}, {}))
case("Tile", "constant multiples [1,2,2,1]", with_consts("Tile", {"input": NHWC}, {"multiples": [1, 2, 2, 1]}))
case("Tile", "multiples from a placeholder", with_consts("Tile", {"input": NHWC, "multiples": ((4,), I32)}, {}))
case("Pack", "two placeholders, axis 0", lambda tf: (lambda x, y: ([x, y], [raw(tf, "Pack", values=[x, y])]))(
     ph(tf, name="x"), ph(tf, name="y")))
case("Unpack", "[2,4] axis 0", unary("Unpack", "value", (2, 4), num=2))
case("Gather", "params [5,4], constant indices", with_consts("Gather", {"params": ((5, 4), F32)},
     {"indices": [0, 2]}))
case("GatherV2", "params [5,4], constant indices, axis 0", with_consts("GatherV2", {"params": ((5, 4), F32)},
     {"indices": [0, 2], "axis": 0}))
case("GatherV2", "params [5,4], indices placeholder, axis 1", with_consts("GatherV2", {"params": ((5, 4), F32),
     "indices": ((2,), I32)}, {"axis": 1}))
case("GatherNd", "params [3,4], constant indices [[0,1],[2,3]]", with_consts("GatherNd",
     {"params": ((3, 4), F32)}, {"indices": [[0, 1], [2, 3]]}))
case("TensorScatterUpdate", "tensor placeholder [5,4], constant indices [[1],[3]], updates placeholder",
     with_consts("TensorScatterUpdate", {"tensor": ((5, 4), F32), "updates": ((2, 4), F32)}, {"indices": [[1], [3]]}))
case("TensorScatterAdd", "tensor placeholder [5,4], constant indices [[1],[3]], updates placeholder",
     with_consts("TensorScatterAdd", {"tensor": ((5, 4), F32), "updates": ((2, 4), F32)}, {"indices": [[1], [3]]}))
case("BitwiseAnd", "int32, two placeholders", two_inputs("BitwiseAnd", (4,), I32))
case("ScatterNd", "constant indices, updates placeholder [2,4], shape [5,4]", with_consts("ScatterNd",
     {"updates": ((2, 4), F32)}, {"indices": [[1], [3]], "shape": [5, 4]}))
for _src, _dst in ((F32, I32), (F32, I64), (I64, F32), (I32, F32), ("uint8", F32), (F32, "float16"),
                   ("float16", F32), (BOOL, F32), (F32, BOOL)):
    case("Cast", "{} -> {}".format(_src, _dst), unary("Cast", "x", (4, 5), _src, DstT=_dst))
case("OneHot", "indices int32 [4], depth 5", with_consts("OneHot", {"indices": ((4,), I32)},
     {"depth": 5, "on_value": 1.0, "off_value": 0.0}))
case("Range", "int32 limit from a placeholder", with_consts("Range", {"limit": ((), I32)}, {"start": 0, "delta": 1}))
case("Range", "float32 limit from a placeholder", with_consts("Range", {"limit": ((), F32)},
     {"start": 0.0, "delta": 0.5}))
case("Einsum", "bij,bjk->bik", lambda tf: (lambda x, y: ([x, y], [raw(tf, "Einsum", inputs=[x, y],
     equation="bij,bjk->bik")]))(ph(tf, (2, 3, 4), F32, "x"), ph(tf, (2, 4, 5), F32, "y")))
case("Einsum", "nhwc,cd->nhwd with a constant", lambda tf: (lambda x: ([x], [raw(tf, "Einsum", inputs=[
     x, tf.constant([[0.5] * 2] * 3)], equation="nhwc,cd->nhwd")]))(ph(tf)))
case("ReverseV2", "axis [2] (flip left-right)", with_consts("ReverseV2", {"tensor": NHWC}, {"axis": [2]}))
for _op in ("ZerosLike", "OnesLike"):
    case(_op, "fixed-shape input", unary(_op, "x"))
    case(_op, "input [None,8,8,3]", unary(_op, "x", (None, 8, 8, 3)))
case("BroadcastTo", "[1,1,1,3] -> constant [1,8,8,3]", with_consts("BroadcastTo", {"input": ((1, 1, 1, 3), F32)},
     {"shape": [1, 8, 8, 3]}))
case("DepthToSpace", "block 2, [1,4,4,8]", unary("DepthToSpace", "input", (1, 4, 4, 8), block_size=2))
case("SpaceToDepth", "block 2, [1,8,8,3]", unary("SpaceToDepth", "input", block_size=2))
case("SpaceToBatchND", "block [2,2], zero paddings", with_consts("SpaceToBatchND", {"input": NHWC},
     {"block_shape": [2, 2], "paddings": [[0, 0], [0, 0]]}))
case("BatchToSpaceND", "block [2,2], zero crops", with_consts("BatchToSpaceND", {"input": ((4, 4, 4, 3), F32)},
     {"block_shape": [2, 2], "crops": [[0, 0], [0, 0]]}))


def _atrous(tf, native=False):
    x = ph(tf)
    if native:
        return [x], [tf.nn.conv2d(x, tf.constant(W33), strides=1, padding="SAME", dilations=2)]
    s2b = tf.raw_ops.SpaceToBatchND(input=x, block_shape=[2, 2], paddings=[[2, 2], [2, 2]])
    y = tf.nn.conv2d(s2b, tf.constant(W33), strides=1, padding="VALID")
    return [x], [tf.raw_ops.BatchToSpaceND(input=y, block_shape=[2, 2], crops=[[0, 0], [0, 0]])]


case(("SpaceToBatchND", "BatchToSpaceND"), "atrous conv: SpaceToBatchND -> Conv2D -> BatchToSpaceND", _atrous,
     covers=("SpaceToBatchND", "Conv2D", "BatchToSpaceND"), baseline=lambda tf: _atrous(tf, True),
     baseline_note="Conv2D with dilations 2, SAME")
case("ExtractImagePatches", "2x2 stride 2 VALID", unary("ExtractImagePatches", "images", ksizes=[1, 2, 2, 1],
     strides=[1, 2, 2, 1], rates=[1, 1, 1, 1], padding="VALID"))

# -- image ops, detection
_SIZE = {"size": [16, 16]}
for _op in ("ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic"):
    for _ac, _hp, _what in ((False, False, "TF1 default"), (False, True, "TF2 default"), (True, False, "")):
        case(_op, "align_corners={} half_pixel_centers={}{}".format(_ac, _hp, " ({})".format(_what) if _what else ""),
             with_consts(_op, {"images": NHWC}, _SIZE, align_corners=_ac, half_pixel_centers=_hp))
case("ResizeBilinear", "size from a placeholder, TF2 default", with_consts("ResizeBilinear", {"images": NHWC,
     "size": ((2,), I32)}, {}, half_pixel_centers=True))
case("ResizeArea", "constant size 4x4", with_consts("ResizeArea", {"images": NHWC}, {"size": [4, 4]}))
for _method in ("bilinear", "nearest"):
    case("CropAndResize", "boxes placeholder [2,4], crop 4x4, {}".format(_method), with_consts(
         "CropAndResize", {"image": NHWC, "boxes": ((2, 4), F32)}, {"box_ind": [0, 0], "crop_size": [4, 4]},
         method=_method))
_NMS_IN = {"boxes": ((10, 4), F32), "scores": ((10,), F32)}
_NMS = {"max_output_size": 5, "iou_threshold": 0.5}
case("NonMaxSuppressionV2", "max 5, iou 0.5", with_consts("NonMaxSuppressionV2", _NMS_IN, _NMS))
case("NonMaxSuppressionV3", "max 5, iou 0.5, score 0.1", with_consts("NonMaxSuppressionV3", _NMS_IN,
     dict(_NMS, score_threshold=0.1)))
case("NonMaxSuppressionV4", "max 5, iou 0.5, score 0.1, pad_to_max_output_size", with_consts(
     "NonMaxSuppressionV4", _NMS_IN, dict(_NMS, score_threshold=0.1), pad_to_max_output_size=True))
case("NonMaxSuppressionV4", "max 5, iou 0.5, score 0.1, no padding", with_consts(
     "NonMaxSuppressionV4", _NMS_IN, dict(_NMS, score_threshold=0.1)))
case("NonMaxSuppressionV5", "max 5, iou 0.5, score 0.1, soft_nms_sigma 0 (hard NMS)", with_consts(
     "NonMaxSuppressionV5", _NMS_IN, dict(_NMS, score_threshold=0.1, soft_nms_sigma=0.0)))
case("NonMaxSuppressionV5", "soft_nms_sigma 0.5 (soft NMS)", with_consts(
     "NonMaxSuppressionV5", _NMS_IN, dict(_NMS, score_threshold=0.1, soft_nms_sigma=0.5)))
case("NonMaxSuppressionV5", "soft_nms_sigma 1.0 (soft NMS)", with_consts(
     "NonMaxSuppressionV5", _NMS_IN, dict(_NMS, score_threshold=0.1, soft_nms_sigma=1.0)))
case("CombinedNonMaxSuppression", "boxes [1,10,1,4], scores [1,10,2], 5 per class, 5 total", with_consts(
     "CombinedNonMaxSuppression", {"boxes": ((1, 10, 1, 4), F32), "scores": ((1, 10, 2), F32)},
     {"max_output_size_per_class": 5, "max_total_size": 5, "iou_threshold": 0.5, "score_threshold": 0.1}))
case("DecodeJpeg", "string placeholder, 3 channels", unary("DecodeJpeg", "contents", (), "string", channels=3))


def _random(op):
    def b(tf, baseline=False):
        x = ph(tf, (2, 3))
        return [x], [tf.add(x if baseline else raw(tf, op, shape=tf.constant([2, 3]), dtype=tf.float32, seed=1), x)]
    return b


for _op in ("RandomUniform", "RandomStandardNormal"):
    _b = _random(_op)
    case(_op, "constant shape [2,3], seed 1, added to a placeholder", _b,
         baseline=lambda tf, _b=_b: _b(tf, True), baseline_note="x + x", compare=False)

# -- graph plumbing: removed before or during conversion
case("Placeholder", "a second graph input", with_consts("AddV2", {"x": NHWC, "y": NHWC}, {}),
     baseline=lambda tf: (lambda x: ([x], [tf.add(x, x)]))(ph(tf)), baseline_note="x + x with one input")
for _op, _wrap in (("Identity", lambda tf, t: tf.raw_ops.Identity(input=t)),
                   ("IdentityN", lambda tf, t: tf.raw_ops.IdentityN(input=[t])[0]),
                   ("StopGradient", lambda tf, t: tf.raw_ops.StopGradient(input=t)),
                   ("Snapshot", lambda tf, t: tf.raw_ops.Snapshot(input=t)),
                   ("CheckNumerics", lambda tf, t: tf.raw_ops.CheckNumerics(tensor=t, message="bad")),
                   ("EnsureShape", lambda tf, t: tf.raw_ops.EnsureShape(input=t, shape=[1, 8, 8, 3])),
                   ("PlaceholderWithDefault", lambda tf, t: tf.raw_ops.PlaceholderWithDefault(input=t,
                                                                                                shape=[1, 8, 8, 3]))):
    case(_op, "between two Negs", sandwich(_wrap), baseline=neg_neg, baseline_note="x -> Neg -> Neg")
case("PlaceholderWithDefault", "constant default 2.0 scaling x", lambda tf: (lambda x: ([x], [tf.multiply(
     x, tf.raw_ops.PlaceholderWithDefault(input=tf.constant(2.0), shape=[]))]))(ph(tf)),
     baseline=lambda tf: (lambda x: ([x], [tf.multiply(x, tf.constant(2.0))]))(ph(tf)), baseline_note="x * 2.0")
case("PlaceholderWithDefault", "listed as a graph input", lambda tf: (lambda p: ([p], [tf.negative(p)]))(
     tf.raw_ops.PlaceholderWithDefault(input=tf.zeros([1, 8, 8, 3]), shape=[1, 8, 8, 3], name="x")),
     note="tf2onnx makes x:0 a graph input and also an initializer holding the default (overridable in onnxruntime)",
     baseline=lambda tf: (lambda x: ([x], [tf.negative(x)]))(ph(tf)), baseline_note="Neg of a Placeholder")
case("NoOp", "control dependency of the output", after_control_dep(lambda tf, x: tf.no_op()),
     baseline=neg_neg, baseline_note="x -> Neg -> Neg")
case("Assert", "Assert(all(x > -1e9), [x]) as a control dependency", after_control_dep(
     lambda tf, x: tf.raw_ops.Assert(condition=tf.reduce_all(x > -1e9), data=[x])),
     baseline=neg_neg, baseline_note="x -> Neg -> Neg")

# -- control flow: tf.while_loop and tf.cond, v1 (frozen TF1 graphs) and v2 (functional ops)


def _loop(tf, baseline=False):
    x, n = ph(tf), ph(tf, (), I32, "n")
    if baseline:
        return [x, n], [tf.less(n, 3), tf.add(n, 1), tf.multiply(x, 2.0)]
    _, y = tf.compat.v1.while_loop(lambda i, y: tf.less(i, n), lambda i, y: (tf.add(i, 1), tf.multiply(y, 2.0)),
                                   [tf.constant(0), x])
    return [x, n], [y]


def _cond(tf, baseline=False):
    x, p = ph(tf), ph(tf, (), BOOL, "p")
    if baseline:
        return [x, p], [tf.multiply(x, 2.0), tf.add(x, 1.0)]
    return [x, p], [tf.cond(p, lambda: tf.multiply(x, 2.0), lambda: tf.add(x, 1.0))]


_LOOP_NOTE = "i = 0; while i < n: i += 1; y *= 2"
case(("Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"), "tf.while_loop, control flow v1", _loop,
     covers=("Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"), note=_LOOP_NOTE,
     baseline=lambda tf: _loop(tf, True), baseline_note="the body's Less, AddV2 and Mul outside a loop",
     control_flow_v1=True)
case(("Switch", "Merge"), "tf.cond, control flow v1", _cond, covers=("Switch", "Merge"),
     note="y = x * 2 if p else x + 1", baseline=lambda tf: _cond(tf, True),
     baseline_note="both branches' ops outside a cond", control_flow_v1=True)
case("StatelessWhile", "tf.while_loop, control flow v2", _loop, note=_LOOP_NOTE,
     baseline=lambda tf: _loop(tf, True), baseline_note="the body's Less, AddV2 and Mul outside a loop")
case("StatelessIf", "tf.cond, control flow v2", _cond, note="y = x * 2 if p else x + 1",
     baseline=lambda tf: _cond(tf, True), baseline_note="both branches' ops outside a cond")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--opsets", default=",".join(map(str, OPSETS)), help="comma-separated ONNX opsets")
    parser.add_argument("--only", help="comma-separated TF ops: measure these and print, write nothing")
    args = parser.parse_args(argv)
    opsets = tuple(int(x) for x in args.opsets.split(","))
    if args.only:

        tf = load_tf()
        for op in args.only.split(","):
            print(dump({op: measure_op(op, opsets, tf)}, header=False))
        return 0
    text = dump(generate(opsets))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print("wrote {}".format(args.out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
