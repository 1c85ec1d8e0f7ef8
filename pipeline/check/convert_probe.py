"""Ask the converter: the onnx route of a frozen TensorFlow graph judged on tf2onnx's real output.

When TensorFlow and tf2onnx are installed, ``deploy check`` runs tf2onnx on the graph the way
deploy's convert stage does (``pipeline.stages.convert``: the graph screened first with
``pipeline.tf.screen.screen_graph`` — tf2onnx's grappler pass evaluates constant subgraphs, so
nothing that can act outside the graph may be in it — then ``to_onnx`` at the opset the convert
stage picks), in a subprocess with a time limit, and checks the ONNX model it wrote like any
.onnx file (``routes.check_onnx_model``, ``onnx_rules.onnx_findings``). Nothing in the graph
runs: tf2onnx converts it, it does not execute it.

    conversion = convert(path, opset=13)    # cached per process: a model checked once is converted once
    convert_many([a, b, c], opset=13)        # several graphs in one subprocess (one TensorFlow import)
    conversion.status                        # converted | failed | refused | timeout | error
    conversion.onnx_path, conversion.seconds, conversion.log

Without TensorFlow or tf2onnx (or with ``DEPLOY_CHECK_CONVERT=0``) the route stays the offline
prediction, labelled "predicted, tf2onnx not run". ``DEPLOY_CHECK_CONVERT_TIMEOUT`` (seconds,
default 120) bounds the subprocess.

Run as ``python -m pipeline.check.convert_probe GRAPH OPSET OUT.onnx`` it is the child: it prints
one JSON object on its last stdout line (``--many OPSET GRAPH OUT [GRAPH OUT ...]``: one line a
graph, as each ends).
"""

import json
import os
import sys
from dataclasses import dataclass, field
from typing import List, Optional

CONVERT_ENV = "DEPLOY_CHECK_CONVERT"  # 0/off/no/false: never run tf2onnx in deploy check
TIMEOUT_ENV = "DEPLOY_CHECK_CONVERT_TIMEOUT"
DEFAULT_TIMEOUT = 120.0
FORMATS = ("frozen_pb", "pbtxt")  # what tf2onnx converts as it is (the convert stage's input)

_CACHE = {}
_TMP = []


@dataclass
class Conversion:
    status: str  # converted | failed (tf2onnx raised) | refused (screen or io) | timeout | error
    message: str = ""
    opset: Optional[int] = None
    onnx_path: Optional[str] = None
    seconds: float = 0.0
    tf2onnx: str = ""
    log: List[str] = field(default_factory=list)  # tf2onnx's warnings and errors, in order
    left: List[str] = field(default_factory=list)  # TF ops tf2onnx left in the ONNX model


def available():
    """Whether deploy check may ask tf2onnx: both importable (found, not imported: importing
    TensorFlow takes seconds) and not switched off with DEPLOY_CHECK_CONVERT=0."""
    if os.environ.get(CONVERT_ENV, "").strip().lower() in ("0", "off", "no", "false"):
        return False
    from importlib.util import find_spec

    return find_spec("tensorflow") is not None and find_spec("tf2onnx") is not None


def timeout_seconds():
    try:
        return float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT


def _key(path, opset):
    from pathlib import Path

    from pipeline.tf.screen import trusted

    path = Path(path).resolve()
    stat = path.stat()
    return path, (str(path), stat.st_size, stat.st_mtime_ns, opset, trusted())


def _workdir():
    if not _TMP:
        import shutil
        import tempfile

        from pipeline.files import at_exit

        _TMP.append(tempfile.mkdtemp(prefix="deploy-check-"))
        at_exit(shutil.rmtree, _TMP[0], True)
    return _TMP[0]


def _child_env():
    from pathlib import Path

    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def convert(path, opset, timeout=None):
    """tf2onnx's conversion of the frozen graph at ``path`` at ``opset`` (a Conversion), run in a
    subprocess; cached per process by the file's path, size and mtime, the opset and --trust-model."""
    import subprocess
    import time
    from pathlib import Path

    path, key = _key(path, opset)
    if key in _CACHE:
        return _CACHE[key]
    out = Path(_workdir()) / "{}.onnx".format(len(_CACHE))
    limit = timeout if timeout is not None else timeout_seconds()
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "pipeline.check.convert_probe", str(path), str(opset), str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_child_env(), timeout=limit)
    except subprocess.TimeoutExpired:
        result = Conversion("timeout", "tf2onnx did not finish within {:g} s ({} sets the limit)".format(limit, TIMEOUT_ENV),
                            opset, seconds=time.monotonic() - start)
    else:
        result = _parse(proc, opset)
        result.seconds = time.monotonic() - start
        if result.status == "converted":
            result.onnx_path = str(out)
    _CACHE[key] = result
    return result


