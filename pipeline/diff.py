"""`deploy diff A B`: what really changed between two graphs, matching nodes by structure, not name.

TensorFlow names unnamed ops in creation order, so a rebuilt graph shows ``concat`` and
``concat_1`` swapped although nothing changed. Nodes are matched instead by what they compute:

1. Bottom-up structural hashes: a node's hash is its op, its attributes (those starting with
   ``_`` and names left out) and the hashes of its inputs, in order. Constants hash by dtype and
   shape, not value (so changed weights still match, and are reported as such); graph inputs by
   dtype and position. Nodes with equal hashes in A and B match, in graph order.
2. Outward from what matched: an unmatched node of A and an unmatched node of B with the same
   op whose inputs are matched to each other match as *changed* (attributes or one input differ);
   repeated until nothing more matches. Then same-op nodes with the same name.
Everything left is added (only in B) or removed (only in A).
"""

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List

from pipeline.errors import DeployError


@dataclass
class DiffReport:
    a: str
    b: str
    nodes: Dict[str, int]
    renamed: Dict[str, str] = field(default_factory=dict)  # A name -> B name (matched, names differ)
    added: List[str] = field(default_factory=list)  # B names
    removed: List[str] = field(default_factory=list)  # A names
    changed: List[dict] = field(default_factory=list)  # {"a", "b", "op", "what"}
    values: List[dict] = field(default_factory=list)  # constants whose values differ: {"a", "b", "max_abs_diff"}

    @property
    def structurally_identical(self):
        return not (self.added or self.removed or self.changed)

    def to_dict(self):
        return {
            "a": self.a, "b": self.b, "nodes": self.nodes,
            "structurally_identical": self.structurally_identical,
            "identical_up_to_renaming": self.structurally_identical and not self.values,
            "renamed": self.renamed, "added": self.added, "removed": self.removed,
            "changed": self.changed, "values": self.values,
            "by_scope": _by_scope(self),
        }


def diff_models(a_path, b_path, signature="serving_default"):
    import gc

    from pipeline.graph.readers import read_model

    enabled = gc.isenabled()
    gc.disable()
    try:
        a, b = read_model(a_path, signature), read_model(b_path, signature)
        if a.kind != b.kind:
            raise DeployError("cannot diff a {} model ({}) with a {} model ({}); compare models of one kind".format(
                a.kind, a_path, b.kind, b_path))
        return diff_graphs(a, b)
    finally:
        if enabled:
            gc.enable()


def diff_graphs(a, b):
    nodes_a, nodes_b = _nodes(a), _nodes(b)
    ins_a, ins_b = _inputs(a, nodes_a), _inputs(b, nodes_b)
    hash_a, hash_b = _hashes(nodes_a, ins_a), _hashes(nodes_b, ins_b)
    match = {}  # A name -> B name
    by_hash = OrderedDict()
    for name in nodes_b:
        if not _is_const(nodes_b[name]):
            by_hash.setdefault(hash_b[name], []).append(name)
    for name in nodes_a:
        candidates = by_hash.get(hash_a[name]) if not _is_const(nodes_a[name]) else None
        if candidates:
            match[name] = candidates.pop(0)
    _match_outward(nodes_a, nodes_b, ins_a, ins_b, match)
    _match_constants(nodes_a, nodes_b, ins_a, ins_b, match)
    report = DiffReport(str(a.source), str(b.source), {"a": len(nodes_a), "b": len(nodes_b)})
    matched_b = set(match.values())
    report.removed = [n for n in nodes_a if n not in match]
    report.added = [n for n in nodes_b if n not in matched_b]
    for name_a, name_b in match.items():
        if name_a != name_b:
            report.renamed[name_a] = name_b
        na, nb = nodes_a[name_a], nodes_b[name_b]
        what = _differences(na, nb, ins_a[name_a], ins_b[name_b], match)
        if what:
            report.changed.append({"a": name_a, "b": name_b, "op": na.op, "what": what})
        elif _is_const(na):
            diff = _value_diff(a, b, na, nb)
            if diff:
                report.values.append({"a": name_a, "b": name_b, "max_abs_diff": diff})
    return report


# ------------------------------------------------------------------------------ structure


