"""Where a frozen TensorFlow graph stops being a function of its own sample: the first node whose
output is random (stochastic) and the first whose output depends on the rest of the batch, in
topological order (``deploy consistency`` and the convert stage's diagnosis)."""

from dataclasses import dataclass
from typing import Optional

from pipeline.errors import DeployError
from pipeline.graph.analysis import topological_names
from pipeline.graph.io import tensor_name as _tensor
from pipeline.numeric import ATOL, RTOL, batched as _batched, diff as _diff, finite as _finite

_REDUCTIONS = ("Mean", "Sum", "Max", "Min", "Prod")


@dataclass
class Divergence:
    node: str
    op: str
    tensor: str
    attrs: dict  # key attributes: is_training (batch norm), axis (reductions), seed/seed2 (random ops)
    reason: str  # "batch-dependent" | "stochastic"
    max_abs_diff: float
    max_rel_diff: float
    hint: Optional[str] = None

    def to_dict(self):
        return _finite(dict(vars(self)))

    def __str__(self):
        attrs = "".join(", {}={}".format(k, str(v).lower() if isinstance(v, bool) else v) for k, v in self.attrs.items())
        what = "stochastic, two runs of the same image differ by" if self.reason == "stochastic" else "max abs diff"
        return "first divergence at {} ({}{}): {} {:.3g}".format(self.node, self.op, attrs, what, self.max_abs_diff)


def _key_attrs(node, consts):
    import numpy as np

    out = {"is_training": node.attr["is_training"].b} if "is_training" in node.attr else {}
    axes = consts.get(node.input[1].split(":")[0]) if node.op in _REDUCTIONS and len(node.input) > 1 else None
    if axes is not None:
        from tensorflow.python.framework import tensor_util

        out["axis"] = np.atleast_1d(tensor_util.MakeNdarray(axes.attr["value"].tensor)).tolist()
    from pipeline.tf.graph import DEPLOY_SEED

    if "seed" in node.attr and node.attr["seed"].i != DEPLOY_SEED:
        out.update({k: node.attr[k].i for k in ("seed", "seed2") if k in node.attr and node.attr[k].i})
    return out


def _hint(op, attrs, reason):
    if reason == "stochastic":
        return ("a random op (dropout or augmentation left in training mode) makes the output random: rebuild with "
                "training=False or apply rewrite strip_dropout")
    if attrs.get("is_training"):
        return ("batch norm in training mode normalises with the batch's own mean and variance: export with "
                "training=False (deploy's export stage does) or apply rewrite bn_inference")
    if 0 in attrs.get("axis", ()):
        return "{} over the batch axis (axis 0) mixes the samples of a batch: use fixed statistics at inference".format(op)
    return None


def _fetch(tf, sess, tensors, feed):
    try:
        return sess.run(tensors, feed)
    except tf.errors.OpError:  # an unfetchable tensor (dead cond branch, loop frame): one by one, None for those
        out = []
        for t in tensors:
            try:
                out.append(sess.run(t, feed))
            except tf.errors.OpError:
                out.append(None)
        return out


def first_divergence(graph_def_path, image, neighbours, io=None, tolerance=ATOL, rtol=RTOL, position=0, chunk=64):
    """The first of ``divergences`` in topological order, or None."""
    found = divergences(graph_def_path, image, neighbours, io, tolerance, rtol, position, chunk)
    return found[0] if found else None


def divergences(graph_def_path, image, neighbours, io=None, tolerance=ATOL, rtol=RTOL, position=0, chunk=64):
    """Where a frozen graph stops being a function of its own sample, in topological order, each
    kind at most once:

    - "stochastic": the first node whose output for ``image`` differs between two runs in one
      session (a random op: dropout left in training mode);
    - "batch-dependent": the first node whose output for ``image`` alone differs from its row at
      ``position`` in a batch with ``neighbours``, each run in a fresh session, so that seeded
      random ops draw the same numbers for that row (at position 0) and only the batch differs.

    Random ops without a seed get one from their name (``seeded_graph_def``): the answer is a pure
    function of the graph and the images. [] when every float tensor agrees."""
    import numpy as np

    from pipeline.backends.tensorflow import load

    session = load(graph_def_path, io)
    if len(session.inputs) != 1:
        raise DeployError("the first-divergence search runs graphs with one image input; {} has {} ({})".format(
            graph_def_path, len(session.inputs), ", ".join(i[0] for i in session.inputs)))
    tf, graph_def, io, graph, inp = session.tf, session.graph_def, session.io, session.graph, session.input_tensor
    image, neighbours = np.asarray(image, inp.dtype.as_numpy_dtype), np.asarray(neighbours, inp.dtype.as_numpy_dtype)
    image = image[None] if inp.shape.rank is not None and image.ndim == inp.shape.rank - 1 else image
    if len(neighbours) == 0:
        raise DeployError("first_divergence needs at least one neighbour image")
    batch = np.concatenate([neighbours[:position], image, neighbours[position:]])
    by_name = {n.name: n for n in graph_def.node}
    consts = {n.name: n for n in graph_def.node if n.op == "Const"}
    used = {_tensor(i) for n in graph_def.node for i in n.input if not i.startswith("^")}
    used |= {_tensor(o["name"]) for o in io["outputs"]}  # unused side outputs (a batch norm's batch variance) can't matter
    tensors = [t for name in topological_names(graph_def) if by_name[name].op not in ("Const", "Placeholder")
               for t in graph.get_operation_by_name(name).outputs
               if t.dtype.is_floating and t.name in used and graph.is_fetchable(t)]
    order = {t.name: k for k, t in enumerate(tensors)}

    def fresh(part, x):  # a new session: every seeded random op starts from its seed
        with tf.compat.v1.Session(graph=graph) as sess:
            return _fetch(tf, sess, part, {inp: x})

    found = {}
    with tf.compat.v1.Session(graph=graph) as sess:
        for start in range(0, len(tensors), chunk):
            part = tensors[start:start + chunk]
            if "stochastic" not in found:
                alone, again = _fetch(tf, sess, part, {inp: image}), _fetch(tf, sess, part, {inp: image})
                for t, a, b in zip(part, alone, again):
                    if a is None or b is None:
                        continue
                    abs_d, rel_d, over = _diff(a, b, tolerance, rtol) if a.shape == b.shape else (np.inf, np.inf, True)
                    if over:
                        found["stochastic"] = (t, abs_d, rel_d)
                        break
            if "batch-dependent" not in found:
                alone, inside = fresh(part, image), fresh(part, batch)
                for t, a, c in zip(part, alone, inside):
                    if a is None or c is None or not (_batched(a, c, len(batch)) or a.shape == c.shape):
                        continue
                    pair = (a[0], c[position]) if _batched(a, c, len(batch)) else (a, c)  # (a, c): no batch dim at all
                    abs_d, rel_d, over = _diff(*pair, tolerance, rtol)
                    if over:
                        found["batch-dependent"] = (t, abs_d, rel_d)
                        break
            if len(found) == 2:
                break
    out = []
    for reason, (t, abs_d, rel_d) in sorted(found.items(), key=lambda kv: order[kv[1][0].name]):
        node = by_name[t.op.name]
        attrs = _key_attrs(node, consts)
        out.append(Divergence(node.name, node.op, t.name, attrs, reason, abs_d, rel_d, _hint(node.op, attrs, reason)))
    return out


# ------------------------------------------------------------------------------ report and command
