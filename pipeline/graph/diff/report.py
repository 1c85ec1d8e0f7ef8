"""What a diff found, in words: attribute and op changes with their values, constants with their
shapes, every swap of a creation-order name, and the changes by scope."""

from collections import OrderedDict

SMALL = 16  # constants up to this many values are printed ([1,1917,1,4] -> [1,1917,5])


def differences(a, b, i, j, match, not_compared=None):
    """What differs between matched nodes A[i] and B[j]: op, attributes (with values), inputs. An attribute
    deploy cannot decode (a placeholder, an unset or unknown kind) is not compared: counted by name in
    ``not_compared`` (the report names each once), never a change of its own."""
    from pipeline.graph.diff.structure import NAMING_ATTRS, attr_signature, tensor_bytes

    what = []
    if a.ops[i] != b.ops[j]:
        what.append("op {} → {}".format(a.ops[i], b.ops[j]))
    if a.sigs[i] != b.sigs[j] and a.ops[i] == b.ops[j]:
        xa, xb = a.attrs_of(i), b.attrs_of(j)
        changes = []
        for key in sorted(set(xa) | set(xb)):
            if key.startswith("_") or key in NAMING_ATTRS:  # names, like the nodes' own
                continue
            if key in xa and key in xb and not (_readable(xa[key]) and _readable(xb[key])):
                if not_compared is not None:
                    not_compared[key] = not_compared.get(key, 0) + 1
                continue
            va, vb = attr_signature("", {key: xa[key]} if key in xa else {}), attr_signature("", {key: xb[key]} if key in xb else {})
            if va == vb and _is_tensor(xa.get(key)) and _is_tensor(xb.get(key)):  # same dtype and shape: the values
                va, vb = tensor_bytes(xa[key]), tensor_bytes(xb[key])
            if va != vb:
                changes.append("{} {} → {}".format(key, _short(xa.get(key)), _short(xb.get(key))))
        if changes:
            what.append("attributes: " + "; ".join(changes))
    ia, ib = a.inputs[i], b.inputs[j]
    if len(ia) != len(ib) or any(match.get(p) != q or pa != qb for (p, pa), (q, qb) in zip(ia, ib)):
        what.append("inputs")
    return ", ".join(what)


def _readable(value):
    from pipeline.graph.view import AttrPlaceholder

    return value is not None and not isinstance(value, AttrPlaceholder)


def _is_tensor(value):
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _short(value):
    if value is None:
        return "(none)"
    if _is_tensor(value):
        array = value.array() if hasattr(value, "array") else None
        if array is not None and array.size <= SMALL:  # its values: what changed
            return "tensor {} {}".format(value.dtype, flat_text(array.ravel().tolist()))
        return "tensor {} {}".format(value.dtype, dims_text(value.shape))
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def dims_text(shape):
    return "[" + ",".join("?" if d is None or d == -1 else str(d) for d in (shape or ())) + "]"


def same_bytes(a, i, b, j):
    """Whether constants A[i] and B[j] have the same bytes: compared directly when both are in
    this process, by fingerprint when one side came from another process (it has only those)."""
    from pipeline.graph.diff.structure import tensor_bytes

    if i in a.fingerprints or j in b.fingerprints:
        return a.fingerprint(i) == b.fingerprint(j)
    return tensor_bytes(a.tensors.get(i)) == tensor_bytes(b.tensors.get(j))


def value_change(a, b, i, j):
    """{"a", "b", "max_abs_diff", "shape": {"a", "b"}, "values": {...} for small ones} or None."""
    import numpy as np

    if same_bytes(a, i, b, j):  # nothing to decode
        return None
    ta, tb = a.tensors.get(i), b.tensors.get(j)
    if ta is None or tb is None:
        return None
    xa, xb = _array(ta), _array(tb)
    if xa is None or xb is None:
        return None
    return array_change(a.names[i], b.names[j], xa, xb)


def array_change(name_a, name_b, xa, xb):
    """The value_change entry of two numpy arrays, or None when they are equal."""
    import numpy as np

    entry = {"a": name_a, "b": name_b, "max_abs_diff": None, "shape": {"a": list(xa.shape), "b": list(xb.shape)}}
    if xa.shape == xb.shape and xa.dtype.kind in "fiub" and xb.dtype.kind in "fiub":
        diff = float(np.max(np.abs(xa.astype("float64") - xb.astype("float64")))) if xa.size else 0.0
        if not diff:
            return None
        entry["max_abs_diff"] = diff
    elif xa.shape == xb.shape and np.array_equal(xa, xb):
        return None
    else:
        entry["max_abs_diff"] = float("inf") if xa.shape == xb.shape else None
    if xa.size <= SMALL and xb.size <= SMALL:
        entry["values"] = {"a": _json_values(xa), "b": _json_values(xb)}
    return entry


def _json_values(x):
    """A small array's values as JSON can hold them: complex numbers as "re+imj" text, NaN and infinity kept as
    floats (json writes them as the tokens deploy's records read)."""
    if x.dtype.kind == "c":
        return [str(v) for v in x.reshape(-1).tolist()]
    return x.tolist()


