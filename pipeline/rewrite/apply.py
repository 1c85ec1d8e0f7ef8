"""The pass runner: apply passes in order, prune, count ops, check the numbers, write the receipt.

After each pass the outputs are compared on real inputs:
- a pass that keeps behaviour (remove_identity, uff_compat, ...) against the graph before it;
- a pass meant to change behaviour (strip_dropout, bn_inference) against the inference-mode
  reference when there is one (``reference``: a frozen graph built with training=False), else
  against the properties it promises: two runs give the same outputs, and a sample's output alone
  equals its output inside a batch.
A pass that fails its comparison fails the rewrite (StageFailed); nothing is written.
"""

from pipeline.errors import DeployError, StageFailed
from pipeline.numeric import max_abs_diff
from pipeline.rewrite import CANONICAL_ORDER, passes


def graph_io(graph, path, outputs=None):
    """The TFGraph's inputs and outputs by pipeline.graph.io's rule (``outputs``, the io.json beside
    ``path``, else Placeholders in and sinks out)."""
    from pipeline.graph.io import graph_io as io_of

    return io_of(graph.graph_def, path, outputs)


class Runner:
    """Runs a TFGraph with the TensorFlow backend on fixed sample inputs."""

    def __init__(self, io, samples):
        self.io = io
        self.samples = samples
        self.input = io["inputs"][0]["name"]

    def run(self, graph, batch=None):
        from pipeline.backends.tensorflow import TensorFlowSession
        from pipeline.tf import import_tf

        tf = import_tf()
        graph_def = tf.compat.v1.GraphDef.FromString(graph.serialize())
        present = {n.name for n in graph_def.node}
        io = {key: [t for t in self.io[key] if t["name"] in present] for key in ("inputs", "outputs")}
        session = None
        try:
            session = TensorFlowSession(graph_def, io, source="the rewritten graph")
            return session.run({self.input: self.samples if batch is None else batch})
        except (tf.errors.OpError, ValueError) as e:
            message = getattr(e, "message", None) or str(e)
            raise StageFailed("the rewritten graph does not run in TensorFlow: {}".format(message.splitlines()[0]))
        finally:
            if session is not None:
                session.close()


def _delta(before, after):
    keys = sorted(set(before) | set(after))
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys if after.get(k, 0) != before.get(k, 0)}


def format_delta(delta):
    return ", ".join("{} {:+d}".format(op, n) for op, n in sorted(delta.items(), key=lambda kv: (kv[1], kv[0]))) or "no op change"


def apply_passes(graph, io, names, options, samples, tolerance=1e-4, reference=None, progress=None):
    """Apply the passes ``names`` in order to ``graph`` (a TFGraph, changed in place); return the receipt."""
    registry = passes()
    for name in names:
        if name not in registry:
            import difflib

            close = difflib.get_close_matches(name, list(registry), n=1)
            raise DeployError("unknown rewrite pass {!r}{} (passes: {})".format(
                name, "; did you mean {!r}?".format(close[0]) if close else "", ", ".join(sorted(registry))))
    outputs = [o["name"] for o in io["outputs"]]
    runner = Runner(io, samples)
    ref_outputs = runner.run(reference) if reference is not None else None
    receipt = []
    # behaviour-changing passes are judged together, after the last of them: halfway (dropout
    # gone, batch norm still in training mode) the graph matches neither the old nor the reference
    last_changing = max([i for i, n in enumerate(names) if registry[n].changes_behaviour], default=-1)
    for index, name in enumerate(names):
        p = registry[name]
        opts = dict(options.get(name) or {})
        missing = [k for k in p.needs if k not in opts]
        if missing:
            raise DeployError("rewrite pass {} needs option {} (stages.rewrite.options.{}.{})".format(
                name, missing[0], name, missing[0]))
        opts["_outputs"] = outputs
        before_counts = graph.op_counts()
        before = None if p.changes_behaviour else runner.run(graph)
        sites = p.func(graph, opts) or []
        graph.prune(outputs)
        delta = _delta(before_counts, graph.op_counts())
        entry = {"pass": name, "sites": list(sites), "ops": delta, "changes_behaviour": p.changes_behaviour}
        if (sites or delta) and p.changes_behaviour and index < last_changing:
            entry["comparison"] = {"against": "deferred to {}, the last behaviour-changing pass".format(names[last_changing])}
        elif sites or delta:
            entry["comparison"] = _compare(name, p, graph, runner, before, ref_outputs, tolerance)
        receipt.append(entry)
        present = graph.nodes
        io["inputs"] = [i for i in io["inputs"] if i["name"] in present]
        if progress is not None:
            progress.log("  {:<16} {} site(s); {}; {}".format(name, len(sites), format_delta(delta),
                                                             _comparison_text(entry.get("comparison"))))
    return receipt


def _compare(name, p, graph, runner, before, ref_outputs, tolerance):
    after = runner.run(graph)
    if not p.changes_behaviour:
        diff = max_abs_diff(before, after)
        result = {"against": "the graph before the pass", "max_abs_diff": diff, "tolerance": tolerance}
    elif ref_outputs is not None:
        diff = max_abs_diff(ref_outputs, after)
        result = {"against": "the inference-mode reference", "max_abs_diff": diff, "tolerance": tolerance}
    else:
        import numpy as np

        again = runner.run(graph)
        alone = [runner.run(graph, batch=runner.samples[i:i + 1]) for i in range(len(runner.samples))]
        stacked = [np.concatenate([a[k] for a in alone]) for k in range(len(after))]
        diff = max(max_abs_diff(after, again), max_abs_diff(after, stacked))
        result = {"against": "determinism and batch independence (no reference given)", "max_abs_diff": diff,
                  "tolerance": tolerance}
    result["passed"] = diff <= tolerance
    if not result["passed"]:
        raise StageFailed("rewrite pass {} changed the outputs: max abs diff {:.3g} against {} (> tolerance {:g})".format(
            name, diff, result["against"], tolerance))
    return result


def _comparison_text(comparison):
    if not comparison:
        return "nothing to compare"
    if "max_abs_diff" not in comparison:
        return "compared " + comparison["against"]
    return "max diff {:.2g} vs {}".format(comparison["max_abs_diff"], comparison["against"])


def auto_passes(graph, target):
    """The passes `deploy check` names as fixes for this graph's findings, runnable without options."""
    from pipeline.check import check_graph
    from pipeline.rewrite.tf_passes import view

    report = check_graph(view(graph), target)
    registry = passes()
    wanted = set()
    findings = report.findings + [f for r in report.routes for f in r.findings + r.accepted_but_wrong]
    for f in findings:
        if f.rewrite in registry and not registry[f.rewrite].needs and (f.severity == "blocker" or f.batch_dependent
                                                                       or f.kind == "accepted_but_wrong"):
            wanted.add(f.rewrite)
    return [n for n in CANONICAL_ORDER if n in wanted], report


def rewrite_auto(graph, io, target, options, samples, tolerance=1e-4, reference=None, progress=None, rounds=5):
    """Apply every pass a finding of `deploy check` names, check again, repeat until nothing applies."""
    receipt, applied = [], []
    for _ in range(rounds):
        names, report = auto_passes(graph, target)
        names = [n for n in names if n not in applied]
        if not names:
            return receipt, report
        receipt += apply_passes(graph, io, names, options, samples, tolerance, reference, progress)
        applied += names
    return receipt, auto_passes(graph, target)[1]
