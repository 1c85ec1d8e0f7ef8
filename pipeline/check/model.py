"""check_model: a model file in, a CheckReport out. What `deploy rewrite --auto` would make of a NO
is the caller's to ask (``predict=pipeline.rewrite.predict.predict_rewrite``: the check verb and the
check stage do): check/ never imports rewrite/, which builds on it."""

from pipeline.check.checker import check_graph, start_file_flops


def check_model(path, target, routes=None, signature="serving_default", convert=None, convert_timeout=None,
                outlive=False, flops=None, predict=None):
    """``convert``: judge a frozen TF graph's onnx route on tf2onnx's real output; None (default):
    when TensorFlow and tf2onnx are installed (convert_probe.available()); False: predict only.
    ``convert_timeout``: seconds the tf2onnx subprocess may take (default: convert_probe.timeout_seconds()).
    ``outlive``: the graph is kept until the process ends (pipeline.files.outlive; the CLI's).
    ``flops``: ``start_file_flops(path, signature)`` started earlier (the CLI's, before loading the
    target); else started here when it pays. Closed here either way.
    ``predict(path, target, report)``: for a NO, what a rewrite would make of it, into ``report.prediction``."""
    from pipeline.files import gc_paused
    from pipeline.files import outlive as keep
    from pipeline.graph.readers import read_model

    with gc_paused(resume=not outlive):  # a big graph is millions of long-lived objects: cyclic GC passes only cost time
        if flops is None and "tftrt" in (routes or target.routes) and target.op_table_for("tftrt"):
            flops = start_file_flops(path, signature)  # a big frozen graph: read twice, at once
        try:
            graph = read_model(path, signature=signature)
            if outlive:
                keep(graph)
            report = check_graph(graph, target, routes, convert=convert, convert_timeout=convert_timeout, flops=flops)
            del graph
        finally:
            if flops is not None:
                flops.close()
        if predict is not None and not report.deployable:
            report.prediction = predict(path, target, report)
        return report
