"""Walk onnx-tensorrt's op tables: one one-node ONNX model per (op, dtype variant), checked with
``deploy check`` and judged against the table row of the target's TensorRT release.

    cases = walk("jetson_tx2", tmp_dir)       # [Case(op, dtype, truth, check_yes, blockers), ...]
    figures(cases)                            # {"checks", "false_yes", "agreement", "unexplained_no", ...}
    python tests/check/optable_walk.py        # the figures for every TensorRT target (the docs' numbers)

The truth is the table: the op is listed as supported and the tensor's type (after the parser's
cast-down: INT64 -> INT32 and DOUBLE -> FP32 on 8.x) is in its row's types; for QuantizeLinear and
DequantizeLinear the quantized type must also be one of the table's ``quantized_types`` and in
DequantizeLinear's row. A false YES is a check with no blocker and nothing accepted-but-wrong where
the table says no. A NO where the table says yes must be traceable: a blocker kind other than
``dtype`` (a restriction row, the parser's rules), or one of the documented type rules
(``EXPLAINED_DTYPE_RULES``); anything else counts as unexplained.

Every op whose ONNX schema has a data type variable (onnx_types.data_type_var) is walked, with every
type the schema allows for that variable; ops without inputs, with graph attributes (If, Loop, Scan)
or with sequence/optional values are skipped (their type is not a tensor's dtype question).
"""

import os
from collections import Counter, namedtuple

import numpy as np

Case = namedtuple("Case", "op dtype truth check_yes blockers")

# ONNX type strings the walk builds, and the numpy dtype of their constants
_NUMPY = {"float": "float32", "float16": "float16", "double": "float64", "int8": "int8", "uint8": "uint8",
          "int16": "int16", "uint16": "uint16", "int32": "int32", "uint32": "uint32", "int64": "int64",
          "uint64": "uint64", "bool": "bool"}

# the blockers a NO may rest on besides a table row's types (documented in docs/check.md)
EXPLAINED_DTYPE_RULES = (
    "only through QuantizeLinear/DequantizeLinear",   # INT8 as a network input
    "only through Q/DQ",                               # INT8 outside Q/DQ
    "has no",                                          # a type the release has no tensors of
    "only as a network input or output",               # io-only UINT8
)

_REQUIRED_ATTRS = {
    "Concat": {"axis": 1}, "DepthToSpace": {"blocksize": 2}, "SpaceToDepth": {"blocksize": 2},
    "Einsum": {"equation": "abcd->abcd"}, "Unsqueeze": {"axes": [0]}, "Squeeze": {"axes": [0]},
    "Split": {"axis": 1}, "Gather": {"axis": 0}, "LRN": {"size": 3}, "Trilu": {}, "CumSum": {},
    "Transpose": {"perm": [0, 1, 3, 2]}, "GridSample": {}, "Upsample": {"mode": "nearest"},
    "AveragePool": {"kernel_shape": [2, 2]}, "MaxPool": {"kernel_shape": [2, 2]}, "LpPool": {"kernel_shape": [2, 2]},
    "GroupNormalization": {"num_groups": 1},
}
_RANK2 = {"Gemm", "Det"}
_SKIP = {"If", "Loop", "Scan", "Constant", "ConstantOfShape", "SequenceConstruct", "SequenceEmpty",
         "Optional", "OptionalGetElement", "OptionalHasElement"}


def _onnx_type(type_str):
    return type_str[len("tensor("):-1] if type_str.startswith("tensor(") else None


def _allowed(schema, var):
    for c in schema.type_constraints:
        if c.type_param_str == var:
            return [t for t in (_onnx_type(s) for s in c.allowed_type_strs) if t in _NUMPY]
    t = _onnx_type(var)
    return [t] if t in _NUMPY else []


def _pick(schema, type_str, var, dtype, chosen):
    """The ONNX type name of a value whose formal type is ``type_str``."""
    if type_str in chosen:
        return chosen[type_str]
    allowed = _allowed(schema, type_str)
    for preferred in ("int64", "float", "int32", "bool"):
        if preferred in allowed:
            chosen[type_str] = preferred
            return preferred
    if allowed:
        chosen[type_str] = allowed[0]
        return allowed[0]
    return None


