"""`deploy diff A B`: what really changed between two graphs, matching nodes by structure, not name.

TensorFlow names unnamed ops in creation order, so a rebuilt graph shows ``concat`` and
``concat_1`` swapped although nothing changed; Keras numbers layers per session (``conv2d_16``
in one, ``conv2d`` in the next). Nodes are matched by what they compute:

1. Bottom-up structural hashes: a node's op, its attributes (those starting with ``_`` and names
   left out, naming attributes too: ``shared_name``, ``debug_name``, ... see structure.NAMING_ATTRS) and its inputs' hashes, in order. Constants hash by dtype and shape, not value (so
   changed weights still match, and are reported); pass-through Identity nodes are looked through
   (a graph and its ``optimize_for_inference`` copy without the ``/read`` Identities match).
   A hash found once on each side matches.
2. From every matched pair outward: inputs slot by slot, consumers by hash and slot, wherever one
   candidate is left on each side (so ``relu(concat(x, y))`` and ``sigmoid(concat(x, z))`` pair
   their concats through the consumers, whatever the concats are called).
3. What is still tied: names people chose (a name unique once ``_<n>`` suffixes are stripped,
   see ``structure.reliable_names``), then the constants' values; TensorFlow's creation-order
   names never decide. What remains tied is identical in structure and values.
4. Changed nodes: an unmatched node sitting where an unmatched counterpart sits (same op with
   matched inputs, or the same input slot of matched consumers): attributes, op or inputs differ.
5. Constants through the nodes that read them. A matched constant whose value changed is listed (and
   counted) with the values; one whose shape changed is also a changed node, replaced, not renamed.

Everything left is added (only in B) or removed (only in A). Matched variable nodes of SavedModels
compare the values in their checkpoints (``weights``); where those cannot be read, the report says why.
"""

from dataclasses import dataclass, field
from typing import Dict, List

from pipeline.errors import DeployError

__all__ = ["DiffReport", "diff_models", "diff_graphs", "format_text"]


@dataclass
class DiffReport:
    a: str
    b: str
    nodes: Dict[str, int]
    renamed: Dict[str, str] = field(default_factory=dict)  # A name -> B name (matched, names differ)
    added: List[str] = field(default_factory=list)  # B names
    removed: List[str] = field(default_factory=list)  # A names
    changed: List[dict] = field(default_factory=list)  # {"a", "b", "op", "what", "shape"}
    not_compared: Dict[str, int] = field(default_factory=dict)  # attribute deploy cannot decode -> nodes it is on
    values: List[dict] = field(default_factory=list)  # constants and variables ("variable": True) whose values differ
    weights_not_compared: Dict[str, int] = field(default_factory=dict)  # why -> matched variables not compared
    variables_compared: int = 0  # matched variables whose values were read on both sides
    passthrough: Dict[str, List[str]] = field(default_factory=lambda: {"removed": [], "added": []})

    @property
    def structurally_identical(self):
        return not (self.added or self.removed or self.changed)

    @property
    def swapped(self):
        """Renames where a name of A is another node's name in B (``concat`` <-> ``concat_1``)."""
        b_names = set(self.renamed.values())
        return {x: y for x, y in self.renamed.items() if x in b_names}

    def to_dict(self):
        from pipeline.graph.diff.report import by_scope

        same = self.structurally_identical and not self.values
        return {
            "a": self.a, "b": self.b, "nodes": self.nodes,
            "structurally_identical": self.structurally_identical,
            "identical_up_to_renaming": None if same and self.weights_not_compared else same,  # None: not known
            "weights_not_compared": self.weights_not_compared, "variables_compared": self.variables_compared,
            "identical_up_to_pass_through": bool(self.passthrough["removed"] or self.passthrough["added"]),
            "renamed": self.renamed, "swapped": self.swapped, "added": self.added, "removed": self.removed,
            "changed": self.changed, "values": self.values, "passthrough": self.passthrough,
            "attributes_not_compared": self.not_compared,
            "by_scope": by_scope(self),
        }


