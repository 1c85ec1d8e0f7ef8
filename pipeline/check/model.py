"""check_model: a model file in, a CheckReport out (with, when it is NO, what `deploy rewrite
--auto` would make of it: pipeline.rewrite.predict)."""

from pipeline.check.checker import check_graph


def check_model(path, target, routes=None, signature="serving_default", convert=None, convert_timeout=None):
    """``convert``: judge a frozen TF graph's onnx route on tf2onnx's real output; None (default):
    when TensorFlow and tf2onnx are installed (convert_probe.available()); False: predict only.
    ``convert_timeout``: seconds the tf2onnx subprocess may take (default: convert_probe.timeout_seconds())."""
    from pipeline.files import gc_paused
    from pipeline.graph.readers import read_model

    with gc_paused():  # a big graph is millions of long-lived objects: cyclic GC passes only cost time
        report = check_graph(read_model(path, signature=signature), target, routes, convert=convert,
                             convert_timeout=convert_timeout)
        if not report.deployable:
            from pipeline.rewrite.predict import predict_rewrite

            report.prediction = predict_rewrite(path, target, report)
        return report