def _elem(name):
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(_NUMPY[name]))


def variants(op, schema):
    """[(label, {type_str: onnx type}, attrs)]: the dtype variants walked for ``op``."""
    from pipeline.check.onnx_types import data_type_var

    if op == "QuantizeLinear":
        xs = _allowed(schema, schema.inputs[0].type_str)
        out = [("x={} y=int8".format(x), {schema.inputs[0].type_str: x, schema.outputs[0].type_str: "int8"}, {})
               for x in xs]
        out += [("x=float y={}".format(q), {schema.inputs[0].type_str: "float", schema.outputs[0].type_str: q}, {})
                for q in _allowed(schema, schema.outputs[0].type_str) if q != "int8"]
        return out
    var = data_type_var(schema, op)
    if var is None:
        return []
    out = []
    for dtype in _allowed(schema, var):
        if op in ("Cast", "CastLike"):
            out.append(("{}->float".format(dtype), {var: dtype, schema.outputs[0].type_str: "float"}, {"to": 1}))
            if dtype != "float":
                out.append(("float->{}".format(dtype), {var: "float", schema.outputs[0].type_str: dtype},
                            {"to": int(_elem(dtype))}))
        elif op == "Pow":  # the exponent's type is asked too (the parser's Pow is float only)
            out.append((dtype, {var: dtype, schema.inputs[1].type_str: dtype}, {}))
        else:
            out.append((dtype, {var: dtype}, {}))
    return out