def diff_models(a_path, b_path, signature="serving_default", outlive=False, progress=None):
    """``outlive``: both graphs are kept until the process ends (pipeline.files.outlive; the CLI's).
    ``progress``: a pipeline.progress.Progress told each step that runs long (reading A and B, matching)."""
    from pipeline.files import gc_paused
    from pipeline.files import outlive as keep
    from pipeline.progress import Progress

    progress = progress or Progress("quiet")
    with gc_paused(resume=not outlive):
        with progress.step("diff: reading {} and {} (step 1 of 2)".format(a_path, b_path)):
            a, b = _load_pair(a_path, b_path, signature)
        if outlive:
            keep((a, b))
        if a.kind != b.kind:
            raise DeployError("cannot diff a {} model ({}) with a {} model ({}); compare models of one kind".format(
                a.kind, a_path, b.kind, b_path))
        with progress.step("diff: matching {} and {} nodes by structure (step 2 of 2)".format(len(a.names), len(b.names))):
            return diff_graphs(a, b)


PARALLEL_BYTES = 4 << 20  # from this size on, B is read in a second process while A is read here


def _load_pair(a_path, b_path, signature):
    """Both DiffGraphs, prepared. Big files, with a core free (``_idle_core``): B is read and
    prepared in a forked process at the same time as A (reading is most of the time), and comes
    back as structure and constant fingerprints; its values are read again only if the report
    needs them."""
    import multiprocessing
    import os
    from pathlib import Path

    from pipeline.graph.diff.structure import DiffGraph, prepare

    big = all(Path(p).is_file() and os.path.getsize(p) >= PARALLEL_BYTES for p in (a_path, b_path))
    if not big or "fork" not in multiprocessing.get_all_start_methods() or not _idle_core():
        a, b = _load(a_path, signature), _load(b_path, signature)
        return prepare(a), prepare(b)
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_load_in_child, args=(b_path, signature, send), daemon=True)
    child.start()
    send.close()
    try:
        a = prepare(_load(a_path, signature))
        try:
            data = receive.recv()
        except EOFError:
            data = None
    finally:
        child.join(5)
        if child.is_alive():
            child.kill()
    if isinstance(data, dict):
        return a, DiffGraph.restore(data, lambda: _load(b_path, signature))
    if isinstance(data, DeployError):
        raise data
    return a, prepare(_load(b_path, signature))  # the child failed: read B here, with its own errors


def _idle_core():
    """Whether a second core is free for reading B: the parallel read only wins then (it costs
    sending B's structure between processes, about as long as reading it on a busy core). The
    result is the same either way."""
    import os

    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    others = max(0.0, load - 1.0)  # this process is one of the running ones the load average counts
    return cores >= 2 and cores - others >= 1.5


def _load_in_child(path, signature, send):
    from pipeline.graph.diff.structure import prepare

    try:
        send.send(prepare(_load(path, signature)).compact())
    except DeployError as e:
        send.send(e)
    except BaseException:  # anything else: the parent reads the file itself and reports
        send.send(None)
    finally:
        send.close()


def _load(path, signature):
    """A DiffGraph: straight from the GraphDef for a frozen graph, through the reader otherwise."""
    from pathlib import Path

    from pipeline.graph.diff.structure import from_graph_def, from_view
    from pipeline.graph.readers import read_model

    path = Path(path)
    if path.is_file() and path.suffix.lower() in (".pb", ".pbtxt", ".graphdef"):
        from pipeline.graph import proto
        from pipeline.graph.parsing import read_bytes, sniff_protobuf

        if sniff_protobuf(path, "text" if path.suffix.lower() == ".pbtxt" else "binary") == "binary":
            graph_def = proto.GraphDef()
            try:
                graph_def.ParseFromString(read_bytes(path, "a frozen GraphDef"))
            except Exception:  # not a GraphDef: the reader says what it is or what is wrong
                graph_def = None
            if graph_def is not None and graph_def.node and not graph_def.library.function and \
                    all(n.name and n.op for n in graph_def.node[:3]):
                return from_graph_def(graph_def, str(path), _io_outputs(path))
    view = read_model(path, signature)
    g = from_view(view)
    if view.format == "saved_model":  # its weights are in its variables/ checkpoint, read if the report needs them
        from pipeline.graph.diff.weights import SavedModelVariables

        g.weights = SavedModelVariables(view.source)
    return g


