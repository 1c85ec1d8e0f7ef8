"""Shape of a tensor whose shape is static, folded into a Const: NvUffParser rejects the Shape op
("Unsupported operation _Shape") that Keras Flatten / Reshape emit."""

from pipeline.rewrite.pass_table import rewrite_pass


@rewrite_pass("fold_shape", runs_graph=True)
def fold_shape(graph, options):
    """Shape of a tensor whose every dimension is known becomes a Const holding that shape (the UFF
    parser rejects Shape; Keras Flatten/Reshape emit it). A Shape over a dynamic dimension (a
    batch of None) is left alone: fix the input first (set_input_shape)."""
    import numpy as np

    sites = [n for n in graph.graph_def.node if n.op == "Shape" and n.name in graph.nodes]
    if not sites:
        return []
    static = _static_shapes(graph, [n.input[0] for n in sites])
    folded = []
    for node in sites:
        dims = static.get(node.input[0])
        if dims is None or any(d is None for d in dims):
            continue
        out_type = "int64" if graph.attr(node, "out_type") in (9, "int64", "DT_INT64") else "int32"
        graph.set_const(node, np.array(dims, dtype=out_type))
        folded.append(node.name)
    return sorted(folded)


def _static_shapes(graph, tensors):
    """{tensor: [dims, None where unknown]} as TensorFlow's shape inference gives them on import."""
    from pipeline.tf import import_tf

    tf = import_tf()
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.graph_util.import_graph_def(tf.compat.v1.GraphDef.FromString(graph.serialize()), name="")
    shapes = {}
    for tensor in tensors:
        name = tensor if ":" in tensor else tensor + ":0"
        shape = tf_graph.get_tensor_by_name(name).shape
        shapes[tensor] = None if shape.rank is None else [d for d in shape.as_list()]
    return shapes
