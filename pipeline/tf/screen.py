"""Screen an untrusted TensorFlow graph before anything runs it.

A frozen graph is data from someone else; running it in TensorFlow runs every op it holds, and
``WriteFile``, ``ReadFile``, ``PyFunc``, ``Save``/``Restore``, a queue or a reader act outside the
graph. Before deploy runs a graph (consistency, rewrite's numeric checks, the convert stage's
comparison and tf2onnx, unfreeze), every node of the graph and of every function in its library
is checked against the allowed ops of ``targets/ops/graph_execution.yaml``:

    screen_graph(graph_def, "model.pb")        # DeployError naming the node and op, or None
    screen_graph(graph_def, "model.pb", outputs=["probabilities"])   # only what fetching them runs
    screen_graph(graph_def, "model.pb", trust=True)   # the user trusts the file: nothing checked

No TensorFlow is imported: ``graph_def`` is TensorFlow's GraphDef or deploy's own
(pipeline.graph.proto); only ``node``, ``library.function[].node_def`` and attrs are read.
"""

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import FrozenSet, Tuple

from pipeline.errors import DeployError

TRUST_FLAG = "--trust-model"
_SHOWN = 3


@dataclass(frozen=True)
class ExecutionPolicy:
    registered: FrozenSet[str]
    stateful: FrozenSet[str]
    allowed_stateful: FrozenSet[str]
    refused: Tuple[Tuple["re.Pattern", str], ...]  # (pattern, why), first match wins

    def refusal(self, op, attrs=None):
        """Why ``op`` may not run, or None when it may."""
        for pattern, why in self.refused:
            if pattern.fullmatch(op):
                return why
        if op not in self.registered:
            return "is not an op this TensorFlow registers (a custom op needs its library, which deploy does not load)"
        if op == "PrintV2" and _text((attrs or {}).get("output_stream")).startswith("file://"):
            return "prints to a file"
        if op in self.stateful and op not in self.allowed_stateful:
            return "is marked stateful by TensorFlow (it can act beyond its outputs) and is not on deploy's list of safe stateful ops"
        return None


@lru_cache(maxsize=None)
def execution_policy():
    from pipeline.targets.files import read_yaml
    from pipeline.targets.files import op_tables_dir

    registry = read_yaml(op_tables_dir() / "tensorflow_ops.yaml", "TensorFlow op registry")
    data = read_yaml(op_tables_dir() / "graph_execution.yaml", "graph execution policy")
    allowed = frozenset(op for group in data["allowed_stateful"].values() for op in group)
    refused = tuple((re.compile(item["pattern"]), item["why"]) for item in data["refused"])
    return ExecutionPolicy(frozenset(registry["ops"]), frozenset(registry["stateful"]), allowed, refused)


def unsafe_nodes(graph_def, outputs=None):
    """[(where, node name, op, why)] for the nodes that may run, in file order: main graph first,
    then the library functions (``where`` is "" or "function NAME").

    ``outputs`` (node names): only what running them can execute is screened, as TensorFlow
    runs it: their data and control inputs, transitively, and every function those nodes call
    (by attribute, e.g. a While's body, or as an op named after the function), transitively.
    None: every node and every function (the conservative answer when the outputs are unknown).
    """
    policy = execution_policy()
    functions = {f.signature.name: f for f in graph_def.library.function}
    if outputs is None:
        nodes, called = list(graph_def.node), list(functions)
    else:
        nodes, called = _reachable(graph_def, functions, outputs)
    found = []
    verdicts = {}

    def visit(where, nodes):
        for node in nodes:
            if node.op in functions:
                continue  # a call of a library function: its body is screened
            if node.op == "PrintV2":  # the only op whose verdict depends on an attribute
                why = policy.refusal(node.op, {"output_stream": _attr_string(node, "output_stream")})
            else:
                if node.op not in verdicts:
                    verdicts[node.op] = policy.refusal(node.op)
                why = verdicts[node.op]
            if why:
                found.append((where, node.name, node.op, why))

    visit("", nodes)
    for name in called:
        visit("function " + name, functions[name].node_def)
    return found


def _reachable(graph_def, functions, outputs):
    """(main-graph nodes that running ``outputs`` executes, in file order; names of the functions
    they call, transitively, in library order)."""
    by_name = {node.name: node for node in graph_def.node}
    seen, work = set(), [o.split(":")[0].lstrip("^") for o in outputs]
    while work:
        name = work.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        work.extend(i.lstrip("^").split(":")[0] for i in by_name[name].input)
    nodes = [node for node in graph_def.node if node.name in seen]
    called, work = set(), [n for node in nodes for n in _calls(node, functions)]
    while work:
        name = work.pop()
        if name in called:
            continue
        called.add(name)
        work.extend(n for node in functions[name].node_def for n in _calls(node, functions))
    return nodes, [name for name in functions if name in called]


def _calls(node, functions):
    """Names of the library functions ``node`` calls."""
    if node.op in functions:
        yield node.op
    for value in node.attr.values():
        kind = value.WhichOneof("value")
        if kind == "func" and value.func.name in functions:
            yield value.func.name
        elif kind == "list":
            for func in value.list.func:
                if func.name in functions:
                    yield func.name


TRUST_ENV = "DEPLOY_TRUST_MODEL"  # set by --trust-model (and inherited by deploy's child processes)


def trusted():
    """Whether the user passed --trust-model (DEPLOY_TRUST_MODEL=1 in the environment)."""
    import os

    return os.environ.get(TRUST_ENV, "").lower() in ("1", "true", "yes")


def screen_graph(graph_def, source, outputs=None, trust=None):
    """Refuse to run ``graph_def`` (read from ``source``) when a node that may run can act outside
    the graph. ``outputs``: the node names that will be fetched (see unsafe_nodes); ``trust``: the
    user vouches for the file (--trust-model; default: ``trusted()``), nothing is screened."""
    if trust if trust is not None else trusted():
        return
    found = unsafe_nodes(graph_def, outputs)
    if not found:
        return
    where, name, op, why = found[0]
    place = " in {}".format(where) if where else ""
    others = sorted({"{} ({})".format(n, o) for _, n, o, _ in found[1:]})
    more = ""
    if others:
        more = "; also {}{}".format(", ".join(others[:_SHOWN]),
                                    " and {} more".format(len(others) - _SHOWN) if len(others) > _SHOWN else "")
    raise DeployError(
        "{}: node '{}'{} is {}, which {}{}: deploy does not run graphs that can act outside the graph; "
        "remove it from the graph (export the inference graph again), or pass {} if you trust this file".format(
            source, name, place, op, why, more, TRUST_FLAG))


def _attr_string(node, key):
    return node.attr[key].s if key in node.attr else b""


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value or "")