def convert_many(paths, opset, timeout=None):
    """Convert several frozen graphs at ``opset`` in ONE subprocess (TensorFlow and tf2onnx are
    imported once, not once a graph) and fill the per-process cache, so that check_model's
    ``convert`` finds them. The limit is ``timeout`` (default: the convert timeout) for each
    graph, over the whole run; a graph not converted when the run ends (timeout, a crash) is
    left out of the cache, and convert() converts it alone later. A Conversion's ``seconds`` is
    then the graph's own conversion time in the child (without the imports).
    Returns {path: Conversion} of the graphs the run answered."""
    import subprocess
    import time
    from pathlib import Path

    todo = []
    for path in paths:
        path, key = _key(path, opset)
        if key not in _CACHE and all(k != key for _, k, _ in todo):
            todo.append((path, key, Path(_workdir()) / "{}-{}.onnx".format(len(_CACHE), len(todo))))
    if not todo:
        return {}
    limit = (timeout if timeout is not None else timeout_seconds()) * len(todo)
    argv = [sys.executable, "-m", "pipeline.check.convert_probe", "--many", str(opset)]
    for path, _, out in todo:
        argv += [str(path), str(out)]
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_child_env(), timeout=limit)
        stdout = proc.stdout
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout or b""
    answered = {}
    lines = stdout.decode("utf-8", "replace").strip().splitlines()
    for (path, key, out), line in zip(todo, [line for line in lines if line.startswith("{")]):
        try:
            data = json.loads(line)
        except ValueError:
            break
        result = Conversion(data["status"], data.get("message", ""), data.get("opset", opset),
                            tf2onnx=data.get("tf2onnx", ""), log=data.get("log", []), left=data.get("left", []),
                            seconds=data.get("seconds", time.monotonic() - start))
        if result.status == "converted":
            result.onnx_path = str(out)
        _CACHE[key] = answered[str(path)] = result
    return answered


def _parse(proc, opset):
    lines = proc.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        data = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        return Conversion("error", "the tf2onnx subprocess ended with code {}{}".format(
            proc.returncode, ": " + tail[-1] if tail else ""), opset)
    return Conversion(data["status"], data.get("message", ""), data.get("opset", opset), tf2onnx=data.get("tf2onnx", ""),
                      log=data.get("log", []), left=data.get("left", []))


# ------------------------------------------------------------------------------ the check


def converted_route(conversion, graph, target, table, tf_by_node, plugins, known_plugins, predicted):
    """The onnx RouteResult of TensorFlow ``graph`` judged on tf2onnx's output (basis "converted"),
    or None when tf2onnx did not run to an answer (refused, timeout, error: the prediction stands).

    ``tf_by_node``: the TF graph's patterns by node (they explain the ONNX nodes tf2onnx named after
    them, e.g. a dropout's RandomUniform); ``predicted``: the offline result, whose blockers name
    the TF ops behind a conversion that failed."""
    from pipeline.check.findings import CONVERTED, Finding, RouteResult
    from pipeline.check.routes import onnx_runtime_label

    info = {"tf2onnx": conversion.tf2onnx, "opset": conversion.opset, "log": conversion.log}
    if conversion.status == "failed":
        result = RouteResult("onnx", table.name, "opset {}, {}".format(conversion.opset, onnx_runtime_label(target, table)),
                             opset=conversion.opset, basis=CONVERTED, convert_seconds=round(conversion.seconds, 2),
                             converter=info)
        result.findings.append(Finding(
            "blocker", "onnx", "unsupported_op", None, [], conversion.message,
            "deploy check names the TensorFlow ops behind it below; replace or cut them before conversion", "cut"))
        result.findings += [f for f in predicted.findings if f.severity == "blocker"]
        return result
    if conversion.status != "converted":
        return None
    import onnx

    from pipeline.check.batch_flow import REDUCTIONS, flagged_reductions
    from pipeline.check.patterns import find_onnx_patterns
    from pipeline.check.routes import check_onnx_model
    from pipeline.graph.onnx_reader import read_onnx
    from pathlib import Path

    onnx_graph = read_onnx(Path(conversion.onnx_path))
    by_node = {}
    # a reduction tf2onnx named after a TF node the TF batch analysis clears (shape arithmetic,
    # e.g. Keras Flatten's Prod over the shape vector) is not batch-dependent in ONNX either
    flagged = flagged_reductions(graph)
    cleared = {n.name for n in graph.nodes.values() if n.op in REDUCTIONS} - {n for n, _ in flagged}
    for match in find_onnx_patterns(onnx_graph):
        if match.kind == "batch_reduction" and all(n in cleared for n in match.nodes):
            continue
        for name in match.nodes:
            by_node.setdefault(name, match)
    for name, match in tf_by_node.items():  # tf2onnx names its nodes after the TF nodes they come from
        if name in onnx_graph.nodes and (match.stochastic or match.batch_dependent or name not in by_node):
            by_node[name] = match
    model = onnx.load(conversion.onnx_path)
    # op support, plugins, attributes, and onnx_rules.onnx_findings (every node and tensor) on the model
    result = check_onnx_model(onnx_graph, target, table, by_node, plugins, known_plugins, model=model)
    ops = sorted({n.op_type for n in model.graph.node})
    info.update(onnx_nodes=len(model.graph.node), ops=ops, left=conversion.left)
    result.basis, result.convert_seconds, result.converter = CONVERTED, round(conversion.seconds, 2), info
    result.detail = "opset {}, {}".format(conversion.opset, onnx_runtime_label(target, table))
    for finding in result.findings:
        if finding.op in conversion.left and finding.kind in ("unsupported_op", "custom_op"):
            _left_in_tensorflow(finding, conversion, tf_by_node)
    for finding in result.accepted_but_wrong:
        said = [line for line in conversion.log if any(n in line for n in finding.nodes) or "Dropout" in line]
        if said:
            finding.cause += "; tf2onnx: " + said[0]
    dropouts = [n.name for n in model.graph.node if n.op_type == "Dropout"]
    if dropouts:
        result.findings.append(Finding(
            "info", "onnx", "pattern", "Dropout", dropouts,
            "tf2onnx's dropout rewriter replaced dropout with a constant rate by ONNX Dropout, a no-op at inference",
            "none needed for the onnx route; rewrite strip_dropout removes it for every route", "strip_dropout"))
    return result


