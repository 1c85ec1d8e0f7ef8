"""Partial restore: copy the weights a changed network still has from a checkpoint into a Keras model.

``read_weights(path)`` reads {name: array} from

- a TF2 object-based checkpoint (prefix or directory; written by ``tf.train.Checkpoint``),
- a TF1 name-based checkpoint (``tf.compat.v1.train.Saver``; names like ``conv1/weights``),
- a Keras model ``.keras`` (names are the variable paths, ``conv0/kernel``),
- Keras weights ``.weights.h5`` (Keras 3: ``<layer>/vars/<i>``) or a legacy ``.h5`` (``conv0/kernel``),
- a frozen graph ``.pb`` (Const nodes by node name).

``restore_report(model, weights)`` pairs each model variable with a checkpoint value, and
``restore(model, path)`` also copies them. Pairing, in order (see ``_pair``):

1. TF2 object-based checkpoints keep no layer names, only positions
   (``model/_operations/4/_kernel``): their layers are aligned with the model's layers in order by
   their variables' names and shapes; a layer the alignment cannot place for certain is not
   restored (reported as ambiguous).
2. Otherwise a checkpoint name, after ``name_map`` (longest prefix rewritten: checkpoint prefix ->
   model prefix, at "/" boundaries), ":0" stripped and TF-slim leaf names read as Keras ones
   (``weights`` -> ``kernel``, ``biases`` -> ``bias``), equal to the variable's path (or to its
   ``<layer>/vars/<i>`` name in a Keras 3 weights file) is a match.
3. Failing that, a name whose "/"-components end with the variable path's (or the other way
   round; at least two components in common, so a leading model scope is ignored) matches when
   that is the only candidate on both sides. Two candidates: not restored, reported as ambiguous.

An ambiguous variable is initialised fresh: it is listed under both "ambiguous" and "new".

The report lists variable paths (restored, new, excluded, trainable, ambiguous), checkpoint names
(unused) and ``"<path> (ckpt shape) vs (model shape)"`` (shape_mismatch). A shape mismatch outside
``exclude_scopes`` is a DeployError that names the variable and the scope to exclude.
"""

import re
from pathlib import Path

from pipeline.train.checkpoints import FORMATS, Weights, first_line, strip_port, inspect, read_weights  # noqa: F401

from pipeline.errors import DeployError

REPORT_KEYS = ("restored", "new", "unused", "shape_mismatch", "excluded", "ambiguous", "trainable")

_LEAF_ALIASES = {"weights": "kernel", "biases": "bias", "depthwise_weights": "depthwise_kernel"}
_TF2_NAME = re.compile(r"(^|/)(_operations|_layers|_self_tracked_trackables|layer_with_weights-\d+|layer-\d+)/")


def _model_vars(model):
    """[(path, variable, aliases)]: aliases are the variable's names in a Keras 3 weights file."""
    aliases = {}

    def walk(layer, scopes, root):
        store = {}
        try:
            layer.save_own_variables(store)
        except Exception:
            store = {}
        for i, v in store.items():
            aliases.setdefault(id(v), "/".join(scopes + ([] if root else [layer.name]) + ["vars", str(i)]))
        inner = scopes if root else scopes + [layer.name]
        for child in getattr(layer, "layers", None) or []:
            walk(child, inner, False)

    walk(model, [], True)
    result = []
    for v in model.weights:
        alias = aliases.get(id(v))
        result.append((v.path, v, [alias] if alias else []))
    return result


def _components(name):
    parts = strip_port(name).strip("/").split("/")
    if parts:
        parts[-1] = _LEAF_ALIASES.get(parts[-1], parts[-1])
    return tuple(parts)


def _apply_name_map(name, name_map):
    if not name_map:
        return name
    best = None
    for src in name_map:
        key = src.rstrip("/")
        if name == key or name.startswith(key + "/"):
            if best is None or len(key) > len(best.rstrip("/")):
                best = src
    if best is None:
        return name
    target = name_map[best].rstrip("/")
    rest = name[len(best.rstrip("/")):].lstrip("/")
    return "/".join(p for p in (target, rest) if p)


