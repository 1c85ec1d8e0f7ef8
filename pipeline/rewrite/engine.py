"""The pass runner, one for both kinds of pass: apply in order, count ops, check the numbers, receipt.

    subject = TFSubject(graph, io, samples)          # a TFGraph, run with the TensorFlow backend
    subject = ONNXSubject(model, feed)               # an onnx.ModelProto, run with ONNX Runtime
    receipt = run_passes(subject, ["fold_constants", ...], options, tolerance=1e-4)

A subject is the small per-format adapter: ``kind`` ("tf" | "onnx"), ``apply(pass, options)`` ->
sites (and the clean-up after it: a TF graph is pruned to its outputs), ``op_counts()`` and
``run(batch=None)`` -> outputs on the fixed sample inputs.

After each pass that changed something the outputs are compared on those inputs:
- a pass that keeps behaviour (remove_identity, lower_opset, ...) against the model before it;
- passes meant to change behaviour (strip_dropout, bn_inference), together after the last of them,
  against the inference-mode reference when there is one, else against the properties they
  promise: two runs give the same outputs, and a sample's output alone equals its output inside a
  batch. An ONNX pass that changes behaviour (a new input type, a TensorRT plugin ONNX Runtime
  cannot run) is not compared (``subject.compares_changes`` is False).
When the samples cannot be made (pipeline.rewrite.feed: an integer input no embedding reads, a
string input, ...) no pass is compared and each receipt entry says why ("not compared: ...").
A pass that fails its comparison fails the rewrite (StageFailed); nothing is written. The comparison
is ``pipeline.numeric.compare_arrays`` with the tolerance as atol and rtol 0 (stages.rewrite.tolerance
is a max abs difference); outputs that are not finite (NaN, inf) before or after a pass fail it too.
"""

import difflib
from collections import Counter

from pipeline import numeric
from pipeline.errors import DeployError, StageFailed
from pipeline.rewrite import KINDS, registry


class TFSubject:
    """A TFGraph (changed in place) run with the TensorFlow backend on fixed sample inputs.

    ``samples``: {input name: array, samples on axis 0} (pipeline.rewrite.feed), or one array for the
    first input; ``skipped``: why the outputs cannot be compared (then no pass is compared, the
    receipt says why). A graph whose batch dimension is fixed (set_input_shape's batch of 1) is fed
    that many samples at a time; the outputs are joined on axis 0."""

    kind = "tf"
    compares_changes = True

    def __init__(self, graph, io, samples, skipped=None):
        self.graph, self.io, self.skipped = graph, io, skipped
        self.input = io["inputs"][0]["name"] if io["inputs"] else None
        self.samples = samples if isinstance(samples, dict) or samples is None else {self.input: samples}
        self.outputs = [o["name"] for o in io["outputs"]]
        self._last = (None, None)  # (graph bytes, outputs on the samples): a pass's "after" is the next one's "before"

    @property
    def count(self):
        return len(next(iter(self.samples.values()))) if self.samples else 0

    def sample(self, i):
        """Sample ``i`` alone (a batch of one), for every input."""
        return {k: v[i:i + 1] for k, v in self.samples.items()}

    def apply(self, p, options):
        from pipeline.tf import import_tf

        tf = import_tf()
        try:
            sites = p.func(self.graph, dict(options, _outputs=self.outputs)) or []
        except tf.errors.OpError as e:  # a pass that runs part of the graph (fold_constants) and cannot
            raise StageFailed("rewrite pass {} cannot run on this graph: {}".format(
                p.name, (getattr(e, "message", None) or str(e)).splitlines()[0]))
        self.graph.prune(self.outputs)
        present = self.graph.nodes
        self.io["inputs"] = [i for i in self.io["inputs"] if i["name"] in present]
        return sites

    def op_counts(self):
        return self.graph.op_counts()

    def run(self, batch=None, graph=None, fresh=False):
        """Outputs on the samples (or ``batch``, a feed dict); the same graph on the samples is run once
        unless ``fresh``."""
        from pipeline.backends.tensorflow import TensorFlowSession
        from pipeline.tf import import_tf

        data = (graph or self.graph).serialize()
        if batch is None and not fresh and data == self._last[0]:
            return self._last[1]
        tf = import_tf()
        graph_def = tf.compat.v1.GraphDef.FromString(data)
        present = {n.name: n for n in graph_def.node}
        io = {key: [t for t in self.io[key] if t["name"] in present] for key in ("inputs", "outputs")}
        feed = {k: v for k, v in (self.samples if batch is None else batch).items() if k in present}
        session = None
        try:
            session = TensorFlowSession(graph_def, io, source="the rewritten graph")
            outputs = _run_in_batches(session, feed, _fixed_batch(present, feed))
            if batch is None:
                self._last = (data, outputs)
            return outputs
        except (tf.errors.OpError, ValueError) as e:
            message = getattr(e, "message", None) or str(e)
            raise StageFailed("the rewritten graph does not run in TensorFlow: {}".format(message.splitlines()[0]))
        finally:
            if session is not None:
                session.close()