def _array(value):
    if hasattr(value, "array"):
        return value.array()
    from pipeline.graph.tf_attrs import decode_tf_tensor

    decoded = decode_tf_tensor(value)
    return decoded.array() if decoded is not None else None


# ------------------------------------------------------------------------------ text


def _scope(name):
    parts = name.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def by_scope(report):
    scopes = OrderedDict()
    for kind, names in (("added", report.added), ("removed", report.removed),
                        ("changed", [c["a"] for c in report.changed]), ("values", [v["a"] for v in report.values])):
        for name in names:
            scopes.setdefault(_scope(name), OrderedDict((k, 0) for k in ("added", "removed", "changed", "values")))[kind] += 1
    return scopes


def _value_text(v):
    name = _pair_name(v)
    if "values" in v:  # a small constant: its values, whatever its shape
        return "{}: {} → {}".format(name, flat_text(v["values"]["a"]), flat_text(v["values"]["b"]))
    if v["shape"]["a"] != v["shape"]["b"]:
        return "{}: shape {} → {}".format(name, dims_text(v["shape"]["a"]), dims_text(v["shape"]["b"]))
    return "{} {}: max abs diff {:.3g}".format(name, dims_text(v["shape"]["a"]), v["max_abs_diff"])


def _pair_name(entry):
    return entry["a"] if entry["a"] == entry["b"] else "{} ↔ {}".format(entry["a"], entry["b"])


def flat_text(values):
    return "[" + ",".join(str(x) for x in (values if isinstance(values, list) else [values])) + "]"


def _changed_text(c):
    shape = c.get("shape")
    extra = ""
    if shape and shape["a"] != shape["b"]:
        extra = "; shape {} → {}".format(",".join(map(dims_text, shape["a"] or [])), ",".join(map(dims_text, shape["b"] or [])))
    return "{} ({}): {}{}".format(_pair_name(c), c["op"], c["what"], extra)


def _grouped(pairs, limit):
    """Rename lines; past ``limit``, one line per scope with its count."""
    lines = ["  {} ↔ {}".format(x, y) for x, y in pairs]
    if len(lines) <= limit:
        return lines
    scopes = OrderedDict()
    for x, _ in pairs:
        scopes[_scope(x)] = scopes.get(_scope(x), 0) + 1
    return ["  {}/...: {} renamed".format(s, n) if "/" in s or n > 1 else "  {}: 1 renamed".format(s)
            for s, n in scopes.items()]


def format_text(report, limit=20):
    lines = ["{} ({} nodes) vs {} ({} nodes)".format(report.a, report.nodes["a"], report.b, report.nodes["b"])]
    through = report.passthrough["removed"] or report.passthrough["added"]
    changed_variables = sum(1 for v in report.values if v.get("variable"))
    constants = len(report.values) - changed_variables
    variables = ", {} variable(s) with different values".format(changed_variables) if changed_variables else ""
    if report.structurally_identical:
        lines.append("structurally identical" + (" up to renaming" if report.renamed else "") +
                     (" and pass-through nodes" if through and report.renamed else " up to pass-through nodes" if through else "") +
                     (", {} constant(s) with different values".format(constants) if constants else "") + variables)
    else:
        lines.append("different: {} added, {} removed, {} changed, {} constant(s) with different values".format(
            len(report.added), len(report.removed), len(report.changed), constants) + variables)
    if report.weights_not_compared:  # never silence: silence says the values are equal
        lines.append("weights not compared: " + "; ".join(
            "{} variable(s): {}".format(n, why) for why, n in sorted(report.weights_not_compared.items())))
    if report.not_compared:  # named once, not on every node that has them
        lines.append("attributes deploy cannot read, not compared: " + ", ".join(
            "{} ({} node{})".format(k, n, "" if n == 1 else "s") for k, n in sorted(report.not_compared.items())))
    swapped = report.swapped
    if swapped:  # every one: these are the renames that mislead a name-based diff
        lines += ["", "swapped names ({}), matched by structure:".format(len(swapped))]
        lines += _grouped(list(swapped.items()), 200)
    other = [(x, y) for x, y in report.renamed.items() if x not in swapped]
    if other:
        lines += ["", "renamed ({}):".format(len(other))] + _grouped(other, limit)
    for title, names in (("pass-through nodes only in A", report.passthrough["removed"]),
                         ("pass-through nodes only in B", report.passthrough["added"])):
        if names:
            lines += ["", "{} ({}): {}{}".format(title, len(names), ", ".join(names[:5]),
                                                 " ..." if len(names) > 5 else "")]
    for title, rows in (("added", report.added), ("removed", report.removed),
                        ("changed", [_changed_text(c) for c in report.changed]),
                        ("values", [_value_text(v) for v in report.values])):
        if rows:
            lines += ["", "{} ({}):".format(title, len(rows))] + ["  " + r for r in rows[:limit]]
            lines += ["  ... {} more (--format json lists all)".format(len(rows) - limit)] if len(rows) > limit else []
    scopes = by_scope(report)
    if scopes and not report.structurally_identical:
        lines += ["", "by scope (added / removed / changed / values):"]
        lines += ["  {:<40} {added} / {removed} / {changed} / {values}".format(s, **c) for s, c in scopes.items()]
    return "\n".join(lines)