def _pair(model_vars, weights, name_map):
    """({model path: checkpoint name}, [ambiguous model paths])."""
    if _is_object_based(weights):
        return _pair_structural(model_vars, weights)
    mapped = {}  # normalised checkpoint name -> [checkpoint names]
    for name in weights:
        mapped.setdefault(_components(_apply_name_map(name, name_map)), []).append(name)
    hits = {path: sorted({n for key in [path] + aliases for n in mapped.get(_components(key), [])})
            for path, _, aliases, _ in model_vars}
    claims = {}
    for path, names in hits.items():
        for name in names:
            claims.setdefault(name, set()).add(path)
    pairs, ambiguous, taken, rest = {}, [], set(), []
    for path, _, _, _ in model_vars:
        names = hits[path]
        taken.update(names)
        if len(names) == 1 and len(claims[names[0]]) == 1:
            pairs[path] = names[0]
        elif names:
            ambiguous.append(path)
        else:
            rest.append(path)
    # Suffix matches between what is left on both sides, kept only when one-to-one.
    free = {key: names[0] for key, names in mapped.items() if len(names) == 1 and names[0] not in taken}
    candidates = {}
    for path in rest:
        mine = _components(path)
        candidates[path] = sorted(
            name for key, name in free.items()
            if min(len(key), len(mine)) >= 2 and (key[-len(mine):] == mine or mine[-len(key):] == key))
    claims = {}
    for path, names in candidates.items():
        for name in names:
            claims.setdefault(name, []).append(path)
    for path, names in candidates.items():
        if len(names) == 1 and len(claims[names[0]]) == 1:
            pairs[path] = names[0]
        elif names:
            ambiguous.append(path)
    return pairs, ambiguous


def _is_object_based(weights):
    kind = getattr(weights, "kind", None)
    if kind:
        return kind == "tf2"
    return bool(weights) and all(_TF2_NAME.search(name) for name in weights)