def _left_in_tensorflow(finding, conversion, tf_by_node):
    """A TF op tf2onnx could not convert (it stays a TF node in the ONNX model): say so, with the
    pattern that explains it in the TF graph."""
    said = next((line for line in conversion.log if finding.op in line), "")
    finding.kind, finding.severity = "unsupported_op", "blocker"
    finding.cause = "tf2onnx {} has no conversion for {} at opset {}: it stays a TensorFlow op in the ONNX model{}".format(
        conversion.tf2onnx, finding.op, conversion.opset, " (tf2onnx: {})".format(said) if said else "")
    match = next((tf_by_node[n] for n in finding.nodes if n in tf_by_node), None)
    if match is not None:
        finding.cause = "{}: {}".format(match.cause, finding.cause)
        finding.fix, finding.rewrite = match.fix, match.rewrite
    else:
        finding.fix = "replace {} before conversion, or cut it out of the graph".format(finding.op)


# ------------------------------------------------------------------------------ the child


def _child(path, opset, out):
    """Screen, convert with the convert stage's to_onnx, save; the outcome as a dict."""
    import logging

    from pipeline.errors import DeployError, StageFailed
    from pipeline.graph.io import graph_io
    from pipeline import convert as stage  # the convert stage's library: the same to_onnx and opset cap
    from pipeline.tf.graph import load_graph_def
    from pipeline.tf.screen import screen_graph

    try:
        graph_def = load_graph_def(path)
        io = graph_io(graph_def, path)
        # the convert stage's screening: tf2onnx's grappler pass evaluates constant subgraphs
        screen_graph(graph_def, path, outputs=[o["name"] for o in io["outputs"]])
    except DeployError as e:
        return {"status": "refused", "message": e.message}
    import tf2onnx

    opset = min(opset, stage.converter_max_opset())
    log = []

    class Keep(logging.Handler):
        def emit(self, record):
            log.append(" ".join(record.getMessage().split()))

    keep = Keep()
    logging.getLogger("tf2onnx").addHandler(keep)
    # to_onnx sets tf2onnx's level to ERROR; the rewriters' warnings say why dropout stays random
    logging.getLogger("tf2onnx.rewriter").setLevel(logging.WARNING)
    kept = {}
    original = tf2onnx.convert.from_graph_def

    def recording(*args, **kwargs):  # to_onnx refuses a model with TF ops left in it: keep it to check it
        kept["model"] = result = original(*args, **kwargs)
        return result

    tf2onnx.convert.from_graph_def = recording
    base = {"opset": opset, "tf2onnx": tf2onnx.__version__, "log": log}
    try:
        model = stage.to_onnx(graph_def, io, opset)
    except StageFailed as e:
        return dict(base, status="failed", message=e.message)
    except DeployError as e:
        if "model" not in kept:
            return dict(base, status="failed", message=e.message)
        model = kept["model"][0]
    finally:  # the next graph of a --many run starts from the same state
        tf2onnx.convert.from_graph_def = original
        logging.getLogger("tf2onnx").removeHandler(keep)
    import onnx

    left = sorted({n.op_type for n in model.graph.node if not onnx.defs.has(n.op_type, n.domain or "")})
    with open(out, "wb") as handle:
        handle.write(model.SerializeToString())
    return dict(base, status="converted", left=left)


def _child_outcome(path, opset, out):
    import time

    start = time.monotonic()
    try:
        outcome = _child(path, opset, out)
    except Exception as e:  # noqa: BLE001 - tf2onnx and TensorFlow raise anything; report it
        outcome = {"status": "error", "message": "{}: {}".format(type(e).__name__, str(e).splitlines()[0] if str(e) else "")}
    outcome["seconds"] = round(time.monotonic() - start, 3)
    return outcome


if __name__ == "__main__":
    if sys.argv[1] == "--many":  # --many OPSET GRAPH OUT [GRAPH OUT ...]: one JSON line each, as each ends
        _opset = int(sys.argv[2])
        for _path, _out in zip(sys.argv[3::2], sys.argv[4::2]):
            print(json.dumps(_child_outcome(_path, _opset, _out)), flush=True)
    else:
        _path, _opset, _out = sys.argv[1:4]
        print(json.dumps(_child_outcome(_path, int(_opset), _out)))