class _Leaf:
    """An ONNX initializer or graph input seen as a node (TF graphs have real nodes for these)."""

    def __init__(self, name, op, attrs):
        self.name, self.op, self.attrs, self.inputs, self.domain = name, op, attrs, [], ""


def _nodes(graph):
    nodes = OrderedDict()
    if graph.kind == "onnx":
        for i, name in enumerate(graph.inputs):
            nodes["input:" + name] = _Leaf(name, "Input", {"position": i, "dtype": graph.tensor_types.get(name)})
        for name, tensor in getattr(graph, "initializers", {}).items():
            nodes["init:" + name] = _Leaf(name, "Initializer", {"value": tensor})
    nodes.update((n.name, n) for n in graph.nodes.values())
    return nodes


def _producer(graph, nodes, tensor):
    """(node key, port) that produces ``tensor`` in ``graph``."""
    if graph.kind == "onnx":
        if "init:" + tensor in nodes:
            return "init:" + tensor, 0
        if "input:" + tensor in nodes:
            return "input:" + tensor, 0
        node = graph.producer(tensor)
        return (node.name, list(node.outputs).index(tensor)) if node is not None else (None, 0)
    name, _, port = tensor.partition(":")
    return name, int(port) if port.isdigit() else 0


def _inputs(graph, nodes):
    """{node key: [(producer key, port), ...]} for every node, computed once."""
    return {name: [_producer(graph, nodes, t) for t in node.inputs if t] for name, node in nodes.items()}


def _is_const(node):
    return node.op in ("Const", "Initializer")


def _attr_signature(node):
    if node.op == "Input":
        return ("input", node.attrs.get("position"), node.attrs.get("dtype"))
    attrs = node.attrs
    items = []
    for key in sorted(attrs):
        if key.startswith("_"):
            continue
        value = attrs[key]
        if hasattr(value, "nbytes") and hasattr(value, "dtype"):  # a tensor: type and shape, not the values
            value = ("tensor", value.dtype, tuple(value.shape or ()))
        items.append((key, repr(value)))
    return tuple(items)


def _hashes(nodes, ins):
    """Bottom-up structural hash of every node (inputs before consumers; cycles broken)."""
    memo, state = {}, {}
    for root in nodes:
        stack = [root]
        while stack:
            name = stack[-1]
            if name in memo:
                stack.pop()
                continue
            node = nodes[name]
            inputs = ins[name]
            if state.get(name) != "open":
                state[name] = "open"
                stack.extend(p for p, _ in inputs if p in nodes and p not in memo and state.get(p) != "open")
                continue
            parts = [node.op, getattr(node, "domain", ""), repr(_attr_signature(node))]
            parts += ["{}:{}".format(memo.get(p, "?"), port) for p, port in inputs]
            memo[name] = hashlib.sha1("\x00".join(parts).encode()).hexdigest()
            stack.pop()
    return memo


def _match_outward(nodes_a, nodes_b, ins_a, ins_b, match):
    """Match unmatched nodes whose inputs are matched to each other (same op): changed nodes."""
    consumers_b = {}
    for name, inputs in ins_b.items():
        for p, _ in inputs:
            consumers_b.setdefault(p, []).append(name)
    progress = True
    while progress:
        progress = False
        matched_b = set(match.values())
        for name, node in nodes_a.items():
            if name in match:
                continue
            candidates = OrderedDict()
            for p, _ in ins_a[name]:
                for c in consumers_b.get(match.get(p), ()):
                    if c not in matched_b and nodes_b[c].op == node.op:
                        candidates[c] = candidates.get(c, 0) + 1
            if candidates:
                best = max(candidates, key=lambda c: (candidates[c], c == name))
                match[name] = best
                matched_b.add(best)
                progress = True
    matched_b = set(match.values())
    for name, node in nodes_a.items():  # last resort: the same name and op (constants: _match_constants)
        if name not in match and not _is_const(node) and name in nodes_b and name not in matched_b \
                and nodes_b[name].op == node.op:
            match[name] = name
            matched_b.add(name)