def _group_key(name):
    """Sort key of a checkpoint object path: numbers compare as numbers."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[/-]", name))


def _groups(named):
    """{parent path: {attribute: (name, shape)}} of "<parent>/<attribute>" names, in path order."""
    groups = {}
    for name, shape in named:
        parent, _, attr = name.rpartition("/")
        groups.setdefault(parent, {})[attr.lstrip("_")] = (name, tuple(shape))
    return [(parent, groups[parent]) for parent in sorted(groups, key=_group_key)]


def _model_object_paths(model_vars):
    """{model path: object path of the variable in tf.train.Checkpoint(model=model)}."""
    from pipeline.tf import import_tf

    tf = import_tf()
    try:
        from tensorflow.python.checkpoint import graph_view

        root = tf.train.Checkpoint(model=model_vars[0][3])  # the view holds it by a weak reference
        _, paths = graph_view.ObjectGraphView(root).breadth_first_traversal()
    except Exception as e:
        raise DeployError("cannot list the model's checkpoint layout to read a TF2 checkpoint into it ({}); "
                          "give a .keras or .weights.h5 file instead".format(first_line(e)))
    result = {}
    for path, v, _, _ in model_vars:
        for obj in (v, getattr(v, "value", None)):
            try:
                ref = paths.get(obj) if obj is not None else None
            except TypeError:
                ref = None
            if ref:
                result[path] = "/".join(r.name for r in ref)
                break
    return result


def _pair_structural(model_vars, weights):
    """Align the checkpoint's layers with the model's, in order, by variable names and shapes."""
    object_paths = _model_object_paths(model_vars)
    by_object = {obj: path for path, obj in object_paths.items()}
    shapes = {path: tuple(v.shape) for path, v, _, _ in model_vars}
    mine = _groups((obj, shapes[path]) for obj, path in by_object.items())
    theirs = _groups((name, value.shape) for name, value in weights.items())

    def signature(group):
        return tuple(sorted((attr, shape) for attr, (_, shape) in group.items()))

    a = [signature(g) for _, g in theirs]
    b = [signature(g) for _, g in mine]
    pairs_idx, loose = _certain_alignment(a, b)
    # Pair layers left between two aligned ones when exactly one is left on each side and their
    # variables have the same names: a changed layer (its shapes differ, reported as a mismatch).
    anchors = [(-1, -1)] + sorted(pairs_idx) + [(len(a), len(b))]
    for (i0, j0), (i1, j1) in zip(anchors, anchors[1:]):
        if i1 - i0 == 2 and j1 - j0 == 2 and i0 + 1 not in loose[0] and j0 + 1 not in loose[1]:
            if sorted(theirs[i0 + 1][1]) == sorted(mine[j0 + 1][1]):
                pairs_idx.append((i0 + 1, j0 + 1))
    pairs, ambiguous = {}, []
    for i, j in pairs_idx:
        for attr, (obj, _) in mine[j][1].items():
            if attr in theirs[i][1]:
                pairs[by_object[obj]] = theirs[i][1][attr][0]
    for j in sorted(loose[1]):
        ambiguous.extend(by_object[obj] for obj, _ in mine[j][1].values())
    return pairs, ambiguous


def _certain_alignment(a, b):
    """Pairs (i, j), a[i] == b[j], in every longest order-keeping alignment of a and b; and the
    indices of a and of b that some longest alignment pairs but not for certain (ambiguous)."""
    n, m = len(a), len(b)
    f = [[0] * (m + 1) for _ in range(n + 1)]  # f[i][j]: longest alignment of a[:i], b[:j]
    for i in range(n):
        for j in range(m):
            f[i + 1][j + 1] = f[i][j] + 1 if a[i] == b[j] else max(f[i][j + 1], f[i + 1][j])
    g = [[0] * (m + 2) for _ in range(n + 2)]  # g[i][j]: of a[i:], b[j:]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            g[i][j] = g[i + 1][j + 1] + 1 if a[i] == b[j] else max(g[i + 1][j], g[i][j + 1])
    best = f[n][m]
    usable = [(i, j) for i in range(n) for j in range(m) if a[i] == b[j] and f[i][j] + 1 + g[i + 1][j + 1] == best]
    partners_a, partners_b = {}, {}
    for i, j in usable:
        partners_a.setdefault(i, set()).add(j)
        partners_b.setdefault(j, set()).add(i)
    certain = []
    for i, j in usable:
        if len(partners_a[i]) != 1 or len(partners_b[j]) != 1:
            continue
        # Used in every longest alignment: leaving a[i] out makes every alignment shorter.
        if max(f[i][k] + g[i + 1][k] for k in range(m + 1)) < best:
            certain.append((i, j))
    done_a = {i for i, _ in certain}
    done_b = {j for _, j in certain}
    return certain, (set(partners_a) - done_a, set(partners_b) - done_b)


# -- report and restore ----------------------------------------------------------------------------

def _in_scopes(path, scopes):
    parts = path.split("/")
    for scope in scopes or ():
        want = [p for p in str(scope).strip("/").split("/") if p]
        if not want:
            continue
        if parts[: len(want)] == want or (len(parts) > 2 and parts[1: 1 + len(want)] == want):
            return True
    return False


def _plan(model, weights, exclude_scopes, name_map):
    model_vars = [(path, v, aliases, model) for path, v, aliases in _model_vars(model)]
    pairs, ambiguous = _pair(model_vars, weights, name_map) if model_vars else ({}, [])
    report = {key: [] for key in REPORT_KEYS}
    assign = []
    used = set(pairs.values())
    for path, v, _, _ in model_vars:
        name = pairs.get(path)
        if _in_scopes(path, exclude_scopes):
            report["excluded"].append(path)
            continue
        if name is None:
            report["new"].append(path)
            continue
        value = weights[name]
        if tuple(value.shape) != tuple(v.shape):
            report["shape_mismatch"].append("{} {} vs {}".format(path, tuple(value.shape), tuple(v.shape)))
            continue
        report["restored"].append(path)
        assign.append((v, value))
    report["ambiguous"] = sorted(set(ambiguous))
    report["unused"] = sorted(n for n in weights if n not in used)
    report["trainable"] = [path for path, v, _, _ in model_vars if v.trainable]
    return report, assign


def restore_report(model, weights, exclude_scopes=(), name_map=None, strict=True, source=None):
    """What ``restore`` would do: {restored, new, unused, shape_mismatch, excluded, ambiguous,
    trainable}. ``strict``: a shape mismatch outside ``exclude_scopes`` is a DeployError."""
    return _checked_plan(model, weights, exclude_scopes, name_map, strict, source)[0]


def _checked_plan(model, weights, exclude_scopes, name_map, strict, source):
    report, assign = _plan(model, weights, exclude_scopes, name_map)
    if strict and report["shape_mismatch"]:
        first = report["shape_mismatch"][0]
        path = first.split(" ", 1)[0]
        scope = path.rsplit("/", 1)[0] if "/" in path else path
        more = len(report["shape_mismatch"]) - 1
        raise DeployError("{}: variable {}{}: shapes differ (checkpoint vs model); to start {} fresh, add "
                          "stages.train.exclude_scopes: [{}]".format(
                              source or getattr(weights, "source", "") or "checkpoint", first,
                              " and {} more".format(more) if more else "", "them" if more else "it", scope))
    return report, assign


def restore(model, path, exclude_scopes=(), trainable_scopes=None, name_map=None, progress=None):
    """Copy into ``model`` the checkpoint values its variables still match; returns the report.

    ``trainable_scopes`` (when non-empty): variables outside them are frozen (trainable = False).
    Nothing is assigned when the restore fails (DeployError).
    """
    weights = read_weights(path)
    report, assign = _checked_plan(model, weights, exclude_scopes, name_map, True, path)
    _nothing_matches(model, weights, report, assign, path)
    for v, value in assign:
        v.assign(value.astype(v.dtype) if hasattr(value, "astype") else value)
    if trainable_scopes:
        for v in model.weights:
            if v.trainable and not _in_scopes(v.path, trainable_scopes):
                v.trainable = False
        report["trainable"] = [v.path for v in model.weights if v.trainable]
    if progress is not None:
        progress.log("  init_from {}: restored {}, new {}, unused {}, shape mismatch {}, excluded {}".format(
            path, len(report["restored"]), len(report["new"]), len(report["unused"]),
            len(report["shape_mismatch"]), len(report["excluded"])))
    return report


def _nothing_matches(model, weights, report, assign, path):
    if weights and not assign and not report["excluded"]:
        raise DeployError("{}: none of its {} variables matches the model's (e.g. {} vs {}); is it another network? "
                          "Map names with stages.train.name_map (deploy ckpt diff shows the report)".format(
                              path, len(weights), sorted(weights)[0], model.weights[0].path if model.weights else "-"))


def restore_problem(model, weights, exclude_scopes, name_map, path):
    """The DeployError ``restore`` would raise for this checkpoint and model (shape mismatch: add
    exclude_scopes; nothing matches: name_map), or None: what ``deploy ckpt diff`` exits on."""
    try:
        report, assign = _checked_plan(model, weights, exclude_scopes, name_map, True, path)
        _nothing_matches(model, weights, report, assign, path)
    except DeployError as e:
        return e
    return None


def format_report(report, limit=5):
    """A small table: one row per kind, its count and its first names."""
    rows = []
    for key in REPORT_KEYS:
        items = report.get(key) or []
        if key == "ambiguous" and not items:
            continue
        shown = ", ".join(items[:limit]) + (", ..." if len(items) > limit else "")
        rows.append((key.replace("_", " "), str(len(items)), shown))
    width = max(len(r[0]) for r in rows)
    count = max(len(r[1]) for r in rows)
    return "\n".join("{:<{w}}  {:>{c}}  {}".format(k, n, s, w=width, c=count).rstrip() for k, n, s in rows)


def config_model(config, tf=None):
    """The model ``stages.train`` starts from: the config's zoo model, or its ``model.source``
    Keras file (fine-tuning the user's own model)."""
    from pipeline.data.dataset import dataset_index
    from pipeline.tf import import_tf

    import_tf()
    if config.model.source is not None:
        return source_model(config.model.source)
    num_classes = config.model.num_classes or len(dataset_index(config, verify=False).classes)
    from pipeline.train.zoo import build_model

    return build_model(config.model, num_classes)


def source_model(source):
    """The user's own Keras model (``model.source``) that fine-tuning starts from."""
    from pipeline.tf.keras_model import load_keras_model

    if Path(source).suffix.lower() not in (".keras", ".h5"):
        raise DeployError("model.source: {} is not a Keras model; fine-tuning (stages.train.init_from) starts "
                          "from a .keras/.h5 model or a model.zoo model".format(source))
    return load_keras_model(source)


def config_restore_report(config, checkpoint):
    """``deploy ckpt diff``: (report, problem) of ``checkpoint`` into the config's model (no
    training); ``problem``: the DeployError ``deploy run`` would stop with, or None."""
    opts = config.stages.train
    model = config_model(config)
    weights = read_weights(checkpoint)
    exclude = opts.exclude_scopes if opts else ()
    name_map = (opts.name_map or None) if opts else None
    report = restore_report(model, weights, exclude, name_map, strict=False, source=checkpoint)
    return report, restore_problem(model, weights, exclude, name_map, checkpoint)