def build(op, schema, types, attrs, opset, const_inputs=()):
    """A one-node model of ``op`` with the formal types in ``types``; None when the walk cannot build it.
    Data inputs are graph inputs, except those in ``const_inputs`` (the row's: weights) and
    DequantizeLinear's (quantized weights, as a Q/DQ model holds them); the rest are initializers."""
    import onnx
    from onnx import helper, numpy_helper

    from pipeline.check.onnx_types import data_type_var

    var = data_type_var(schema, op) if op != "QuantizeLinear" else schema.outputs[0].type_str
    chosen = dict(types)
    inputs, inits = [], []
    required = [p for p in schema.inputs if p.option != p.option.Optional]
    if op == "QuantizeLinear" or op == "DequantizeLinear":
        required = list(schema.inputs[:3])  # the zero point carries the quantized type
    names = []
    shape = [2, 4] if op in _RANK2 else [1, 2, 4, 4]
    for index, formal in enumerate(required):
        t = _pick(schema, formal.type_str, var, None, chosen)
        if t is None:
            return None
        name = "in{}".format(index)
        names.append(name)
        is_data = formal.type_str in types and (index == 0 or types.get(formal.type_str) == types.get(
            required[0].type_str) and formal.type_str == required[0].type_str)
        if (op == "QuantizeLinear" and index > 0) or op == "DequantizeLinear" or index in const_inputs:
            is_data = False
        if is_data:
            inputs.append(helper.make_tensor_value_info(name, _elem(t), shape))
        else:
            value = np.zeros([] if op in ("QuantizeLinear", "DequantizeLinear") else [1], _NUMPY[t])
            if op in ("QuantizeLinear", "DequantizeLinear") and index == 1:
                value = np.array(0.1, _NUMPY[t])
            elif op == "DequantizeLinear" and index == 0 or index in const_inputs:
                value = np.ones(shape if index == 0 else [shape[1]], _NUMPY[t])
            inits.append(numpy_helper.from_array(value, name))
    outputs = []
    for index, formal in enumerate(schema.outputs):
        if formal.option == formal.option.Optional and index > 0:
            continue
        t = _pick(schema, formal.type_str, var, None, chosen)
        if t is None:
            return None
        outputs.append(helper.make_tensor_value_info("out{}".format(index), _elem(t), None))
    attrs = dict(_REQUIRED_ATTRS.get(op, {}), **attrs)
    for a in schema.attributes.values():
        if a.required and a.name not in attrs:
            return None
    node = helper.make_node(op, names, [o.name for o in outputs], name="node", **attrs)
    graph = helper.make_graph([node], "walk", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def truth(table, op, types, schema):
    """What the table says: (listed and supported, the type checked is in the row)."""
    from pipeline.check.onnx_types import type_name
    from pipeline.targets.optables import normalize_type

    entry = table.lookup(op)
    if entry is None or not entry.supported or entry.types is None:
        return False
    listed = {normalize_type(t) for t in entry.types}
    cast_down = dict(table.cast_down or {})

    def ok(onnx_name):
        name = type_name(int(_elem(onnx_name)))
        return cast_down.get(name, name) in listed or name in listed

    if op == "QuantizeLinear":
        x, q = types[schema.inputs[0].type_str], types[schema.outputs[0].type_str]
        dq = table.lookup("DequantizeLinear")
        dq_types = set(dq.types or ()) if dq is not None and dq.supported else set()
        qname = type_name(int(_elem(q)))
        return ok(x) and qname in set(table.quantized_types or ()) and qname in dq_types
    if op == "DequantizeLinear":
        q = types[schema.inputs[0].type_str]
        qname = type_name(int(_elem(q)))
        return ok(q) and qname in set(table.quantized_types or ())
    return all(ok(t) for t in types.values())


def walk(target_name, directory):
    """Every (op, dtype variant) of the target's onnx table, checked; a list of Case."""
    import onnx

    from pipeline.check import check_model
    from pipeline.check.onnx_types import schema_of
    from pipeline.targets import load_target
    from pipeline.targets.optables import load_op_table

    target = load_target(target_name)
    table = load_op_table(target.op_tables["onnx"])
    opset = target.max_opset
    cases = []
    for op in sorted(table.ops):
        if op in _SKIP:
            continue
        schema = schema_of(op, "", opset)
        if schema is None or not schema.inputs or any(a.type == a.type.GRAPH for a in schema.attributes.values()):
            continue
        if any(p.type_str.startswith(("seq(", "optional(")) for p in list(schema.inputs) + list(schema.outputs)):
            continue
        for label, types, attrs in variants(op, schema):
            entry = table.lookup(op)
            model = build(op, schema, types, attrs, opset, tuple((entry.const_inputs or {}) if entry else ()))
            if model is None:
                continue
            path = os.path.join(str(directory), "{}_{}.onnx".format(op, label.replace(">", "").replace("=", "")))
            onnx.save(model, path)
            report = check_model(path, target, convert=False)
            route = report.route("onnx")
            blockers = [f for f in route.findings if f.severity == "blocker"] + list(route.accepted_but_wrong)
            cases.append(Case(op, label, truth(table, op, types, schema), not blockers, blockers))
    return cases


def explained(case):
    """A NO the table does not give is explained by a restriction/parser blocker or a documented rule."""
    for f in case.blockers:
        if f.kind != "dtype" or any(rule in f.cause for rule in EXPLAINED_DTYPE_RULES):
            return True
    return False


def figures(cases):
    false_yes = [c for c in cases if c.check_yes and not c.truth]
    no_vs_table = [c for c in cases if not c.check_yes and c.truth]
    agree = sum(1 for c in cases if c.check_yes == c.truth)
    return {"checks": len(cases), "false_yes": len(false_yes),
            "agreement": round(100.0 * agree / max(1, len(cases)), 1),
            "no_where_table_yes": len(no_vs_table),
            "unexplained_no": len([c for c in no_vs_table if not explained(c)]),
            "false_yes_cases": ["{} {}".format(c.op, c.dtype) for c in false_yes],
            "unexplained_cases": ["{} {}: {}".format(c.op, c.dtype, c.blockers[0].cause[:140])
                                  for c in no_vs_table if not explained(c)],
            "no_kinds": dict(Counter(f.kind for c in no_vs_table for f in c.blockers[:1]))}


TARGETS = ("jetson_tx2", "jetson_nano", "agx_xavier", "xavier_nx", "agx_orin", "orin_nx", "orin_nano")

if __name__ == "__main__":
    import json
    import sys
    import tempfile

    for name in sys.argv[1:] or TARGETS:
        with tempfile.TemporaryDirectory() as tmp:
            f = figures(walk(name, tmp))
        verbose = os.environ.get("WALK_VERBOSE")
        print(name, json.dumps(f if verbose else {k: v for k, v in f.items() if not k.endswith("_cases")}))
