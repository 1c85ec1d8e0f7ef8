"""The converter worker: one process, one TensorFlow import, many conversions.

``deploy check`` asks tf2onnx for its real answer in a worker process (TensorFlow stays out of
deploy's own process, so a check without conversion starts fast and a TensorFlow crash is a
message, not a dead deploy). A worker imports TensorFlow and tf2onnx once and then answers
requests one at a time, so a zoo pays one import per worker, not one per model:

    worker = Worker()                                             # started now: its imports run beside the caller
    worker.ask({"do": "convert", "path": "m.pb", "opset": 13, "out": "m.onnx"}, timeout=120)
    worker.ask({"do": "freeze", "path": "m.keras", "out": "frozen.pb"}, timeout=120)
    worker.close()                                                # also when deploy ends: see below

- **Dies with deploy.** The worker's first act is ``pipeline.files.die_with_parent`` (Linux: the
  kernel kills it when the deploy thread that started it ends, ``kill -9`` of deploy included, as
  ``pipeline.check.background``'s forked child does), then it checks its parent is still the one
  that started it (a deploy killed during the start); only then does it import anything.
- **A protocol channel nobody else writes to.** The worker keeps a duplicate of fd 1 for its
  answers and points fd 1 at stderr before importing anything: tf2onnx, TensorFlow and C
  libraries print to fd 1. Its stderr goes to a log file the parent reads when the worker dies.
- **Memory.** tf2onnx's optimizers deep-copy the ONNX graph before each of their ~12 passes per
  round (``optimize_graph(catch_errors=True)``), and with protobuf's default C implementation
  (upb) every pass's ``update_proto`` grows each node's arena by the size of its tensors: a
  100 MB ResNet50 graph peaks at 7 GB in tf2onnx's own CLI. The worker sets tf2onnx's
  ``TF2ONNX_CATCH_ERRORS=FALSE`` (no copies; if a conversion then fails, it is retried once
  with tf2onnx's default, so the answer is the convert stage's) and, for graphs of
  ``PURE_PROTOBUF_BYTES`` or more, protobuf's pure-Python implementation
  (``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python``: no arenas; it costs a few seconds of
  import, which a small graph does not win back). Both are the libraries' own settings. The conversion is
  tf2onnx's own public steps (``pipeline.check.tf2onnx_steps``: from_graph_def's model, each intermediate given
  back as soon as the next exists: what a conversion adds at its peak falls by 17-31 % on keras.applications
  models, DenseNet121 508 -> 382 MB). After each
  answer the worker gives back what it freed (``release_memory``: the cyclic GC, then glibc's
  ``malloc_trim``; without it a worker keeps its largest conversion's peak as its RSS: 987 MB against
  604 MB after DenseNet121), and reports its RSS then and its peak while answering (``rss``,
  ``peak_rss``); the pool replaces a worker still holding more than ``RECYCLE_BYTES``.

Requests and answers are one JSON object a line. ``convert``: the frozen graph screened like the
convert stage screens it (``pipeline.tf.screen``), converted into the model ``tf2onnx.convert.from_graph_def``
makes as ``pipeline.convert.to_onnx`` calls it, the ONNX model written to ``out`` even when TensorFlow ops
are left in it (the check explains them). ``freeze``: a SavedModel frozen by deploy's freeze stage
(``pipeline.tf.freeze.freeze_saved_model``), a Keras file traced ``model(x, training=False)`` and
frozen with ``convert_variables_to_constants_v2`` (as ``pipeline.graph.keras_reader`` does), written
to ``out`` as a frozen GraphDef; a model Keras's safe mode will not load (Lambda layers, custom
classes) is ``refused`` and the caller reads it the way it always does.
"""

import json
import os
import select
import sys
import time

from pipeline.check.tf2onnx_steps import CATCH_ENV, catch_errors, from_graph_def_in_steps, release_memory

PARENT_ENV = "DEPLOY_CHECK_WORKER_PARENT"
PROTOBUF_ENV = "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"
PURE_PROTOBUF_BYTES = 48 << 20  # a graph file this big converts in pure-Python protobuf (see the module doc)
RECYCLE_BYTES = 768 << 20  # a worker holding more than this after an answer (and release_memory) is replaced


class WorkerGone(Exception):
    """The worker died or did not answer in time (``timed_out``); ``log``: its stderr's last line."""

    def __init__(self, message, timed_out=False):
        super().__init__(message)
        self.timed_out = timed_out