def _match_constants(nodes_a, nodes_b, ins_a, ins_b, match):
    """Constants match through the nodes that read them (same input position of matched nodes),
    then by name: two weights of one shape are told apart by where they are used, not by order."""
    matched_b = set(match.values())
    for name_a, name_b in list(match.items()):
        for (pa, _), (pb, _) in zip(ins_a[name_a], ins_b[name_b]):
            if pa in nodes_a and pb in nodes_b and pa not in match and pb not in matched_b \
                    and _is_const(nodes_a[pa]) and _is_const(nodes_b[pb]):
                match[pa] = pb
                matched_b.add(pb)
    for name, node in nodes_a.items():
        if name not in match and _is_const(node) and name in nodes_b and name not in matched_b \
                and _is_const(nodes_b[name]):
            match[name] = name
            matched_b.add(name)


def _differences(na, nb, ia, ib, match):
    what = []
    if _attr_signature(na) != _attr_signature(nb):
        keys = sorted({k for k in list(na.attrs) + list(nb.attrs) if not k.startswith("_")})
        changed = [k for k in keys if _attr_signature(_Only(na, k)) != _attr_signature(_Only(nb, k))]
        what.append("attributes: " + ", ".join(changed or ["?"]))
    if len(ia) != len(ib) or any(match.get(pa) != pb or qa != qb for (pa, qa), (pb, qb) in zip(ia, ib)):
        what.append("inputs")
    return "; ".join(what)


class _Only:
    def __init__(self, node, key):
        self.op = node.op
        self.attrs = {key: node.attrs[key]} if key in node.attrs else {}


def _value_diff(a, b, na, nb):
    import numpy as np

    va, vb = na.attrs.get("value"), nb.attrs.get("value")
    xa = va.array() if hasattr(va, "array") else None
    xb = vb.array() if hasattr(vb, "array") else None
    if xa is None or xb is None:  # not a numeric tensor deploy can decode
        return None
    if xa.shape != xb.shape:
        return float("inf")
    if xa.dtype.kind in "fiub":
        d = float(np.max(np.abs(xa.astype("float64") - xb.astype("float64")))) if xa.size else 0.0
        return d or None
    return None if np.array_equal(xa, xb) else float("inf")


# ------------------------------------------------------------------------------ report


def _scope(name):
    parts = name.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def _by_scope(report):
    scopes = OrderedDict()
    for kind, names in (("added", report.added), ("removed", report.removed),
                        ("changed", [c["a"] for c in report.changed]), ("values", [v["a"] for v in report.values])):
        for name in names:
            scopes.setdefault(_scope(name), OrderedDict((k, 0) for k in ("added", "removed", "changed", "values")))[kind] += 1
    return scopes


def format_text(report, limit=20):
    lines = ["{} ({} nodes) vs {} ({} nodes)".format(report.a, report.nodes["a"], report.b, report.nodes["b"])]
    if report.structurally_identical:
        lines.append("structurally identical" + (" up to renaming" if report.renamed else "") +
                     (", {} constant(s) with different values".format(len(report.values)) if report.values else ""))
    else:
        lines.append("different: {} added, {} removed, {} changed, {} constant(s) with different values".format(
            len(report.added), len(report.removed), len(report.changed), len(report.values)))
    if report.renamed:
        lines.append("")
        lines.append("renamed ({}):".format(len(report.renamed)))
        lines += ["  {} ↔ {}".format(x, y) for x, y in list(report.renamed.items())[:limit]]
        lines += ["  ... {} more".format(len(report.renamed) - limit)] if len(report.renamed) > limit else []
    for title, rows in (("added", report.added), ("removed", report.removed),
                        ("changed", ["{} ({}): {}".format(c["a"], c["op"], c["what"]) for c in report.changed]),
                        ("values", ["{}: max abs diff {:.3g}".format(v["a"], v["max_abs_diff"]) for v in report.values])):
        if rows:
            lines += ["", "{} ({}):".format(title, len(rows))] + ["  " + r for r in rows[:limit]]
            lines += ["  ... {} more".format(len(rows) - limit)] if len(rows) > limit else []
    scopes = _by_scope(report)
    if scopes and not report.structurally_identical:
        lines += ["", "by scope (added / removed / changed / values):"]
        lines += ["  {:<40} {added} / {removed} / {changed} / {values}".format(s, **c) for s, c in scopes.items()]
    return "\n".join(lines)
