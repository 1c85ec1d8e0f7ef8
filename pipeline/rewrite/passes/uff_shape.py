"""Shape folded away: NvUffParser rejects the Shape op ("Unsupported operation _Shape") that Keras
Flatten / Reshape emit (``Shape -> StridedSlice -> Pack -> Reshape``)."""

from pipeline.rewrite.pass_table import rewrite_pass
from pipeline.rewrite.tfgraph import split_tensor


@rewrite_pass("fold_shape", runs_graph=True)
def fold_shape(graph, options):
    """Shape of a static-shaped tensor becomes a Const (the UFF parser rejects Shape; Keras Flatten and
    Reshape emit it); with a dynamic batch, the slices of the shape past the batch become Consts and
    a batch read only to reshape the same tensor becomes -1. Any other use of a dynamic dimension
    is left alone (fix the input first: set_input_shape)."""
    import numpy as np

    sites = [n for n in graph.graph_def.node if n.op == "Shape" and n.name in graph.nodes]
    if not sites:
        return []
    static = _static_shapes(graph, [n.input[0] for n in sites])
    changed = []
    for node in sites:
        dims = static.get(node.input[0])
        if dims is None or any(d is None for d in dims[1:]):
            continue
        out_type = "int64" if graph.attr(node, "out_type") in (9, "int64", "DT_INT64") else "int32"
        if dims[0] is not None:
            graph.set_const(node, np.array(dims, dtype=out_type))
            changed.append(node.name)
            continue
        changed += _fold_past_the_batch(graph, node, dims, out_type)
    return sorted(changed)


def _fold_past_the_batch(graph, shape, dims, out_type):
    """Shape of a [None, static...] tensor: a StridedSlice of it that skips index 0 becomes a Const;
    one that reads index 0 only to Pack the shape of a Reshape of that same tensor becomes -1.
    Returns the nodes changed (the Shape itself goes when nothing reads it any more)."""
    import numpy as np

    changed = []
    for user in graph.consumers(shape.name):
        picked = _sliced_indices(graph, user, len(dims))
        if picked is None:
            continue
        indices, shrink = picked
        if indices and 0 not in indices:
            values = np.array([dims[i] for i in indices], dtype=out_type)
            graph.set_const(user, values[0] if shrink else values)
            changed.append(user.name)
        elif indices == [0] and shrink and _only_reshapes_the_same_tensor(graph, user, shape.input[0]):
            graph.set_const(user, np.array(-1, dtype=out_type))
            changed.append(user.name)
    if changed and not graph.consumers(shape.name):
        changed.append(shape.name)
    return changed


def _sliced_indices(graph, node, length):
    """([indices], shrink): what a 1-D StridedSlice with constant begin/end/strides picks; None otherwise."""
    if node.op != "StridedSlice" or len(node.input) < 4 or split_tensor(node.input[0])[1] != 0:
        return None
    values = [_constant(graph, t) for t in node.input[1:4]]
    if any(v is None or v.size != 1 for v in values):
        return None
    if any(graph.attr(node, m, 0) for m in ("ellipsis_mask", "new_axis_mask")):
        return None
    begin, end, stride = (int(v.reshape(-1)[0]) for v in values)
    shrink = bool(graph.attr(node, "shrink_axis_mask", 0) & 1)
    if shrink:
        return [begin % length], True
    begin = None if graph.attr(node, "begin_mask", 0) & 1 else begin
    end = None if graph.attr(node, "end_mask", 0) & 1 else end
    return list(range(length))[slice(begin, end, stride)], False


def _constant(graph, tensor):
    """The value of a Const, or of a Fill of two Consts (tf.strided_slice's default strides); None."""
    import numpy as np

    node = graph.producer(tensor)
    if node is None:
        return None
    if node.op == "Fill" and len(node.input) == 2:
        dims, value = (graph.const_value(graph.producer(t)) for t in node.input)
        return None if dims is None or value is None else np.full([int(d) for d in dims.reshape(-1)], value)
    return graph.const_value(node)


def _only_reshapes_the_same_tensor(graph, batch, tensor):
    """Every reader of ``batch`` is a Pack at position 0 whose every reader is the shape input of a
    Reshape of ``tensor``: -1 there gives the same batch."""
    target = split_tensor(tensor)
    packs = graph.consumers(batch.name)
    if not packs:
        return False
    for pack in packs:
        if pack.op != "Pack" or split_tensor(pack.input[0])[0] != batch.name or any(
                split_tensor(t)[0] == batch.name for t in pack.input[1:]):
            return False
        readers = graph.consumers(pack.name)
        if not readers or any(r.op != "Reshape" or split_tensor(r.input[1])[0] != pack.name
                              or split_tensor(r.input[0]) != target for r in readers):
            return False
    return True


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
        shapes[tensor] = None if shape.rank is None else list(shape.as_list())
    return shapes