def _io_outputs(path):
    """Output node names from the io.json beside a frozen graph, or None."""
    from pipeline.graph.io import read_io_json, sidecar

    side = sidecar(path)
    if side is None:
        return None
    return [o["name"] for o in read_io_json(side)["outputs"]]


def diff_graphs(a, b):
    """Diff two DiffGraphs (pipeline.graph.diff.structure) or two graph views."""
    from pipeline.graph.diff.match import Matcher
    from pipeline.graph.diff.report import differences, dims_text, value_change
    from pipeline.graph.diff.structure import DiffGraph, decoded_signatures, from_view, prepare
    from pipeline.graph.diff.weights import VARIABLE_OPS, variable_change

    a = a if isinstance(a, DiffGraph) else from_view(a)
    b = b if isinstance(b, DiffGraph) else from_view(b)
    if a.from_bytes != b.from_bytes:  # a frozen .pb against a reader's view (.keras, SavedModel): like with like
        decoded_signatures(a if a.from_bytes else b)
    for g in (a, b):
        if g.hashes is None:
            prepare(g)
    match = Matcher(a, b).run()
    skip_a, skip_b = set(a.passthrough), set(b.passthrough)
    report = DiffReport(a.source, b.source, {"a": len(a.names), "b": len(b.names)})
    matched_b = set(match.values())
    report.removed = [a.names[i] for i in range(len(a.names)) if i not in match and i not in skip_a]
    report.added = [b.names[j] for j in range(len(b.names)) if j not in matched_b and j not in skip_b]
    _pair_passthrough(a, b, match)
    matched_b = set(match.values())
    report.passthrough = {"removed": [a.names[i] for i in sorted(skip_a) if i not in match],
                          "added": [b.names[j] for j in sorted(skip_b) if j not in matched_b]}
    names_a, names_b, hashes_a, hashes_b, inputs_a, inputs_b = a.names, b.names, a.hashes, b.hashes, a.inputs, b.inputs
    for i in sorted(match):
        j = match[i]
        if a.const[i]:
            change = value_change(a, b, i, j)
            if change:  # its value changed, whatever its shape: counted and listed with the values
                report.values.append(change)
            if change and change["shape"]["a"] != change["shape"]["b"]:  # another tensor shape flows: structure
                report.changed.append({"a": change["a"], "b": change["b"], "op": a.ops[i], "what": "shape {} → {}".format(
                    dims_text(change["shape"]["a"]), dims_text(change["shape"]["b"])), "shape": None})
                continue  # a constant replaced by another (its names may differ), not renamed
        if names_a[i] != names_b[j]:
            report.renamed[names_a[i]] = names_b[j]
        if a.const[i]:
            continue
        if a.ops[i] in VARIABLE_OPS and b.ops[j] in VARIABLE_OPS:  # its value is outside the graph
            change, why = variable_change(a, b, i, j)
            if why:
                report.weights_not_compared[why] = report.weights_not_compared.get(why, 0) + 1
            else:
                report.variables_compared += 1
                if change:
                    report.values.append(change)
        if hashes_a[i] == hashes_b[j] and [match.get(p) for p, _ in inputs_a[i]] == [q for q, _ in inputs_b[j]]:
            continue  # same op, attributes and inputs: nothing to say
        what = differences(a, b, i, j, match, report.not_compared)
        if what:
            report.changed.append({"a": a.names[i], "b": b.names[j], "op": a.ops[i], "what": what,
                                   "shape": _shapes(a, b, i, j)})
    return report


def _pair_passthrough(a, b, match):
    """Pass-through nodes on both sides that read matched tensors pair up (in file order)."""
    readers_b = {}
    for j in b.passthrough:
        readers_b.setdefault(b.inputs[j][0] if b.inputs[j] else None, []).append(j)
    for i in a.passthrough:
        if not a.inputs[i]:
            continue
        p, port = a.inputs[i][0]
        if p in match:
            free = readers_b.get((match[p], port))
            if free:
                match[i] = free.pop(0)


def _shapes(a, b, i, j):
    sa, sb = a.shapes.get(i), b.shapes.get(j)
    return None if sa is None and sb is None else {"a": sa, "b": sb}


def format_text(report, limit=20):
    from pipeline.graph.diff.report import format_text as text

    return text(report, limit)
