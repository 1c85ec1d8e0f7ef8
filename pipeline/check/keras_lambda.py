"""Keras Lambda layers deploy did not load: their own cause and fix on every finding that names them.

pipeline.graph.keras_reader turns each Keras Lambda layer it did not load (Keras safe mode: the
layer's Python code is pickled in the file) into a stand-in node ``<layer>/keras_lambda_not_run``,
op PyFunc, attribute ``token`` "keras Lambda layer NAME: ...". The routes and the every-route check
see a PyFunc (no conversion for it, acts outside the graph); what the user has to know is that it is
a Lambda layer whose code was neither loaded nor run, and what to do about it:

    explain_lambdas(graph, results, findings)   # rewrites (or splits off) the findings naming stand-ins
"""

import re

from pipeline.check.findings import Finding
from pipeline.graph.keras_reader import LAMBDA_MARK

_MARK = re.compile(re.escape(LAMBDA_MARK) + r"(_\d+)?$")
_LAYER = re.compile(r"keras Lambda layer (.+?): ")

FIX = ("replace the Lambda with standard layers, or pass --trust-model if you trust the file (it is then loaded "
       "and its real ops checked)")


def lambda_layers(graph):
    """{stand-in node: Lambda layer name} of a graph read from a Keras file."""
    found = {}
    for node in graph.nodes.values():
        if node.op == "PyFunc" and _MARK.search(node.name):
            token = node.attrs.get("token")
            token = token.decode("utf-8", "replace") if isinstance(token, bytes) else str(token or "")
            match = _LAYER.match(token)
            if match:
                found[node.name] = match.group(1)
    return found


def cause(layers, kind=None, route=None):
    """The cause of a finding on the stand-ins of ``layers`` (Lambda layer names)."""
    names = sorted(set(layers))
    text = "Keras Lambda layer{} {}: Python code that cannot be translated without trusting it (not loaded, " \
           "never run)".format("s" if len(names) > 1 else "", ", ".join(names))
    if kind == "acts_outside_graph":
        text += "; deploy refuses to run the graph (consistency, rewrite checks, convert) unless you pass --trust-model"
    elif route == "tftrt":
        text += "; TF-TRT would leave it to TensorFlow, which needs the code"
    return text


def explain_lambdas(graph, results, findings):
    """Give the Lambda stand-ins their own cause and fix in every route's findings (and accepted-but-wrong
    list) and in ``findings`` (every route), in place. A finding naming stand-ins and other nodes is split:
    the other nodes keep the finding, the stand-ins get one of their own right after it."""
    lambdas = lambda_layers(graph)
    if not lambdas:
        return
    for result in results:
        result.findings[:] = _explained(result.findings, lambdas, result.route)
        result.accepted_but_wrong[:] = _explained(result.accepted_but_wrong, lambdas, result.route)
    findings[:] = _explained(findings, lambdas, None)


def _explained(findings, lambdas, route):
    out = []
    for f in findings:
        mine = [n for n in f.nodes if n in lambdas]
        if not mine:
            out.append(f)
            continue
        rest = [n for n in f.nodes if n not in lambdas]
        if rest:
            f.nodes = rest
            out.append(f)
        out.append(Finding(f.severity, f.route, f.kind, f.op, mine, cause([lambdas[n] for n in mine], f.kind, route),
                           FIX, None, f.batch_dependent))
    return out
