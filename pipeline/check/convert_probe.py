"""Ask the converter: the onnx route of a frozen TensorFlow graph judged on tf2onnx's real output.

When TensorFlow and tf2onnx are installed, ``deploy check`` runs tf2onnx on the graph the way
deploy's convert stage does (the graph screened first with ``pipeline.tf.screen.screen_graph`` —
tf2onnx's grappler pass evaluates constant subgraphs, so nothing that can act outside the graph
may be in it — then ``tf2onnx.convert.from_graph_def`` at the opset the convert stage picks), in a
worker process with a time limit (``pipeline.check.worker``: one TensorFlow import, many
conversions), and checks the ONNX model it wrote like any .onnx file (``routes.check_onnx_model``,
``onnx_rules.onnx_findings``). Nothing in the graph runs: tf2onnx converts it, it does not execute it.

    start(path, opset)                       # the conversion under way now, beside the caller's own reading
    conversion = convert(path, opset=13)     # cached per process: a model checked once is converted once
    convert_many([a, b, c], opset=13)        # on every core, one TensorFlow import per worker
    frozen, why = freeze("model.keras")      # a Keras file or SavedModel frozen as deploy's freeze stage would
    conversion.status                        # converted | failed | refused | timeout | error
    conversion.onnx_path, conversion.seconds, conversion.log

Without TensorFlow or tf2onnx (or with ``DEPLOY_CHECK_CONVERT=0``) the route stays the offline
prediction, labelled "predicted, tf2onnx not run". ``DEPLOY_CHECK_CONVERT_TIMEOUT`` (seconds,
default 120) bounds each request to a worker (its TensorFlow import included, for the first).

The ONNX models and frozen graphs live in one temporary folder per deploy process,
``$TMPDIR/deploy-check-*``, removed when deploy ends; it holds a lock for as long as its process
lives, so a folder left by a deploy that was killed (``kill -9``) is removed by the next check.
"""

import os
from dataclasses import dataclass, field
from typing import List, Optional

CONVERT_ENV = "DEPLOY_CHECK_CONVERT"  # 0/off/no/false: never run tf2onnx in deploy check
TIMEOUT_ENV = "DEPLOY_CHECK_CONVERT_TIMEOUT"
DEFAULT_TIMEOUT = 120.0
FORMATS = ("frozen_pb", "pbtxt")  # what tf2onnx converts as it is (the convert stage's input)

_CACHE = {}  # conversion key -> Conversion
_FROZEN = {}  # (model path, size, mtime, signature) -> (frozen graph path or None, why not)
_LOST = set()  # freeze keys whose worker timed out or died
_PENDING = {}  # conversion key -> (worker, out path, started)
_SHARED = []  # the worker of single checks, started on first use
_REPORTING = []  # [(Progress, model label)] of the check under way
_CLOSING = []  # whether _close_workers is registered to run at exit


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


# ------------------------------------------------------------------------------ asking a worker


def workdir():
    """This process's temporary folder (pipeline.check.pool.workdir)."""
    from pipeline.check.pool import workdir as folder

    path = folder()
    if not _CLOSING:
        from pipeline.files import at_exit

        _CLOSING.append(path)
        at_exit(_close_workers)  # registered after the folder's removal: runs before it
    return path


def _big(path):
    from pipeline.check.pool import model_bytes
    from pipeline.check.worker import PURE_PROTOBUF_BYTES

    return model_bytes(path) >= PURE_PROTOBUF_BYTES


def _shared_worker(big):
    from pipeline.check.worker import Worker

    if _SHARED and (not _SHARED[0].alive or (big and not _SHARED[0].big)):
        _SHARED.pop().close()
    if not _SHARED:
        _SHARED.append(Worker(workdir(), big=big))
    return _SHARED[0]


def _close_workers():
    while _SHARED:
        _SHARED.pop().close()
    for worker, _, _ in _PENDING.values():
        worker.close()
    _PENDING.clear()


def _conversion(answer, opset, out, seconds):
    result = Conversion(answer["status"], answer.get("message", ""), answer.get("opset", opset),
                        tf2onnx=answer.get("tf2onnx", ""), log=answer.get("log", []), left=answer.get("left", []),
                        seconds=seconds)
    if result.status == "converted":
        result.onnx_path = str(out)
    return result


def _gone(e, opset, limit, seconds):
    if e.timed_out:
        return Conversion("timeout", "tf2onnx did not finish within {:g} s ({} sets the limit)".format(limit, TIMEOUT_ENV),
                          opset, seconds=seconds)
    return Conversion("error", str(e), opset, seconds=seconds)


def convert_on(worker, path, opset, timeout=None):
    """tf2onnx's conversion of ``path`` at ``opset`` asked of ``worker`` (a Conversion), cached per process."""
    import time

    from pipeline.check.worker import WorkerGone

    path, key = _key(path, opset)
    if key in _CACHE:
        return _CACHE[key]
    out = os.path.join(workdir(), "{}-{}.onnx".format(len(_CACHE), os.urandom(4).hex()))
    limit = timeout if timeout is not None else timeout_seconds()
    start = time.monotonic()
    try:
        worker.send({"do": "convert", "path": str(path), "opset": opset, "out": out})
        result = _conversion(worker.receive(limit), opset, out, time.monotonic() - start)
    except WorkerGone as e:
        result = _gone(e, opset, limit, time.monotonic() - start)
    _CACHE[key] = result
    return result


