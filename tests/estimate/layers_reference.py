"""The engine layers as pipeline.estimate.layers worked them out before issue 30 item 5 made the loop faster
(commit e78fab0, verbatim but for the imports): the plain definition test_speed_identity compares the fast one
with. Keep it as it is; it is a reference, not a second implementation to maintain."""

from pipeline.estimate.layers import (ANCHORS, CONCAT, FREE, _PER_ELEMENT, Layer, _kind, _order,
                                      _reformat)
from pipeline.estimate.shapes import tensor_key, tensor_shapes


def _count(dims):
    if dims is None:
        return None
    n = 1
    for d in dims:
        n *= d
    return n


def reference_engine_layers(graph, input_shapes=None, precision="fp16"):
    """The engine's layers of ``graph`` (see the module doc), in the order the graph runs them."""
    order = _order(graph)
    shapes = tensor_shapes(graph, order, input_shapes)
    if graph.kind == "tensorflow":
        def key(t):
            return t if ":" not in t and "^" not in t else tensor_key(graph, t)
    else:
        def key(t):
            return t
    is_const = _constant_test(graph, order, key)
    outputs = _outputs(graph, key)
    users = {}  # tensor key -> number of consuming nodes
    for node in order:
        for t in set(node.inputs):
            if t:
                users[key(t)] = users.get(key(t), 0) + 1
    for t in outputs:
        users[t] = users.get(t, 0) + 1  # a graph output is read by the caller
    layer_of = {}  # tensor key -> the open Layer whose output it is
    layers = []
    for node in order:
        op = node.op
        out = _out_key(graph, node, key)
        if is_const(out):
            continue  # folded by the builder
        if op in FREE or op in CONCAT:
            if op in FREE and node.inputs and node.inputs[0] and op not in ("Const", "Constant", "Shape"):
                source = layer_of.get(key(node.inputs[0]))
                if source is not None and op in ("Identity", "Snapshot", "StopGradient", "Dropout") and \
                        users.get(key(node.inputs[0])) == 1:
                    layer_of[out] = source  # a pass-through keeps the chain open
            continue
        data = [t for t in node.inputs if t and not is_const(t)]
        consts = [t for t in node.inputs if t and is_const(t)]
        out_n = _count(shapes.of(out if graph.kind == "onnx" else node.name))
        kind = _kind(op)
        target = _fuse_into(node, kind, data, layer_of, users, key)
        if target is not None:
            target.ops.append(op)
            if out_n is None:
                target.known = False
            else:
                target.flops += out_n * _PER_ELEMENT.get(op, 1)
                target.writes = out_n
            residual = [t for t in data if layer_of.get(key(t)) is not target]
            for t in residual:
                n = _count(shapes.of(t))
                target.reads += n or 0
            if residual and target.kind in ANCHORS:
                target.ops[-1] = op + " (residual)"
            target.weights += sum(_count(shapes.of(t)) or 0 for t in consts if op not in ("Reshape",))
            layer_of[out] = target
            continue
        layer = Layer(name=node.name, kind=kind, ops=[op])
        _measure(layer, node, shapes, data, consts, out_n)
        layers.append(layer)
        layer_of[out] = layer
    if precision in ("fp16", "int8"):
        layers[:0] = [_reformat(graph, t, shapes, precision, "input") for t in graph.inputs]
        layers.extend(_reformat(graph, t, shapes, precision, "output") for t in graph.outputs)
    return layers


def _fuse_into(node, kind, data, layer_of, users, key):
    """The open layer this point-wise op joins, or None: its main input must come from a conv, matrix
    product or point-wise layer whose output only this op reads."""
    if kind != "pointwise" or not data:
        return None
    for t in data:
        source = layer_of.get(key(t))
        if source is None or users.get(key(t)) != 1:
            continue
        others = [x for x in data if x is not t]
        if source.kind in ANCHORS:
            if others and (node.op not in ("Add", "AddV2", "Sum", "AddN") or len(others) > 1 or
                           any(o.endswith(" (residual)") for o in source.ops)):
                continue  # one residual Add, nothing else with a second tensor
            return source
        if source.kind == "pointwise" and not others:
            return source
    return None


def _measure(layer, node, shapes, data, consts, out_n):
    """Fill a new layer's FLOPs, weights and activations from the op and its shapes."""
    if out_n is None:
        layer.known = False
        return
    layer.writes = out_n
    layer.reads = sum(_count(shapes.of(t)) or 0 for t in data)
    layer.weights = sum(_count(shapes.of(t)) or 0 for t in consts)
    op, kind = node.op, layer.kind
    first = shapes.of(data[0]) if data else None
    if kind in ("conv", "depthwise"):
        kernel = shapes.of(node.inputs[1]) if len(node.inputs) > 1 else None
        if kernel is None:
            layer.known = False
            return
        if node.op in ("Conv", "ConvTranspose"):  # ONNX: [co, ci/group, kh, kw]
            per_output = _count(kernel[1:])
        elif kind == "depthwise":  # TF: [kh, kw, ci, multiplier]: each output reads kh*kw inputs
            per_output = kernel[0] * kernel[1]
        else:  # TF: [kh, kw, ci, co]
            per_output = _count(kernel[:-1])
        if node.op in ("Conv2DBackpropInput", "ConvTranspose"):
            layer.flops = 2.0 * (_count(shapes.of(data[0])) or 0) * _count(kernel) / max(kernel[0] if
                                                                                          node.op == "ConvTranspose" else kernel[-1], 1)
        else:
            layer.flops = 2.0 * out_n * per_output
            if node.op == "Conv" and (node.attrs.get("group", 1) or 1) > 1:
                layer.kind = "depthwise" if node.attrs.get("group") == (first[1] if first else 0) else "conv"
    elif kind == "matmul":
        b = shapes.of(node.inputs[1])
        if b is None or first is None:
            layer.known = False
            return
        transposed = node.attrs.get("transA") if op == "Gemm" else (
            node.attrs.get("transpose_a") or node.attrs.get("adj_x"))
        k = first[-2] if transposed else first[-1]
        layer.flops = 2.0 * out_n * k
        if not consts and len(data) > 1:  # both operands are activations (attention): no weights
            layer.weights = 0
    elif kind in ("pool", "reduce"):
        layer.flops = float(layer.reads)
    elif kind == "softmax":
        layer.flops = 5.0 * out_n
    elif kind == "pointwise":
        layer.flops = float(out_n) * _PER_ELEMENT.get(op, 1)
    # reformat and other: bytes only


def _constant_test(graph, order, key):
    """A test: is this tensor a constant? Const nodes, ONNX initializers, and any op all of whose inputs are
    constants (the frozen batch norm's ``rsqrt(var + eps) * gamma``: TensorRT folds it at build time)."""
    initializers = graph.initializers or {}
    constant = set(initializers)
    for node in order:
        if node.op in ("Const", "Constant", "VarHandleOp", "VariableV2"):  # weights, frozen or in variables
            constant.add(_out_key(graph, node, key))
        elif node.inputs and node.op not in ("Placeholder", "PlaceholderWithDefault") and \
                all(t and key(t) in constant for t in node.inputs) and not node.control_inputs:
            constant.add(_out_key(graph, node, key))
            for extra in node.outputs[1:]:
                constant.add(key(extra))

    def is_const(tensor):
        return key(tensor) in constant

    return is_const


def _out_key(graph, node, key):
    return key(node.outputs[0]) if graph.kind == "onnx" and node.outputs else node.name


def _outputs(graph, key):
    return [key(t) for t in graph.outputs]