class Worker:
    """One worker process (see the module doc); not thread-safe: one caller at a time."""

    def __init__(self, workdir, big=False):
        import subprocess
        from pathlib import Path

        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env[PARENT_ENV] = str(os.getpid())
        env.setdefault(CATCH_ENV, "FALSE")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        if big:
            env.setdefault(PROTOBUF_ENV, "python")
        self.log_path = os.path.join(workdir, "worker-{}-{}.log".format(os.getpid(), id(self)))
        self.big = big
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "pipeline.check.worker"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, env=env)
        self.rss = self.peak_rss = 0
        self._buffer = b""

    def ask(self, request, timeout):
        """The worker's answer (a dict) to ``request``: ``send`` then ``receive``."""
        self.send(request)
        return self.receive(timeout)

    def send(self, request):
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerGone(self._death())

    def receive(self, timeout):
        """The answer to the request sent; WorkerGone when the worker dies or passes ``timeout`` seconds
        (it is killed then: a conversion cannot be stopped any other way)."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise WorkerGone("did not finish within {:g} s".format(timeout), timed_out=True)
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise WorkerGone(self._death())
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer = json.loads(line.decode("utf-8"))
        self.rss = answer.pop("rss", 0)  # after the answer, the memory it freed given back
        self.peak_rss = answer.pop("peak_rss", 0)  # its peak while answering
        return answer

    @property
    def alive(self):
        return self.proc.poll() is None

    def _death(self):
        code = self.proc.wait()
        return "the tf2onnx worker ended with code {}{}".format(code, ": " + self.last_log_line() if self.last_log_line() else "")

    def last_log_line(self):
        try:
            with open(self.log_path, "rb") as log:
                lines = [l for l in log.read()[-4096:].decode("utf-8", "replace").splitlines() if l.strip()]
        except OSError:
            return ""
        return lines[-1].strip() if lines else ""

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:
                pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


# ------------------------------------------------------------------------------ the worker's side


def _rss(field="VmRSS:"):
    """This process's resident memory in bytes (``VmHWM:``: its peak since ``_reset_peak``); 0 where unknown."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _reset_peak():
    """Start VmHWM over from the current RSS (Linux 4.0+: ``clear_refs`` 5), so each answer reports its own peak."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def convert_graph(path, opset, out):
    """Screen, convert, save: the outcome as a dict (status converted | failed | refused, opset, tf2onnx, log, left)."""
    import logging

    from pipeline.convert import converter_max_opset
    from pipeline.errors import DeployError
    from pipeline.graph.io import graph_io
    from pipeline.tf.graph import load_graph_def
    from pipeline.tf.screen import screen_graph

    try:
        graph_def = load_graph_def(path)
        io = graph_io(graph_def, path)
        # the convert stage's screening: tf2onnx's grappler pass evaluates constant subgraphs
        screen_graph(graph_def, path, outputs=[o["name"] for o in io["outputs"]])
    except DeployError as e:
        return {"status": "refused", "message": e.message}
    import onnx
    import tf2onnx

    opset = min(opset, converter_max_opset())
    log = []

    class Keep(logging.Handler):
        def emit(self, record):
            log.append(" ".join(record.getMessage().split()))

    keep = Keep()
    tf2onnx.logging.set_level(logging.ERROR)  # as pipeline.convert.to_onnx
    logging.getLogger("tf2onnx").addHandler(keep)
    # the rewriters' warnings say why a dropout stays random
    logging.getLogger("tf2onnx.rewriter").setLevel(logging.WARNING)
    base = {"opset": opset, "tf2onnx": tf2onnx.__version__, "log": log}
    inputs = [i["name"] + ":0" for i in io["inputs"]]
    outputs = [o["name"] + ":0" for o in io["outputs"]]
    held = [graph_def]  # from here on the conversion holds the only reference: each step gives back the last one's
    del graph_def
    try:
        try:
            model = from_graph_def_in_steps(held, inputs, outputs, opset, catch_errors())
        except Exception:  # noqa: BLE001 - with TF2ONNX_CATCH_ERRORS=FALSE an optimizer's error ends the conversion:
            if catch_errors():  # ask again with tf2onnx's default (it skips that optimizer)
                raise
            model = None
        if model is None:  # outside the except: its traceback holds the failed attempt's graphs
            del log[:]
            release_memory()
            model = from_graph_def_in_steps([load_graph_def(path)], inputs, outputs, opset, catch_errors=True)
    except Exception as e:  # noqa: BLE001 - tf2onnx raises ValueError/RuntimeError/KeyError... with the reason
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        return dict(base, status="failed", message="tf2onnx failed at opset {}: {}".format(opset, text))
    finally:
        logging.getLogger("tf2onnx").removeHandler(keep)
    left = sorted({n.op_type for n in model.graph.node if not onnx.defs.has(n.op_type, n.domain or "")})
    data = model.SerializeToString()
    del model
    _write(out, data)
    return dict(base, status="converted", left=left)


def freeze_model(path, out, signature="serving_default"):
    """A SavedModel or Keras file frozen into a GraphDef at ``out``; refused when it cannot be loaded here."""
    from pathlib import Path

    from pipeline.errors import DeployError

    path = Path(path)
    try:
        if path.is_dir():
            from pipeline.tf.freeze import freeze_saved_model

            graph_def, _ = freeze_saved_model(path, signature or "serving_default")
        else:
            graph_def = _freeze_keras(path)
    except DeployError as e:
        return {"status": "refused", "message": e.message}
    _write(out, graph_def.SerializeToString())
    return {"status": "frozen", "nodes": len(graph_def.node)}


def _freeze_keras(path):
    """``model(x, training=False)`` traced and frozen, inputs named as pipeline.graph.keras_reader names them."""
    import re

    from pipeline.errors import DeployError
    from pipeline.tf import import_tf
    from pipeline.tf.keras_model import keras_file_problem, load_keras_model

    tf = import_tf()
    import keras
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    problem = keras_file_problem(path)
    if problem:
        raise DeployError("{}: {}".format(path, problem))
    from pipeline.tf.keras_model import custom_objects

    try:
        with keras.saving.custom_object_scope(custom_objects()):  # {} unless the user opted in (--custom-objects)
            model = load_keras_model(path)
        inputs = list(model.inputs)
    except DeployError:
        raise
    except Exception as e:  # noqa: BLE001 - keras raises many types; the caller reads it its own way
        raise DeployError("{}: {}".format(path, (str(e).strip().splitlines() or [type(e).__name__])[0]))
    if not inputs:
        raise DeployError("{}: the Keras model has no defined inputs".format(path))
    specs = [tf.TensorSpec(t.shape, t.dtype, name=re.sub(r"[^A-Za-z0-9_.\-/]", "_", t.name.split(":")[0]))
             for t in inputs]

    @tf.function
    def call(*xs):
        return model(xs[0] if len(xs) == 1 else list(xs), training=False)

    graph_def = convert_variables_to_constants_v2(call.get_concrete_function(*specs)).graph.as_graph_def()
    keras.backend.clear_session()
    return graph_def


def _write(path, data):
    part = "{}.part{}".format(path, os.getpid())
    with open(part, "wb") as handle:
        handle.write(data)
    os.replace(part, path)


def _answer(request):
    start = time.monotonic()
    try:
        if request.get("do") == "freeze":
            outcome = freeze_model(request["path"], request["out"], request.get("signature"))
        else:
            outcome = convert_graph(request["path"], int(request["opset"]), request["out"])
    except Exception as e:  # noqa: BLE001 - tf2onnx and TensorFlow raise anything; report it
        outcome = {"status": "error", "message": "{}: {}".format(type(e).__name__, str(e).splitlines()[0] if str(e) else "")}
    outcome["seconds"] = round(time.monotonic() - start, 3)
    return outcome


def main():
    from pipeline.files import die_with_parent

    die_with_parent()  # the kernel kills this process when the thread of deploy that started it ends
    parent = os.environ.get(PARENT_ENV)
    if parent and os.getppid() != int(parent):  # deploy died before that took hold
        os._exit(1)
    channel = os.fdopen(os.dup(1), "w")  # answers only; fd 1 is stderr from here on
    os.dup2(2, 1)
    from pipeline.tf import import_tf

    import_tf()
    from tf2onnx import optimizer, tf_loader, tfonnx  # noqa: F401 - imported now, beside the caller's own work

    for line in sys.stdin:
        if not line.strip():
            continue
        _reset_peak()
        outcome = _answer(json.loads(line))
        outcome["peak_rss"] = _rss("VmHWM:")
        release_memory()
        outcome["rss"] = _rss()
        channel.write(json.dumps(outcome) + "\n")
        channel.flush()


if __name__ == "__main__":
    main()
