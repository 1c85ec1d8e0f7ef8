"""Keras models (.keras / .h5) into the graph view: the one reader that needs TensorFlow."""

import re

from pipeline.errors import DeployError
from pipeline.graph.tf_reader import lazy_tensor_types, pruned_view


def read_keras(path):
    """Load with Keras, trace ``model(x, training=False)`` as a concrete function and freeze it
    (variables to constants, as deploy's export and freeze stages do), then view that graph.

    The view is pruned from the traced outputs and inlined like a SavedModel's.
    """
    if path.stat().st_size == 0:
        raise DeployError("{}: file is empty; expected a Keras model saved with model.save()".format(path))
    from pipeline.tf import import_tf

    try:
        tf = import_tf()
        import keras  # noqa: F401 - Keras must be installed to read the file
    except ImportError as e:
        raise DeployError("{}: reading a Keras model needs TensorFlow ({}); install deploy[tf], or pass the "
                          "exported SavedModel or frozen .pb".format(path, e))
    from pipeline.graph import proto

    from pipeline.tf.keras_model import load_keras_model

    model = load_keras_model(path)
    try:
        model_inputs = list(model.inputs)
    except (AttributeError, ValueError):
        model_inputs = []
    if not model_inputs:
        raise DeployError("{}: the Keras model has no defined inputs (a subclassed model that was never built); "
                          "save a functional or Sequential model".format(path))
    specs = [tf.TensorSpec(t.shape, t.dtype, name=re.sub(r"[^A-Za-z0-9_.\-/]", "_", t.name.split(":")[0]))
             for t in model_inputs]

    @tf.function
    def call(*xs):
        return model(xs[0] if len(xs) == 1 else list(xs), training=False)

    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = convert_variables_to_constants_v2(call.get_concrete_function(*specs))
    graph_def = proto.GraphDef()
    graph_def.ParseFromString(concrete.graph.as_graph_def().SerializeToString())
    input_names = [t.name for t in concrete.inputs[:len(specs)]]
    output_names = [t.name for t in concrete.outputs]
    graph = pruned_view(graph_def, input_names, output_names, str(path), "keras")
    known = {}
    for tensor, spec in zip(concrete.inputs[:len(specs)], specs):
        known[tensor.name] = spec.dtype.name
        graph.input_shapes[tensor.name] = list(spec.shape) if spec.shape.rank is not None else None
    for name, tensor in zip(graph.outputs, concrete.outputs):
        known[name] = tensor.dtype.name
        graph.output_shapes[name] = list(tensor.shape) if tensor.shape.rank is not None else None
    lazy_tensor_types(graph, known)
    return graph