def _fixed_batch(nodes, feed):
    """The batch size the graph's placeholders fix (their first dimension), or None when it is free."""
    for name in feed:
        shape = nodes[name].attr["shape"].shape if "shape" in nodes[name].attr else None
        if shape is not None and not shape.unknown_rank and shape.dim and shape.dim[0].size > 0:
            return shape.dim[0].size
    return None


def _run_in_batches(session, feed, batch):
    """``session.run(feed)``, ``batch`` samples at a time when the graph fixes its batch (the last
    group filled up with its last sample, the extra outputs dropped)."""
    import numpy as np

    count = len(next(iter(feed.values()))) if feed else 0
    if batch is None or count == batch or not count:
        return session.run(feed)
    parts = []
    for start in range(0, count, batch):
        group = {}
        for k, v in feed.items():
            chunk = v[start:start + batch]
            if len(chunk) < batch:
                chunk = np.concatenate([chunk] + [chunk[-1:]] * (batch - len(chunk)))
            group[k] = chunk
        parts.append((min(batch, count - start), session.run(group)))
    return [np.concatenate([out[k][:n] for n, out in parts]) for k in range(len(parts[0][1]))]


class ONNXSubject:
    """An onnx.ModelProto (replaced by each pass) run with ONNX Runtime on a fixed feed."""

    kind = "onnx"
    compares_changes = False

    def __init__(self, model, feed):
        self.model, self.feed, self.samples = model, feed, None
        self._last = (None, None)  # (model, outputs)

    def apply(self, p, options):
        self.model, sites = p.func(self.model, options)
        return sites

    def op_counts(self):
        return dict(Counter(n.op_type for n in self.model.graph.node))

    def run(self, batch=None, fresh=False):
        from pipeline.backends.onnxruntime import from_model

        if not fresh and self._last[0] is self.model:  # passes return a new model when they change it
            return self._last[1]
        session = from_model(self.model, "the rewritten model")
        names = {name for name, _, _ in session.inputs}
        outputs = session.run({k: v for k, v in self.feed.items() if k in names})
        self._last = (self.model, outputs)
        return outputs


def check_names(names, kind):
    """DeployError for a name that is not a registered pass of ``kind`` (with a did-you-mean)."""
    known, every = registry(kind), registry(None)
    for name in names:
        if name in known:
            continue
        close = difflib.get_close_matches(name, list(known), n=1)
        other = every.get(name)
        hint = ("; {} is a pass for {}".format(name, KINDS[other.kind]) if other is not None
                else "; did you mean {!r}?".format(close[0]) if close else "")
        raise DeployError("unknown {}rewrite pass {!r}{} ({}passes: {})".format(
            "ONNX " if kind == "onnx" else "", name, hint, "ONNX " if kind == "onnx" else "", ", ".join(sorted(known))))