def start(path, opset):
    """Send the conversion of ``path`` to the single-check worker now, so TensorFlow's import and tf2onnx run
    while the caller reads and checks the graph; ``convert`` collects it. Nothing when it is cached or asked."""
    import time

    path, key = _key(path, opset)
    if key in _CACHE or key in _PENDING:
        return
    worker = _shared_worker(_big(path))
    out = os.path.join(workdir(), "{}-{}.onnx".format(len(_CACHE), os.urandom(4).hex()))
    worker.send({"do": "convert", "path": str(path), "opset": opset, "out": out})
    _PENDING[key] = (worker, out, time.monotonic())


def discard_pending():
    """Stop conversions ``start`` sent that nobody collected (the check was NO before conversion)."""
    for worker, _, _ in list(_PENDING.values()):
        worker.close()
        if _SHARED and _SHARED[0] is worker:
            _SHARED.pop()
    _PENDING.clear()


def reporting(progress, label):
    """While in this context, a conversion or ONNX check that takes seconds says so on ``progress``, naming the
    model by ``label``."""
    from contextlib import contextmanager

    @contextmanager
    def context():
        _REPORTING.append((progress, label))
        try:
            yield
        finally:
            _REPORTING.pop()

    return context()


def step(message):
    """A progress step of the check under way (``reporting``), or a context that says nothing."""
    from contextlib import nullcontext

    if not _REPORTING:
        return nullcontext()
    progress, label = _REPORTING[-1]
    return progress.step(message.format(model=label))


def _outcome(step, result):
    """The slow step's closing word: "done" for a conversion, else what happened (refused: the screen, before
    tf2onnx ran; failed; timeout)."""
    if step is not None and result.status != "converted":
        step.outcome = {"refused": "refused (not converted)", "failed": "failed", "timeout": "timed out"}.get(
            result.status, result.status)


def convert(path, opset, timeout=None):
    """tf2onnx's conversion of the frozen graph at ``path`` at ``opset`` (a Conversion), in the single-check
    worker; cached per process by the file's path, size and mtime, the opset and --trust-model."""
    import time

    from pipeline.check.worker import WorkerGone

    resolved, key = _key(path, opset)
    if key in _CACHE:
        return _CACHE[key]
    with step("converting {{model}} with tf2onnx at opset {}".format(opset)) as slow:
        if key not in _PENDING:
            result = convert_on(_shared_worker(_big(resolved)), resolved, opset, timeout)
            _outcome(slow, result)
            return result
        worker, out, started = _PENDING.pop(key)
        limit = timeout if timeout is not None else timeout_seconds()
        try:
            result = _conversion(worker.receive(max(0.0, started + limit - time.monotonic())), opset, out,
                                 time.monotonic() - started)
        except WorkerGone as e:
            result = _gone(e, opset, limit, time.monotonic() - started)
        _outcome(slow, result)
    _CACHE[key] = result
    return result


def transient(path, opset=None, signature=None):
    """Whether the conversion of ``path`` at ``opset`` (or its freezing, without an opset) in this process
    timed out or lost its worker: an answer that may change on its own."""
    try:
        if opset is None:
            return _freeze_key(path, signature) in _LOST
        _, key = _key(path, opset)
    except OSError:
        return False
    found = _CACHE.get(key)
    return found is not None and found.status in ("timeout", "error")


def _freeze_key(path, signature):
    from pathlib import Path

    from pipeline.tf.screen import trusted

    path = Path(path).resolve()
    stat = path.stat()
    return str(path), stat.st_size, stat.st_mtime_ns, signature or "serving_default", trusted()


def freeze_on(worker, path, signature=None, timeout=None):
    """(frozen GraphDef path, "") for a Keras file or SavedModel frozen in ``worker``, or (None, why not)."""
    from pipeline.check.worker import WorkerGone

    key = _freeze_key(path, signature)
    if key in _FROZEN:
        return _FROZEN[key]
    out = os.path.join(workdir(), "frozen-{}-{}.pb".format(len(_FROZEN), os.urandom(4).hex()))
    try:
        worker.send({"do": "freeze", "path": str(path), "signature": signature, "out": out})
        answer = worker.receive(timeout if timeout is not None else timeout_seconds())
        found = (out, "") if answer["status"] == "frozen" else (None, answer.get("message", ""))
    except WorkerGone as e:
        found = (None, "freezing it in TensorFlow: " + str(e))
        _LOST.add(key)
    _FROZEN[key] = found
    return found


def freeze(path, signature=None, timeout=None):
    """``freeze_on`` in the single-check worker."""
    key = _freeze_key(path, signature)
    if key in _FROZEN:
        return _FROZEN[key]
    return freeze_on(_shared_worker(_big(path)), path, signature, timeout)


def frozen_ahead(path, signature=None):
    """What ``freeze`` already knows of ``path`` (a zoo froze it), or None."""
    try:
        return _FROZEN.get(_freeze_key(path, signature))
    except OSError:
        return None


def convert_many(paths, opset, timeout=None, workers=None, on_done=None):
    """Convert several frozen graphs at ``opset`` over ``run_pool``'s workers and fill the per-process cache, so
    that check_model's ``convert`` finds them. ``timeout``: each graph's limit. Returns {path: Conversion}."""
    from pipeline.check.pool import model_bytes, run_pool

    todo, seen = [], set()
    for path in paths:
        _, key = _key(path, opset)
        if key not in _CACHE and key not in seen:
            seen.add(key)
            todo.append((str(path), (lambda w, p=str(path): convert_on(w, p, opset, timeout)), model_bytes(path)))
    return run_pool(todo, workers=workers, on_done=on_done)
