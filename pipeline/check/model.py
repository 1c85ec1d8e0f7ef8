"""check_model: a model file in, a CheckReport out. What `deploy rewrite --auto` would make of a NO
is the caller's to ask (``predict=pipeline.rewrite.predict.predict_rewrite``: the check verb and the
check stage do): check/ never imports rewrite/, which builds on it.

One model, one answer: where tf2onnx can run, a Keras file (.keras, .h5) or a SavedModel is frozen
in the converter's worker (``convert_probe.freeze``: a Keras file loaded in safe mode and traced with
training=False as deploy's Keras reader does; a SavedModel by deploy's freeze stage, with --trust-model
only: loading it runs its restore and init ops) and that frozen graph is checked and
converted exactly as a frozen .pb would be; the report keeps the file's own path and format and says
``checked_as``. A model Keras's safe mode will not load in the worker is read the way it always is.
"""

from pipeline.check.checker import check_graph, start_file_flops

FREEZABLE_SUFFIXES = (".keras", ".h5", ".hdf5")
CHECKED_AS = ("its frozen graph: frozen in TensorFlow by deploy check (a Keras file traced with training=False, a "
              "SavedModel by deploy's freeze stage), then converted by tf2onnx like a frozen .pb")


def check_model(path, target, routes=None, signature="serving_default", convert=None, convert_timeout=None,
                outlive=False, flops=None, predict=None, progress=None, label=None, fingerprint=False):
    """``convert``: judge a TF model's onnx route on tf2onnx's real output; None (default): when
    TensorFlow and tf2onnx are installed (convert_probe.available()); False: predict only.
    ``convert_timeout``: seconds a worker request may take (default: convert_probe.timeout_seconds()).
    ``outlive``: the graph is kept until the process ends (pipeline.files.outlive; the CLI's).
    ``flops``: ``start_file_flops(path, signature)`` started earlier (the CLI's, before loading the
    target); else started here when it pays. Closed here either way.
    ``predict(path, target, report)``: for a NO, what a rewrite would make of it, into ``report.prediction``.
    ``progress``: a pipeline.progress.Progress for the steps that take seconds; ``label``: how they name
    the model (default: the path).
    ``fingerprint``: set ``report.fingerprint`` (``weights_fingerprint``; a zoo's, to find one model twice)."""
    from pathlib import Path

    from pipeline.check import convert_probe
    from pipeline.files import gc_paused
    from pipeline.files import outlive as keep
    from pipeline.graph.readers import read_model
    from pipeline.progress import Progress

    progress = progress or Progress("quiet")
    label = label or str(path)
    converting = convert is not False and "onnx" in (routes or target.routes) and target.op_table_for("onnx") \
        and convert_probe.available()
    source, frozen_from, frozen = path, None, None
    with gc_paused(resume=not outlive):  # a big graph is millions of long-lived objects: cyclic GC passes only cost time
        try:
            if converting and _freezable(Path(path)):
                frozen = convert_probe.frozen_ahead(path, signature)
                if frozen is None:
                    with progress.step("freezing {} in TensorFlow for tf2onnx".format(label)):
                        frozen = convert_probe.freeze(path, signature, convert_timeout)
                if frozen[0]:
                    source, frozen_from = frozen[0], _model_format(Path(path))
            if converting and str(source).lower().endswith((".pb", ".pbtxt")) and Path(source).is_file() \
                    and Path(source).name not in ("saved_model.pb", "saved_model.pbtxt"):
                convert_probe.start(source, converter_opset(target))  # tf2onnx works while the graph is read here
            if flops is None and "tftrt" in (routes or target.routes) and target.op_table_for("tftrt"):
                flops = start_file_flops(source, signature)  # a big frozen graph: read twice, at once
            with convert_probe.reporting(progress, label):
                with progress.step("reading {}".format(label)):
                    graph = read_model(source, signature=signature)
                if outlive:
                    keep(graph)
                report = check_graph(graph, target, routes, convert=convert, convert_timeout=convert_timeout,
                                     flops=flops)
            if fingerprint:
                report.fingerprint = weights_fingerprint(graph)
            # an answer that depends on the moment (timed out, a worker that died) is not kept (pipeline.check.cache)
            report.transient = bool(converting) and (convert_probe.transient(path, signature=signature) or (
                convert_probe.transient(source, converter_opset(target))))
            del graph
        finally:
            convert_probe.discard_pending()
            if flops is not None:
                flops.close()
        if frozen_from:
            report.model.update(path=str(path), format=frozen_from, checked_as=CHECKED_AS)
        if predict is not None and not report.deployable:
            report.prediction = predict(path, target, report)
        return report


def converter_opset(target):
    """The opset the onnx route of ``target`` is converted at: what deploy's convert stage emits."""
    from pipeline.targets.tf2onnx import load_tf2onnx_table

    return min(target.max_opset, load_tf2onnx_table().max_opset)


def _freezable(path):
    """A Keras file (loaded in Keras's safe mode: no code of the file runs), or a SavedModel when trusted:
    loading a SavedModel in TensorFlow runs its restore and (TF1) init ops, which deploy check does not run
    in a file nobody vouched for (--trust-model)."""
    from pipeline.tf.screen import trusted

    return path.suffix.lower() in FREEZABLE_SUFFIXES and path.is_file() or (
        trusted() and path.is_dir() and any((path / name).is_file() for name in ("saved_model.pb", "saved_model.pbtxt")))


def _model_format(path):
    return "saved_model" if path.is_dir() else "keras"


WEIGHT_BYTES = 1024  # a constant this big is a weight, not a shape or an axis


def weights_fingerprint(graph):
    """The same trained model in two files, whatever their format: the SHA-256 of the sorted SHA-256
    digests of every constant tensor of WEIGHT_BYTES or more (dtype, shape and bytes), or None when the
    graph holds no such constant (a SavedModel's weights are variables until frozen; an ONNX model's
    initializers are transposed by the converter, so it is compared with ONNX models only).
    Two models with the same multiset of weight tensors are, for any practical purpose, the same
    trained model; the op graph around them may differ by format (Identity wrappers, a signature's
    renames), so it is not part of the fingerprint."""
    import hashlib

    digests = []
    for node in graph.nodes.values():
        if graph.kind == "tensorflow" and node.op != "Const":
            continue
        values = [node.attrs.get("value")] if graph.kind == "tensorflow" else []
        for value in values:
            if value is None or not getattr(value, "nbytes", 0) or value.nbytes < WEIGHT_BYTES:
                continue
            try:
                array = value.array()
            except Exception:  # noqa: BLE001 - a tensor deploy cannot decode is left out of the fingerprint
                continue
            if array is None:
                continue
            digest = hashlib.sha256("{}{}".format(array.dtype.str, array.shape).encode())
            digest.update(array.tobytes())
            digests.append(digest.hexdigest())
    for value in (graph.initializers or {}).values():
        if getattr(value, "nbytes", 0) >= WEIGHT_BYTES:
            array = value.array()
            if array is not None:
                digests.append("onnx" + hashlib.sha256(array.tobytes()).hexdigest())
    if not digests:
        return None
    return hashlib.sha256("\n".join(sorted(digests)).encode()).hexdigest()