def run_passes(subject, names, options, tolerance=1e-4, reference_outputs=None, progress=None):
    """Apply the passes ``names`` in order to the subject; return the receipt (one entry per pass, each
    shown by ``format_pass``). ``progress``: a pipeline.progress.Progress told each pass that runs long."""
    from pipeline.progress import Progress

    progress = progress or Progress("quiet")
    check_names(names, subject.kind)
    passes = registry(subject.kind)
    receipt = []
    # behaviour-changing passes are judged together, after the last of them: halfway (dropout
    # gone, batch norm still in training mode) the graph matches neither the old nor the reference
    last_changing = max([i for i, n in enumerate(names) if passes[n].changes_behaviour], default=-1)
    for index, name in enumerate(names):
        p = passes[name]
        opts = dict(options.get(name) or {})
        missing = [k for k in p.needs if k not in opts]
        if missing:
            raise DeployError("rewrite pass {} needs option {} (stages.rewrite.options.{}.{})".format(
                name, missing[0], name, missing[0]))
        with progress.step("rewrite: pass {} ({} of {})".format(name, index + 1, len(names))):
            before_counts = subject.op_counts()
            skipped = getattr(subject, "skipped", None)
            before = None if p.changes_behaviour or skipped else subject.run()
            sites = subject.apply(p, opts)
            delta = op_delta(before_counts, subject.op_counts())
            entry = {"pass": name, "sites": list(sites), "ops": delta, "changes_behaviour": p.changes_behaviour}
            if (sites or delta) and skipped:
                entry["comparison"] = {"against": "not compared: " + skipped}
            elif (sites or delta) and p.changes_behaviour and not subject.compares_changes:
                pass  # not comparable by design (see the module doc)
            elif (sites or delta) and p.changes_behaviour and index < last_changing:
                entry["comparison"] = {"against": "deferred to {}, the last behaviour-changing pass".format(names[last_changing])}
            elif sites or delta:
                entry["comparison"] = _compare(name, p, subject, before, reference_outputs, tolerance)
            receipt.append(entry)
    return receipt


def op_delta(before, after):
    """{op: change in count} of the ops whose count a pass changed (a receipt's ``ops``)."""
    keys = sorted(set(before) | set(after))
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys if after.get(k, 0) != before.get(k, 0)}


def format_pass(entry):
    """One receipt entry as a line: the pass, its sites, the op counts it changed, its numeric comparison."""
    return "  {:<24} {} site(s); {}; {}".format(entry["pass"], len(entry["sites"]), format_delta(entry["ops"]),
                                               _comparison_text(entry.get("comparison")))


def format_delta(delta):
    return ", ".join("{} {:+d}".format(op, n) for op, n in sorted(delta.items(), key=lambda kv: (kv[1], kv[0]))) or "no op change"


def _compare(name, p, subject, before, ref_outputs, tolerance):
    after = subject.run()
    if not p.changes_behaviour:
        against = "the {} before the pass".format("graph" if subject.kind == "tf" else "model")
        pairs = [(before, after)]
    elif ref_outputs is not None:
        against, pairs = "the inference-mode reference", [(ref_outputs, after)]
    else:
        import numpy as np

        again = subject.run(fresh=True)
        alone = [subject.run(batch=subject.sample(i)) for i in range(subject.count)]
        stacked = [np.concatenate([a[k] for a in alone]) for k in range(len(after))]
        against, pairs = "determinism and batch independence (no reference given)", [(after, again), (after, stacked)]
    found = [numeric.compare_arrays(ref, got, tolerance, 0.0) for ref, got in pairs]
    if not all(f["finite"] for f in found):
        raise StageFailed("rewrite pass {}: the outputs compared against {} are not finite (NaN or inf), so deploy "
                          "cannot tell whether the pass changed them; check the model's weights and sample "
                          "inputs".format(name, against))
    diff = max(f["max_abs_diff"] for f in found)
    result = {"against": against, "max_abs_diff": diff, "tolerance": tolerance,
              "passed": all(f["within_tolerance"] for f in found)}
    if not result["passed"]:
        raise StageFailed("rewrite pass {} changed the outputs: max abs diff {:.3g} against {} (> tolerance {:g})".format(
            name, diff, against, tolerance))
    return result


def _comparison_text(comparison):
    if not comparison:
        return "nothing to compare"
    if "max_abs_diff" not in comparison:
        return comparison["against"] if comparison["against"].startswith("not compared") \
            else "compared " + comparison["against"]
    return "max diff {:.2g} vs {}".format(comparison["max_abs_diff"], comparison["against"])
