"""tf2onnx's conversion of a GraphDef as tf2onnx's own public steps, each intermediate given back as soon as the
next exists: the converter worker's conversion (pipeline.check.worker).

    model = from_graph_def_in_steps([graph_def], inputs, outputs, opset, catch_errors())  # the list is emptied
    release_memory()                                # the cyclic GC, then glibc's malloc_trim

The ModelProto is ``tf2onnx.convert.from_graph_def(graph_def, input_names=inputs, output_names=outputs,
opset=opset)``'s (tests/check/test_converter_worker.py compares the two on frozen graphs); nothing of tf2onnx is
patched. Where the memory went and what this saves: docs/performance.md, "Where a zoo's memory goes".
"""

import os

CATCH_ENV = "TF2ONNX_CATCH_ERRORS"  # tf2onnx.constants.ENV_TF2ONNX_CATCH_ERRORS
# tf2onnx releases whose from_graph_def / _convert_common these steps follow (read, and compared model for model in
# tests/check/test_converter_worker.py); any other release converts with from_graph_def itself (its memory, its model)
STEPS_FOLLOW = ("1.17",)


def release_memory():
    """Give the memory this process freed back to the OS: Python's cyclic garbage collected, then glibc's
    ``malloc_trim(0)`` (freed heap pages of every malloc arena returned; glibc keeps them otherwise, so a
    process that converted a big model keeps that model's peak as its RSS). Elsewhere than glibc: the collection only."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def catch_errors():
    """tf2onnx's catch_errors for a conversion of a graph (not large_model), as its _convert_common reads it."""
    value = os.environ.get(CATCH_ENV)
    return True if value is None else value.upper() == "TRUE"


def from_graph_def_in_steps(held, input_names, output_names, opset, catch_errors):
    """``tf2onnx.convert.from_graph_def(graph_def, input_names=, output_names=, opset=)``'s ONNX ModelProto, made
    by tf2onnx's own public steps in its order, each intermediate given back as soon as the next exists.
    ``held``: a list holding the GraphDef, emptied here, so that the GraphDef goes once grappler has its copy.

    from_graph_def keeps everything it made to its end: the GraphDef, the tf.Graph it imports it into (with a
    session and ``freeze_session``'s copy, which it then discards: tf_optimize is given the GraphDef), grappler's
    GraphDef (``tf_optimize``) and the second tf.Graph that ``process_tf_graph`` reads. Here the first import is
    kept only for what it decides (a graph TensorFlow will not import fails with its error; ``inputs_without_resource``)
    and each step's input is freed once its output exists, with ``release_memory`` between: the peak becomes
    grappler's own (measured in docs/performance.md, "Where a zoo's memory goes"). freeze_session is not run: its
    output is discarded, and it could only fail on variables or on names the graph lacks, which deploy's screen and
    graph_io refuse first."""
    import tf2onnx
    from tf2onnx import optimizer, tf_loader, tfonnx

    if ".".join(tf2onnx.__version__.split(".")[:2]) not in STEPS_FOLLOW:
        return _from_graph_def(tf2onnx, held.pop(), input_names, output_names, opset, catch_errors)
    from pipeline.tf import import_tf

    tf = import_tf()
    graph_def = held.pop()
    with tf.device("/cpu:0"):
        with tf.Graph().as_default() as tf_graph:
            with tf_loader.tf_session(graph=tf_graph) as sess:
                tf.import_graph_def(graph_def, name="")
                input_names = tf_loader.inputs_without_resource(sess, input_names)
    del tf_graph, sess
    release_memory()
    with tf.device("/cpu:0"):
        with tf.Graph().as_default():
            graph_def = tf_loader.tf_optimize(input_names, output_names, graph_def)
    release_memory()
    with tf.Graph().as_default() as tf_graph:  # as tf2onnx's _convert_common
        tf.import_graph_def(graph_def, name="")
        del graph_def
        held.append(tfonnx.process_tf_graph(tf_graph, continue_on_error=True, opset=opset,
                                            input_names=input_names, output_names=output_names))
    del tf_graph
    release_memory()
    # passed on without a reference here: with catch_errors, optimize_graph deep-copies the graph before each
    # optimizer and drops the one before; a caller holding the first would keep three copies instead of two
    onnx_graph = optimizer.optimize_graph(held.pop(), catch_errors)
    return onnx_graph.make_model("converted from unknown")  # from_graph_def's name=None


def _from_graph_def(tf2onnx, graph_def, input_names, output_names, opset, catch_errors):
    """tf2onnx.convert.from_graph_def's model, with ``catch_errors`` given as tf2onnx reads it (its environment
    variable, put back after)."""
    before = os.environ.get(CATCH_ENV)
    os.environ[CATCH_ENV] = "TRUE" if catch_errors else "FALSE"
    try:
        return tf2onnx.convert.from_graph_def(graph_def, input_names=input_names, output_names=output_names,
                                              opset=opset)[0]
    finally:
        if before is None:
            os.environ.pop(CATCH_ENV, None)
        else:
            os.environ[CATCH_ENV] = before
